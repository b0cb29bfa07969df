"""``DatasetTask``: a single-answer task made of a local dataset and weighted reward functions,
in the style of TRL's ``GRPOTrainer(reward_funcs=..., reward_weights=...)`` (see
``docs/tasks/dataset.md``)."""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import numbers
import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tasks.base import (
    SPLITS,
    Problem,
    Score,
    SingleAnswerTask,
    Split,
    TaskConfigError,
    grader_failure,
    split_of,
)
from tasks.data_files import listed
from tasks.dataset import rewards
from tasks.dataset.reading import Table, read_table
from teamtr_core.choices import choice_errors

log = logging.getLogger(__name__)

_WHAT = "DatasetTask"
_TOLERANCE = 1e-9
_CACHE_SIZE = 8
_WARNED: set[tuple[str, str]] = set()  # (reward function, error type) already logged at WARNING


@dataclass(frozen=True)
class _Loaded:
    """A dataset read and turned into problems: shared by every task made from the same file
    with the same column options (problems are frozen, so sharing is safe)."""

    problems: tuple[Problem, ...]
    columns: tuple[str, ...]
    by_split: Mapping[str, tuple[Problem, ...]]


_CACHE: OrderedDict[tuple[Any, ...], _Loaded] = OrderedDict()


class DatasetTask(SingleAnswerTask):
    """Rows of a local dataset as problems, graded by weighted reward functions (TRL style).

    Each row is one problem: the ``prompt_column`` is the opening prompt (a string, or a
    conversation: a list of ``{"role", "content"}`` messages, shown as their contents), and the
    final agent's message is the completion. Every reward function is called as TRL calls it,
    ``f(prompts=[prompt], completions=[completion], **{column: [value]})`` with every other
    column as a keyword argument, and returns one float per completion; here every list has length
    1 (one episode is graded at a time). ``Score.reward`` is the weighted sum of the values; a
    ``None`` value adds nothing (TRL's "does not apply").

    Splits: with a ``split_column`` in the data, each row's value (``train``, ``validation`` or
    ``test``) is its split; a saved ``DatasetDict`` labels rows with its split names; otherwise a
    stable hash of the problem id (:func:`tasks.base.split_of`) assigns 80/10/10. ``sample``
    draws a row of this task's ``split``.

    Ids: the ``id_column``'s value, else ``"row-"`` and a hash of the row's content (identical
    rows are one problem).

    Correctness: ``Score.correct`` is ``reward >= success_threshold``, whose default is the sum of
    the positive weights: full marks when every reward function returns values in [0, 1].

    Errors: a reward function that raises, or returns anything but one finite number (or
    ``None``), never crashes a rollout: the episode scores 0, not correct, with reason
    ``"reward_error"`` and the error in ``details``, marked as a grader failure
    (``details["grader_failed"]``: evaluations count these apart), and the error is logged.

    Args:
        path: a ``.jsonl`` file (standard library only), a ``.parquet`` file, or a directory
            written by ``datasets``' ``save_to_disk`` (these two need ``pip install
            'teamtr[datasets]'``). Local paths only; a relative path is read from the working
            directory.
        prompt_column: the column holding the prompt.
        reward_funcs: a reward function or a list of them: callables or ``"module:function"``
            import strings.
        reward_weights: one weight per reward function (default: all 1.0).
        id_column: the column holding a unique, stable id (default: a hash of the row).
        split: the split ``sample`` draws from.
        split_column: the column that labels each row's split, when the data has it.
        meta_columns: columns copied into ``Problem.meta`` (per-subset breakdowns in reports).
        success_threshold: the reward at or above which an episode counts as correct.

    Raises:
        TaskConfigError: listing every problem with the options and the data at once (missing
            file, unknown columns with the columns that exist, weights of the wrong length, a
            reward function that is not callable or cannot take the columns, an empty dataset).
    """

    name = "dataset"
    description = "Rows of a local dataset graded by weighted reward functions (TRL style)."

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        prompt_column: str = "prompt",
        reward_funcs: object = None,
        reward_weights: Sequence[float] | None = None,
        id_column: str | None = None,
        split: str = "train",
        split_column: str | None = "split",
        meta_columns: Sequence[str] = (),
        success_threshold: float | None = None,
    ) -> None:
        errors: list[str] = []
        if not isinstance(prompt_column, str) or not prompt_column:
            errors.append(f"prompt_column: expected a column name, got {prompt_column!r}")
        for option, value in (("id_column", id_column), ("split_column", split_column)):
            if value is not None and (not isinstance(value, str) or not value):
                errors.append(f"{option}: expected a column name or null, got {value!r}")
        if isinstance(meta_columns, str):
            meta_columns = [meta_columns]
        if not isinstance(meta_columns, Sequence) or not all(
            isinstance(c, str) and c for c in meta_columns
        ):
            errors.append(f"meta_columns: expected a list of column names, got {meta_columns!r}")
        columns_ok = not errors  # the data is only read with well-formed column options
        errors += choice_errors("split", split, Split)
        funcs, given = self._resolve_funcs(reward_funcs, errors)
        weights = self._weights(reward_weights, given, errors)
        if success_threshold is not None and not _is_number(success_threshold):
            errors.append(
                f"success_threshold: expected a finite number or null, got {success_threshold!r}"
            )
        loaded = None
        if path is None or not isinstance(path, (str, os.PathLike)) or not str(path):
            errors.append(f"path: expected the path of a local dataset, got {path!r}")
        elif columns_ok:  # the file's own errors are reported with the options'
            try:
                loaded = _load(
                    Path(path).expanduser(),
                    prompt_column,
                    id_column,
                    split_column,
                    tuple(meta_columns),
                )
            except TaskConfigError as exc:
                errors += exc.errors
        if loaded is not None:
            passed = [c for c in loaded.columns if c not in _skipped(prompt_column)]
            for name, func in funcs:
                error = rewards.signature_error(name, func, passed)
                if error is not None:
                    errors.append(error)
        if errors:
            raise TaskConfigError(_WHAT, errors)
        assert loaded is not None
        self.path = Path(path).expanduser()  # type: ignore[arg-type]
        self.prompt_column = prompt_column
        self.id_column = id_column
        self.split = split
        self.split_column = split_column
        self.meta_columns = tuple(meta_columns)
        self.reward_names = rewards.unique_names([name for name, _ in funcs])
        self.reward_funcs = [func for _, func in funcs]
        self.reward_weights = weights
        self.success_threshold = (
            float(success_threshold)
            if success_threshold is not None
            else float(sum(w for w in weights if w > 0))
        )
        self._loaded = loaded
        self._rows = loaded.by_split.get(split, ())
        self.description = (
            f"{self.path.name}: {len(loaded.problems)} rows ({self._counts()}), graded by "
            f"{', '.join(self.reward_names)}"
        )

    # -- options ------------------------------------------------------------------------------
    @staticmethod
    def _resolve_funcs(
        specs: object, errors: list[str]
    ) -> tuple[list[tuple[str, rewards.RewardFunc]], int]:
        """The resolved reward functions and how many were given."""
        if specs is None:
            errors.append(
                "reward_funcs: give at least one reward function (a callable or "
                "'module:function'), e.g. 'tasks.dataset.rewards:exact_match'"
            )
            return [], 0
        if isinstance(specs, str) or callable(specs):
            specs = [specs]
        if not isinstance(specs, Sequence) or not specs:
            errors.append(
                f"reward_funcs: expected a reward function or a non-empty list of them, got "
                f"{specs!r}"
            )
            return [], 0
        funcs = []
        for i, spec in enumerate(specs):
            found = rewards.resolve(spec, f"reward_funcs[{i}]")
            if isinstance(found, str):
                errors.append(found)
            else:
                funcs.append(found)
        return funcs, len(specs)

    @staticmethod
    def _weights(given: object, n: int, errors: list[str]) -> list[float]:
        if given is None:
            return [1.0] * n
        if not isinstance(given, Sequence) or isinstance(given, str):
            errors.append(f"reward_weights: expected a list of numbers, got {given!r}")
            return [1.0] * n
        bad = [w for w in given if not _is_number(w)]
        if bad:
            errors.append(f"reward_weights: expected finite numbers, got {bad}")
        if len(given) != n:
            errors.append(
                f"reward_weights: {len(given)} weight(s) for {n} reward function(s); give one "
                "weight per reward function (or none: every weight 1.0)"
            )
        if bad or len(given) != n:
            return [1.0] * n
        return [float(w) for w in given]

    def _counts(self) -> str:
        return ", ".join(f"{s} {len(self._loaded.by_split.get(s, ()))}" for s in SPLITS)

    # -- the task -----------------------------------------------------------------------------
    @property
    def problems(self) -> tuple[Problem, ...]:
        """Every problem of the dataset, all splits, in file order."""
        return self._loaded.problems

    def problems_in_split(self, split: str | None = None) -> tuple[Problem, ...]:
        """The problems of ``split`` (default: this task's split), in file order."""
        return self._loaded.by_split.get(split or self.split, ())

    def sample(self, rng: np.random.Generator) -> Problem:
        """A uniformly drawn row of this task's split.

        Raises:
            TaskConfigError: the split has no rows.
        """
        if not self._rows:
            raise TaskConfigError(
                _WHAT,
                [
                    f"split {self.split!r} of {str(self.path)!r} has no rows (rows per split: "
                    f"{self._counts()}); label rows with a {self.split_column or 'split'!r} "
                    "column, or use another split"
                ],
            )
        return self._rows[int(rng.integers(len(self._rows)))]

    def load(self, path: str | Path) -> list[Problem]:
        """Reads another dataset with this task's column options (``--data-path``): every row,
        labelled with its split as in the task's own file.

        Raises:
            TaskConfigError: as the constructor, for the file's errors.
        """
        return list(
            _load(
                Path(path).expanduser(),
                self.prompt_column,
                self.id_column,
                self.split_column,
                self.meta_columns,
            ).problems
        )

    def prompt(self, problem: Problem) -> str:
        """The prompt column's text (a conversation: its messages' contents, one paragraph
        each)."""
        value = problem.data.get(self.prompt_column, "")
        if _is_conversation(value):
            return "\n\n".join(str(m.get("content", "")) for m in value)
        return str(value)

    def grade(self, problem: Problem, text: str) -> Score:
        """Calls every reward function on ``text`` as the completion (lists of length 1) and
        scores the weighted sum; never raises (see the class docstring for ``reward_error``)."""
        answer = " ".join(text.split()) or None
        prompt = problem.data.get(self.prompt_column, "")
        conversational = _is_conversation(prompt)
        skipped = _skipped(self.prompt_column)
        values: dict[str, float | None] = {}
        total = 0.0
        for name, func, weight in zip(self.reward_names, self.reward_funcs, self.reward_weights):
            # Fresh copies for every call: a function that edits its arguments changes nothing.
            columns = {k: [copy.deepcopy(v)] for k, v in problem.data.items() if k not in skipped}
            completion: Any = [{"role": "assistant", "content": text}] if conversational else text
            try:
                value = rewards.one_value(
                    func(prompts=[copy.deepcopy(prompt)], completions=[completion], **columns)
                )
            except Exception as exc:  # the user's code: any failure is a scored outcome
                error = f"{type(exc).__name__}: {exc}"[:500]
                _log_error(name, exc, problem.id)
                details = grader_failure(
                    "reward_error", reward_func=name, error=error, rewards=values
                )
                return Score(0.0, False, answer, details)
            values[name] = value
            if value is not None:
                total += weight * value
        threshold = self.success_threshold
        correct = total >= threshold - _TOLERANCE * max(1.0, abs(threshold))
        reason = "correct" if correct else "below_threshold"
        return Score(total, correct, answer, {"reason": reason, "rewards": values})


def _is_number(value: object) -> bool:
    """A finite real number that is not a ``bool``."""
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _is_conversation(value: object) -> bool:
    """A TRL conversational prompt: a non-empty list of ``{"role", "content"}`` dicts."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, dict) and "role" in m and "content" in m for m in value)
    )


def _skipped(prompt_column: str) -> frozenset[str]:
    """Columns not passed to reward functions: the prompt column and the reserved names."""
    return rewards.RESERVED_COLUMNS | {prompt_column}


def _log_error(name: str, exc: Exception, problem_id: str) -> None:
    key = (name, type(exc).__name__)
    if key in _WARNED:
        log.debug("reward function %s failed on %s: %r", name, problem_id, exc)
        return
    _WARNED.add(key)
    log.warning(
        "reward function %s failed on problem %s (scored 0, reason 'reward_error'; later %s "
        "errors of this function are logged at DEBUG): %r",
        name,
        problem_id,
        type(exc).__name__,
        exc,
    )


# -- loading ----------------------------------------------------------------------------------
def _stamp(path: Path) -> tuple[tuple[str, int, int], ...]:
    files = sorted(path.rglob("*")) if path.is_dir() else [path]
    return tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.is_file())


def _load(
    path: Path,
    prompt_column: str,
    id_column: str | None,
    split_column: str | None,
    meta_columns: tuple[str, ...],
) -> _Loaded:
    """The problems of ``path``, from a small cache keyed by the files' size and modification
    time and the column options (a runner makes an environment, so a task, per episode)."""
    try:
        key: tuple[Any, ...] | None = (
            str(path.resolve()),
            _stamp(path),
            prompt_column,
            id_column,
            split_column,
            meta_columns,
        )
    except OSError:
        key = None  # read_table reports the problem
    if key is not None and key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    table = read_table(path)
    loaded = _build(path, table, prompt_column, id_column, split_column, meta_columns)
    if key is not None:
        _CACHE[key] = loaded
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return loaded


def _build(
    path: Path,
    table: Table,
    prompt_column: str,
    id_column: str | None,
    split_column: str | None,
    meta_columns: tuple[str, ...],
) -> _Loaded:
    """The problems of ``table``.

    Raises:
        TaskConfigError: listing the column options that do not fit the data, and every bad line
            of the file at once, in file order (lines that are not JSON objects, a missing or
            empty prompt, a bad id, split label or meta value, an id repeated with different
            content, naming where it was first), each as ``file:line: ...``, the first 50 and a
            count of the rest.
    """
    columns = table.columns
    errors = _column_errors(path, table, prompt_column, id_column, split_column, meta_columns)
    bad = list(table.bad)  # (order, "where: what") of every bad line
    if errors:  # the rows cannot be checked against columns that are not there
        raise TaskConfigError(_WHAT, errors + _listed(bad))
    labelled = split_column is not None and split_column in columns and table.splits is None
    built: dict[str, Problem] = {}
    first: dict[str, tuple[str, dict[str, Any]]] = {}  # problem id -> where first, its row
    for i, row in enumerate(table.rows):
        issues: list[str] = []  # what is wrong with this row
        prompt = row.get(prompt_column)
        if not (isinstance(prompt, str) and prompt.strip()) and not _is_conversation(prompt):
            issues.append(
                f"prompt_column {prompt_column!r} must hold a non-empty string or a list of "
                f"{{'role', 'content'}} messages, got {_shown(prompt)}"
            )
        problem_id = _row_id(row, columns, id_column, issues)
        split: Split | None = None
        if table.splits is not None:
            split = table.splits[i]
        elif labelled:
            label = row.get(split_column)  # type: ignore[arg-type]
            if label in SPLITS:
                split = label
            else:
                issues.append(
                    f"split_column {split_column!r} must hold one of {list(SPLITS)}, got "
                    f"{_shown(label)}"
                )
        elif problem_id is not None:
            split = split_of(problem_id)
        meta = {c: row[c] for c in meta_columns}
        if any(isinstance(v, (dict, list)) for v in meta.values()):
            issues.append("meta_columns must hold strings, numbers, booleans or nulls")
        if problem_id is not None:  # a repeat with the same content is the same problem
            seen = first.setdefault(problem_id, (table.places[i], row))
            if seen[1] != row:
                issues.append(
                    f"duplicate id {problem_id!r} (first on {seen[0]}) with different content; "
                    f"id_column {id_column!r} must be unique"
                )
        bad += [(table.order[i], f"{table.where[i]}: {issue}") for issue in issues]
        if issues or problem_id is None or split is None:
            continue
        _keep_first(built, Problem(problem_id, row, None, split, meta), path)
    if bad:
        raise TaskConfigError(_WHAT, _listed(bad))
    ordered = tuple(built.values())
    by_split: dict[str, tuple[Problem, ...]] = {
        s: tuple(p for p in ordered if p.split == s) for s in SPLITS
    }
    return _Loaded(ordered, columns, by_split)


def _keep_first(built: dict[str, Problem], problem: Problem, path: Path) -> None:
    """Adds ``problem`` unless its id is in ``built`` (a repeat in another split is logged)."""
    earlier = built.setdefault(problem.id, problem)
    if earlier is not problem and earlier.split != problem.split:
        log.warning(
            "%s: the row with id %s is in both %s and %s; kept in %s",
            path,
            problem.id,
            earlier.split,
            problem.split,
            earlier.split,
        )


def _column_errors(
    path: Path,
    table: Table,
    prompt_column: str,
    id_column: str | None,
    split_column: str | None,
    meta_columns: tuple[str, ...],
) -> list[str]:
    """The column options that name no column of ``table`` (or: the table has no rows)."""
    columns = table.columns
    shown = f"{str(path)!r} has the columns {list(columns)}"
    errors = []
    if not table.rows:
        if not table.bad:
            errors.append(f"path: {str(path)!r} has no rows (an empty dataset)")
        return errors
    for option, column in (("prompt_column", prompt_column), ("id_column", id_column)):
        if column is not None and column not in columns:
            errors.append(f"{option}: no column {column!r}; {shown}")
    if split_column not in (None, "split") and split_column not in columns:
        errors.append(f"split_column: no column {split_column!r}; {shown}")
    missing = [c for c in meta_columns if c not in columns]
    if missing:
        errors.append(f"meta_columns: no column(s) {missing}; {shown}")
    return errors


def _row_id(
    row: dict[str, Any], columns: Sequence[str], id_column: str | None, issues: list[str]
) -> str | None:
    """The row's problem id: its ``id_column`` value, or a hash of its content without one;
    ``None`` (with the reason added to ``issues``) when it has none."""
    content: str | None = None
    try:
        content = json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        kinds = sorted({_unjsonable(row, c) for c in columns} - {""})
        issues.append(
            "rows must be JSON-serialisable (problems are saved and sent as JSON); "
            f"column(s) {kinds}: drop or convert them"
        )
    if id_column is not None:
        value = row.get(id_column)
        if value is None or isinstance(value, (dict, list)) or not str(value).strip():
            issues.append(
                f"id_column {id_column!r} must hold a non-empty string or number, got "
                f"{_shown(value)}"
            )
            return None
        return str(value).strip()
    if content is None:
        return None
    return "row-" + hashlib.blake2b(content.encode("utf-8"), digest_size=8).hexdigest()


def _listed(bad: list[tuple[int, str]]) -> list[str]:
    """The bad lines in file order (one line's errors in the order found), capped."""
    return listed([message for _, message in sorted(bad, key=lambda b: b[0])])


def _shown(value: object) -> str:
    """A value for a message: its repr, cut at 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _unjsonable(row: Mapping[str, Any], column: str) -> str:
    """``"name (bytes)"`` if ``row[column]`` is not JSON-serialisable, else ``""``."""
    try:
        json.dumps(row[column])
    except (TypeError, ValueError):
        return f"{column} ({type(row[column]).__name__})"
    return ""
