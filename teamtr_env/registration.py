"""The task registry: versioned ids, frozen specs, ``make`` with kwargs merging, and third-party
plugins through the ``teamtr_env.tasks`` entry-point group.

Modelled on Gymnasium's registry, with its known faults fixed: a :class:`Registry` object that tests
can isolate (the module-level functions use a default instance), typed errors whose messages say
what was expected and suggest close matches, and keyword arguments checked against what the task
and the environment accept, all errors reported at once.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import inspect
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tasks.base import Task, UnknownOptionsError
from tasks.capabilities import SupportsSeats
from tasks.data_files import listed
from teamtr_core.errors import (
    ConfigError,
    InvalidKwargsError,
    PluginLoadError,
    UnknownTaskError,
    VersionNotFoundError,
)
from teamtr_core.registry import PluginRegistry, parse_id
from teamtr_env.env import TeamEnv
from teamtr_env.protocol import TeamProtocol

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "teamtr_env.tasks"
_PROTOCOL_FIELDS = tuple(f.name for f in dataclasses.fields(TeamProtocol))
ENV_KWARGS = ("protocol", "router", "problems", "data_path", "render_mode", *_PROTOCOL_FIELDS)


@dataclass(frozen=True)
class TaskSpec:
    """A frozen description of how to build one registered team environment.

    Attributes:
        id: ``namespace/Name-vN``.
        entry_point: a ``"module:attr"`` string or a callable returning a ``Task``.
        description: one line shown by ``teamtr tasks``.
        kwargs: default keyword arguments of the task factory.
        env_kwargs: default keyword arguments of the environment (protocol fields, router, ...).
        plugin: the entry-point plugin that registered it (``None`` for direct registration).
        loaded: the registry's cache of loaded data files (``None``: load every time).
        source: where the task comes from when it wraps another library (``"reasoning-gym"``),
            shown by ``teamtr tasks``; empty for teamtr's own and plugins' tasks.
        unavailable: ``() -> reason | None``: why the task cannot run on this machine (a
            dependency missing, a Python too old for the wrapped library), shown by ``teamtr
            tasks``; ``None``: it can.
    """

    id: str
    entry_point: str | Callable[..., Task]
    description: str = ""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    plugin: str | None = None
    loaded: LoadedProblems | None = field(default=None, compare=False, repr=False)
    source: str = ""
    unavailable: Callable[[], str | None] | None = field(default=None, compare=False, repr=False)

    def unavailable_reason(self) -> str | None:
        """Why the task cannot run here, or ``None``."""
        return self.unavailable() if self.unavailable is not None else None

    def __post_init__(self) -> None:
        parse_id(self.id)
        if isinstance(self.entry_point, str) and ":" not in self.entry_point:
            raise InvalidKwargsError(
                f"entry point of {self.id}",
                [
                    f"expected 'module:attr' naming a task class or factory, got "
                    f"{self.entry_point!r}"
                ],
            )
        if not isinstance(self.entry_point, str) and not callable(self.entry_point):
            raise InvalidKwargsError(
                f"entry point of {self.id}",
                [f"expected a callable or 'module:attr', got {type(self.entry_point).__name__}"],
            )
        object.__setattr__(self, "kwargs", MappingProxyType(dict(self.kwargs)))
        object.__setattr__(self, "env_kwargs", MappingProxyType(dict(self.env_kwargs)))

    @property
    def namespace(self) -> str | None:
        return parse_id(self.id)[0]

    @property
    def name(self) -> str:
        return parse_id(self.id)[1]

    @property
    def version(self) -> int | None:
        return parse_id(self.id)[2]

    def load_factory(self) -> Callable[..., Task]:
        """Resolves the entry point to the task factory."""
        if callable(self.entry_point):
            return self.entry_point
        module_name, _, attr = self.entry_point.partition(":")
        module = importlib.import_module(module_name)
        try:
            return getattr(module, attr)
        except AttributeError as exc:
            raise InvalidKwargsError(
                f"entry point of {self.id}", [f"{module_name!r} has no attribute {attr!r}"]
            ) from exc

    def accepts(self, param: str) -> bool:
        """Whether the task factory takes the keyword ``param`` (e.g. ``"split"``)."""
        accepted = _accepted_params(self.load_factory())
        return accepted is None or param in accepted

    def make(self, **overrides: Any) -> TeamEnv:
        """Builds the environment; ``overrides`` are merged over the spec's defaults.

        Raises:
            InvalidKwargsError: listing every problem with the task and environment arguments.
        """
        factory = self.load_factory()
        env_kwargs = {**self.env_kwargs, **{k: v for k, v in overrides.items() if k in ENV_KWARGS}}
        task_over = {k: v for k, v in overrides.items() if k not in ENV_KWARGS}
        accepted = _accepted_params(factory)
        errors = _unknown_kwargs(task_over, accepted, self.id)
        try:
            protocol = _build_protocol(env_kwargs)
        except ConfigError as exc:
            errors += exc.errors
        # The task is built from the options it accepts even when others are wrong, so that
        # their values' problems are reported together with the unknown names.
        known = {k: v for k, v in task_over.items() if accepted is None or k in accepted}
        task = None
        try:
            task = factory(**{**self.kwargs, **known})
        except UnknownOptionsError as exc:  # a **options factory's names, with the environment's
            errors += _unknown_kwargs(dict.fromkeys(exc.unknown), set(exc.accepted), self.id)
            errors += [f"task: {e}" for e in exc.others]
        except (TypeError, ValueError) as exc:
            nested = exc.errors if isinstance(exc, ConfigError) else None
            errors += [f"task: {e}" for e in nested] if nested else [f"task: {exc}"]
        data_path = env_kwargs.get("data_path")
        errors += _data_path_errors(data_path)
        if errors or task is None:
            raise InvalidKwargsError(f"arguments for {self.id}", errors)
        if isinstance(task, SupportsSeats) and "agents" not in env_kwargs:
            # a game seats its own players (their number is the game's option)
            protocol = _build_protocol({**env_kwargs, "agents": list(task.seats())})
        return TeamEnv(
            task,
            protocol=protocol,
            router=env_kwargs.get("router"),
            problems=(
                _load_problems(task, data_path, {**self.kwargs, **task_over}, self.loaded)
                if data_path is not None
                else env_kwargs.get("problems")
            ),
            render_mode=env_kwargs.get("render_mode"),
        )


class LoadedProblems:
    """A registry's cache of problems loaded from data files, bounded to ``max_files`` (oldest
    evicted first): a runner makes one environment per episode, and some loaders are expensive
    (optimal plans, parsing). Each :class:`Registry` owns one; nothing is process-wide."""

    def __init__(self, max_files: int = 16) -> None:
        self.max_files = max_files
        self._files: dict[tuple[Any, ...], list[Any]] = {}

    def __len__(self) -> int:
        return len(self._files)

    def get(self, key: tuple[Any, ...]) -> list[Any] | None:
        hit = self._files.get(key)
        return None if hit is None else list(hit)

    def put(self, key: tuple[Any, ...], problems: list[Any]) -> None:
        if len(self._files) >= self.max_files:
            self._files.pop(next(iter(self._files)))
        self._files[key] = list(problems)

    def clear(self) -> None:
        self._files.clear()


def _load_problems(
    task: Task, path: Any, task_kwargs: Mapping[str, Any], cache: LoadedProblems | None
) -> list[Any]:
    """``task.load(path)``, once per ``cache`` for the same file (path, size and modification
    time of the file, or of every file in a directory) and the same task arguments."""
    target = Path(path)
    try:
        files = sorted(target.rglob("*")) if target.is_dir() else [target]
        stamp = tuple(
            (str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.is_file()
        )
        key: tuple[Any, ...] | None = (
            type(task),
            str(target.resolve()),
            stamp,
            repr(sorted(task_kwargs.items())),
        )
    except OSError:
        key = None  # let the task's loader report the problem
    hit = cache.get(key) if cache is not None and key is not None else None
    if hit is not None:
        return hit
    try:
        problems = list(task.load(path))
    except ConfigError:
        raise  # a loader that lists every bad row (tasks.load_problems) names the file itself
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        # The file's content is the user's input: its errors are a ConfigError naming the
        # file (a loader's own message names the line), not a traceback.
        detail = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
        raise ConfigError(f"data file {path}", [f"{type(exc).__name__}: {detail}"]) from exc
    if not problems:
        raise ConfigError(f"data file {path}", [f"{path}: no problems in it (an empty file?)"])
    repeats = _repeated_ids(problems)
    if repeats:
        raise ConfigError(f"data file {path}", listed(repeats))
    if cache is not None and key is not None:
        cache.put(key, problems)
    return list(problems)


def _repeated_ids(problems: list[Any]) -> list[str]:
    """One line per problem whose id an earlier one has (any task's loader): a repeated problem is
    not an independent one, so a problem file with one is refused."""
    first: dict[str, int] = {}
    repeats = []
    for i, problem in enumerate(problems, 1):
        pid = getattr(problem, "id", None)
        if not isinstance(pid, str):
            continue
        if pid in first:
            repeats.append(
                f"problem {i} repeats the id {pid!r} of problem {first[pid]} (in load order); a "
                "repeated problem is not an independent one: remove or rename it"
            )
        else:
            first[pid] = i
    return repeats


def _data_path_errors(data_path: Any) -> list[str]:
    """A ``data_path`` that is no readable file, said plainly (not as an OS error number)."""
    if data_path is None:
        return []
    path = Path(str(data_path))
    if path.is_dir():
        return [f"data_path: {path} is a directory; give the problem file in it (e.g. test.jsonl)"]
    if not path.exists():
        return [f"data_path: {path} does not exist"]
    if not os.access(path, os.R_OK):
        return [f"data_path: {path} is not readable"]
    return []


def _accepted_params(factory: Callable[..., Any]) -> frozenset[str] | None:
    """Names the factory accepts, or ``None`` if it takes ``**kwargs`` (read once per factory:
    a runner builds hundreds of environments, and a signature costs about 0.2 ms)."""
    try:
        return _signature_params(factory)
    except TypeError:  # an unhashable callable object: read it each time
        return _signature_params.__wrapped__(factory)


@functools.lru_cache(maxsize=256)
def _signature_params(factory: Callable[..., Any]) -> frozenset[str] | None:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return frozenset(
        p.name
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    )


def _unknown_kwargs(given: Mapping[str, Any], accepted: Set[str] | None, task_id: str) -> list[str]:
    if accepted is None:
        return []
    valid = sorted(accepted | set(ENV_KWARGS))
    errors = []
    for key in given:
        if key not in accepted:
            close = difflib.get_close_matches(key, valid, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            errors.append(
                f"{key!r} is not accepted by {task_id}.{hint} Task options: "
                f"{sorted(accepted) or 'none'}; environment options: {sorted(ENV_KWARGS)}."
            )
    return errors


def _build_protocol(env_kwargs: Mapping[str, Any]) -> TeamProtocol:
    protocol = env_kwargs.get("protocol") or TeamProtocol()
    fields = {k: v for k, v in env_kwargs.items() if k in _PROTOCOL_FIELDS}
    if not fields:
        return protocol
    # Defaulted fields must follow a changed team: recompute them unless given explicitly.
    if "agents" in fields:
        fields.setdefault("final_agent", None)
        fields.setdefault("max_turns", None)
    return dataclasses.replace(protocol, **fields)


class Registry(PluginRegistry[TaskSpec]):
    """A mapping ``id -> TaskSpec`` with ``register`` and ``make``; plugins come from the
    ``teamtr_env.tasks`` entry-point group.

    Args:
        plugins: load third-party plugins from the ``teamtr_env.tasks`` entry-point group on first
            use.
        entry_points: where to find plugins (default: the installed distributions); tests pass
            their own list of ``importlib.metadata.EntryPoint``.
    """

    group = ENTRY_POINT_GROUP
    kind = "Task"
    plugin_error = PluginLoadError
    example_id = "teamtr/Arith-v0"
    listing = "teamtr tasks"

    def __init__(
        self,
        *,
        plugins: bool = True,
        entry_points: Callable[[], Iterable[metadata.EntryPoint]] | None = None,
    ) -> None:
        super().__init__(plugins=plugins, entry_points=entry_points)
        self.loaded = LoadedProblems()  # data files loaded through this registry's specs

    # -- registration -------------------------------------------------------------------------
    def register(
        self,
        id: str,
        entry_point: str | Callable[..., Task],
        *,
        description: str = "",
        kwargs: Mapping[str, Any] | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
        override: bool = False,
        source: str = "",
        unavailable: Callable[[], str | None] | None = None,
    ) -> TaskSpec:
        """Registers a task under ``id`` (``namespace/Name-vN``).

        Args:
            id: the versioned id.
            entry_point: ``"module:attr"`` or a callable that returns a ``Task``.
            description: one line for ``teamtr tasks``.
            kwargs: default task arguments; ``make`` merges overrides over them.
            env_kwargs: default environment arguments (``agents``, ``max_turns``, ``router``...).
            override: replace an existing registration instead of raising.
            source: the library the task wraps, for ``teamtr tasks`` (``"reasoning-gym"``).
            unavailable: ``() -> reason | None``, why the task cannot run on this machine, for
                ``teamtr tasks`` (the factory still raises its own error when made).

        Raises:
            InvalidTaskIdError: malformed id or no version.
            DuplicateTaskError: the id is taken and ``override`` is false.
            InvalidKwargsError: ``env_kwargs`` names unknown options.
        """
        self._check_new_id(id, override=override)
        unknown = [k for k in (env_kwargs or {}) if k not in ENV_KWARGS]
        if unknown:
            raise InvalidKwargsError(
                f"env_kwargs of {id}",
                [
                    f"{k!r} is not an environment option; expected one of {sorted(ENV_KWARGS)}"
                    for k in unknown
                ],
            )
        spec = TaskSpec(
            id,
            entry_point,
            description,
            kwargs or {},
            env_kwargs or {},
            self._loading,
            self.loaded,
            source,
            unavailable,
        )
        self._specs[id] = spec
        return spec

    # -- lookup -------------------------------------------------------------------------------
    def spec(self, id: str) -> TaskSpec:
        """The spec of ``id``; an id without ``-vN`` resolves to the highest registered version.

        Raises:
            InvalidTaskIdError: ``id`` is not ``namespace/Name-vN``.
            UnknownTaskError: no task of that name is registered.
            VersionNotFoundError: the name is registered, but not that version.
        """
        self._ensure_plugins()
        if id in self._specs:
            return self._specs[id]
        namespace, name, version = parse_id(id)
        siblings = sorted(
            (s for s in self._specs.values() if (s.namespace, s.name) == (namespace, name)),
            key=lambda s: s.version or 0,
        )
        if siblings and version is None:
            log.info("Task id %r has no version; using %r.", id, siblings[-1].id)
            return siblings[-1]
        if siblings:
            raise VersionNotFoundError(
                f"Task {id!r} is not registered at version v{version}; available: "
                f"{[s.id for s in siblings]}."
            )
        raise UnknownTaskError(self._unknown_message(id))

    def make(self, id: str, **overrides: Any) -> TeamEnv:
        """Builds the team environment registered as ``id``.

        Keyword arguments the task accepts go to the task; ``agents``, ``system_prompts``,
        ``final_agent``, ``max_turns``, ``max_message_chars``, ``max_context_chars``,
        ``reasoning``, ``header``, ``protocol``, ``router``, ``problems``, ``data_path`` and
        ``render_mode`` go to the environment. Unknown names raise ``InvalidKwargsError`` listing
        every one of them with suggestions.
        """
        spec = self.spec(id)
        env = spec.make(**overrides)
        env.spec = spec
        return env


registry = Registry()


def register(id: str, entry_point: str | Callable[..., Task], **kwargs: Any) -> TaskSpec:
    """Registers a task in the default registry (see :meth:`Registry.register`)."""
    return registry.register(id, entry_point, **kwargs)


def make(id: str, **overrides: Any) -> TeamEnv:
    """Builds a registered team environment from the default registry (see :meth:`Registry.make`)."""
    return registry.make(id, **overrides)


def spec(id: str) -> TaskSpec:
    """The spec of a registered id in the default registry."""
    return registry.spec(id)
