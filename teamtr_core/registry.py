"""The plugin-registry plumbing every registry of the project shares: versioned ids
(``namespace/Name-vN``), a mapping ``id -> spec`` whose third-party entries come from an
entry-point group, loaded lazily and isolated when they fail, and "did you mean" messages.

The task registry (:class:`teamtr_env.registration.Registry`) and the learner registry
(:class:`trainers.learners.registry.LearnerRegistry`) subclass :class:`PluginRegistry`.
"""

from __future__ import annotations

import difflib
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from importlib import metadata
from typing import TypeVar

from teamtr_core.errors import DuplicateTaskError, InvalidTaskIdError, PluginLoadError

_Spec = TypeVar("_Spec")

_ID = re.compile(
    r"^(?:(?P<namespace>[A-Za-z][\w.-]*)/)?(?P<name>[A-Za-z][\w.:]*(?:-[A-Za-z][\w.:]*)*?)"
    r"(?:-v(?P<version>\d+))?$"
)


class PluginLoadWarning(UserWarning):
    """A third-party plugin (of tasks or learners) failed to load; its entries are unavailable."""


def parse_id(
    task_id: str,
    *,
    kind: str = "task",
    example: str = "teamtr/Arith-v0",
    error: type[Exception] = InvalidTaskIdError,
) -> tuple[str | None, str, int | None]:
    """Splits ``"namespace/Name-vN"`` into ``(namespace, name, version)``.

    ``kind``, ``example`` and ``error`` adapt the error to the registry (tasks, learners).

    Raises:
        InvalidTaskIdError (or ``error``): if the id does not have that form.
    """
    match = _ID.match(task_id) if isinstance(task_id, str) else None
    if match is None:
        raise error(
            f"Malformed {kind} id {task_id!r}: expected 'namespace/Name-vN' such as "
            f"'{example}' (namespace and version optional when making)."
        )
    version = match.group("version")
    return match.group("namespace"), match.group("name"), int(version) if version else None


class PluginRegistry(Mapping[str, _Spec]):
    """A mapping ``id -> spec`` whose third-party entries come from an entry-point group: the
    plumbing shared by the task registry and the learner registry (``trainers.learners.registry``).

    Subclasses set ``group`` (the entry-point group), ``kind`` (``"Task"``, ``"Learner"``: the
    first word of messages), ``plugin_error`` (the exception type of a failed plugin) and
    ``listing`` (the command that lists the ids), and implement :meth:`spec`.

    Args:
        plugins: load third-party plugins from ``group`` on first use.
        entry_points: where to find plugins (default: the installed distributions); tests pass
            their own list of ``importlib.metadata.EntryPoint``.
    """

    group: str = ""
    kind: str = ""
    plugin_error: type[Exception] = PluginLoadError
    id_error: type[Exception] = InvalidTaskIdError
    duplicate_error: type[Exception] = DuplicateTaskError
    example_id: str = ""
    listing: str = ""

    def __init__(
        self,
        *,
        plugins: bool = True,
        entry_points: Callable[[], Iterable[metadata.EntryPoint]] | None = None,
    ) -> None:
        self._specs: dict[str, _Spec] = {}
        self._plugins_pending = plugins
        self._entry_points = entry_points or (lambda: metadata.entry_points(group=self.group))
        self._loading: str | None = None
        self.plugin_errors: list[Exception] = []

    def spec(self, id: str) -> _Spec:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    def unregister(self, id: str) -> None:
        """Removes a registration (mostly for tests and notebooks)."""
        self._specs.pop(id, None)

    def _check_new_id(self, id: str, *, override: bool) -> None:
        """Refuses an id that is malformed or has no version (``id_error``), or that is taken
        while ``override`` is false (``duplicate_error``)."""
        kind = self.kind.lower()
        if parse_id(id, kind=kind, example=self.example_id, error=self.id_error)[2] is None:
            raise self.id_error(
                f"{self.kind} id {id!r} has no version: register it as '{id}-v0' so that later "
                "incompatible changes can become '-v1' without breaking users."
            )
        if id in self._specs and not override:
            owner = getattr(self._specs[id], "plugin", None)
            raise self.duplicate_error(
                f"{self.kind} {id!r} is already registered"
                f"{f' by plugin {owner!r}' if owner else ''}. "
                "Pass override=True to replace it, or bump the version."
            )

    def __getitem__(self, id: str) -> _Spec:
        return self.spec(id)

    def __iter__(self) -> Iterator[str]:
        self._ensure_plugins()
        return iter(sorted(self._specs))

    def __len__(self) -> int:
        self._ensure_plugins()
        return len(self._specs)

    def load_plugins(self, *, strict: bool = False) -> list[Exception]:
        """Loads every plugin of the entry-point group (once).

        A plugin's entry point must resolve to a callable ``register(registry)``. A failing plugin
        is skipped with a ``PluginLoadWarning`` and recorded in ``plugin_errors``.

        Raises:
            the ``plugin_error`` of the first failure, when ``strict``.
        """
        self._plugins_pending = False
        errors = []
        for ep in self._entry_points():
            error = self._load_plugin(ep)
            if error is not None:
                errors.append(error)
                if not strict:
                    warnings.warn(str(error), PluginLoadWarning, stacklevel=2)
        self.plugin_errors.extend(errors)
        if strict and errors:
            raise errors[0]
        return errors

    def _load_plugin(self, ep: metadata.EntryPoint) -> Exception | None:
        dist = getattr(getattr(ep, "dist", None), "name", None)
        where = f"plugin {ep.name!r} ({ep.value}{f', distribution {dist!r}' if dist else ''})"
        before = dict(self._specs)
        self._loading = ep.name
        try:
            hook = ep.load()
            if not callable(hook):
                raise TypeError(f"entry point resolves to {type(hook).__name__}, not a callable")
            hook(self)
        except Exception as exc:
            self._specs = before  # a half-registered plugin leaves nothing behind
            error = self.plugin_error(
                f"{self.kind} {where} failed to load: {type(exc).__name__}: {exc}. Its "
                f"{self.kind.lower()}s are unavailable; fix or uninstall the plugin. The entry "
                "point must name a function 'register(registry)'."
            )
            error.plugin = ep.name  # type: ignore[attr-defined]
            error.__cause__ = exc
            return error
        finally:
            self._loading = None
        return None

    def _ensure_plugins(self) -> None:
        if self._plugins_pending:
            self.load_plugins()

    def _unknown_message(self, id: str, aliases: Iterable[str] = ()) -> str:
        """ "No ... registered as ...", with close matches among the ids (and ``aliases``)."""
        ids = sorted(self._specs)
        names = [*ids, *sorted(aliases)]
        lowered = {i.lower(): i for i in names}
        close = [lowered[id.lower()]] if id.lower() in lowered else []
        close += [
            c for c in difflib.get_close_matches(id, names, n=3, cutoff=0.6) if c not in close
        ]
        msg = f"No {self.kind.lower()} registered as {id!r}."
        if close:
            msg += f" Did you mean {' or '.join(repr(c) for c in close)}?"
        shown = ids if len(ids) <= 12 else [*ids[:12], "..."]
        msg += f" Registered: {shown}. Run `{self.listing}` to list them with descriptions."
        if self.plugin_errors:
            names = [getattr(e, "plugin", "?") for e in self.plugin_errors]
            msg += f" Note: plugin(s) {names} failed to load and may have provided it."
        return msg
