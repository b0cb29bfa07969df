"""Run directories that never silently mix or overwrite results.

The rules ``run_training`` (and ``teamtr train``) apply before anything is written:

- **A new run needs an empty directory.** A directory that holds anything is refused unless the
  run resumes it (``resume``) or replaces it (``overwrite``: teamtr's own files, listed in
  :data:`ARTEFACTS`, are deleted first; other files are left alone and named).
- **One writer at a time.** A process holds an OS lock on ``.teamtr.lock`` in the directory
  while it writes it (:class:`DirectoryLock`); a second process is refused with the first one's
  PID, and a process that dies releases the lock.
- **A resume must be the same run.** Every checkpoint stores the configuration that determines the
  results, and ``config.yaml`` holds it from the start; a resume whose configuration differs in
  anything but :data:`SAFE_TO_CHANGE` is refused with the list of differences.
- **Checkpoints are written atomically** (a temporary file, then a rename) with their SHA-256
  beside them (``stage_0001.pt.sha256``), and loaded weights-only (tensors and plain data: a
  crafted file cannot run code) once the digest matches and every floating-point tensor
  (weights and optimiser state) is finite. A latest checkpoint that fails any of these falls
  back to the newest intact one, and says so.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from teamtr_core.config import flat_items, read_config
from teamtr_core.errors import ConfigError

SAFE_TO_CHANGE: tuple[str, ...] = (
    "progress",
    "run_dir",
    "torch_threads",
    "loggers",
    "logger_options",
    "plot",
)
"""Config keys a resume may change: they do not change what the run computes (progress bars, where
the directory is, the CPU threads torch uses, where metrics are sent, and the plot)."""

ARTEFACTS: tuple[str, ...] = (
    "config.yaml",
    "metrics.jsonl",
    "tb",
    "checkpoints",
    "models",
    "curves.png",
    "summary.json",
    "swap.json",
    "eval_per_problem.json",
    "wandb",
)
"""What a run writes in its directory (``--overwrite`` deletes these and nothing else)."""

_STAGE_FILE = re.compile(r"^stage_(\d{4,})\.pt$")

LOCK_FILE = ".teamtr.lock"
"""The file a process holds an OS lock on while it writes a run directory (or a comparison's
``--out``); it names that process's PID, and is removed when the lock is released."""


_HELD: dict[str, list[int]] = {}
"""The lock files this process holds: resolved path -> [file descriptor, holders]."""


class DirectoryLock:
    """An exclusive ``flock`` on ``folder/.teamtr.lock``, held while a process writes
    ``folder``. The OS releases it when the process ends, crash or kill included; a later
    process then takes the lock over (the leftover file names a dead PID, and is reused).
    Within one process the lock is shared: a second ``acquire`` of the same folder (``teamtr
    swap`` holding its new run while ``run_training`` resumes it) succeeds, and the lock is
    released when the last holder releases it."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / LOCK_FILE
        self._key: str | None = None

    def acquire(self, what: str) -> DirectoryLock:
        """Takes the lock (creating ``folder`` if needed) without waiting.

        Raises:
            ConfigError: another process holds it (named by its PID).
        """
        if self._key is not None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        key = str(self.path.resolve())
        if key in _HELD:
            _HELD[key][1] += 1
            self._key = key
            return self
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 64).decode("ascii", "replace").strip() or "unknown"
                os.close(fd)
                raise ConfigError(
                    what,
                    [
                        f"{self.path.parent} is in use: process {holder} is writing it (another "
                        "teamtr train, compare or swap). Wait for it to finish or stop it (a "
                        "process that ends, even by a crash, releases the directory), or choose "
                        "another directory"
                    ],
                ) from None
            try:  # the holder may have removed the file between our open and our lock
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        _HELD[key] = [fd, 1]
        self._key = key
        return self

    def release(self) -> None:
        """Gives this holder's share up; the last one removes the lock file and releases the
        lock (nothing when not held)."""
        if self._key is None:
            return
        held = _HELD[self._key]
        held[1] -= 1
        if held[1] == 0:
            self.path.unlink(missing_ok=True)
            os.close(held[0])
            del _HELD[self._key]
        self._key = None

    def __enter__(self) -> DirectoryLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass(frozen=True)
class LoadedCheckpoint:
    """An intact checkpoint: its path, its contents, and the newer ones that could not be read."""

    path: Path
    state: dict[str, Any]
    skipped: tuple[str, ...] = ()


def result_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The plain config data that determines a run's results: all but :data:`SAFE_TO_CHANGE`."""
    return {k: v for k, v in config.items() if k not in SAFE_TO_CHANGE}


def config_differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """``"key: old -> new"`` for every leaf that differs (dotted keys, safe keys ignored)."""
    flat_old, flat_new = _flat_json(result_config(old)), _flat_json(result_config(new))
    lines = []
    for key in sorted(set(flat_old) | set(flat_new)):
        a, b = flat_old.get(key, "(unset)"), flat_new.get(key, "(unset)")
        if a != b:
            lines.append(f"{key}: {_show(a)} -> {_show(b)}")
    return lines


def _flat_json(data: Mapping[str, Any]) -> dict[str, str]:
    return {k: json.dumps(v, sort_keys=True, default=str) for k, v in flat_items(data)}


def _show(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def prepare(run_dir: Path, *, resume: bool, overwrite: bool) -> list[str]:
    """Applies the directory rules for a new or resumed run and returns what was deleted.

    Raises:
        ConfigError: ``resume`` and ``overwrite`` together, or a non-empty directory for a new
            run without ``overwrite``.
    """
    if resume and overwrite:
        raise ConfigError(
            "train",
            [
                "--resume continues a run and --overwrite replaces it: pick one (from Python: "
                "resume=True or overwrite=True)"
            ],
        )
    if resume or not run_dir.exists():
        return []
    if not run_dir.is_dir():
        raise ConfigError("run directory", [f"{run_dir} exists and is not a directory"])
    present = sorted(p.name for p in run_dir.iterdir() if p.name != LOCK_FILE)
    ours = [name for name in present if name in ARTEFACTS]
    if not present:
        return []
    if not overwrite:
        what = f"a run ({', '.join(ours)})" if ours else f"other files ({', '.join(present[:5])})"
        raise ConfigError(
            "run directory",
            [
                f"{run_dir} already holds {what}: pass --resume to continue that run, "
                "--overwrite to replace it, or choose another --run-dir (from Python: "
                "train(..., resume=True), train(..., overwrite=True) or another run_dir=)"
            ],
        )
    for name in ours:
        delete_entry(run_dir / name)
    return ours


def delete_entry(path: Path) -> None:
    """Deletes a file, a link (not what it points to) or a folder with everything in it."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def remove_new_entries(run_dir: Path, present: set[str]) -> list[str]:
    """Deletes what a refused new run wrote in ``run_dir``: every entry whose name is not in
    ``present`` (what was there before it wrote), the lock file aside; returns their names."""
    removed = []
    for path in sorted(run_dir.iterdir()) if run_dir.is_dir() else []:
        if path.name in present or path.name == LOCK_FILE:
            continue
        delete_entry(path)
        removed.append(path.name)
    return removed


def remove_if_empty(folder: Path, made: bool) -> None:
    """Removes ``folder`` when this process made it (``made``) and it is empty again."""
    if made:
        with contextlib.suppress(OSError):  # not empty (another writer's files), or gone
            folder.rmdir()


def check_resume(
    run_dir: Path,
    config: Mapping[str, Any],
    checkpoint: LoadedCheckpoint | None,
    normalise: Callable[[Any], Mapping[str, Any]] = dict,
) -> None:
    """Refuses a resume whose configuration differs from the run's (``config.yaml`` and the
    checkpoint's stored configuration, each passed through ``normalise``, e.g. to rename old
    keys), listing every difference.

    Raises:
        ConfigError: the differences, with how to resume with the run's own config.
    """
    saved: list[tuple[str, Mapping[str, Any]]] = []
    path = run_dir / "config.yaml"
    if path.exists():
        saved.append((str(path), normalise(read_config(path, what="the run's config.yaml"))))
    if checkpoint is not None and isinstance(checkpoint.state.get("config"), Mapping):
        saved.append((str(checkpoint.path), normalise(checkpoint.state["config"])))
    errors = []
    for where, old in saved:
        diffs = config_differences(old, config)
        if diffs:
            errors.append(f"the config differs from the one in {where}:")
            errors += [f"  {line}" for line in diffs]
    if errors:
        errors.append(
            f"resume with the run's own config (teamtr train --resume --run-dir "
            f"{shlex.quote(str(run_dir))}, "
            "which reads its config.yaml), or start a new run in another --run-dir; only "
            f"{', '.join(SAFE_TO_CHANGE)} may change on a resume"
        )
        raise ConfigError("resume", errors)


# -- checkpoints --------------------------------------------------------------------------------


def _is_tensor(value: Any) -> bool:
    """Whether ``value`` is a torch tensor. This module imports torch only to save or load a file
    (its lock, used by every command on a run directory, must not cost torch's 2 s): before
    torch is imported, nothing is a tensor."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def plain(value: Any) -> Any:
    """``value`` as tensors and plain data (what a weights-only load accepts): NumPy scalars and
    arrays become Python numbers and lists, tuples stay tuples."""
    if _is_tensor(value):
        return value
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [plain(v) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def save(folder: Path, stage: int, state: Mapping[str, Any], keep: int = 2) -> Path:
    """Atomically writes ``folder/stage_XXXX.pt`` (``state`` as plain data), points ``latest`` at
    it and deletes the stage files outside the last ``keep`` stages up to ``stage``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = stage_path(folder, stage)
    write_file(path, state)
    (folder / "latest.tmp").write_text(path.name, encoding="utf-8")
    os.replace(folder / "latest.tmp", folder / "latest")
    for number, old in _stage_files(folder):
        if not stage - keep < number <= stage:
            old.unlink()
            digest_path(old).unlink(missing_ok=True)
    return path


def digest_path(path: Path) -> Path:
    """The file beside ``path`` that records its SHA-256 (``stage_0001.pt.sha256``)."""
    return path.with_name(path.name + ".sha256")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_file(path: Path, state: Any) -> None:
    """Writes ``state`` (as :func:`plain` data) to ``path`` atomically, with its SHA-256 in
    :func:`digest_path`. The digest is in place before the file is renamed in: a crash between
    the two leaves a digest that the old file (or none) does not match, and the reader refuses it.
    The temporary names are the process's own: processes that write the same file at once (a
    comparison's seeds on Ray, sharing one behaviour clone) do not write into each other's."""
    import torch

    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    torch.save(plain(state), tmp)
    record, record_tmp = digest_path(path), digest_path(tmp)
    record_tmp.write_text(f"{_sha256(tmp)}  {path.name}\n", encoding="utf-8")
    os.replace(record_tmp, record)
    os.replace(tmp, path)


def read_file(path: Path) -> Any:
    """A file :func:`write_file` wrote, checked: its SHA-256 against the recorded one (files
    written before digests were recorded have none, and are read as they are), loaded
    weights-only, and every floating-point tensor in it (weights and optimiser state alike)
    finite.

    Raises:
        ValueError: the file does not match its digest, cannot be read, or holds NaN or inf
            (the message names the file, and the tensor).
    """
    record = digest_path(path)
    if record.is_file():
        expected = record.read_text(encoding="utf-8").split(maxsplit=1)[:1]
        if not expected or expected[0] != _sha256(path):
            raise ValueError(
                f"{path.name} does not match the SHA-256 recorded when it was written "
                f"({record.name}): the file was changed or corrupted since"
            )
    try:
        state = torch_load_plain(path)
    except Exception as exc:
        raise ValueError(
            f"{path.name} cannot be read ({type(exc).__name__}: {_first_line(exc)})"
        ) from exc
    bad = _non_finite(state)
    if bad is not None:
        raise ValueError(f"{path.name} holds NaN or inf values (in {bad})")
    return state


def _non_finite(value: Any, where: str = "") -> str | None:
    """The dotted key of the first floating-point tensor in ``value`` with a NaN or an inf."""
    if _is_tensor(value):
        if value.is_floating_point() and not bool(value.isfinite().all()):
            return where or "the file"
        return None
    if isinstance(value, Mapping):
        items: Any = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _non_finite(item, f"{where}.{key}" if where else str(key))
        if found is not None:
            return found
    return None


def _stage_files(folder: Path) -> list[tuple[int, Path]]:
    """``(stage, path)`` of the stage files, newest first."""
    found = [
        (int(m.group(1)), p) for p in folder.glob("stage_*.pt") if (m := _STAGE_FILE.match(p.name))
    ]
    return sorted(found, reverse=True)


def load(folder: Path) -> LoadedCheckpoint | None:
    """The newest intact checkpoint in ``folder`` (``None``: there is none to resume from).

    ``latest`` names the newest; when it is empty, names a missing file, or that file cannot be
    read, the other stage files are tried, newest first, and the reasons are kept in
    ``skipped``.

    Raises:
        ConfigError: checkpoints exist but none can be read (each one's reason listed).
    """
    if not folder.is_dir():
        return None
    skipped: list[str] = []
    candidates = _stage_files(folder)
    latest = folder / "latest"
    if latest.exists():
        name = _read_latest(latest, skipped)
        if name is not None:
            named = folder / name
            if not named.is_file():
                skipped.append(f"latest names {name}, which does not exist")
            else:
                candidates = [(-1, named), *[(n, p) for n, p in candidates if p != named]]
    for _, path in candidates:
        try:
            state = read_checkpoint(path)
        except ValueError as exc:
            skipped.append(str(exc))
            continue
        return LoadedCheckpoint(path, state, tuple(skipped))
    if skipped:
        raise ConfigError(f"checkpoints in {folder}", [*skipped, "no intact checkpoint is left"])
    return None


def stage_path(folder: Path, stage: int) -> Path:
    """Where ``save`` writes stage ``stage``'s checkpoint in ``folder``."""
    return folder / f"stage_{stage:04d}.pt"


def stage_names(folder: Path) -> list[str]:
    """The stage files ``folder`` keeps, oldest first."""
    return [p.name for _, p in reversed(_stage_files(folder))]


def read_checkpoint(path: Path) -> dict[str, Any]:
    """The contents of the stage checkpoint at ``path`` (checked by :func:`read_file`).

    Raises:
        ValueError: it does not match its digest, cannot be read, holds NaN or inf, or is not a
            teamtr checkpoint (the message says which,
            naming the file).
    """
    state = read_file(path)
    if not isinstance(state, dict) or "trainer" not in state:
        raise ValueError(f"{path.name} is not a teamtr checkpoint")
    return state


def _read_latest(latest: Path, skipped: list[str]) -> str | None:
    if latest.is_dir():
        skipped.append(f"{latest} is a directory, not the file naming the newest checkpoint")
        return None
    try:
        name = latest.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        skipped.append(f"{latest} cannot be read ({exc})")
        return None
    if not name:
        skipped.append(f"{latest} is empty (it should name the newest stage_XXXX.pt)")
        return None
    if not _STAGE_FILE.match(name):
        skipped.append(f"{latest} names {name!r}, not a stage_XXXX.pt file")
        return None
    return name


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:160] if text else ""


def torch_load_plain(path: Path) -> Any:
    """``torch.load`` of a file this package wrote, weights-only (tensors and plain data)."""
    import torch

    return torch.load(path, weights_only=True, map_location="cpu")
