"""The ``textarena/<Game>-v0`` tasks: TextArena's cooperative games as team tasks.

TextArena is an optional dependency (``pip install -e '.[textarena]'``), imported only when one
of these tasks is made; the ids and the reasons a game cannot run come from a static catalogue
(:mod:`tasks.textarena.catalogue`). docs/tasks/textarena.md describes each game's reward.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from tasks.textarena import codenames, hanabi, public_goods
from tasks.textarena.catalogue import GAMES, INSTALL, TEXTARENA_VERSION, unavailable_reason
from tasks.textarena.task import OwnRandom, TextArenaExpertTask, TextArenaTask

__all__ = [
    "GAMES",
    "INSTALL",
    "TEXTARENA_VERSION",
    "OwnRandom",
    "TextArenaExpertTask",
    "TextArenaTask",
    "make_task",
    "unavailable_reason",
]


@dataclass(frozen=True)
class _Played:
    """A game wired in as a task: its module (``score``, ``expert``, ``check_options``,
    ``METRICS``), the reward that counts as solved, the history its agents see, and what its
    task takes beyond a plain game's (``settings(game_options)``: may take options out)."""

    rules: ModuleType
    success: float
    history: str
    settings: Callable[[dict[str, Any]], dict[str, Any]] | None = None


_PLAYED: dict[str, _Played] = {
    "Hanabi": _Played(hanabi, 0.4, "last_turn"),
    "PublicGoods": _Played(public_goods, 0.95, "all"),
    "Codenames": _Played(codenames, 1.0, "last_turn", codenames.task_settings),
}


def make_task(
    game: str,
    *,
    num_players: int | None = None,
    success: float | None = None,
    split: str = "train",
    history: str | None = None,
    **game_options: Any,
) -> TextArenaTask:
    """The task of TextArena game ``game`` (the registry's entry point); ``game_options`` are the
    TextArena environment's own arguments (Hanabi's ``info_tokens``, PublicGoods' ``num_rounds``).

    Raises:
        TaskConfigError: every problem of the options at once (a value out of the game's range
            included: each game module's ``check_options``), or the reason the game cannot run
            here.
    """
    reason = unavailable_reason(game)
    if game not in _PLAYED or reason is not None:
        from tasks.base import TaskConfigError

        raise TaskConfigError(f"textarena/{game}-v0", [reason or f"{game} is not wired in yet"])
    played = _PLAYED[game]
    extra = played.settings(game_options) if played.settings is not None else {}
    rules = played.rules
    return TextArenaExpertTask(
        game,
        scorer=rules.score,
        expert=rules.expert,
        check_options=rules.check_options,
        metrics=rules.METRICS,
        num_players=num_players,
        success=played.success if success is None else success,
        split=split,
        history=played.history if history is None else history,
        game_options=game_options,
        **extra,
    )
