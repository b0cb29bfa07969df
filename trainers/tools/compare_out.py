"""Where a comparison writes (``teamtr compare --out``): the rules that keep a comparison's
folder from mixing results. A new or empty folder starts a comparison; one that holds a
comparison of the same settings continues it (the rerun of an interrupted command); ``overwrite``
replaces a comparison; anything else, a ``teamtr train`` run directory or an unrelated folder, is
refused before anything is written."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from teamtr_core.errors import ConfigError
from teamtr_core.paths import unwritable_folder
from trainers.run import rundir

SPEC_FILE = "compare-spec.json"
"""The shared settings of the comparison in a folder (what a rerun must keep)."""

OUT_ARTEFACTS = (SPEC_FILE, "compare.json", "compare.md", "compare.png", "runs", "bc-cache")
"""What a comparison writes in its ``--out`` (``overwrite`` deletes these and nothing else)."""


def check_out(out: Path, shared: dict[str, Any], overwrite: bool) -> list[str]:
    """The rules of a comparison's ``--out``, applied before anything is written: a new or empty
    folder starts a comparison; one that holds a comparison of the same settings continues it;
    ``overwrite`` replaces a comparison (of any settings); anything else is refused, a
    ``teamtr train`` run directory and an unrelated folder included. Returns the entries
    ``overwrite`` is to delete (:data:`OUT_ARTEFACTS`).

    Raises:
        ConfigError: an ``--out`` that cannot be made or written, or that holds something else.
    """
    problem = unwritable_folder(out)
    if problem:
        raise ConfigError("--out", [f"{out}: {problem}"])
    present = (
        sorted(p.name for p in out.iterdir() if p.name != rundir.LOCK_FILE) if out.is_dir() else []
    )
    if not present:
        return []
    ours = [name for name in present if name in OUT_ARTEFACTS]
    others = [name for name in present if name not in OUT_ARTEFACTS]
    if SPEC_FILE not in present and others:  # not a comparison (its first write is SPEC_FILE)
        runs = [name for name in present if name in rundir.ARTEFACTS]
        what = (
            f"a teamtr train run ({', '.join(runs)})"
            if runs
            else f"other files ({', '.join(others[:5])}{', ...' if len(others) > 5 else ''})"
        )
        raise ConfigError(
            "--out",
            [
                f"{out} holds {what}, not a comparison: give a new or empty folder (--overwrite "
                "replaces an earlier comparison only, never another folder)"
            ],
        )
    if overwrite:
        return ours
    if SPEC_FILE not in present:  # runs without the record: each run's resume checks its config
        return []
    differ = _spec_differences(out / SPEC_FILE, shared)
    if differ:
        raise ConfigError(
            "compare",
            [
                f"{out} holds a comparison with other settings (they differ in {differ}); "
                "rerun with the same settings to continue it, --overwrite to replace it, or "
                "choose another --out"
            ],
        )
    return []


def _spec_differences(path: Path, shared: dict[str, Any]) -> list[str]:
    """The settings in which ``shared`` differs from the comparison recorded at ``path``."""
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(recorded, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        raise ConfigError(
            "--out",
            [
                f"{path} cannot be read ({exc}): the comparison there cannot be continued; "
                "--overwrite replaces it, or choose another --out"
            ],
        ) from None
    now, then = _flat(_plain(shared)), _flat(recorded)
    return sorted(k for k in set(now) | set(then) if now.get(k) != then.get(k))


def start_out(out: Path, shared: dict[str, Any], overwrite: bool, console: Console) -> None:
    """Applies :func:`check_out` once ``out`` is locked: deletes what ``overwrite`` replaces,
    and records the shared settings of a new comparison."""
    replaced = check_out(out, shared, overwrite)
    for name in replaced:
        rundir.delete_entry(out / name)
    if replaced:
        console.print(f"--overwrite: deleted {', '.join(replaced)} in {out}", soft_wrap=True)
    path = out / SPEC_FILE
    if not path.exists():
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(shared, indent=1, default=str))


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _flat(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"optim": {"lr": 1}}`` -> ``{"optim.lr": 1}``."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
