"""The TextArena games teamtr plays as team tasks, and why a game cannot run on this machine.

This module imports nothing of TextArena: ``teamtr tasks`` lists every game, with the reason it
is unavailable where it is, without importing a game module (several call ``nltk.download`` at
import, which reaches for the network).
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass

TEXTARENA_VERSION = "0.7.4"
"""The TextArena release the games were written against (the ``textarena`` extra pins it)."""

INSTALL = 'pip install -e ".[textarena]"'


@dataclass(frozen=True)
class Game:
    """One TextArena game as a team task.

    Attributes:
        name: the id's name (``textarena/<name>-v0``).
        entry: the game's environment class, ``module:Class`` inside TextArena.
        description: one line for ``teamtr tasks``.
        players: the smallest and largest number of players.
        default_players: the players when ``num_players`` is not given.
        max_turns: the team's turn limit (a game that has not ended by then is truncated).
        python: the oldest Python whose syntax the game's source uses.
        needs: what the game needs that teamtr does not supply (a network judge, nltk data),
            ``None`` when it needs nothing more.
    """

    name: str
    entry: str
    description: str
    players: tuple[int, int]
    default_players: int
    max_turns: int
    python: tuple[int, int] = (3, 10)
    needs: str | None = None


GAMES: dict[str, Game] = {
    game.name: game
    for game in (
        Game(
            "Hanabi",
            "textarena.envs.Hanabi.env:HanabiEnv",
            "Cooperative card game: each player sees every hand but its own; hints, plays and "
            "discards build five fireworks (reward: fireworks score / 25).",
            (2, 5),
            3,
            max_turns=300,
        ),
        Game(
            "PublicGoods",
            "textarena.envs.PublicGoodsGame.env:PublicGoodsGameEnv",
            "Public goods game: talk, then contribute tokens that are multiplied and shared "
            "(reward: the team's total payoff / its maximum).",
            (2, 8),
            4,
            max_turns=200,
        ),
        Game(
            "StagHunt",
            "textarena.envs.IteratedStagHunt.env:IteratedStagHuntEnv",
            "Iterated stag hunt: coordinate on the stag or settle for a hare.",
            (2, 2),
            2,
            max_turns=100,
            python=(3, 12),
            needs="teamtr to read its shared payoff from the game state, not written yet (the "
            "game's source needs Python 3.12, which teamtr's tests do not run)",
        ),
        Game(
            "Codenames",
            "textarena.envs.Codenames.env:CodenamesEnv",
            "Codenames: the team is red's spymaster and operative, against a scripted blue team "
            "(reward: 1 win, 0.5 draw, 0 loss); an offline word list of 96 nouns.",
            (4, 4),
            4,
            max_turns=160,
        ),
        Game(
            "Taboo",
            "textarena.envs.Taboo.env:TabooEnv",
            "Taboo: a clue giver describes a word without its taboo words, a guesser guesses.",
            (2, 2),
            2,
            max_turns=100,
            needs="nltk data (its word lists), which it downloads at import",
        ),
    )
}


def unavailable_reason(name: str) -> str | None:
    """Why ``textarena/<name>-v0`` cannot run here (``None``: it can), without importing it."""
    game = GAMES[name]
    if game.python > sys.version_info[:2]:
        need = ".".join(map(str, game.python))
        here = ".".join(map(str, sys.version_info[:2]))
        return (
            f"TextArena's {name} uses Python {need} syntax (its source fails to parse on "
            f"Python {here}); run it on Python {need} or newer"
        )
    if game.needs is not None:
        return f"TextArena's {name} needs {game.needs}"
    if importlib.util.find_spec("textarena") is None:
        return f"needs TextArena {TEXTARENA_VERSION}: {INSTALL}"
    return None
