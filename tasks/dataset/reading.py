"""Reading the rows of a local dataset: JSONL with the standard library; parquet files and
``datasets`` ``save_to_disk`` directories with ``pyarrow`` / ``datasets``, imported only when such a
file is read (the ``datasets`` extra: ``pip install 'teamtr[datasets]'``).

Nothing here downloads anything: only local paths are read. Lines of a JSON file that cannot be
read (not UTF-8, not JSON, not an object) are kept in :attr:`Table.bad` with their ``file:line``,
so that the task reports them together with the rows' own errors (a missing prompt, a repeated
id), every bad line at once (:func:`tasks.data_files.listed`: the first 50 and a count of the
rest), as a :class:`~tasks.base.TaskConfigError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.base import Split, TaskConfigError
from tasks.data_files import read_json_rows

JSON_SUFFIXES = (".jsonl", ".ndjson", ".json")
PARQUET_SUFFIXES = (".parquet", ".pq")
EXTRA = "pip install 'teamtr[datasets]'"

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
        where: for each row, where it is, to start its error messages: ``"file:3"`` (line 3 of a
            JSON file), ``"file:5: item 2"`` (a JSON list's second item, on line 5),
            ``"file: row 3"`` (parquet, ``save_to_disk``), ``"file: test row 3"`` (a split of a
            saved ``DatasetDict``).
        places: for each row, the same place in short (``"line 3"``, ``"row 3"``,
            ``"test row 3"``), to say where a repeated id was first.
        order: for each row, its position in the file (a JSON file's line, else the row's index),
            to list the errors of the file in file order.
        splits: for a saved ``DatasetDict``, each row's split (from the dict's split names);
            ``None`` for a single table.
        bad: ``(order, message)`` of every line that could not be read as a row (not UTF-8, not
            JSON, not an object), each message ``file:line: ...``.
    """

    rows: list[dict[str, Any]]
    columns: tuple[str, ...]
    where: list[str]
    places: list[str]
    order: list[int]
    splits: list[Split] | None = None
    bad: list[tuple[int, str]] = field(default_factory=list)


def read_table(path: Path) -> Table:
    """Reads ``path``: a ``.jsonl`` / ``.ndjson`` file (one JSON object per line), a ``.json``
    file (JSON lines, or one JSON array of objects), a ``.parquet`` file, or a directory written by
    ``datasets``' ``save_to_disk`` (a ``Dataset`` or a ``DatasetDict`` whose split names are
    ``train``, ``validation`` / ``valid`` / ``val`` / ``dev`` and ``test``).

    Lines of a JSON file that cannot be read as rows are not raised here: they are in
    :attr:`Table.bad`, for the task to report with the rows' own errors.

    Raises:
        TaskConfigError: a missing path, an unknown format, an unreadable parquet file or
            directory, or a missing optional library (naming the extra to install).
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


def _table(
    rows: list[dict[str, Any]],
    where: list[str],
    places: list[str],
    order: list[int],
    splits: list[Split] | None = None,
    bad: list[tuple[int, str]] | None = None,
) -> Table:
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    full = [{c: row.get(c) for c in columns} for row in rows]
    return Table(full, tuple(columns), where, places, order, splits, list(bad or []))


def _numbered(path: Path, rows: list[dict[str, Any]], prefix: str = "") -> Table:
    """A table of rows without lines (parquet, ``save_to_disk``), numbered from 1."""
    places = [f"{prefix}row {i}" for i in range(1, len(rows) + 1)]
    return _table(rows, [f"{path}: {p}" for p in places], places, list(range(1, len(rows) + 1)))


def _read_json(path: Path) -> Table:
    read = read_json_rows(
        path,
        layout="array",
        expected="one JSON object (one row) per line, or one JSON list of them",
    )
    places = [
        f"line {row.line}" if row.item is None else f"item {row.item} (line {row.line})"
        for row in read.rows
    ]
    return _table(
        [row.value for row in read.rows],
        [row.where for row in read.rows],
        places,
        [row.line for row in read.rows],
        None,
        read.bad,
    )


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
    return _numbered(path, rows)


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
        return _numbered(path, loaded.to_list())
    unknown = [name for name in loaded if name.lower() not in SPLIT_NAMES]
    if unknown:
        raise TaskConfigError(
            _WHAT,
            [
                f"path: the DatasetDict in {str(path)!r} has split(s) {unknown} that are not "
                f"one of {sorted(SPLIT_NAMES)}; save only those splits (or rename them)"
            ],
        )
    rows: list[dict[str, Any]] = []
    where: list[str] = []
    places: list[str] = []
    splits: list[Split] = []
    for name, part in loaded.items():
        table = _numbered(path, part.to_list(), f"{name} ")
        rows += table.rows
        where += table.where
        places += table.places
        splits += [SPLIT_NAMES[name.lower()]] * len(table.rows)
    return _table(rows, where, places, list(range(len(rows))), splits)
