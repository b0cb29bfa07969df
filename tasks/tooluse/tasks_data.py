"""Tool-use tasks: the record format, the shipped tasks, and loaders for tau-bench task files.

A task is tau-bench's record::

    {"user_id": "ada_park_1001",
     "instruction": "You are Ada Park ... (what the simulated user wants)",
     "actions": [{"name": "cancel_pending_order", "kwargs": {"order_id": "#W5001001", ...}}, ...],
     "outputs": ["200.75"]}

``actions`` are the gold tool calls (replayed to get the goal database), ``outputs`` the strings the
team must tell the user. Accepted files (:func:`load_task_file`):

* a JSON list of such records (``.json``), or one record per line (``.jsonl``);
* tau-bench's Python task modules (``tasks_test.py``: ``TASKS = [Task(user_id=..., actions=
  [Action(name=..., kwargs={...})], ...)]``), read with :mod:`ast` -- only ``Task(...)`` /
  ``Action(...)`` calls with literal arguments are accepted, nothing is executed;
* the project's JSONL (:func:`tasks.base.save_problems` of these tasks' problems).

Gold ``respond`` actions are dropped (they change nothing in the database). Tasks whose actions
name tools this domain lacks are reported, and skipped or refused (``unsupported``).
"""

from __future__ import annotations

import ast
import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from tasks.base import Problem, Split, load_problems
from tasks.data_files import JsonRow, JsonRows, read_json_rows
from tasks.tooluse.tools import RESPOND, TERMINAL_TOOL_NAMES, TOOL_NAMES, WRITE_TOOL_NAMES
from teamtr_core.errors import ConfigError

MAX_TASK_FILE_BYTES = 32 * 1024 * 1024
Unsupported = Literal["skip", "error"]


class UnsupportedToolsWarning(UserWarning):
    """Some tasks of a file use tools this domain does not have; they were skipped."""


@dataclass(frozen=True)
class Action:
    """One gold tool call."""

    name: str
    kwargs: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kwargs": json.loads(json.dumps(dict(self.kwargs)))}


@dataclass(frozen=True)
class ToolTask:
    """One task: who the user is, what they want, the gold actions and the required outputs."""

    id: str
    user_id: str
    instruction: str
    actions: tuple[Action, ...]
    outputs: tuple[str, ...]

    def to_record(self) -> dict[str, Any]:
        """The tau-bench record (without the id)."""
        return {
            "user_id": self.user_id,
            "instruction": self.instruction,
            "actions": [a.to_dict() for a in self.actions],
            "outputs": list(self.outputs),
        }

    def category(self) -> str:
        """The first gold action that changes something (``"cancel_pending_order"``,
        ``"transfer_to_human_agents"``, ...), or ``"information"``: a breakdown key."""
        for action in self.actions:
            if action.name in WRITE_TOOL_NAMES or action.name in TERMINAL_TOOL_NAMES:
                return action.name
        return "information"

    def to_problem(self, split: Split, source: str) -> Problem:
        """The task as a project :class:`Problem` (gold actions and outputs in ``answer``)."""
        record = self.to_record()
        names = [a.name for a in self.actions]
        return Problem(
            id=self.id,
            data={"user_id": self.user_id, "instruction": self.instruction},
            answer={"actions": record["actions"], "outputs": record["outputs"]},
            split=split,
            meta={
                "source": source,
                "category": self.category(),
                "n_actions": len(names),
                "has_outputs": bool(self.outputs),
            },
        )

    @classmethod
    def from_problem(cls, problem: Problem) -> ToolTask:
        """Rebuilds the task from :meth:`to_problem`'s output.

        Raises:
            ValueError: listing what is malformed.
        """
        answer = problem.answer if isinstance(problem.answer, Mapping) else {}
        record = {**dict(problem.data), **dict(answer)}
        task = parse_record(record, problem.id)
        if isinstance(task, list):
            raise ValueError(f"problem {problem.id!r}: " + "; ".join(task))
        return task


def parse_record(record: object, task_id: str) -> ToolTask | list[str]:
    """A :class:`ToolTask` from a tau-bench record, or the list of everything wrong with it."""
    if not isinstance(record, Mapping):
        return [f"expected a JSON object, got {type(record).__name__}"]
    errors = []
    user_id, instruction = record.get("user_id"), record.get("instruction")
    if not isinstance(user_id, str):
        errors.append(f"user_id: expected a string, got {user_id!r:.60}")
    if not isinstance(instruction, str) or not instruction.strip():
        errors.append("instruction: expected a non-empty string")
    raw_actions, outputs = record.get("actions"), record.get("outputs", [])
    actions: list[Action] = []
    if not isinstance(raw_actions, list):
        errors.append("actions: expected a list of {name, kwargs}")
        raw_actions = []
    for i, raw in enumerate(raw_actions):
        name = raw.get("name") if isinstance(raw, Mapping) else None
        kwargs = raw.get("kwargs", raw.get("arguments", {})) if isinstance(raw, Mapping) else None
        if not isinstance(name, str) or not isinstance(kwargs, Mapping):
            errors.append(f"actions[{i}]: expected {{'name': str, 'kwargs': object}}")
        elif name != RESPOND:  # a gold reply to the user changes nothing in the database
            actions.append(Action(name, dict(kwargs)))
    if not isinstance(outputs, list) or not all(isinstance(o, str) for o in outputs):
        errors.append("outputs: expected a list of strings")
        outputs = []
    if errors:
        return errors
    assert isinstance(user_id, str) and isinstance(instruction, str)
    return ToolTask(task_id, user_id, instruction, tuple(actions), tuple(outputs))


def unsupported_tools(task: ToolTask) -> list[str]:
    """The tools a task's gold actions use that this domain lacks (sorted)."""
    return sorted({a.name for a in task.actions} - TOOL_NAMES)


def builtin_tasks() -> list[ToolTask]:
    """The 12 tasks shipped with the package (``tasks/tooluse/data/tasks.json``)."""
    resource = resources.files("tasks.tooluse").joinpath("data").joinpath("tasks.json")
    with resources.as_file(resource) as path:
        read = read_json_rows(path, layout="array", objects=False, expected=EXPECTED)
    return _records_to_tasks(read, "builtin")


EXPECTED = "tau-bench task records: one JSON list of them, or one JSON object per line"


def _records_to_tasks(read: JsonRows, prefix: str) -> list[ToolTask]:
    """The tasks of tau-bench records (task ``i`` is ``tooluse:<prefix>-<i>``).

    Raises:
        ConfigError: (a ``ValueError``) listing every bad line of ``read`` and everything wrong
            with each record, each as ``file:line: ...``, the first 50 and a count of the rest.
    """
    tasks = []
    for i, row in enumerate(read.rows):
        parsed = parse_record(row.value, f"tooluse:{prefix}-{i:03d}")
        if isinstance(parsed, list):
            for problem in parsed:
                read.add(row, problem)
        else:
            tasks.append(parsed)
    if read.bad:
        raise ConfigError(f"data file {read.path}", read.errors())
    return tasks


def load_task_file(
    path: str | Path, *, split: Split = "test", unsupported: Unsupported = "skip"
) -> list[Problem]:
    """Problems from a tau-bench task file (JSON, JSONL, Python literal) or the project's JSONL.

    Args:
        path: the file.
        split: the split of tasks read from tau-bench files (project JSONL keeps its own).
        unsupported: ``"skip"`` tasks that use tools this domain lacks (with an
            :class:`UnsupportedToolsWarning` naming them) or ``"error"`` (raise).

    Raises:
        ConfigError: (a ``ValueError``) listing every bad line or record at once, each as
            ``file:line: ...`` (not JSON, not a record, a record's every malformed field; in the
            project's JSONL also a duplicate id), the first 50 and a count of the rest.
        ValueError: a file that is neither JSON nor a Python task module, or (listing them) the
            tasks that use unsupported tools when ``unsupported="error"``.
    """
    path = Path(path)
    if path.stat().st_size > MAX_TASK_FILE_BYTES:
        raise ValueError(f"{path}: larger than {MAX_TASK_FILE_BYTES} bytes; refused.")
    data = path.read_bytes()
    text = data.decode("utf-8", errors="replace")  # strictly decoded below, line by line for JSON
    stripped = text.lstrip()
    prefix = path.stem
    if path.suffix == ".py" or not stripped.startswith(("[", "{")):
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            raise ValueError(
                f"{path}:{line}: not UTF-8 text (byte {data[exc.start]:#04x}); expected a "
                "tau-bench task file (JSON, JSONL or a Python task module)."
            ) from exc
        tasks = _records_to_tasks(_python_records(text, path), prefix)
    else:
        read = read_json_rows(path, layout="array", objects=False, expected=EXPECTED)
        first = read.rows[0] if read.rows else None
        if (
            first is not None
            and first.item is None
            and isinstance(first.value, dict)
            and "data" in first.value
            and "id" in first.value
        ):
            return _checked(_project_jsonl(path), path, unsupported)
        tasks = _records_to_tasks(read, prefix)
    problems = [t.to_problem(split, f"file:{path.name}") for t in tasks]
    return _checked(problems, path, unsupported)


def _project_jsonl(path: Path) -> list[Problem]:
    return load_problems(path, check=_row_errors)


def _row_errors(problem: Problem) -> list[str]:
    """Why a project-JSONL row is not a tool-use task (empty: it is one)."""
    try:
        ToolTask.from_problem(problem)
    except ValueError as exc:
        return [str(exc).removeprefix(f"problem {problem.id!r}: ")]
    return []


def _checked(problems: list[Problem], path: Path, unsupported: Unsupported) -> list[Problem]:
    kept, skipped = [], []
    for problem in problems:
        missing = unsupported_tools(ToolTask.from_problem(problem))
        if missing:
            skipped.append(f"{problem.id} (uses {', '.join(missing)})")
        else:
            kept.append(problem)
    if skipped:
        message = (
            f"{path}: {len(skipped)} of {len(problems)} task(s) use tools the ToolUse retail "
            f"domain lacks (it has: {', '.join(sorted(TOOL_NAMES))}): "
            + "; ".join(skipped[:10])
            + (f"; ... and {len(skipped) - 10} more" if len(skipped) > 10 else "")
        )
        if unsupported == "error":
            raise ValueError(message)
        warnings.warn(message + ". They were skipped.", UnsupportedToolsWarning, stacklevel=3)
    if not kept:
        raise ValueError(
            f"{path}: no usable task (every one uses unsupported tools or none found)."
        )
    return kept


# -- tau-bench's Python task modules, read without executing them ------------------------------
_CALLS = {"Task", "Action"}


def _python_records(text: str, path: Path) -> JsonRows:
    """Every ``Task(...)`` of the module's list literals, as records (each located by its line);
    a ``Task(...)`` with anything but literal keyword arguments is a bad line."""
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        at = f":{exc.lineno}" if exc.lineno else ""
        raise ValueError(f"{path}{at}: neither JSON nor a Python task module ({exc.msg}).") from exc
    except (RecursionError, MemoryError, ValueError) as exc:
        raise ValueError(
            f"{path}: cannot be parsed as a Python task module ({exc!r:.80})."
        ) from exc
    read = JsonRows(str(path))
    found = 0
    try:
        for node in ast.walk(tree):
            if isinstance(node, ast.List):
                for element in node.elts:
                    if _call_name(element) == "Task":
                        found += 1
                        line = element.lineno
                        try:
                            record = _literal(element, path)
                        except ValueError as exc:
                            read.bad.append((line, str(exc)))
                            continue
                        read.rows.append(JsonRow(f"{path}:{line}: Task {found}", line, record))
    except RecursionError as exc:
        raise ValueError(f"{path}: task literals nested too deeply.") from exc
    if not found:
        raise ValueError(f"{path}: no Task(...) entries found (expected tau-bench's format).")
    return read


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return func.id
        if isinstance(func, ast.Attribute):
            return func.attr
    return None


def _literal(node: ast.AST, path: Path) -> Any:
    name = _call_name(node)
    if name is not None:
        assert isinstance(node, ast.Call)
        if name not in _CALLS or node.args or any(kw.arg is None for kw in node.keywords):
            raise ValueError(
                f"{path}:{node.lineno}: only Task(...) and Action(...) with keyword arguments "
                f"are accepted, got {name}(...)."
            )
        return {str(kw.arg): _literal(kw.value, path) for kw in node.keywords}
    if isinstance(node, ast.List):
        return [_literal(e, path) for e in node.elts]
    if isinstance(node, ast.Dict):
        keys = [k for k in node.keys if k is not None]
        if len(keys) == len(node.values):  # no ``**mapping`` entries
            return {_literal(k, path): _literal(v, path) for k, v in zip(keys, node.values)}
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError) as exc:
        line = getattr(node, "lineno", "?")
        raise ValueError(f"{path}:{line}: not a literal value ({exc}).") from exc


def problems_from_tasks(tasks: Sequence[ToolTask], split: Split, source: str) -> list[Problem]:
    """Problems for a list of tasks."""
    return [t.to_problem(split, source) for t in tasks]
