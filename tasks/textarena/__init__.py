"""The ``textarena/<Game>-v0`` tasks: TextArena's cooperative games as team tasks.

TextArena is an optional dependency (``pip install -e '.[textarena]'``), imported only when one
of these tasks is made; the ids and the reasons a game cannot run come from a static catalogue
(:mod:`tasks.textarena.catalogue`). docs/tasks/textarena.md describes each game's reward.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from tasks.textarena import codenames, hanabi, public_goods
from tasks.textarena.catalogue import GAMES, INSTALL, TEXTARENA_VERSION, unavailable_reason
from tasks.textarena.task import OwnRandom, Players, TextArenaExpertTask, TextArenaTask

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

_PLAYED: dict[str, tuple[ModuleType, float, str]] = {
    # game -> (its module: score, expert, check_options, METRICS; the reward that counts as
    # solved; history)
    "Hanabi": (hanabi, 0.4, "last_turn"),
    "PublicGoods": (public_goods, 0.95, "all"),
    "Codenames": (codenames, 1.0, "last_turn"),
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
    rules, default_success, default_history = _PLAYED[game]
    extra: dict[str, Any] = {}
    if game == "Codenames":  # red is the team; blue, the task's scripted opponent
        names = codenames.SEATS
        extra = {
            "env_class": codenames.env_class(),
            "players": Players(names, frozenset(names[2:])),
            "opponent_error_rate": game_options.pop("opponent_error_rate", 0.0),
        }
    return TextArenaExpertTask(
        game,
        scorer=rules.score,
        expert=rules.expert,
        check_options=rules.check_options,
        metrics=rules.METRICS,
        num_players=num_players,
        success=default_success if success is None else success,
        split=split,
        history=default_history if history is None else history,
        game_options=game_options,
        **extra,
    )
