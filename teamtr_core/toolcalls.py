"""Tool-call normaliser: one canonical tool-call shape for every agent of a team (paper App. G.7).

The tool-call format is part of the shared team state, so whatever model holds a seat, its calls
are rewritten into one form before anyone reads them::

    <tool_call>{"arguments":{"order_id":"#W1"},"name":"cancel_order"}</tool_call>

(compact JSON, sorted keys, non-ASCII kept). :func:`parse_tool_calls` recognises, in any order:

1. Hermes / Qwen: ``<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>``; ``arguments``
   may be a JSON-encoded string: ``{"name": "f", "arguments": "{\\"x\\": 1}"}``.
2. Llama 3.x JSON: ``<|python_tag|>{"name": "f", "parameters": {"x": 1}}`` (tag optional).
3. OpenAI: ``{"type": "function", "function": {"name": "f", "arguments": "{\\"x\\": 1}"}}`` and
   ``{"tool_calls": [{"type": "function", "function": {...}}, ...]}``.
4. Mistral: ``[TOOL_CALLS] [{"name": "f", "arguments": {"x": 1}}, ...]``.
5. Fenced: ````` ```json\\n{"name": "f", "arguments": {"x": 1}}\\n``` ````` (any language tag).
6. A JSON list of such objects: ``[{"name": "f", "arguments": {}}, {"name": "g", ...}]``.

A bare object is a call only if it has ``arguments``/``parameters`` (or ``function`` /
``tool_calls``); right after ``<tool_call>``, ``<|python_tag|>``, ``[TOOL_CALLS]`` or
```` ```tool_call ```` any object is a call, and ``{"name": "f"}`` means no arguments. Valid JSON
that is not call-shaped is skipped whole (a call nested inside it does not count). JSON values are
delimited by bracket counting that respects strings and escapes, with memoised matches and a work
budget linear in ``max_chars``; malformed candidates become diagnostics, never exceptions. Only the
first ``max_chars`` characters are scanned: a call still open where they end is reported as too
long (naming the limit), not as unbalanced.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

CANONICAL_OPEN = "<tool_call>"
CANONICAL_CLOSE = "</tool_call>"
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
DEFAULT_MAX_CHARS = 100_000
MAX_DEPTH = 64  # nesting limit of arguments; candidates nested deeper are rejected unparsed
_BROKEN, _OPEN = -1, -2  # the end _match gives an unbalanced value / one still open at the end
_CANDIDATE_RE = re.compile(r'\{[ \t\r\n]*["}]|\[[ \t\r\n]*\{')
_OUT_RE = re.compile(r'[\[\]{}"\\]')
_IN_RE = re.compile(r'["\\]')
_WS_RE = re.compile(r"[ \t\r\n]*")
_LOOKS_RE = re.compile(r'"(?:name|arguments|parameters|function|tool_calls)"[ \t\r\n]*:')
_FENCE_LANG_RE = re.compile(r"[A-Za-z_-]*")
_LEFT_MARKERS = ("<|python_tag|>", "[TOOL_CALLS]")
_EXPLICIT = (CANONICAL_OPEN, *_LEFT_MARKERS, "```tool_call")
_CLOSER = {"{": "}", "[": "]"}
_DUMPS = json.JSONEncoder(
    sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
).encode


def _freeze(value: Any, depth: int = 0) -> Any:
    """A deep read-only copy of a JSON value (mappings -> MappingProxyType, lists -> tuples)."""
    if depth > MAX_DEPTH:
        raise ValueError(f"arguments nested deeper than {MAX_DEPTH}")
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("arguments contain a non-finite number")
        return value
    if isinstance(value, str):
        value.encode("utf-8")  # a lone surrogate raises UnicodeEncodeError (a ValueError)
        return value
    if isinstance(value, Mapping):
        if not all(isinstance(key, str) for key in value):
            raise TypeError("argument keys must be strings")
        return MappingProxyType({_freeze(k): _freeze(v, depth + 1) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v, depth + 1) for v in value)
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    return [_thaw(v) for v in value] if isinstance(value, tuple) else value


def _finite(text: str) -> float:
    number = float(text)  # also sees NaN / Infinity / -Infinity (parse_constant)
    if not math.isfinite(number):
        raise ValueError(f"non-finite number {text[:20]}")
    return number


_loads = json.JSONDecoder(parse_float=_finite, parse_constant=_finite).decode


@dataclass(frozen=True, eq=False)
class ToolCall:
    """One tool call, an immutable value.

    Attributes:
        name: the tool name, matching :data:`NAME_RE`.
        arguments: a JSON object, stored as a deep read-only copy (mappings become
            ``MappingProxyType``, lists become tuples); :meth:`arguments_dict` gives a plain copy.

    Equality and hashing follow the canonical JSON (:meth:`to_json`), so ``1`` and ``1.0`` differ.

    Raises:
        ValueError: if the name is invalid, or the arguments hold non-finite numbers, lone
            surrogates or nesting deeper than :data:`MAX_DEPTH`.
        TypeError: if ``arguments`` is not a mapping of JSON values with string keys.
    """

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    _json: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or NAME_RE.fullmatch(self.name) is None:
            raise ValueError(f"invalid tool name {self.name!r}")
        if not isinstance(self.arguments, Mapping):
            raise TypeError("arguments must be a mapping")
        frozen = _freeze(self.arguments)
        object.__setattr__(self, "arguments", frozen)
        object.__setattr__(self, "_json", _DUMPS({"name": self.name, "arguments": _thaw(frozen)}))

    def to_json(self) -> str:
        """The canonical compact JSON ``{"arguments":{...},"name":"..."}`` (sorted keys)."""
        return self._json

    def arguments_dict(self) -> dict[str, Any]:
        """A mutable deep copy of the arguments (plain dicts and lists)."""
        return dict(_thaw(self.arguments))

    def __eq__(self, other: object) -> bool:
        return self._json == other._json if isinstance(other, ToolCall) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._json)

    def __reduce__(self) -> tuple[type[ToolCall], tuple[str, dict[str, Any]]]:
        return (ToolCall, (self.name, self.arguments_dict()))  # mappingproxy does not pickle


def render_tool_call(call: ToolCall) -> str:
    """The canonical team rendering: ``<tool_call>`` + ``call.to_json()`` + ``</tool_call>``."""
    return CANONICAL_OPEN + call.to_json() + CANONICAL_CLOSE


class ToolCallParse(NamedTuple):
    """Result of :func:`parse_tool_calls_detailed`: valid calls in order, and diagnostics."""

    calls: list[ToolCall]
    errors: list[str]


class _Span(NamedTuple):
    start: int
    end: int
    calls: list[ToolCall]
    clean: bool  # every candidate in the span was a valid call


def _call_from(obj: dict[str, Any]) -> ToolCall | str:
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return "name is missing or not a string"
    if NAME_RE.fullmatch(name) is None:
        return f"invalid name {name[:40]!r}"
    args = obj["arguments"] if "arguments" in obj else obj.get("parameters", {})
    if isinstance(args, str):
        try:
            args = _loads(args)
        except (ValueError, RecursionError):
            return "arguments string is not valid JSON"
    if not isinstance(args, dict):
        return "arguments is not an object"
    try:
        return ToolCall(name, args)
    except (ValueError, TypeError, RecursionError) as exc:
        return f"arguments rejected: {exc}"


def _items(value: Any, explicit: bool) -> list[ToolCall | str] | None:
    """The candidates in a parsed JSON value (call or diagnostic each); None if not call-shaped."""
    if isinstance(value, list) or (
        isinstance(value, dict) and isinstance(value.get("tool_calls"), list)
    ):
        elements = value if isinstance(value, list) else value["tool_calls"]
        inner = explicit or isinstance(value, dict)
        found = [_items(v, inner) if isinstance(v, dict) else None for v in elements]
        if isinstance(value, list) and all(f is None for f in found):
            return None
        return [x for f in found for x in (f if f is not None else ["not a tool call"])]
    if not isinstance(value, dict):
        return None
    for key in ("function", "function_call"):
        if isinstance(value.get(key), dict):
            return [_call_from(value[key])]
    if explicit or "arguments" in value or "parameters" in value:
        return [_call_from(value)]
    return None


def _match(
    src: str, start: int, memo: dict[int, tuple[int, int]], budget: list[int]
) -> tuple[int, int] | None:
    """(end, depth) of the bracketed value opening at ``start``; end is :data:`_BROKEN` (-1) if
    it is unbalanced (a mismatched bracket or a backslash outside a string) and :data:`_OPEN`
    (-2) if it is still open where ``src`` ends (a value cut by the scan window). Every opener
    met outside a string is memoised (a fresh scan from it would behave identically) and known
    spans are jumped over. Scans that disagree on string state can only re-agree through a
    backslash outside a string, which ends them, so at most three scans cross any character.

    Returns:
        ``(end, depth)``, or None when the work budget ran out.
    """
    if start in memo:
        return memo[start]
    stack, pos, in_string, code = [[start, 1]], start + 1, False, _BROKEN
    while budget[0] >= 0:
        found = (_IN_RE if in_string else _OUT_RE).search(src, pos)
        if found is None:
            code = _OPEN
            break
        p = found.start()
        char, budget[0], pos = src[p], budget[0] - (p + 1 - pos), p + 1
        if in_string:
            pos, in_string = (pos + 1, True) if char == "\\" else (pos, False)
        elif char == '"':
            in_string = True
        elif char == "\\":  # illegal outside a string: not JSON
            break
        elif char in "{[":
            if (known := memo.get(p)) is None:
                stack.append([p, 1])
            elif known[0] < 0:  # the same scan from here on: it ends the same way
                code = known[0]
                break
            else:
                stack[-1][1], pos = max(stack[-1][1], known[1] + 1), known[0]
        elif _CLOSER[src[stack[-1][0]]] != char:
            break
        else:
            opener, depth = stack.pop()
            memo[opener] = (p + 1, depth)
            if not stack:
                return memo[opener]
            stack[-1][1] = max(stack[-1][1], depth + 1)
    else:
        return None
    for opener, _ in stack:
        memo[opener] = (code, 0)
    return (code, 0)


def _ws_left(src: str, pos: int, lo: int) -> int:
    while pos > lo and src[pos - 1] in " \t\r\n":
        pos -= 1
    return pos


def _ws_right(src: str, pos: int) -> int:
    found = _WS_RE.match(src, pos)
    return found.end() if found else pos


def _extend(src: str, start: int, end: int, lo: int) -> tuple[int, int]:
    """Widen a JSON span over the markup around it (tags, python tag, [TOOL_CALLS], fences)."""
    while True:
        left, right = _ws_left(src, start, lo), _ws_right(src, end)
        opened = src.endswith(CANONICAL_OPEN, lo, left)
        closed = src.startswith(CANONICAL_CLOSE, right)
        marker = next((m for m in _LEFT_MARKERS if src.endswith(m, lo, left)), "")
        fence = src.rfind("```", max(lo, left - 40), left)
        if opened or closed:  # the tags pair up, but a lone one is markup too
            start = left - len(CANONICAL_OPEN) if opened else start
            end = right + len(CANONICAL_CLOSE) if closed else end
        elif marker:
            start = left - len(marker)
        elif (
            fence >= 0
            and _FENCE_LANG_RE.fullmatch(src, fence + 3, left)
            and src.startswith("```", right)
        ):
            start, end = fence, right + 3
        else:
            return start, end


def _scan(text: str, max_chars: int) -> tuple[list[ToolCall], list[str], list[_Span]]:
    src = text[:max_chars]
    calls: list[ToolCall] = []
    errors = [f"text truncated to max_chars={max_chars}"] if len(text) > max_chars else []
    spans: list[_Span] = []
    memo: dict[int, tuple[int, int]] = {}
    budget = [8 * len(src) + 4096]  # characters of bracket scanning and JSON decoding, in all
    pos = prev = count = 0
    while (candidate := _CANDIDATE_RE.search(src, pos)) is not None:
        start = candidate.start()
        hit = memo.get(start) or _match(src, start, memo, budget)
        if hit is None or budget[0] < 0:
            errors.append(f"scan budget exhausted at character {start}; rest not scanned")
            break
        end, depth = hit
        explicit = src.endswith(_EXPLICIT, prev, _ws_left(src, start, prev))
        problem, items, pos = "", None, end  # valid JSON that is not call-shaped: skip it whole
        if end == _OPEN and len(text) > max_chars:
            problem = f"too long: runs past the {max_chars}-character scan window (max_chars)"
            pos = start + 1
        elif end < 0:
            problem, pos = "unbalanced JSON", start + 1
        elif depth > MAX_DEPTH + 8:
            problem = "JSON nested too deeply"
        else:
            budget[0] -= end - start
            try:
                items = _items(_loads(src[start:end]), explicit)
            except (ValueError, RecursionError):
                problem, pos = "invalid JSON", start + 1  # calls may still be inside it
        if items is None:
            stop = min(end if end > 0 else len(src), start + 256)
            if problem and (explicit or _LOOKS_RE.search(src, start, stop)):
                count += 1
                errors.append(f"tool_call {count}: {problem}")
            continue
        good = [item for item in items if isinstance(item, ToolCall)]
        for item in items:
            count += 1
            if isinstance(item, str):
                errors.append(f"tool_call {count}: {item}")
        calls.extend(good)
        lo, hi = _extend(src, start, end, prev)
        spans.append(_Span(lo, hi, good, bool(good) and len(good) == len(items)))
        pos = prev = hi
    return calls, errors, spans


def parse_tool_calls_detailed(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> ToolCallParse:
    """All tool calls in a message, in order, plus one diagnostic per malformed candidate.

    Args:
        text: a model's message.
        max_chars: only ``text[:max_chars]`` is scanned (work is linear in it).

    Returns:
        ``(calls, errors)``; errors read like ``"tool_call 2: arguments is not an object"``, or
        ``"tool_call 1: too long: runs past the 100000-character scan window (max_chars)"`` for
        a call cut by ``max_chars``.
    """
    calls, errors, _ = _scan(text, max_chars)
    return ToolCallParse(calls, errors)


def parse_tool_calls(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> list[ToolCall]:
    """The valid tool calls in a message, in order (see :func:`parse_tool_calls_detailed`)."""
    return _scan(text, max_chars)[0]


def canonicalize_tool_calls(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> tuple[str, int]:
    """Rewrite every recognised tool call in place into :func:`render_tool_call` form.

    Surrounding prose is kept; the call's own markup (tags, ``[TOOL_CALLS]``, fences) is replaced.
    A span holding any malformed candidate (e.g. a Mistral list with one bad call) is left
    verbatim. Idempotent for texts within ``max_chars``.

    Args:
        text: a model's message.
        max_chars: only ``text[:max_chars]`` is scanned; the rest is kept as is.

    Returns:
        The new text (``text`` itself when nothing changed) and the number of calls now in
        canonical form (already-canonical calls count too).
    """
    parts, last, count = [], 0, 0
    for span in _scan(text, max_chars)[2]:
        if span.clean:
            parts += [text[last : span.start], "\n".join(map(render_tool_call, span.calls))]
            last, count = span.end, count + len(span.calls)
    if not count:
        return text, 0
    out = "".join([*parts, text[last:]])
    return (text if out == text else out), count
