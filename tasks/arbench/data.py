"""Loaders for AR-Bench's official data files, the project's JSONL, and the bundled demo cases.

Official formats (``data/<game>/test.json`` in tmlr-group/AR-Bench):

* GN: a JSON list of 4-digit strings (``["8362", "1058", ...]``);
* SP: a JSON list of objects with at least ``surface``, ``bottom`` and ``key_question`` (a list of
  yes-answered key questions), plus ``index``, ``story_tree``, ``core_sentence`` ...;
* DC: a JSON list of cases with ``time``, ``location``, ``victim{name, introduction,
  cause_of_death, murder_weapon}``, ``suspects`` (5 objects: ``name``, ``introduction``, ``task``,
  ``story`` and, for 4 of them, ``relationship``, ``is_murderer``, ``evidence``, ``testimony``,
  ``timeline`` ...), ``initial_information{..., suspect: [{name, introduction}]}`` (the order of the
  choices A-E), ``murderer`` and ``label`` (0-based index of the murderer in that order).

Every loader also reads a single official object, one official object per line (JSONL), and the
project's JSONL (``tasks.save_problems``). Official rows are labelled ``split`` (the tasks pass
their ``data_split``, default ``"test"``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from tasks.arbench import dc_rules, gn_rules
from tasks.base import Problem, Split
from tasks.data_files import read_json_rows
from teamtr_core.errors import ConfigError

Converter = Callable[[Any, int, Split], Problem]


class ArbenchDataError(ConfigError):
    """A data file that is not in an accepted format; ``errors`` lists every bad row, each
    named by its file and line (and item, in a JSON list). A ``ConfigError``, so a
    ``ValueError``."""


EXPECTED = "AR-Bench's JSON list of rows (or one row), or one JSON row per line"


def load_file(path: str | Path, convert: Converter, split: Split = "test") -> list[Problem]:
    """Reads ``path`` as a JSON list / object of official rows, or as JSONL (official rows or the
    project's ``Problem`` dicts), converting official rows with ``convert(row, position, split)``
    (``position``: the 1-based item of a JSON list, or the line of a JSONL row).

    Raises:
        ArbenchDataError: listing every bad row at once, each as ``file:line: ...`` (``file:line:
            item N`` in a JSON list): not JSON, not a row ``convert`` accepts, a duplicate id
            (with the line that had it first); the first 50 and a count of the rest. Or a file
            with no problems.
        FileNotFoundError: if ``path`` does not exist.
    """
    read = read_json_rows(path, layout="document", objects=False, expected=EXPECTED)
    problems: list[Problem] = []
    for row in read.rows:
        value = row.value
        try:
            if isinstance(value, Mapping) and "id" in value and "data" in value:
                problem = Problem.from_dict(value)
            else:
                position = row.item if row.item is not None else row.line
                problem = convert(value, position, split)
        except (KeyError, TypeError, ValueError) as exc:
            read.add(row, str(exc))
            continue
        read.keep(row, problem, problems)
    if read.bad:
        raise ArbenchDataError(f"data file {path}", read.errors())
    if not problems:
        raise ArbenchDataError(
            f"data file {path}",
            [f"{path}: no problems found (expected a JSON list or JSONL rows)"],
        )
    return problems


def gn_problem(row: Any, position: int, split: Split) -> Problem:
    """An official GN row (a secret string, or a list of 4 digits) as a problem."""
    secret = "".join(str(d) for d in row) if isinstance(row, list) else row
    if not gn_rules.is_secret(secret):
        raise ValueError(f"expected a secret of 4 distinct digits such as '0521', got {row!r}")
    return gn_from_secret(secret, split)


def gn_from_secret(secret: str, split: Split) -> Problem:
    """The GN problem of ``secret`` (the secret is the answer; the data shows nothing)."""
    return Problem(id=f"arbench-gn:{secret}", data={}, answer=secret, split=split)


def _require(row: Mapping[str, Any], keys: tuple[str, ...], what: str) -> None:
    missing = [k for k in keys if k not in row]
    if missing:
        raise ValueError(f"{what} is missing {missing}; it has {sorted(row)}")


def sp_problem(row: Any, position: int, split: Split) -> Problem:
    """An official SP item as a problem (``answer`` = the ``bottom`` story)."""
    if not isinstance(row, Mapping):
        raise TypeError(
            f"expected an SP object with 'surface' and 'bottom', got {type(row).__name__}"
        )
    _require(row, ("surface", "bottom"), "SP item")
    keys = row.get("key_question", [])
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise ValueError(f"'key_question' must be a list of strings, got {keys!r}")
    surface, bottom = row["surface"], row["bottom"]
    if not isinstance(surface, str) or not isinstance(bottom, str):
        raise ValueError("'surface' and 'bottom' must be strings")
    if not surface.strip() or not bottom.strip():
        raise ValueError("'surface' and 'bottom' must be non-empty (the puzzle and its story)")
    index = row.get("index", position)
    meta = {k: row[k] for k in ("supernatural", "someone_dies") if k in row}
    return Problem(
        id=f"arbench-sp:{index}",
        data={"surface": row["surface"], "bottom": row["bottom"], "key_question": list(keys)},
        answer=row["bottom"],
        split=split,
        meta=meta,
    )


def dc_problem(row: Any, position: int, split: Split) -> Problem:
    """An official DC case as a problem (``answer`` = the murderer's letter ``A``-``E``)."""
    if not isinstance(row, Mapping):
        raise TypeError(f"expected a DC case object, got {type(row).__name__}")
    _require(row, ("time", "location", "victim", "suspects", "initial_information"), "DC case")
    _require(row["victim"], ("name", "murder_weapon"), "DC 'victim'")
    suspects = row["suspects"]
    choices = row["initial_information"].get("suspect")
    if not isinstance(suspects, list) or not isinstance(choices, list):
        raise ValueError("'suspects' and 'initial_information.suspect' must be lists")
    names = [str(s["name"]) for s in choices]
    if not 2 <= len(names) <= len(dc_rules.LETTERS):
        raise ValueError(
            f"expected 2-5 suspects in 'initial_information.suspect', got {len(names)}"
        )
    if sorted(names) != sorted(str(s["name"]) for s in suspects):
        raise ValueError(
            f"'suspects' and 'initial_information.suspect' name different people: {names}"
        )
    label = row.get("label")
    murderer = row.get("murderer")
    if label is None and murderer in names:
        label = names.index(murderer)
    if not isinstance(label, int) or isinstance(label, bool) or not 0 <= label < len(names):
        raise ValueError(f"'label' must be the murderer's 0-based index in {names}, got {label!r}")
    if murderer is not None and murderer != names[label]:
        raise ValueError(f"'murderer' {murderer!r} is not choice {label} ({names[label]!r})")
    case = dict(row)
    case["murderer"] = names[label]
    index = row.get("index", position)
    return Problem(
        id=f"arbench-dc:{index}",
        data=case,
        answer=dc_rules.LETTERS[label],
        split=split,
    )


def bundled(name: str, convert: Converter, split: Split = "train") -> list[Problem]:
    """The demo cases shipped in ``tasks/arbench/data/<name>`` (official format)."""
    resource = resources.files("tasks.arbench").joinpath("data", name)
    with resources.as_file(resource) as path:
        return load_file(path, convert, split)
