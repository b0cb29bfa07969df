"""The registry of learners: versioned ids (``teamtr/TeamTR-v0``), built-ins and third-party
plugins from the ``teamtr.learners`` entry-point group, modelled on the task registry.

A plugin's entry point names a function ``register(registry)`` that calls
``registry.register(id, "module:Class", description=...)`` for each of its learners::

    [project.entry-points."teamtr.learners"]
    mylab = "mylab_learners:register"

``schedule.learner`` in a training config, ``teamtr train --learner`` and
``teamtr compare --learners`` take any registered id, or one of the short names
``teamtr``, ``naive_sequential``, ``joint``, ``independent``, ``at_grpo`` and ``teamtr_tree`` of
the built-ins.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any

from teamtr_core.errors import RegistryError

__all__ = [
    "ALIASES",
    "DuplicateLearnerError",
    "InvalidLearnerIdError",
    "LearnerPluginError",
    "LearnerRegistry",
    "LearnerSpec",
    "RegistryError",
    "UnknownLearnerError",
    "learner_errors",
    "learner_id_errors",
    "learner_ids",
    "learner_spec",
    "make_learner",
    "register_learner",
    "registry",
]
from teamtr_core.registry import PluginRegistry
from trainers.learners.base import Learner

if TYPE_CHECKING:
    from trainers.config import TrainConfig

ENTRY_POINT_GROUP = "teamtr.learners"
# Short names of the built-in learners (the values of ``schedule.learner`` before the registry).
ALIASES = {
    "teamtr": "teamtr/TeamTR-v0",
    "naive_sequential": "teamtr/NaiveSequential-v0",
    "joint": "teamtr/Joint-v0",
    "independent": "teamtr/IndependentGRPO-v0",
    "at_grpo": "teamtr/ATGRPO-v0",
    "teamtr_tree": "teamtr/TeamTRTree-v0",
}


def installed_entry_points() -> list[metadata.EntryPoint]:
    """The installed plugins of :data:`ENTRY_POINT_GROUP`."""
    return list(metadata.entry_points(group=ENTRY_POINT_GROUP))


class InvalidLearnerIdError(RegistryError, ValueError):
    """A learner id that does not have the form ``namespace/Name-vN``."""


class UnknownLearnerError(RegistryError, KeyError):
    """No learner is registered under the id (the message suggests close matches)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class DuplicateLearnerError(RegistryError, ValueError):
    """An id registered twice without ``override=True``."""


class LearnerPluginError(RegistryError, ImportError):
    """A plugin of the ``teamtr.learners`` group failed to import or to register its learners."""


@dataclass(frozen=True)
class LearnerSpec:
    """A registered learner: its id, where its class lives, and one line for listings."""

    id: str
    entry_point: str | type
    description: str = ""
    plugin: str | None = None

    def load(self) -> type[Learner]:
        """The learner class (imported on first use for ``"module:Class"`` entry points)."""
        target: Any = self.entry_point
        if isinstance(target, str):
            module, _, attr = target.partition(":")
            try:
                target = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError) as exc:
                raise LearnerPluginError(
                    f"Learner {self.id!r}: cannot import {self.entry_point!r} "
                    f"({type(exc).__name__}: {exc})"
                ) from exc
        if not (isinstance(target, type) and issubclass(target, Learner)):
            raise LearnerPluginError(
                f"Learner {self.id!r}: {self.entry_point!r} is not a subclass of "
                "trainers.learners.Learner"
            )
        return target

    def make(self) -> Learner:
        """A new instance of the learner."""
        return self.load()()


class LearnerRegistry(PluginRegistry[LearnerSpec]):
    """A mapping ``id -> LearnerSpec`` with ``register`` and ``make``; plugins come from the
    ``teamtr.learners`` entry-point group (the plumbing is the task registry's).

    Args:
        plugins: load third-party learners from the ``teamtr.learners`` entry-point group on
            first use.
        entry_points: where to find plugins (default: the installed distributions).
    """

    group = ENTRY_POINT_GROUP
    kind = "Learner"
    plugin_error = LearnerPluginError
    id_error = InvalidLearnerIdError
    duplicate_error = DuplicateLearnerError
    example_id = "teamtr/TeamTR-v0"
    listing = "teamtr learners"

    def __init__(
        self,
        *,
        plugins: bool = True,
        entry_points: Callable[[], Iterable[metadata.EntryPoint]] | None = None,
    ) -> None:
        super().__init__(plugins=plugins, entry_points=entry_points or installed_entry_points)

    def register(
        self,
        id: str,
        entry_point: str | type,
        *,
        description: str = "",
        override: bool = False,
    ) -> LearnerSpec:
        """Registers a learner under ``id`` (``namespace/Name-vN``).

        Args:
            id: the versioned id.
            entry_point: ``"module:Class"`` or the class, a subclass of ``Learner``.
            description: one line for ``teamtr learners``.
            override: replace an existing registration instead of raising.

        Raises:
            InvalidLearnerIdError: malformed id or no version.
            DuplicateLearnerError: the id is taken and ``override`` is false.
        """
        self._check_new_id(id, override=override)
        spec = LearnerSpec(id, entry_point, description, self._loading)
        self._specs[id] = spec
        return spec

    def spec(self, id: str) -> LearnerSpec:
        """The spec of ``id`` (a registered id or a built-in's short name).

        Raises:
            UnknownLearnerError: with close matches ("did you mean").
        """
        self._ensure_plugins()
        key = ALIASES.get(id, id)
        if key in self._specs:
            return self._specs[key]
        raise UnknownLearnerError(self._unknown_message(id, ALIASES))

    def canonical(self, id: str) -> str:
        """The registered id that ``id`` names (short names resolve to their built-in)."""
        return self.spec(id).id

    def make(self, id: str) -> Learner:
        """A new instance of the learner registered as ``id``."""
        return self.spec(id).make()


registry = LearnerRegistry()
registry.register(
    "teamtr/TeamTR-v0",
    "trainers.learners.teamtr:TeamTR",
    description="fresh rollouts under the partially updated team before every agent update",
)
registry.register(
    "teamtr/NaiveSequential-v0",
    "trainers.learners.naive_sequential:NaiveSequential",
    description="rollouts sampled once per stage and reused for every agent's update",
)
registry.register(
    "teamtr/Joint-v0",
    "trainers.learners.joint:Joint",
    description="one stage-start batch, every agent updated on it; no intermediate teams",
)
registry.register(
    "teamtr/IndependentGRPO-v0",
    "trainers.learners.independent:IndependentGRPO",
    description="independent per-agent GRPO on one stage-start batch, no trust region (MAGRPO)",
)
registry.register(
    "teamtr/ATGRPO-v0",
    "trainers.learners.at_grpo:ATGRPO",
    description="AT-GRPO: a tree of candidates per turn, groups per agent and turn (PettingLLMs)",
)
registry.register(
    "teamtr/TeamTRTree-v0",
    "trainers.learners.teamtr_tree:TeamTRTree",
    description="TeamTR whose resampled batches are trees: fresh contexts, same-context groups",
)


def register_learner(id: str, entry_point: str | type, **kwargs: Any) -> LearnerSpec:
    """Registers a learner in the default registry (see :meth:`LearnerRegistry.register`)."""
    return registry.register(id, entry_point, **kwargs)


def make_learner(id: str) -> Learner:
    """A new learner registered as ``id`` in the default registry."""
    return registry.make(id)


def learner_spec(id: str) -> LearnerSpec:
    """The spec of a registered learner id (or short name) in the default registry."""
    return registry.spec(id)


def learner_ids() -> Mapping[str, LearnerSpec]:
    """Every registered learner, by id."""
    return {i: registry.spec(i) for i in registry}


def learner_id_errors(data: Mapping[str, Any]) -> list[str]:
    """``[problem]`` when a training config's data (a mapping, before it is built) names no
    registered learner as ``schedule.learner`` (the registry's message, with its suggestions),
    or a plugin that fails to load; ``[]`` otherwise (a missing or non-string id is the
    schema's to report)."""
    schedule = data.get("schedule")
    value = schedule.get("learner") if isinstance(schedule, Mapping) else None
    if not isinstance(value, str):
        return []
    try:
        learner_spec(value).load()
    except RegistryError as exc:
        return [f"schedule.learner: {exc}"]
    return []


def learner_errors(config: TrainConfig) -> list[str]:
    """Every problem of a built configuration's learner: an unregistered id, or the learner's own
    :meth:`~trainers.learners.base.Learner.check` of the configuration (one line each)."""
    try:
        learner = make_learner(config.schedule.learner)
    except RegistryError as exc:
        return [f"schedule.learner: {exc}"]
    return list(learner.check(config))
