"""Reading the rows of a task's data file, every bad line collected and reported at once.

:func:`read_json_rows` reads a file of JSON lines, one JSON array of rows or one JSON document
(:data:`JsonLayout`) into :class:`JsonRows`: the rows, each located by its file and line
(:class:`JsonRow`), and every line that could not be read. A loader checks each row, adds what is
wrong with it, and raises one error listing every bad line (:func:`listed`: the first
:data:`MAX_LISTED_ROWS` and a count of the rest); :func:`repeated_id` words a repeated problem id.
Only ``json`` reads a file's content; nothing in it is evaluated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from teamtr_core.errors import more_line

MAX_LISTED_ROWS = 50
"""A problem file's error lists its first 50 bad lines (and says how many more there are)."""


def listed(errors: Sequence[str], limit: int = MAX_LISTED_ROWS) -> list[str]:
    """The first ``limit`` lines of ``errors`` and, when there are more, a line counting them."""
    if len(errors) <= limit:
        return list(errors)
    return [*errors[:limit], more_line(len(errors) - limit, limit)]


class _HasId(Protocol):
    """What :meth:`JsonRows.keep` needs of a problem: its id (``tasks.base.Problem``)."""

    @property
    def id(self) -> str: ...


_P = TypeVar("_P", bound=_HasId)


@dataclass(frozen=True)
class JsonRow:
    """One JSON value read from a data file by :func:`read_json_rows`.

    Attributes:
        where: its place for messages: ``"file:line"``, or ``"file:line: item N"`` for the N-th
            (1-based) item of a JSON array (the line it starts on).
        line: the line it starts on (1-based).
        value: the parsed JSON value.
        text: its source text (the line without its newline, or the array item), for quoting.
        item: its 1-based position among the rows of a file that is one JSON document (an
            array's items; a single value is item 1); ``None`` for a line of JSON lines.
    """

    where: str
    line: int
    value: Any
    text: str = ""
    item: int | None = None


@dataclass
class JsonRows:
    """What :func:`read_json_rows` read: the rows, and the bad lines found so far.

    A loader checks each row, adds what is wrong with it (:meth:`add`), and when anything is
    wrong raises one error listing :meth:`errors`: every bad line of the file, in line order,
    the first :data:`MAX_LISTED_ROWS` of them and a count of the rest.

    Attributes:
        path: the file.
        rows: the rows read, in file order.
        bad: ``(line, message)`` of every bad line (line 0: the file as a whole).
    """

    path: str
    rows: list[JsonRow] = field(default_factory=list)
    bad: list[tuple[int, str]] = field(default_factory=list)
    first_line: dict[str, int] = field(default_factory=dict)

    def add(self, row: JsonRow, message: str) -> None:
        """Records ``"<row.where>: <message>"`` as a bad line."""
        self.bad.append((row.line, f"{row.where}: {message}"))

    def keep(self, row: JsonRow, problem: _P, kept: list[_P]) -> bool:
        """Appends ``problem`` to ``kept`` and returns ``True``, or records ``row`` as bad and
        returns ``False`` when its id repeats an earlier row's (:func:`repeated_id`)."""
        repeat = repeated_id(self.first_line, problem.id, row.line)
        if repeat is not None:
            self.add(row, repeat)
            return False
        kept.append(problem)
        return True

    def errors(self, limit: int = MAX_LISTED_ROWS) -> list[str]:
        """Every bad line, in line order (one line's messages in the order added), capped with
        :func:`listed`."""
        return listed([message for _, message in sorted(self.bad, key=lambda b: b[0])], limit)


JsonLayout = Literal["lines", "array", "document"]
"""How :func:`read_json_rows` reads a file: ``"lines"``: one JSON value per line (JSONL);
``"array"``: a file that starts with ``[`` is one JSON array of rows, any other is JSONL;
``"document"``: a file that is one JSON document is an array of rows (or, any other value, one
row), any other is JSONL."""

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _skip_space(text: str, pos: int) -> int:
    match = _WHITESPACE.match(text, pos)
    return match.end() if match else pos


def read_json_rows(
    path: str | Path,
    *,
    layout: JsonLayout = "lines",
    objects: bool = True,
    expected: str = "one JSON object per line",
) -> JsonRows:
    """Reads the JSON rows of a data file, collecting every line that cannot be read.

    Blank lines are skipped. A line that is not UTF-8, not JSON, or (with ``objects``) not a JSON
    object is a bad line, reported as ``file:line: ...`` with ``expected`` as the hint; the other
    lines are rows. A JSON array that does not parse (``layout="array"``) is one bad line, where
    it breaks. Only ``json`` reads the content; nothing in it is evaluated.

    Raises:
        OSError: the file cannot be read.
    """
    data = Path(path).read_bytes()
    read = JsonRows(str(path))
    whole = None if layout == "lines" else _read_as_document(read, data, layout, expected)
    if whole is False:  # a broken document: its one bad line, no rows
        return read
    if whole is None:
        _read_lines(read, data, expected)
    return _objects_only(read) if objects else read


def _read_as_document(
    read: JsonRows, data: bytes, layout: JsonLayout, expected: str
) -> bool | None:
    """Reads ``data`` as one JSON document when ``layout`` takes it for one: ``True`` when it was
    (its rows, or the one bad line of a broken array, added), ``False`` when it is a broken
    document (its one bad line added), ``None`` when the file is JSON lines after all."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if layout == "array" and data.lstrip().startswith(b"["):  # one document: one error
            at = data.count(b"\n", 0, exc.start) + 1
            column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
            read.bad.append(
                (
                    at,
                    f"{read.path}:{at}: not UTF-8 text (byte {data[exc.start]:#04x} at column "
                    f"{column}); expected {expected}",
                )
            )
            return False
        return None  # JSON lines: reported line by line
    start = _skip_space(text, 0)
    if layout == "array" and text.startswith("[", start):
        _read_array(read, text, start, expected)
        return True
    if layout == "document" and start < len(text):
        return _read_document(read, text, start, expected)
    return None


def _read_document(read: JsonRows, text: str, start: int, expected: str) -> bool | None:
    """Adds the rows of ``text`` when it is one JSON document (an array: its items; any other
    value: one row) and returns ``True``; ``False`` when it is a broken document (its one bad
    line added); ``None`` when it is not one document (JSON lines)."""
    try:
        whole = json.loads(text)
    except json.JSONDecodeError as exc:
        if _opens_a_document(text, start):  # a broken document, not JSON lines
            read.bad.append((exc.lineno, _not_json(read.path, exc, expected)))
            return False
        return None
    except RecursionError:
        return None
    if isinstance(whole, list):
        _read_array(read, text, start, expected)
    else:
        at = text.count("\n", 0, start) + 1
        read.rows.append(JsonRow(f"{read.path}:{at}", at, whole, text.strip(), 1))
    return True


def _read_lines(read: JsonRows, data: bytes, expected: str) -> None:
    """Adds every non-blank line of ``data`` (JSON lines) to ``read.rows``, or, when it is not
    UTF-8 or not JSON, to ``read.bad``."""
    path = read.path
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        try:
            line = raw.decode("utf-8").removesuffix("\r")
        except UnicodeDecodeError as exc:
            read.bad.append(
                (
                    lineno,
                    f"{path}:{lineno}: not UTF-8 text (byte {raw[exc.start]:#04x} at column "
                    f"{exc.start + 1}); expected {expected}",
                )
            )
            continue
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            read.bad.append(
                (
                    lineno,
                    f"{path}:{lineno}: not valid JSON ({exc.msg} at column {exc.colno}); "
                    f"expected {expected}, got {line[:80]!r}",
                )
            )
            continue
        except RecursionError:
            read.bad.append(
                (lineno, f"{path}:{lineno}: JSON nested too deeply; expected {expected}")
            )
            continue
        read.rows.append(JsonRow(f"{path}:{lineno}", lineno, value, line))


def _not_json(path: str | Path, exc: json.JSONDecodeError, expected: str) -> str:
    return (
        f"{path}:{exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno}); expected "
        f"{expected}"
    )


def _opens_a_document(text: str, start: int) -> bool:
    """Whether the first non-blank line of ``text`` is the unfinished start of a JSON document
    spread over several lines (``[``, ``{"a": 1,``), rather than a line of JSON lines."""
    end = text.find("\n", start)
    first = text[start : end if end >= 0 else len(text)].rstrip()
    try:
        json.loads(first)
    except json.JSONDecodeError as exc:
        return exc.pos >= len(first)  # the line ran out before the value was complete
    except RecursionError:
        return False
    return False


def _read_array(read: JsonRows, text: str, start: int, expected: str) -> None:
    """Adds the items of ``text``, one JSON array starting at ``start``, to ``read.rows``, each
    located by the line it starts on; an array that does not parse is one bad line."""
    items: list[JsonRow] = []
    line, counted = 1, 0  # the line of text[counted]
    try:
        pos = _skip_space(text, start + 1)
        if text.startswith("]", pos):
            pos += 1
        else:
            while True:
                value, end = _DECODER.raw_decode(text, pos)
                line += text.count("\n", counted, pos)
                counted = pos
                item = len(items) + 1
                where = f"{read.path}:{line}: item {item}"
                items.append(JsonRow(where, line, value, text[pos:end], item))
                pos = _skip_space(text, end)
                if text.startswith("]", pos):
                    pos += 1
                    break
                if not text.startswith(",", pos):
                    raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
                pos = _skip_space(text, pos + 1)
        rest = _skip_space(text, pos)
        if rest != len(text):
            raise json.JSONDecodeError("Extra data", text, rest)
    except json.JSONDecodeError as exc:
        read.bad.append(
            (
                exc.lineno,
                f"{read.path}:{exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno}) in "
                f"the file's JSON list of rows; expected {expected}",
            )
        )
        return
    except RecursionError:
        read.bad.append((0, f"{read.path}: JSON nested too deeply; expected {expected}"))
        return
    read.rows += items


def _objects_only(read: JsonRows) -> JsonRows:
    """Moves the rows that are not JSON objects to the bad lines."""
    rows = []
    for row in read.rows:
        if isinstance(row.value, dict):
            rows.append(row)
        else:
            read.add(
                row, f"expected a JSON object, got {type(row.value).__name__}: {row.text[:80]!r}"
            )
    read.rows = rows
    return read


def repeated_id(first: dict[str, int], problem_id: str, line: int) -> str | None:
    """``None`` when ``problem_id`` is new (recorded as first seen on ``line``), else the message
    for a repeat: ``duplicate id 'x' (first on line 3); ...`` (a repeated problem is not an
    independent one)."""
    if problem_id not in first:
        first[problem_id] = line
        return None
    return (
        f"duplicate id {problem_id!r} (first on line {first[problem_id]}); a repeated problem "
        "is not an independent one: remove or rename it"
    )
