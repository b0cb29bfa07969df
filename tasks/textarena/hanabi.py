"""Hanabi (``textarena/Hanabi-v0``): the team outcome and a scripted player.

**Reward.** The fireworks score, the sum of the five fireworks' heights (0-25), divided by 25, read
from TextArena's game state when the game ends: the deck ran out and every player took a last
turn, the team ran out of fuse tokens, or every firework reached 5 (the perfect game, 1.0, the only
outcome TextArena's own ``close()`` rewards; it gives 0 to every other game, so teamtr does not use
it). A game still running at the team's turn limit is scored the same way (a truncation).

**Scripted player.** A convention the whole team shares, read from what the player is shown:

1. A hint to this player since its last move means "play this card": it plays the card hinted.
2. Otherwise, with an info token left, it hints a playable card (its rank is its colour's
   firework plus one) of the first teammate after it that holds one.
3. Otherwise it discards its oldest card.

A wrong move (``make_error``) plays a card at random, blind. A convention like this is what a team
of language models has to co-adapt: a hint means what the teammates' policies make it mean.

**Options.** ``info_tokens`` 0-8 (TextArena gives a token back on a discard only below 8, and
checks hints against 0 only: at -1 they never run out) and ``fuse_tokens`` of at least 1 (the
rules the players are shown end the game when the fuse tokens reach 0).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from tasks.base import Problem
from tasks.textarena.options import integer

MAX_SCORE = 25
MAX_INFO_TOKENS = 8
"""TextArena's cap on info tokens: a discard gives one back only below it."""
METRICS = ("fireworks_score",)
"""The score details an evaluation reports the mean of (out of :data:`MAX_SCORE`)."""
COLOURS = ("white", "yellow", "green", "blue", "red")

_STATE = "Current game state:"
_INFO = re.compile(r"Info tokens: there are (\d+) info tokens")
_FIREWORK = re.compile(r"^\s*(white|yellow|green|blue|red): (\d)\.", re.MULTILINE)
_HAND = re.compile(r"- Player (\d+) has cards:\n((?:\s*card \d+: .*\n?)*)")
_CARD = re.compile(r"card (\d+): a (\w+) card with rank (\d)")


def score(env: Any, problem: Problem) -> tuple[float, dict[str, Any]]:
    """The fireworks score / 25, with the game's counters."""
    state = env.state.game_state
    fireworks = {getattr(s, "value", str(s)): int(h) for s, h in state["fireworks"].items()}
    total = sum(fireworks.values())
    details = {
        "fireworks": fireworks,
        "fireworks_score": total,
        "fuse_tokens": int(state["fuse_tokens"]),
        "info_tokens": int(state["info_tokens"]),
        "deck_left": len(state["deck"]),
    }
    return total / MAX_SCORE, details


def check_options(options: Mapping[str, Any]) -> dict[str, str]:
    """The bad ones among TextArena's Hanabi options (:data:`tasks.textarena.options.OptionsCheck`)."""
    return {
        **integer(
            options,
            "info_tokens",
            0,
            MAX_INFO_TOKENS,
            default=MAX_INFO_TOKENS,
            why=f"the game's cap is {MAX_INFO_TOKENS}, and below 0 hints never run out",
        ),
        **integer(
            options,
            "fuse_tokens",
            1,
            default=4,
            why="the rules the players are shown end the game when they reach 0",
        ),
    }


def _hints_to_me(context: str, me: int, seat: str) -> list[int]:
    """The cards hinted to player ``me`` since its last move, in order."""
    last_move = context.rfind(f"### {seat}\n[")
    recent = context[last_move + 1 :] if last_move >= 0 else context
    pattern = re.compile(rf"Card (\d) from player {me} (?:is \w+|has rank \d)\.")
    return [int(m[1]) for m in pattern.finditer(recent)]


def _playable_hint(context: str, me: int) -> str | None:
    """A hint about a playable card of the first teammate after ``me`` that holds one."""
    start = context.rfind(_STATE)
    if start < 0:
        return None
    board = context[start:]
    info = _INFO.search(board)
    if info is None or int(info[1]) == 0:
        return None
    fireworks = {colour: int(height) for colour, height in _FIREWORK.findall(board)}
    hands = {int(p): _CARD.findall(cards) for p, cards in _HAND.findall(board)}
    players = max([me, *hands]) + 1
    for step in range(1, players):
        player = (me + step) % players
        for index, colour, rank in hands.get(player, ()):
            if int(rank) == fireworks.get(colour, -1) + 1:
                return f"[Reveal] player {player} card {index} rank {rank}"
    return None


def expert(seat: str, context: str, rng: np.random.Generator, make_error: bool) -> str:
    """The scripted player's move for ``seat`` (``player<N>``) seeing ``context``."""
    me = int(seat.removeprefix("player"))
    if make_error:
        return f"[Play] {int(rng.integers(0, 4))}"
    hinted = _hints_to_me(context, me, seat)
    if hinted:
        return f"[Play] {hinted[0]}"
    hint = _playable_hint(context, me)
    if hint is not None:
        return hint
    return "[Discard] 0"
