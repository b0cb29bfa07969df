"""Grading a model's text against a gold LaTeX answer: extraction, then math-verify.

Steps (documented in ``docs/tasks/math.md``):

1. :func:`tasks.math.extract.extract_answer` finds the answer (think format, last box, ``Answer:``
   last line).
2. An answer longer than ``max_answer_chars`` is not parsed at all (``"answer_too_long"``).
3. math-verify decides, in a worker process with a hard deadline
   (:mod:`tasks.math.verifier`): ``verify(parse(gold), parse(pred))``, gold first.

Model text never reaches ``eval``, ``exec`` or ``sympify``: math-verify's LaTeX/expression parser
is the only path from text to sympy.
"""

from __future__ import annotations

from typing import Any

from tasks.base import Score, grader_failure
from tasks.math.extract import extract_answer
from tasks.math.verifier import VerifierPool, default_pool

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MAX_ANSWER_CHARS = 1000
_SNIPPET = 200  # characters of the raw answer kept in Score.details


def _squash(text: str) -> str:
    return "".join(text.split())


def grade_answer(
    gold: str,
    text: str,
    *,
    require_think_format: bool = False,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS,
    pool: VerifierPool | None = None,
) -> Score:
    """Grades ``text`` against the ``gold`` LaTeX answer. Never raises on any ``text``.

    Returns:
        A :class:`~tasks.base.Score` (reward 1.0 iff correct). ``answer`` is the parsed
        prediction as math-verify prints it (so ``\\dfrac{28}{6}`` and ``\\frac{14}{3}`` vote
        together) or the raw extracted answer when it was not parsed. ``details["reason"]`` is
        ``"correct"``, ``"wrong_answer"``, ``"unparseable_answer"``, ``"timeout"``,
        ``"verifier_error"``, ``"answer_too_long"``, ``"invalid_gold"``, or an extraction reason
        (``"no_answer"``, ``"unbalanced_box"``, ``"empty_box"``, ``"missing_think_close"``).
        ``timeout``, ``verifier_error`` and ``invalid_gold`` are the grader's own failures
        (``details["grader_failed"]``, :func:`tasks.base.grader_failure`).
    """
    found = extract_answer(text, require_think_format=require_think_format)
    if found.answer is None:
        details: dict[str, Any] = {"reason": found.reason, "extraction": found.how}
        if found.reason == "missing_think_close":
            details["format_error"] = True
        return Score(0.0, False, None, details)
    answer = found.answer
    details = {"extraction": found.how, "raw": answer[:_SNIPPET]}
    if len(answer) > max_answer_chars:
        details.update(reason="answer_too_long", chars=len(answer))
        return Score(0.0, False, None, details)
    if not isinstance(gold, str) or not gold.strip():
        failed = grader_failure("invalid_gold", **details, gold=repr(gold)[:_SNIPPET])
        return Score(0.0, False, _squash(answer), failed)
    verdict = (pool or default_pool()).verify(gold, answer, timeout_s)
    details["seconds"] = round(verdict.seconds, 4)
    if verdict.status == "timeout":
        failed = grader_failure("timeout", **details, timeout_s=timeout_s)
        return Score(0.0, False, _squash(answer), failed)
    if verdict.status == "error":
        failed = grader_failure("verifier_error", **details, error=verdict.error)
        return Score(0.0, False, _squash(answer), failed)
    if verdict.gold is None:
        failed = grader_failure("invalid_gold", **details, gold=gold[:_SNIPPET])
        return Score(0.0, False, _squash(answer), failed)
    if verdict.pred is None:
        details["reason"] = "unparseable_answer"
        return Score(0.0, False, _squash(answer), details)
    details["reason"] = "correct" if verdict.correct else "wrong_answer"
    return Score(float(verdict.correct), verdict.correct, verdict.pred, details)


def perturbed_gold(gold: str) -> str:
    """``gold`` with its last digit changed (``9`` -> ``0``), or negated when it has no digit:
    a copy the grader must reject."""
    for i in range(len(gold) - 1, -1, -1):
        if gold[i].isdigit():
            return gold[:i] + str((int(gold[i]) + 1) % 10) + gold[i + 1 :]
    return f"-({gold})"


def gold_problems(
    golds: list[tuple[str, str]],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    pool: VerifierPool | None = None,
) -> list[str]:
    """The gold answers (``(problem id, gold)``) the grader cannot trust: one it does not match
    against itself, or one it matches against :func:`perturbed_gold`'s copy; one line each."""
    pool = pool or default_pool()
    found = []
    for problem_id, gold in golds:
        if not pool.verify(gold, gold, timeout_s).correct:
            found.append(
                f"{problem_id}: the grader does not match the gold {gold[:60]!r} against itself"
            )
        elif pool.verify(gold, wrong := perturbed_gold(gold), timeout_s).correct:
            found.append(
                f"{problem_id}: the grader accepts {wrong[:60]!r} for the gold {gold[:60]!r} "
                "(one digit changed)"
            )
    return found
