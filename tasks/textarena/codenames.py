"""Codenames (``textarena/Codenames-v0``): the red team (spymaster and operative) is the team; the
blue team is a fixed opponent, the same scripted players, played by the task.

**Words.** TextArena's Codenames downloads nltk's word corpus and tagger at import and draws its
board from them. teamtr supplies a word list of its own instead (``codenames_words.json``: 96
nouns in 12 categories, such as ``fruit: apple, mango, ...``), with the download switched off while
the module is imported, so the game runs offline. TextArena's ``hardcore`` option picks between
two nltk word lists, neither of which is used here, so it is refused rather than ignored.

**Reward.** 1 when red wins (it reveals its 9 words first, or blue reveals the assassin or red's
last word), 0 when blue wins, 0.5 for a draw; at TextArena's move limit (80), or the team's turn
limit, the team that revealed more of its words wins, as TextArena itself decides at its limit.

**Scripted players**, a convention over the word list's categories:

* the spymaster clues a category, ``[fruit 2]``: the category with the most of its team's
  unrevealed words, preferring one whose unrevealed words on the board are all its team's (then
  its number is their count; else 1), and never one that holds the assassin;
* the operative guesses the clue's category's unrevealed words on the board, at most the clue's
  number, in board order, then passes (``[pass]``).

A wrong move (``make_error``) clues a random category, or guesses a random unrevealed word.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from tasks.base import Problem
from tasks.textarena.options import integer

WORDS_FILE = Path(__file__).with_name("codenames_words.json")
SEATS = ["spymaster", "operative", "blue_spymaster", "blue_operative"]
"""The players by TextArena id: red (0, 1) is the team, blue (2, 3) the opponent."""
METRICS = ("red_revealed", "blue_revealed")
"""The score details an evaluation reports the mean of."""
MOVE_LIMIT = 80
"""TextArena's default move limit (its ``max_turns``)."""

_CLUE = re.compile(r"submitted \[(\w+) (\d+)\]")
_BOARD_LINE = re.compile(r"^(\w+)\s*(R|B|N|A)?\s*(revealed)?\s*$")


@cache
def categories() -> dict[str, list[str]]:
    """The word list: category -> its words."""
    return dict(json.loads(WORDS_FILE.read_text(encoding="utf-8")))


def category_of(word: str) -> str | None:
    return next((c for c, ws in categories().items() if word in ws), None)


@contextlib.contextmanager
def _no_downloads() -> Iterator[None]:
    """``nltk.download`` does nothing while TextArena's module is imported (it calls it at
    import, and this machine, like many, has no network)."""
    import nltk

    saved = nltk.download
    nltk.download = lambda *args, **kwargs: False
    try:
        yield
    finally:
        nltk.download = saved


def env_class() -> type:
    """TextArena's ``CodenamesEnv`` with the board drawn from :func:`categories`."""
    with _no_downloads():
        module = importlib.import_module("textarena.envs.Codenames.env")
    words = [w for ws in categories().values() for w in ws]

    class OfflineCodenamesEnv(module.CodenamesEnv):  # type: ignore[name-defined]
        # No ``hardcore``: it would choose an nltk word list, and the board comes from ours.
        def __init__(self, max_turns: int = MOVE_LIMIT) -> None:
            super().__init__(max_turns=max_turns)

        def _load_word_list(self, hardcore: bool = False) -> None:
            self.word_list = list(words)

    return OfflineCodenamesEnv


def task_settings(game_options: dict[str, Any]) -> dict[str, Any]:
    """What Codenames' task takes beyond a plain game's (``tasks.textarena.make_task``): red is
    the team, blue the task's scripted opponent (``opponent_error_rate``, taken out of
    ``game_options``: it is the task's, not the TextArena environment's)."""
    from tasks.textarena.task import Players

    return {
        "env_class": env_class(),
        "players": Players(SEATS, frozenset(SEATS[2:])),
        "opponent_error_rate": game_options.pop("opponent_error_rate", 0.0),
    }


def check_options(options: Mapping[str, Any]) -> dict[str, str]:
    """The bad ones among TextArena's Codenames options
    (:data:`tasks.textarena.options.OptionsCheck`); ``hardcore`` is refused whatever its value."""
    problems = integer(
        options, "max_turns", 1, default=MOVE_LIMIT, why="TextArena's move limit of a game"
    )
    if "hardcore" in options:
        problems["hardcore"] = (
            f"hardcore: TextArena's hardcore mode draws the board from nltk's full English word "
            f"list, which needs a download; this task plays offline on its own list of "
            f"{sum(map(len, categories().values()))} nouns ({WORDS_FILE.name}), so hardcore "
            f"would change nothing, whatever its value (got {options['hardcore']!r}); leave it out"
        )
    return problems


def score(env: Any, problem: Problem) -> tuple[float, dict[str, Any]]:
    """1 for a red win, 0.5 for a draw, 0 for a loss (by revealed words if the game is on)."""
    board, guessed = env.board, env.state.game_state["guessed_words"]
    red = sum(1 for w, t in board.items() if t == "R" and w in guessed)
    blue = sum(1 for w, t in board.items() if t == "B" and w in guessed)
    rewards = env.state.rewards
    if rewards:
        reward = 1.0 if rewards[0] > 0 else (0.5 if rewards[0] == 0 else 0.0)
    else:  # not over: as TextArena decides at its move limit
        reward = 1.0 if red > blue else (0.5 if red == blue else 0.0)
    assassin = any(t == "A" and w in guessed for w, t in board.items())
    details = {"red_revealed": red, "blue_revealed": blue, "assassin_revealed": assassin}
    return reward, details


def _board(context: str) -> list[tuple[str, str | None, bool]]:
    """The last board the context shows: ``(word, label or None, revealed)`` per word."""
    start = context.rfind("Codenames Words:\n")
    rows = []
    for line in context[start:].splitlines()[1:26] if start >= 0 else []:
        match = _BOARD_LINE.match(line.strip())
        if match and match[1] in {w for ws in categories().values() for w in ws}:
            rows.append((match[1], match[2], bool(match[3])))
    if rows and not all(label for _, label, _ in rows):  # an operative's view: labels = revealed
        rows = [(word, label, label is not None) for word, label, _ in rows]
    return rows


def _spymaster(team: str, board: list[tuple[str, str | None, bool]], rng: Any, error: bool) -> str:
    names = list(categories())
    if error:
        return f"[{names[int(rng.integers(len(names)))]} 2]"
    best: tuple[int, int, str] | None = None
    for name in names:
        words = [(w, t) for w, t, revealed in board if not revealed and category_of(w) == name]
        own = sum(1 for _, t in words if t == team)
        if own and all(t != "A" for _, t in words):  # never near the assassin
            safe = int(own == len(words))
            key = (safe, own, name)
            best = max(best, key) if best else key
    if best is None:
        return f"[{names[0]} 1]"
    return f"[{best[2]} {best[1] if best[0] else 1}]"


def _operative(
    context: str, board: list[tuple[str, str | None, bool]], rng: Any, error: bool
) -> str:
    hidden = [w for w, _, revealed in board if not revealed]
    if error and hidden:
        return f"[{hidden[int(rng.integers(len(hidden)))]}]"
    clues = _CLUE.findall(context)
    if not clues:
        return "[pass]"
    clue, number = clues[-1]
    since = context[context.rfind(f"submitted [{clue} {number}]") :]
    guessed = len(re.findall(r"correctly guessed \[", since))
    candidates = [w for w in hidden if category_of(w) == clue]
    if guessed >= int(number) or not candidates:
        return "[pass]"
    return f"[{candidates[0]}]"


def expert(seat: str, context: str, rng: np.random.Generator, make_error: bool) -> str:
    """The scripted player's move for ``seat`` (:data:`SEATS`) seeing ``context``."""
    board = _board(context)
    if seat.endswith("spymaster"):
        return _spymaster("B" if seat.startswith("blue") else "R", board, rng, make_error)
    return _operative(context, board, rng, make_error)
