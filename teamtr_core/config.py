"""Typed configuration machinery: frozen dataclasses are the single source of truth.

:func:`~teamtr_core.config_schema.json_schema` (in :mod:`teamtr_core.config_schema`, with the
wording of schema errors) generates a JSON Schema (draft 2020-12) from a dataclass;
:func:`from_dict` validates a mapping against it (reporting every problem at once) and builds the
dataclass, :func:`to_dict` is its inverse, and :func:`load_config` / :func:`dump_config` read and
write YAML or JSON files with ``--set``-style overrides (``"optim.lr=3e-4"``).

Two class attributes act on the plain data before it is validated, in every nested section:

- ``_renamed_keys: ClassVar[dict[str, str | dict[str, str]]]`` maps a key that was renamed to its
  new dotted path within the same section (``{"temperature": "sampling.temperature"}``; ``^``
  starts it at the top: ``{"resample_every": "^learner_options.resample_every"}``), or a
  section whose keys moved to the new dotted path of each (``{"trainer": {"backend":
  "runner.agents"}}``). An old key does not load: it is reported as a problem naming the new key
  (``temperature was renamed to sampling.temperature``), with every other problem of the config
  (CHANGELOG.md lists the renames).
- ``_prepare_config`` (a static method taking the section's mapping and changing it in place)
  runs after the renamed keys are checked, parents before children; :func:`inherit` is its usual
  helper, for a section that fills its unset keys from a parent section.

Dataclasses are inspected with :func:`typing.get_type_hints`, so they must be defined at module
level when they use ``from __future__ import annotations``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import re
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Union

import yaml
from jsonschema import Draft202012Validator

from teamtr_core.config_schema import (
    ARRAY_TYPES,
    MAPPING_TYPES,
    dotted_path,
    init_fields,
    is_dataclass_type,
    jsonable,
    schema_errors,
    show_value,
    type_hints,
    type_schema,
)
from teamtr_core.errors import ConfigError

_FAILED: Any = object()  # marks a value that could not be built (its errors are recorded)
_KEYED = re.compile(r"^[A-Za-z_][\w.\[\]]*: ")
_T = typing.TypeVar("_T")


class _Loader(yaml.SafeLoader):
    """``SafeLoader`` that also reads ``1e-4`` as a float (as YAML 1.2 and JSON do)."""


class _Dumper(yaml.SafeDumper):
    """``SafeDumper`` that quotes strings :class:`_Loader` would read as floats (``"1e-4"``)."""


for _yaml_class in (_Loader, _Dumper):
    _yaml_class.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
        list("-+0123456789"),
    )


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # YAML reads NEL and the Unicode line/paragraph separators as line breaks: double-quote such
    # strings so they are written as escapes and read back unchanged.
    style = '"' if any(c in value for c in "\x85\u2028\u2029") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def _field_checks(
    cls: Any, data: Any, path: tuple[Any, ...], bad: set[tuple[Any, ...]] | None = None
) -> list[str]:
    """Errors from the ``metadata={"check": fn}`` of ``cls``'s fields (``fn(value)`` returns
    one line per error), run beside the schema so that they are reported with its errors;
    nested dataclass sections are checked too. The paths of failed fields are added to ``bad``."""
    if not (is_dataclass_type(cls) and isinstance(data, Mapping)):
        return []
    sections: dict[str, list[tuple[Any, dict[str, Any], tuple[Any, ...]]]] = {}
    for child, section, key in _sections(cls, data):
        sections.setdefault(key[0], []).append((child, section, key))
    errors = []
    for f in init_fields(cls):
        if f.name not in data:
            continue
        check = f.metadata.get("check")
        if check is not None:
            found = [_prefix((*path, f.name), p) for p in check(data[f.name])]
            if found and bad is not None:
                bad.add((*path, f.name))
            errors += found
        for child, section, key in sections.get(f.name, ()):  # nested sections, checked too
            errors += _field_checks(child, section, (*path, *key), bad)
    return errors


def _prefix(path: Sequence[Any], error: str) -> str:
    if not path:
        return error
    return (
        f"{dotted_path(path)}.{error}" if _KEYED.match(error) else f"{dotted_path(path)}: {error}"
    )


def _failed(values: typing.Iterable[Any]) -> bool:
    return any(v is _FAILED for v in values)


def _build(
    tp: Any,
    value: Any,
    path: tuple[Any, ...],
    errors: list[str],
    bad: frozenset[tuple[Any, ...]] = frozenset(),
) -> Any:
    """Builds ``value`` as ``tp``; the errors of dataclasses' own checks go to ``errors``.

    ``bad`` holds the paths where validation already found a problem: those values are not
    built and the result is ``_FAILED``, but every section is still constructed, with its failed
    fields left at their defaults, so that its own checks (``__post_init__``) on the other fields
    are reported with the schema's errors."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    below = bool(bad) and any(b[: len(path)] == path for b in bad)
    if is_dataclass_type(tp):
        if not isinstance(value, Mapping):
            return _FAILED
        hints = type_hints(tp)
        kwargs = {
            f.name: _build(hints[f.name], value[f.name], (*path, f.name), errors, bad)
            for f in init_fields(tp)
            if f.name in value
        }
        if _failed(kwargs.values()) or below:
            if bad:  # only for its errors: the failed fields keep their defaults
                usable = {k: v for k, v in kwargs.items() if v is not _FAILED}
                with contextlib.suppress(TypeError, AttributeError):  # e.g. a required field
                    try:
                        tp(**usable)
                    except ConfigError as exc:
                        errors.extend(_prefix(path, p) for p in exc.errors)
                    except ValueError as exc:
                        errors.append(_prefix(path, str(exc)))
            return _FAILED
        try:
            return tp(**kwargs)
        except ConfigError as exc:
            errors.extend(_prefix(path, p) for p in exc.errors)
        except ValueError as exc:
            errors.append(_prefix(path, str(exc)))
        return _FAILED
    if path in bad:
        return _FAILED
    if origin in (Union, types.UnionType):
        for arm in args:
            if Draft202012Validator(type_schema(arm, "", ())).is_valid(value):
                return _build(arm, value, path, errors, bad)
        if below:  # invalid inside: build the section anyway for its other errors
            arm = next((a for a in args if is_dataclass_type(a)), None)
            if arm is not None and isinstance(value, Mapping):
                _build(arm, value, path, errors, bad)
            return _FAILED
        return value
    if isinstance(tp, type) and issubclass(tp, (enum.Enum, Path)):
        return tp(value)
    if tp is float or (tp is int and isinstance(value, float)):
        return tp(value)
    if origin in ARRAY_TYPES and value is not None:
        fixed = origin is tuple and args and args[-1] is not ...
        arms = args if fixed else (args[0] if args else Any,) * len(value)
        built = [_build(a, v, (*path, i), errors, bad) for i, (a, v) in enumerate(zip(arms, value))]
        return _FAILED if _failed(built) else built if origin is list else tuple(built)
    if tp in (tuple, Sequence):
        return tuple(value)
    if origin in MAPPING_TYPES:
        built_map = {k: _build(args[1], v, (*path, k), errors, bad) for k, v in value.items()}
        return _FAILED if _failed(built_map.values()) else built_map
    return value


def from_dict(cls: type[_T], data: Mapping[str, Any], *, what: str | None = None) -> _T:
    """Validates ``data`` against :func:`json_schema` of ``cls`` and builds the dataclass.

    Args:
        cls: the dataclass to build.
        data: plain data (as read from YAML/JSON); lists become tuples where annotated so.
        what: the name of the configuration in error messages (default: the class name).

    Returns:
        The instance, with nested dataclasses built.

    Raises:
        ConfigError: listing every schema error at once (sorted by path), or the errors that
            the dataclasses' own ``__post_init__`` raised, prefixed with their path.
    """
    return _checked_build(cls, data, what or cls.__name__, [])


def _sections(
    cls: Any, data: Mapping[str, Any]
) -> list[tuple[Any, dict[str, Any], tuple[Any, ...]]]:
    """The nested dataclass sections of ``data`` (a mapping for ``cls``) that are mappings: a
    ``Section`` or ``Section | None`` field, or each value of a ``dict[str, Section]`` field."""
    hints = type_hints(cls)
    found: list[tuple[Any, dict[str, Any], tuple[Any, ...]]] = []
    for f in init_fields(cls):
        value = data.get(f.name)
        if not isinstance(value, dict):
            continue
        tp = hints[f.name]
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin in MAPPING_TYPES:
            if len(args) == 2 and is_dataclass_type(args[1]):
                found += [
                    (args[1], v, (f.name, k)) for k, v in value.items() if isinstance(v, dict)
                ]
            continue
        arm = next((a for a in (tp, *args) if is_dataclass_type(a)), None)
        if arm is not None:
            found.append((arm, value, (f.name,)))
    return found


def _renamed(cls: Any, data: dict[str, Any], path: tuple[Any, ...], errors: list[str]) -> None:
    """Reports every key of ``cls._renamed_keys`` that ``data`` (or a nested section) still uses
    as an error naming its new key, and drops it, so that validation does not report it a second
    time as an unknown key."""
    for old, new in getattr(cls, "_renamed_keys", {}).items():
        if old not in data:
            continue
        value = data.pop(old)
        if isinstance(new, str):  # a path in the same section, or from the top (``^a.b``)
            target = new[1:].split(".") if new.startswith("^") else [*path, *new.split(".")]
            errors.append(
                f"{dotted_path((*path, old))} was renamed to {dotted_path(tuple(target))}"
            )
            continue
        # a section whose keys moved one by one: each key it gives, named with its new path
        given = [k for k in value if k in new] if isinstance(value, dict) else []
        errors += [
            f"{dotted_path((*path, old, k))} was renamed to {dotted_path((*path, *new[k].split('.')))}"
            for k in given
        ]
        if not given:
            moved = ", ".join(dotted_path((*path, *n.split("."))) for n in new.values())
            errors.append(f"{dotted_path((*path, old))} was removed: its keys are now {moved}")
    for child, section, key in _sections(cls, data):
        _renamed(child, section, (*path, *key), errors)


def _prepare(cls: Any, data: dict[str, Any]) -> None:
    hook = getattr(cls, "_prepare_config", None)
    if hook is not None:
        hook(data)
    for child, section, _ in _sections(cls, data):
        _prepare(child, section)


def inherit(parent: Any, own: Any, defaults: Any = None) -> Any:
    """The data of a section that inherits every key it does not set from ``parent``.

    For ``_prepare_config`` hooks: ``defaults`` (a dataclass instance, the parent's defaults),
    then ``parent``, then ``own`` (the section's own keys win). Data that is not a mapping (a
    mistake validation will report) is left as it is.
    """
    if own is not None and not isinstance(own, dict):
        return own
    merged = dict(jsonable(defaults)) if defaults is not None else {}
    merged.update(parent if isinstance(parent, dict) else {})
    merged.update(own or {})
    return merged


def _checked_build(cls: type[_T], data: Any, what: str, errors: list[str]) -> _T:
    plain = jsonable(data) if isinstance(data, Mapping) else data
    if isinstance(plain, dict) and is_dataclass_type(cls):
        _renamed(cls, plain, (), errors)
        _prepare(cls, plain)
    invalid = schema_errors(cls, plain)
    errors += [text for _, text in invalid]
    bad = {tuple(path) for path, _ in invalid}
    errors += _field_checks(cls, plain, (), bad)
    if errors:  # every section is still built: its own checks report too
        if isinstance(plain, Mapping):
            _build(cls, plain, (), errors, frozenset(bad | {()}))
        raise ConfigError(what, errors)
    built = _build(cls, plain, (), errors)
    if errors:
        raise ConfigError(what, errors)
    return typing.cast(_T, built)


def flat_items(data: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted key, leaf value)`` of nested mappings (``{"optim": {"lr": 1}}`` gives
    ``("optim.lr", 1)``); an empty mapping is a leaf."""
    if isinstance(data, Mapping) and data:
        for key, value in data.items():
            yield from flat_items(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, data


def to_dict(instance: Any) -> dict[str, Any]:
    """The JSON-serialisable data of a dataclass instance; :func:`from_dict` inverts it.

    Tuples become lists, mappings (including ``MappingProxyType``) dicts, enums their values and
    paths strings; only ``init`` fields are included.

    Raises:
        TypeError: ``instance`` is not a dataclass instance.
    """
    if not dataclasses.is_dataclass(instance) or isinstance(instance, type):
        raise TypeError(f"to_dict: expected a dataclass instance, got {show_value(instance)}")
    return typing.cast(dict[str, Any], jsonable(instance))


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parses one ``--set`` override ``"a.b.c=value"``.

    The value is read as a YAML scalar or flow collection: ``1e-4`` is a float, ``true`` a bool,
    ``[a, b]`` a list, ``null`` None, ``foo`` a string; an empty value is the empty string.

    Returns:
        The key path and the value.

    Raises:
        ValueError: the text is not ``KEY=VALUE`` with a dotted key, or the value is not YAML.
    """
    key, sep, raw = text.partition("=")
    keys = [k.strip() for k in key.split(".")]
    if not sep or not all(keys):
        raise ValueError(
            f"override {text!r}: expected KEY=VALUE with a dotted key, e.g. 'optim.lr=3e-4'"
        )
    if not raw.strip():
        return keys, ""
    name = ".".join(keys)
    try:
        return keys, yaml.load(raw, Loader=_Loader)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or exc
        raise ValueError(
            f"override {name}={show_value(raw)}: the value is not valid YAML ({problem}); quote "
            "it, e.g. key='a: b'"
        ) from exc
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise ValueError(f"override {name}: {unreadable_value(exc, raw)}") from exc


def unreadable_value(exc: ValueError, raw: str) -> str:
    """Why a value given as text could not be read, said plainly: an integer longer than
    Python's conversion limit (4300 digits) is named as such, not with the interpreter's
    advice to raise the limit."""
    if "integer string conversion" in str(exc):
        digits = sum(ch.isdigit() for ch in raw)
        return (
            f"the value is a number of {digits:,} digits, far beyond any setting (Python reads "
            "at most 4300)"
        )
    return f"the value {show_value(raw)} cannot be read ({str(exc)[:200]})"


Override = str | tuple[Sequence[str], Any]
"""One override: a ``--set`` string ``"a.b.c=value"`` (:func:`parse_override`), or the key path
and the value already apart (:func:`keyword_overrides`: nothing to print and parse again)."""


def keyword_overrides(settings: Mapping[str, Any]) -> list[tuple[list[str], Any]]:
    """Keyword settings as overrides: ``schedule={"stages": 2}`` gives ``(["schedule",
    "stages"], 2)`` (a mapping names a section's keys; any other value, and ``task_options``, is
    set whole)."""
    out: list[tuple[list[str], Any]] = []
    for key, value in settings.items():
        if isinstance(value, Mapping) and value and key != "task_options":
            out += [([key, inner], v) for inner, v in value.items()]
        else:
            out.append(([key], value))
    return out


def override_parts(override: Override) -> tuple[list[str], Any]:
    """An override's key path and value.

    Raises:
        ValueError: a malformed ``--set`` string (:func:`parse_override`).
    """
    if isinstance(override, str):
        return parse_override(override)
    keys, value = override
    return list(keys), jsonable(value)


def _apply(
    data: Mapping[str, Any], overrides: Sequence[Override]
) -> tuple[dict[str, Any], list[str]]:
    result: dict[str, Any] = jsonable(data)
    errors: list[str] = []
    for override in overrides:
        try:
            keys, value = override_parts(override)
        except ValueError as exc:
            errors.append(str(exc))
            continue
        text = override if isinstance(override, str) else f"{'.'.join(keys)}=..."
        node = result
        for i, key in enumerate(keys[:-1]):
            if node.get(key) is None:
                node[key] = {}
            if not isinstance(node[key], dict):
                head = ".".join(keys[: i + 1])
                errors.append(
                    f"override {text!r}: {head} is {show_value(node[key])}, not a mapping; "
                    f"set {head}=... instead"
                )
                break
            node = node[key]
        else:
            node[keys[-1]] = value
    return result, errors


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """A copy of ``data`` with ``"a.b.c=value"`` overrides applied (see :func:`parse_override`).

    Missing intermediate keys are created as mappings; unknown keys are left for validation to
    report (with a suggestion). ``data`` is not modified.

    Raises:
        ConfigError: listing every malformed override at once.
    """
    result, errors = _apply(data, overrides)
    if errors:
        raise ConfigError("overrides", errors)
    return result


def _read(path: Path) -> tuple[Any, list[str]]:
    suffix = path.suffix.lower()
    if suffix not in (".yaml", ".yml", ".json"):
        return None, [f"{path}: expected a .yaml, .yml or .json file, got {suffix or 'no'} suffix"]
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, [f"{path}: file not found (check the path)"]
    except (OSError, UnicodeDecodeError) as exc:
        return None, [f"{path}: cannot read the file ({exc})"]
    try:
        if suffix == ".json":
            return json.loads(text), []
        return yaml.load(text, Loader=_Loader), []
    except json.JSONDecodeError as exc:
        return None, [f"{path}, line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        return None, [f"{path}{at}: invalid YAML: {getattr(exc, 'problem', None) or exc}"]
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        huge = re.search(r"\d{4300,}", text)
        at = f", line {text[: huge.start()].count(chr(10)) + 1}" if huge else ""
        return None, [f"{path}{at}: {unreadable_value(exc, huge.group(0) if huge else '')}"]


def read_config(path: str | Path, what: str | None = None) -> dict[str, Any]:
    """The top-level mapping of a YAML (``.yaml``/``.yml``) or JSON (``.json``) config file; an
    empty YAML file is an empty mapping.

    Raises:
        ConfigError: naming the file (``what``, default ``"config <path>"``): an unreadable file,
            a syntax error (with its line), or a top level that is not a mapping.
    """
    path = Path(path)
    what = what or f"config {str(path)!r}"
    data, errors = _read(path)
    if errors:
        raise ConfigError(what, errors)
    if data is None and path.suffix.lower() != ".json":
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            what, [f"{path}: expected a mapping of keys at top level, got {type(data).__name__}"]
        )
    return data


def build_config(
    cls: type[_T],
    data: Mapping[str, Any],
    overrides: Sequence[Override] = (),
    *,
    what: str,
    check: typing.Callable[[Mapping[str, Any]], list[str]] | None = None,
) -> _T:
    """``data`` with overrides applied in order (``"a.b.c=value"`` strings, see
    :func:`parse_override`, or key paths with their values: :data:`Override`), validated and
    built as ``cls``. ``check``: more problems of the merged data that the class cannot see
    itself (e.g. an id checked against a registry above this layer), one line each.

    Raises:
        ConfigError: listing every malformed override and every problem of the result at once.
    """
    merged, errors = _apply(data, overrides)
    if check is not None:
        errors += check(merged)
    return _checked_build(cls, merged, what, errors)


def load_config(cls: type[_T], path: str | Path, overrides: Sequence[str] = ()) -> _T:
    """Reads a YAML (``.yaml``/``.yml``) or JSON (``.json``) file, applies overrides, builds ``cls``.

    Args:
        cls: the dataclass to build.
        path: the file; an empty YAML file is an empty mapping.
        overrides: ``"a.b.c=value"`` strings (see :func:`parse_override`), applied in order.

    Returns:
        The validated instance.

    Raises:
        ConfigError: naming the file; an unreadable file, a syntax error (with its line), a top
            level that is not a mapping, or every malformed override and schema problem at once.
    """
    what = f"{cls.__name__} config {str(path)!r}"
    return build_config(cls, read_config(path, what), overrides, what=what)


def dump_config(instance: Any, path: str | Path) -> None:
    """Writes :func:`to_dict` of ``instance`` as YAML or JSON, chosen by the file extension.

    Raises:
        ConfigError: the extension is not ``.yaml``, ``.yml`` or ``.json``.
    """
    path = Path(path)
    data = to_dict(instance)
    if path.suffix.lower() == ".json":
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    elif path.suffix.lower() in (".yaml", ".yml"):
        text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True)
        path.write_text(text, encoding="utf-8")
    else:
        raise ConfigError(
            f"output path {str(path)!r}",
            [f"expected a .yaml, .yml or .json file, got {path.name!r}"],
        )
