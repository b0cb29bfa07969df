"""Routers pick the single active agent at each turn of a turn-taking team."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, overload, runtime_checkable

import numpy as np

from tasks.base import Message
from teamtr_core.errors import ConfigError


@dataclass(frozen=True)
class RouterState:
    """What a router may look at when choosing the next speaker.

    Attributes:
        turn: the index of the turn about to be played (0-based).
        agents: the team's agent names.
        transcript: the shared context so far (``TeamEnv`` passes a :class:`TranscriptView`,
            which compares equal to the tuple of its messages).
        rng: the episode's random generator (seeded by ``env.reset(seed=...)``).
    """

    turn: int
    agents: tuple[str, ...]
    transcript: Sequence[Message]
    rng: np.random.Generator


class TranscriptView(Sequence[Message]):
    """A read-only view of the first ``length`` messages of a list that only grows, such as a
    ``TeamEnv`` transcript: a snapshot that costs nothing to take, however long the episode.

    Indexing, iteration and ``len`` see those messages only; a slice is a tuple; a view equals
    (and hashes as) the tuple of its messages.
    """

    __slots__ = ("_length", "_messages")

    def __init__(self, messages: Sequence[Message], length: int | None = None) -> None:
        self._messages = messages
        self._length = len(messages) if length is None else length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...

    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        if isinstance(index, slice):
            return tuple(self._messages[i] for i in range(self._length)[index])
        return self._messages[range(self._length)[index]]

    def __iter__(self) -> Iterator[Message]:
        for i in range(self._length):
            yield self._messages[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TranscriptView | tuple):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"TranscriptView({tuple(self)!r})"


@runtime_checkable
class Router(Protocol):
    """Anything with ``select(state) -> agent name``."""

    def select(self, state: RouterState) -> str: ...


class RoundRobin:
    """Agents speak in their listed order, cycling: turn t -> ``agents[t % n]`` (the default)."""

    def select(self, state: RouterState) -> str:
        return state.agents[state.turn % len(state.agents)]

    def __repr__(self) -> str:
        return "RoundRobin()"


class FixedOrder:
    """A fixed speaking schedule, e.g. ``["solver", "critic", "solver", "aggregator"]``; it cycles
    if the episode has more turns than the schedule."""

    def __init__(self, order: Sequence[str]) -> None:
        if isinstance(order, str) or not order:
            raise ConfigError(
                "FixedOrder", [f"order: expected a non-empty list of agent names, got {order!r}"]
            )
        self.order = tuple(order)

    def select(self, state: RouterState) -> str:
        return self.order[state.turn % len(self.order)]

    def check(self, agents: Sequence[str]) -> list[str]:
        unknown = [a for a in self.order if a not in agents]
        return (
            [f"router: order names unknown agents {unknown}; agents are {list(agents)}"]
            if unknown
            else []
        )

    def __repr__(self) -> str:
        return f"FixedOrder({list(self.order)!r})"


class CallableRouter:
    """Wraps a user function ``fn(state: RouterState) -> agent name``."""

    def __init__(self, fn: Callable[[RouterState], str]) -> None:
        self.fn = fn

    def select(self, state: RouterState) -> str:
        return self.fn(state)

    def __repr__(self) -> str:
        return f"CallableRouter({getattr(self.fn, '__name__', self.fn)!r})"


RouterLike = Router | Callable[[RouterState], str] | Sequence[str] | str | None


def make_router(spec: RouterLike) -> Router:
    """Builds a router from ``None``/``"round_robin"`` (round robin), a list of names (fixed
    order), a function, or an object with ``select``."""
    if spec is None or spec == "round_robin":
        return RoundRobin()
    if isinstance(spec, Router):
        return spec
    if isinstance(spec, str):
        raise ConfigError(
            "router", [f"expected 'round_robin', a list of agent names or a callable, got {spec!r}"]
        )
    if callable(spec):
        return CallableRouter(spec)
    return FixedOrder(list(spec))
