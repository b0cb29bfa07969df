"""The registry of learners: versioned ids (``teamtr/TeamTR-v0``), built-ins and third-party
plugins from the ``teamtr.trainers`` entry-point group, modelled on the task registry.

A plugin's entry point names a function ``register(registry)`` that calls
``registry.register(id, "module:Class", description=...)`` for each of its learners::

    [project.entry-points."teamtr.trainers"]
    mylab = "mylab_learners:register"

``schedule.method`` in a training config, ``teamtr train --trainer`` and
``benchmarks/compare_trainers.py --trainers`` take any registered id, or one of the short names
``teamtr``, ``naive_sequential`` and ``joint`` of the built-ins.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from teamtr_core.errors import RegistryError

__all__ = [
    "ALIASES",
    "DuplicateTrainerError",
    "InvalidTrainerIdError",
    "RegistryError",
    "TrainerPluginError",
    "TrainerRegistry",
    "TrainerSpec",
    "UnknownTrainerError",
    "make_learner",
    "register_trainer",
    "registry",
    "trainer_ids",
    "trainer_spec",
]
from teamtr_core.registry import PluginRegistry

if TYPE_CHECKING:
    from trainers.learners.base import Learner

ENTRY_POINT_GROUP = "teamtr.trainers"
# Short names of the built-in learners (the values of ``schedule.method`` before the registry).
ALIASES = {
    "teamtr": "teamtr/TeamTR-v0",
    "naive_sequential": "teamtr/NaiveSequential-v0",
    "joint": "teamtr/Joint-v0",
}


class InvalidTrainerIdError(RegistryError, ValueError):
    """A learner id that does not have the form ``namespace/Name-vN``."""


class UnknownTrainerError(RegistryError, KeyError):
    """No learner is registered under the id (the message suggests close matches)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class DuplicateTrainerError(RegistryError, ValueError):
    """An id registered twice without ``override=True``."""


class TrainerPluginError(RegistryError, ImportError):
    """A plugin of the ``teamtr.trainers`` group failed to import or to register its learners."""


@dataclass(frozen=True)
class TrainerSpec:
    """A registered learner: its id, where its class lives, and one line for listings."""

    id: str
    entry_point: str | type
    description: str = ""
    plugin: str | None = None

    def load(self) -> type[Learner]:
        """The learner class (imported on first use for ``"module:Class"`` entry points)."""
        from trainers.learners.base import Learner

        target: Any = self.entry_point
        if isinstance(target, str):
            module, _, attr = target.partition(":")
            try:
                target = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError) as exc:
                raise TrainerPluginError(
                    f"Learner {self.id!r}: cannot import {self.entry_point!r} "
                    f"({type(exc).__name__}: {exc})"
                ) from exc
        if not (isinstance(target, type) and issubclass(target, Learner)):
            raise TrainerPluginError(
                f"Learner {self.id!r}: {self.entry_point!r} is not a subclass of "
                "trainers.learners.Learner"
            )
        return target

    def make(self) -> Learner:
        """A new instance of the learner."""
        return self.load()()


class TrainerRegistry(PluginRegistry[TrainerSpec]):
    """A mapping ``id -> TrainerSpec`` with ``register`` and ``make``; plugins come from the
    ``teamtr.trainers`` entry-point group (the plumbing is the task registry's).

    Args:
        plugins: load third-party learners from the ``teamtr.trainers`` entry-point group on
            first use.
        entry_points: where to find plugins (default: the installed distributions).
    """

    group = ENTRY_POINT_GROUP
    kind = "Learner"
    plugin_error = TrainerPluginError
    id_error = InvalidTrainerIdError
    duplicate_error = DuplicateTrainerError
    example_id = "teamtr/TeamTR-v0"
    listing = "teamtr trainers"

    def register(
        self,
        id: str,
        entry_point: str | type,
        *,
        description: str = "",
        override: bool = False,
    ) -> TrainerSpec:
        """Registers a learner under ``id`` (``namespace/Name-vN``).

        Args:
            id: the versioned id.
            entry_point: ``"module:Class"`` or the class, a subclass of ``Learner``.
            description: one line for ``teamtr trainers``.
            override: replace an existing registration instead of raising.

        Raises:
            InvalidTrainerIdError: malformed id or no version.
            DuplicateTrainerError: the id is taken and ``override`` is false.
        """
        self._check_new_id(id, override=override)
        spec = TrainerSpec(id, entry_point, description, self._loading)
        self._specs[id] = spec
        return spec

    def spec(self, id: str) -> TrainerSpec:
        """The spec of ``id`` (a registered id or a built-in's short name).

        Raises:
            UnknownTrainerError: with close matches ("did you mean").
        """
        self._ensure_plugins()
        key = ALIASES.get(id, id)
        if key in self._specs:
            return self._specs[key]
        raise UnknownTrainerError(self._unknown_message(id, ALIASES))

    def canonical(self, id: str) -> str:
        """The registered id that ``id`` names (short names resolve to their built-in)."""
        return self.spec(id).id

    def make(self, id: str) -> Learner:
        """A new instance of the learner registered as ``id``."""
        return self.spec(id).make()


registry = TrainerRegistry()
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


def register_trainer(id: str, entry_point: str | type, **kwargs: Any) -> TrainerSpec:
    """Registers a learner in the default registry (see :meth:`TrainerRegistry.register`)."""
    return registry.register(id, entry_point, **kwargs)


def make_learner(id: str) -> Learner:
    """A new learner registered as ``id`` in the default registry."""
    return registry.make(id)


def trainer_spec(id: str) -> TrainerSpec:
    """The spec of a registered learner id (or short name) in the default registry."""
    return registry.spec(id)


def trainer_ids() -> Mapping[str, TrainerSpec]:
    """Every registered learner, by id."""
    return {i: registry.spec(i) for i in registry}
