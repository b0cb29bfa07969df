"""Checks of ``Literal`` choices read from the type itself (``typing.get_args``), so that a
choice is written once: in its ``Literal``."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union


def choices(tp: Any) -> tuple[Any, ...]:
    """The values a ``Literal`` (or an optional ``Literal``, ``Literal[...] | None``) allows.

    Raises:
        TypeError: ``tp`` is not a Literal.
    """
    if typing.get_origin(tp) is Literal:
        return typing.get_args(tp)
    if typing.get_origin(tp) in (Union, types.UnionType):
        out: list[Any] = []
        for arm in typing.get_args(tp):
            out.extend([None] if arm is type(None) else choices(arm))
        return tuple(out)
    raise TypeError(f"choices: expected a Literal type, got {tp!r}")


def one_of(tp: Any) -> str:
    """``'a' or 'b'``, ``'a', 'b' or 'c'``: the choices of ``tp`` for a message."""
    shown = [repr(c) for c in choices(tp)]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def choice_errors(name: str, value: Any, tp: Any) -> list[str]:
    """``[]`` when ``value`` is one of ``tp``'s choices, else one line
    ``"<name>: expected <choices>, got <value>"``."""
    if value in choices(tp):
        return []
    return [f"{name}: expected {one_of(tp)}, got {value!r}"]
