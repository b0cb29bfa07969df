"""The JSON Schema side of the typed-config machinery (:mod:`teamtr_core.config` builds on it).

:func:`json_schema` generates a JSON Schema (draft 2020-12) from a dataclass, recursively from its
type hints, and :func:`schema_errors` validates plain data against it, wording every problem
with its path (``optim.lr: expected number, got 'fast'``) and a "did you mean" for unknown keys
and choices. The dataclass helpers here (:func:`init_fields`, :func:`jsonable`, ...) are the
ones both modules share.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import enum
import functools
import json
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Union

from jsonschema import Draft202012Validator, ValidationError

ARRAY_TYPES = (list, tuple, Sequence)
"""The annotations (and their origins) that are JSON arrays."""
MAPPING_TYPES = (dict, Mapping)
"""The annotations (and their origins) that are JSON objects with string keys."""
_TYPE_NAMES = {"object": "mapping", "array": "list"}
_SIMPLE = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}


def init_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """The fields of a dataclass that its ``__init__`` takes (those a config file sets)."""
    return [f for f in dataclasses.fields(cls) if f.init]


def is_dataclass_type(tp: Any) -> bool:
    """Whether ``tp`` is a dataclass type (not an instance)."""
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def jsonable(value: Any) -> Any:
    """Plain data of ``value``: dataclass instances (their ``init`` fields) and mappings become
    dicts, tuples lists, enums their values and paths strings; anything else is kept."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in init_fields(type(value))}
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def json_schema(cls: type) -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) of a dataclass, generated recursively from its type hints.

    Args:
        cls: a dataclass; fields may be ``int``, ``float``, ``str``, ``bool``, ``Path``,
            ``Literal``, ``Enum``, unions (``X | None``), nested dataclasses, ``tuple``, ``list``,
            ``Sequence``, ``dict[str, X]``, ``Mapping[str, X]`` or ``Any``.

    Returns:
        The schema; ``metadata={"help": ...}`` becomes ``description``, JSON-serialisable
        defaults become ``default``.

    Raises:
        TypeError: ``cls`` is not a dataclass, or a field's annotation is unsupported (named).
    """
    if not is_dataclass_type(cls):
        raise TypeError(f"json_schema: expected a dataclass type, got {cls!r}")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **_object_schema(cls, ())}


@functools.lru_cache(maxsize=512)
def type_hints(cls: type) -> dict[str, Any]:
    """``typing.get_type_hints(cls)``, evaluated once per class (a config is checked and built
    field by field, section by section: thousands of lookups a run)."""
    return typing.get_type_hints(cls)


@functools.lru_cache(maxsize=128)
def _validator(cls: type) -> Draft202012Validator:
    """The schema validator of a dataclass, built once per class."""
    return Draft202012Validator(json_schema(cls))


def _object_schema(cls: type, seen: tuple[type, ...]) -> dict[str, Any]:
    if cls in seen:
        raise TypeError(f"{cls.__qualname__}: recursive dataclasses are not supported")
    hints = type_hints(cls)
    props: dict[str, Any] = {}
    required: list[str] = []
    for f in init_fields(cls):
        props[f.name] = prop = type_schema(
            hints[f.name], f"{cls.__qualname__}.{f.name}", (*seen, cls)
        )
        if "help" in f.metadata:
            prop["description"] = str(f.metadata["help"])
        if f.default is not dataclasses.MISSING:
            default: Any = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            required.append(f.name)
            continue
        with contextlib.suppress(TypeError, ValueError):  # no "default" if not JSON-serialisable
            prop["default"] = json.loads(json.dumps(jsonable(default), allow_nan=False))
    return {
        "title": cls.__name__,
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


def type_schema(tp: Any, where: str, seen: tuple[type, ...]) -> dict[str, Any]:
    """The schema of one annotation; ``where`` names the field in errors, ``seen`` holds the
    dataclasses being expanded (a recursive one is refused)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return {}
    if tp in _SIMPLE:
        return {"type": _SIMPLE[tp]}
    if isinstance(tp, type) and issubclass(tp, Path):
        return {"type": "string"}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    if is_dataclass_type(tp):
        return _object_schema(tp, seen)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (Union, types.UnionType):
        return {"anyOf": [type_schema(a, where, seen) for a in args]}
    if tp in ARRAY_TYPES or origin in ARRAY_TYPES:
        if origin is tuple and args and args[-1] is not ...:
            items = [type_schema(a, where, seen) for a in args]
            return {"type": "array", "prefixItems": items, "items": False, "minItems": len(items)}
        return {"type": "array", "items": type_schema(args[0] if args else Any, where, seen)}
    if (tp in MAPPING_TYPES or origin in MAPPING_TYPES) and (not args or args[0] is str):
        values = type_schema(args[1] if args else Any, where, seen)
        return {"type": "object", "additionalProperties": values}
    raise TypeError(
        f"{where}: unsupported annotation {tp!r}; expected int, float, str, bool, Path, Literal, "
        "Enum, X | None, a dataclass, tuple[X, ...], list[X], dict[str, X] or Any"
    )


def dotted_path(path: Sequence[Any]) -> str:
    """A data path as written in errors: ``["agents", "a", "lr"]`` gives ``agents.a.lr``, an
    index ``[0]``; the empty path is ``top level``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "top level"


def show_value(value: Any) -> str:
    """``repr(value)``, cut to 60 characters, for a problem's text."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _describe(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return f"one of {schema['enum']!r}"
    if "anyOf" in schema:
        return " or ".join(_describe(s) for s in schema["anyOf"])
    kind = schema.get("type")
    return _TYPE_NAMES.get(kind, kind) if isinstance(kind, str) else "any value"


def _format(err: ValidationError) -> list[tuple[list[Any], str]]:
    path, where, kind = list(err.absolute_path), dotted_path(err.absolute_path), err.validator
    if kind == "additionalProperties" and err.schema.get("additionalProperties") is False:
        allowed = list(err.schema.get("properties", {}))
        where = "at top level" if not path else f"in {where}"
        errors = []
        for key in sorted((k for k in err.instance if k not in allowed), key=str):
            near = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean {near[0]!r}?" if near else "allowed: " + ", ".join(allowed)
            errors.append((path, f"unknown key {key!r} {where} ({hint})"))
        return errors
    if kind == "required":
        missing = [[*path, k] for k in err.validator_value if k not in err.instance]
        return [(p, f"{dotted_path(p)}: required key is missing (add it)") for p in missing]
    if kind == "enum":
        near = difflib.get_close_matches(str(err.instance), [str(v) for v in err.validator_value])
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        return [
            (
                path,
                f"{where}: {show_value(err.instance)} is not one of {err.validator_value!r}{hint}",
            )
        ]
    if kind == "anyOf" and err.instance is not None:  # X | None with a non-null value: look in X
        arms = [i for i, s in enumerate(err.validator_value) if s != {"type": "null"}]
        subs = [e for e in err.context or [] if [e.relative_schema_path[0]] == arms]
        if subs and not any(e.validator == "type" and list(e.absolute_path) == path for e in subs):
            return [p for sub in subs for p in _format(sub)]
    if kind in ("type", "anyOf"):
        return [
            (path, f"{where}: expected {_describe(err.schema)}, got {show_value(err.instance)}")
        ]
    return [(path, f"{where}: {err.message}")]


def _path_key(path: Sequence[Any]) -> list[tuple[int, int, str]]:
    return [(0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in path]


def schema_errors(cls: type, data: Any) -> list[tuple[list[Any], str]]:
    """Every schema problem as ``(path, text)``, sorted by path, texts without repeats."""
    found = [p for e in _validator(cls).iter_errors(data) for p in _format(e)]
    seen: set[str] = set()
    unique = []
    for path, text in sorted(found, key=lambda p: _path_key(p[0])):
        if text not in seen:
            seen.add(text)
            unique.append((path, text))
    return unique
