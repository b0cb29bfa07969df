"""Answers in Python/SymPy notation (``-x**9 + 7*x**7 + 9*x**4/2 + C``) as LaTeX.

math-verify parses an answer as LaTeX inside ``\\boxed{...}``. LaTeX has no ``**``, so a gold
answer in SymPy notation parses to something else (``x**2 + 3*x`` became the number 3), and
wrong answers such as ``x**5 + 3*x`` were graded right while the right one in LaTeX,
``x^2 + 3x``, was graded wrong. An answer that uses ``**``, ``*`` between operands or a SymPy
function call and has no backslash (no LaTeX of its own) is rewritten first: ``a**b`` becomes
``a^{b}`` (a parenthesised exponent keeps its whole group), ``*`` becomes ``\\cdot``, and
``exp(u)``, ``sqrt(u)``, ``log(u)`` and the trigonometric functions their LaTeX forms, ``pi`` and
``oo`` ``\\pi`` and ``\\infty``. Only the text is rewritten: nothing is evaluated.
"""

from __future__ import annotations

import re

_FUNCTIONS = ("asin", "acos", "atan", "sin", "cos", "tan", "log", "ln", "exp", "sqrt")
_CALL = re.compile(r"\b(" + "|".join(_FUNCTIONS) + r")\(")
_PYTHON = re.compile(r"\*|\b(?:" + "|".join(_FUNCTIONS) + r")\(|\boo\b")
_OPERAND = re.compile(r"\s*[-+]?\s*[\w.]+")
_NAMES = re.compile(r"\b(pi|oo)\b")


def is_python_notation(answer: str) -> bool:
    """``answer`` is written in Python/SymPy notation rather than LaTeX."""
    return "\\" not in answer and _PYTHON.search(answer) is not None


def to_latex(answer: str) -> str:
    """``answer`` in LaTeX when :func:`is_python_notation`, else unchanged."""
    if not is_python_notation(answer):
        return answer
    return _rewrite(answer)


def _group_end(text: str, start: int) -> int:
    """The index after the parenthesis group that opens at ``text[start]`` (the text's end
    when it never closes)."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1
    return len(text)


def _rewrite(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        call = _CALL.match(text, i) if (i == 0 or not text[i - 1].isalnum()) else None
        if call is not None:
            end = _group_end(text, call.end() - 1)
            inner = _rewrite(text[call.end() : max(call.end(), end - 1)])
            name = call.group(1)
            if name == "exp":
                out.append(f"e^{{{inner}}}")
            elif name == "sqrt":
                out.append(f"\\sqrt{{{inner}}}")
            else:
                out.append(f"\\{name}({inner})")
            i = end
        elif text.startswith("**", i):
            start = i + 2
            if text[start : start + 1] == "(":
                end = _group_end(text, start)
                out.append(f"^{{{_rewrite(text[start + 1 : max(start + 1, end - 1)])}}}")
            else:
                match = _OPERAND.match(text, start)
                end = match.end() if match else start
                out.append(f"^{{{text[start:end].strip()}}}")
            i = end
        elif text[i] == "*":
            out.append(" \\cdot ")
            i += 1
        else:
            match = _NAMES.match(text, i) if (i == 0 or not text[i - 1].isalnum()) else None
            if match is not None:
                out.append("\\pi " if match.group(1) == "pi" else "\\infty ")
                i = match.end()
            else:
                out.append(text[i])
                i += 1
    return "".join(out)
