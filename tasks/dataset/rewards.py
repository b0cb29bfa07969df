"""Reward functions in the style of TRL's ``GRPOTrainer(reward_funcs=..., reward_weights=...)``.

A reward function is called with keyword arguments: ``prompts`` (a list), ``completions`` (a list
of the same length) and one list per other dataset column (``answer=[...]``), and returns one
float per completion (``None`` where it does not apply: it then adds nothing, as in TRL).
:class:`~tasks.dataset.DatasetTask` grades one episode at a time, so every list has length 1.

Reward functions are Python callables or import strings ``"module:function"`` (so that YAML
configs can name them); an import string imports the module and reads the attribute, nothing is
ever evaluated.
"""

from __future__ import annotations

import importlib
import inspect
import math
import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

RewardFunc = Callable[..., Sequence[float | None]]
"""``f(prompts, completions, **columns) -> [float | None, ...]``, one value per completion."""

RESERVED_COLUMNS = frozenset({"prompt", "prompts", "completion", "completions", "completion_ids"})
"""Columns never passed to reward functions as keyword arguments (``prompts`` and
``completions`` are the function's own arguments; TRL also leaves out ``prompt`` and
``completion``)."""

_IMPORT_STRING = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


class RewardValueError(ValueError):
    """A reward function returned something other than one finite number (or ``None``) per
    completion."""


def resolve(spec: object, where: str) -> tuple[str, RewardFunc] | str:
    """The reward function ``spec`` names: ``(name, function)``, or one line saying what is wrong.

    Args:
        spec: a callable, or an import string ``"module:function"`` (``"module:Class.attr"``).
        where: how messages refer to it (``"reward_funcs[0]"``).
    """
    if isinstance(spec, str):
        if not _IMPORT_STRING.match(spec):
            return (
                f"{where}: expected a callable or an import string 'module:function', got "
                f"{spec!r} (reward models are not supported: wrap one in a function)"
            )
        module_name, _, attr = spec.partition(":")
        try:
            found: Any = importlib.import_module(module_name)
        except Exception as exc:  # the module is the user's code: any import failure is theirs
            return (
                f"{where}: cannot import {module_name!r} for {spec!r} ({type(exc).__name__}: {exc})"
            )
        for part in attr.split("."):
            if not hasattr(found, part):
                return f"{where}: {spec!r}: {module_name!r} has no attribute {attr!r}"
            found = getattr(found, part)
        if not callable(found):
            return f"{where}: {spec!r} is a {type(found).__name__}, not a callable"
        return getattr(found, "__name__", attr.rsplit(".", 1)[-1]), found
    if callable(spec):
        return str(getattr(spec, "__name__", type(spec).__name__)), spec
    return (
        f"{where}: expected a callable or an import string 'module:function', got "
        f"{type(spec).__name__} {spec!r}"
    )


def signature_error(name: str, func: RewardFunc, columns: Sequence[str]) -> str | None:
    """One line if ``func`` cannot be called as ``func(prompts=..., completions=..., **columns)``
    (every column a keyword argument, as TRL calls it), else ``None``. A function whose signature
    cannot be read is assumed to be fine."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(prompts=[], completions=[], **{c: [] for c in columns})
    except TypeError as exc:
        fix = (
            "its other parameters must be columns of the dataset or have defaults"
            if "missing" in str(exc)
            else "give it a **kwargs parameter, as TRL reward functions have"
        )
        return (
            f"reward function {name}{signature} cannot be called with prompts=, completions= and "
            f"one keyword argument per column {sorted(columns)} ({exc}): {fix}"
        )
    return None


def unique_names(names: Sequence[str]) -> list[str]:
    """``["f", "g", "f"]`` -> ``["f", "g", "f#2"]``: the keys of ``Score.details["rewards"]``."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


def one_value(returned: object) -> float | None:
    """The single value of a reward function's result for one completion.

    Raises:
        RewardValueError: not a sequence of length 1, or its element is neither ``None`` nor a
            finite number.
    """
    if returned is None or isinstance(returned, (str, bytes, Mapping)):
        raise RewardValueError(
            f"returned {type(returned).__name__}; expected a list with one float per completion"
        )
    try:
        size = len(returned)  # type: ignore[arg-type]
        value = returned[0] if size == 1 else None  # type: ignore[index]
    except Exception as exc:
        raise RewardValueError(
            f"returned {type(returned).__name__}; expected a list with one float per completion"
        ) from exc
    if size != 1:
        raise RewardValueError(f"returned {size} values for 1 completion")
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not (
        isinstance(value, numbers.Real) or hasattr(value, "__float__")
    ):
        raise RewardValueError(f"returned [{value!r}]; expected a float")
    number = float(value)
    if not math.isfinite(number):
        raise RewardValueError(f"returned [{number}]; expected a finite float")
    return number


def exact_match(
    prompts: Sequence[Any], completions: Sequence[Any], answer: Sequence[Any], **kwargs: Any
) -> list[float]:
    """1.0 where the completion, stripped, equals the ``answer`` column's value (as text,
    stripped), else 0.0. A conversational completion (a list of messages) is read from its last
    message's ``content``. Import string: ``"tasks.dataset.rewards:exact_match"``."""
    out = []
    for completion, gold in zip(completions, answer):
        if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
            completion = completion[-1].get("content", "")
        out.append(float(str(completion).strip() == str(gold).strip()))
    return out
