"""Reading the rows of a local dataset: JSONL with the standard library; parquet files and
``datasets`` ``save_to_disk`` directories with ``pyarrow`` / ``datasets``, imported only when such a
file is read (the ``datasets`` extra: ``pip install 'teamtr[datasets]'``).

Nothing here downloads anything: only local paths are read. Every problem found in a file is
collected (up to :data:`MAX_REPORTED` malformed rows, then a count) and raised at once as a
:class:`~tasks.base.TaskConfigError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.base import Split, TaskConfigError

JSON_SUFFIXES = (".jsonl", ".ndjson", ".json")
PARQUET_SUFFIXES = (".parquet", ".pq")
EXTRA = "pip install 'teamtr[datasets]'"
MAX_REPORTED = 5
"""How many malformed rows a message lists before it only counts the rest."""

SPLIT_NAMES: dict[str, Split] = {
    "train": "train",
    "validation": "validation",
    "valid": "validation",
    "val": "validation",
    "dev": "validation",
    "test": "test",
}
"""The split names of a saved ``DatasetDict`` and the split each one labels its rows with."""

_WHAT = "DatasetTask"


@dataclass(frozen=True)
class Table:
    """The rows of a dataset.

    Attributes:
        rows: one dict per row; every row has every column (a missing value is ``None``).
        columns: the column names, in order of first appearance.
        where: for each row, where it is in the source (``"line 3"``, ``"row 3"``,
            ``"test row 3"``), for error messages.
        splits: for a saved ``DatasetDict``, each row's split (from the dict's split names);
            ``None`` for a single table.
    """

    rows: list[dict[str, Any]]
    columns: tuple[str, ...]
    where: list[str]
    splits: list[Split] | None = None


def read_table(path: Path) -> Table:
    """Reads ``path``: a ``.jsonl`` / ``.ndjson`` file (one JSON object per line), a ``.json``
    file (JSON lines, or one JSON array of objects), a ``.parquet`` file, or a directory written by
    ``datasets``' ``save_to_disk`` (a ``Dataset`` or a ``DatasetDict`` whose split names are
    ``train``, ``validation`` / ``valid`` / ``val`` / ``dev`` and ``test``).

    Raises:
        TaskConfigError: a missing path, an unknown format, malformed rows, or a missing optional
            library (naming the extra to install), every problem at once.
    """
    if not path.exists():
        raise TaskConfigError(
            _WHAT,
            [
                f"path: no such file or directory: {str(path)!r} (a relative path is read from "
                f"the working directory, now {str(Path.cwd())!r})"
            ],
        )
    if path.is_dir():
        return _read_saved(path)
    suffix = path.suffix.lower()
    if suffix in JSON_SUFFIXES:
        return _read_json(path)
    if suffix in PARQUET_SUFFIXES:
        return _read_parquet(path)
    raise TaskConfigError(
        _WHAT,
        [
            f"path: {str(path)!r} has an unknown format {suffix or '(no suffix)'!r}; expected a "
            f"JSONL file ({', '.join(JSON_SUFFIXES)}), a parquet file "
            f"({', '.join(PARQUET_SUFFIXES)}) or a directory written by datasets' save_to_disk"
        ],
    )


def _table(rows: list[dict[str, Any]], where: list[str], splits: list[Split] | None) -> Table:
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    full = [{c: row.get(c) for c in columns} for row in rows]
    return Table(full, tuple(columns), where, splits)


def capped(problems: list[str], total: int, what: str) -> list[str]:
    """``problems`` (already at most :data:`MAX_REPORTED`) and a line counting the rest."""
    if total > len(problems):
        problems = [*problems, f"... and {total - len(problems)} more {what}"]
    return problems


def _read_json(path: Path) -> Table:
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TaskConfigError(_WHAT, [f"{path}: not valid JSON ({exc})"]) from exc
        items = [(f"item {i}", row) for i, row in enumerate(data, 1)]
    else:
        items = []
        bad: list[str] = []
        total = 0
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                items.append((f"line {lineno}", json.loads(line)))
            except json.JSONDecodeError as exc:
                total += 1
                if len(bad) < MAX_REPORTED:
                    bad.append(f"{path}:{lineno}: not a JSON object ({exc}): {line[:60]!r}")
        if bad:
            raise TaskConfigError(_WHAT, capped(bad, total, "malformed lines"))
    rows: list[dict[str, Any]] = []
    where: list[str] = []
    wrong: list[str] = []
    total = 0
    for at, row in items:
        if isinstance(row, dict):
            rows.append(row)
            where.append(at)
            continue
        total += 1
        if len(wrong) < MAX_REPORTED:
            wrong.append(
                f"{path}, {at}: expected a JSON object (one row), got {type(row).__name__}"
            )
    if wrong:
        raise TaskConfigError(_WHAT, capped(wrong, total, "rows that are not objects"))
    return _table(rows, where, None)


def _read_parquet(path: Path) -> Table:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise TaskConfigError(
            _WHAT,
            [f"path: reading the parquet file {str(path)!r} needs pyarrow, not installed: {EXTRA}"],
        ) from exc
    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow's errors have no common base besides Exception
        raise TaskConfigError(
            _WHAT, [f"path: cannot read {str(path)!r} as parquet ({type(exc).__name__}: {exc})"]
        ) from exc
    return _table(rows, [f"row {i}" for i in range(1, len(rows) + 1)], None)


def _read_saved(path: Path) -> Table:
    if not ((path / "state.json").is_file() or (path / "dataset_dict.json").is_file()):
        raise TaskConfigError(
            _WHAT,
            [
                f"path: {str(path)!r} is a directory but not one written by datasets' "
                "save_to_disk (no state.json or dataset_dict.json in it); give such a directory, "
                "a JSONL file or a parquet file"
            ],
        )
    try:
        import datasets
    except ImportError as exc:
        raise TaskConfigError(
            _WHAT,
            [
                f"path: reading the save_to_disk directory {str(path)!r} needs the datasets "
                f"library, not installed: {EXTRA}"
            ],
        ) from exc
    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as exc:  # a damaged directory: datasets raises several kinds
        raise TaskConfigError(
            _WHAT,
            [f"path: datasets cannot load {str(path)!r} ({type(exc).__name__}: {exc})"],
        ) from exc
    if not isinstance(loaded, datasets.DatasetDict):
        rows = loaded.to_list()
        return _table(rows, [f"row {i}" for i in range(1, len(rows) + 1)], None)
    unknown = [name for name in loaded if name.lower() not in SPLIT_NAMES]
    if unknown:
        raise TaskConfigError(
            _WHAT,
            [
                f"path: the DatasetDict in {str(path)!r} has split(s) {unknown} that are not "
                f"one of {sorted(SPLIT_NAMES)}; save only those splits (or rename them)"
            ],
        )
    rows, where, splits = [], [], []
    for name, part in loaded.items():
        part_rows = part.to_list()
        rows += part_rows
        where += [f"{name} row {i}" for i in range(1, len(part_rows) + 1)]
        splits += [SPLIT_NAMES[name.lower()]] * len(part_rows)
    return _table(rows, where, splits)
