"""Range checks of the TextArena games' own options, run when a task is made, before any game.

TextArena takes whatever value it is given and plays it: Hanabi with -1 info tokens never runs
out of hints (its check is ``== 0``), a public goods game with a multiplication factor below 1
rewards keeping everything. So each game module says what its options may be
(``check_options(options) -> {option: problem}``), with these helpers, and the task reports every
bad option at once (:class:`tasks.textarena.TextArenaTask`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from tasks.base import is_int

OptionsCheck = Callable[[Mapping[str, Any]], dict[str, str]]
"""A game's check of its TextArena options: each bad option given -> what is wrong with it, said
for a user (expected, seen, how to fix). Options not given are TextArena's defaults and fine."""


def _fix(name: str, default: object) -> str:
    return (
        f"fix: give {name} a value in that range, or leave it out (TextArena's default: {default})"
    )


def integer(
    options: Mapping[str, Any],
    name: str,
    low: int,
    high: int | None = None,
    *,
    default: int,
    why: str,
) -> dict[str, str]:
    """``{name: problem}`` when ``options[name]`` is given and is not an integer in
    ``[low, high]`` (``high=None``: no upper bound); ``why`` says what the range comes from."""
    if name not in options:
        return {}
    value = options[name]
    if is_int(value) and value >= low and (high is None or value <= high):
        return {}
    span = f"from {low} to {high}" if high is not None else f"of at least {low}"
    return {
        name: f"{name}: expected an integer {span} ({why}), got {value!r}; {_fix(name, default)}"
    }


def number_above(
    options: Mapping[str, Any], name: str, low: float, *, default: float, why: str
) -> dict[str, str]:
    """``{name: problem}`` when ``options[name]`` is given and is not a finite number above
    ``low``; ``why`` says what the bound comes from."""
    if name not in options:
        return {}
    value = options[name]
    real = isinstance(value, int | float) and not isinstance(value, bool)
    if real and math.isfinite(value) and value > low:
        return {}
    return {
        name: f"{name}: expected a finite number above {low:g} ({why}), got {value!r}; "
        f"{_fix(name, default)}"
    }
