"""Pure rules that find the final answer in a model's text (no sympy, no math-verify).

The rules, in order (documented in ``docs/tasks/math.md``):

1. Think format (only when required): the graded text is what follows the LAST ``</think>``; a
   text without ``</think>`` is a format failure.
2. The LAST ``\\boxed{...}`` or ``\\fbox{...}`` of the graded text, its braces matched by counting
   (escaped ``\\{`` and ``\\}`` do not count). If that last box never closes (a truncated reply),
   there is no answer: an earlier box is an intermediate result, not the final one.
3. Without any box: the ``Answer:`` last-line rule. The last non-blank line must start, after
   optional Markdown markers (``*``, ``_``, ``#``, ``>``), with ``Answer`` or ``Final answer``
   (any case), optional ``*``/``_``, then ``:``; the rest of the line is the answer, with
   surrounding Markdown markers, one pair of math delimiters (``$..$``, ``$$..$$``, ``\\(..\\)``,
   ``\\[..\\]``) and one trailing period removed.

Every regular expression has bounded repetitions, and the scans are linear in the text length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

THINK_CLOSE = "</think>"
BOX_COMMANDS = ("\\boxed", "\\fbox")

How = Literal["boxed", "fbox", "answer_line", "none"]

_BOX_START = re.compile(r"\\(boxed|fbox)(?![A-Za-z])[ \t]{0,3}\{")
_ANSWER_LINE = re.compile(
    r"[*_#> \t]{0,12}(?:final[ \t]{1,3})?answer[ \t*_]{0,6}[:\uff1a](.*)", re.IGNORECASE
)
_DELIMITERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))


@dataclass(frozen=True)
class Extraction:
    """Where the final answer was found.

    Attributes:
        answer: the answer's LaTeX (the inside of the box, or the rest of the ``Answer:`` line),
            stripped; ``None`` if there is none.
        how: ``"boxed"``, ``"fbox"``, ``"answer_line"`` or ``"none"``.
        reason: why there is no answer (``"no_answer"``, ``"unbalanced_box"``,
            ``"empty_box"``, ``"missing_think_close"``), empty when there is one.
    """

    answer: str | None
    how: How
    reason: str = ""


def after_think(text: str) -> str | None:
    """The text after the last ``</think>`` (``None`` if the tag is missing)."""
    cut = text.rfind(THINK_CLOSE)
    return None if cut < 0 else text[cut + len(THINK_CLOSE) :]


def matching_brace(text: str, open_at: int) -> int | None:
    """Index of the ``}`` closing the ``{`` at ``open_at``, by brace counting.

    A backslash escapes the next character, so ``\\{`` and ``\\}`` are not counted (and ``\\\\``
    is a LaTeX line break, after which a ``{`` counts again). Returns ``None`` if it never closes.
    """
    depth = 0
    i = open_at
    n = len(text)
    while i < n:
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def last_boxed(text: str) -> Extraction:
    """The content of the last ``\\boxed{...}`` / ``\\fbox{...}`` (see the module docstring)."""
    last = None
    for match in _BOX_START.finditer(text):
        last = match
    if last is None:
        return Extraction(None, "none", "no_answer")
    how: How = "boxed" if last.group(1) == "boxed" else "fbox"
    close = matching_brace(text, last.end() - 1)
    if close is None:
        return Extraction(None, how, "unbalanced_box")
    answer = text[last.end() : close].strip()
    return Extraction(answer, how) if answer else Extraction(None, how, "empty_box")


def answer_line(text: str) -> Extraction:
    """The ``Answer:`` last-line rule (see the module docstring)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return Extraction(None, "none", "no_answer")
    match = _ANSWER_LINE.fullmatch(lines[-1])
    if match is None:
        return Extraction(None, "none", "no_answer")
    answer = match.group(1).strip().strip("*_").strip()
    for left, right in _DELIMITERS:
        if len(answer) >= len(left) + len(right) and answer.startswith(left):
            end = answer.rfind(right)
            if end >= len(left):
                tail = answer[end + len(right) :].strip()
                if tail in ("", "."):
                    answer = answer[len(left) : end].strip()
                    break
    if answer.endswith("."):
        answer = answer[:-1].rstrip()
    if not answer:
        return Extraction(None, "none", "no_answer")
    return Extraction(answer, "answer_line")


def extract_answer(text: str, *, require_think_format: bool = False) -> Extraction:
    """Finds the final answer in ``text`` by the rules of the module docstring."""
    if require_think_format:
        graded = after_think(text)
        if graded is None:
            return Extraction(None, "none", "missing_think_close")
        text = graded
    boxed = last_boxed(text)
    if boxed.how != "none":
        return boxed
    return answer_line(text)
