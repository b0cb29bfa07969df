"""The ``teamtr/Math-v0`` task plugin: generated algebra, MATH-500 and AIME, graded by math-verify."""

from __future__ import annotations

import difflib
import hashlib
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tasks.base import SPLITS, Problem, Score, SingleAnswerTask, TaskConfigError, is_int
from tasks.math.expert import expert_text, wrong_candidates
from tasks.math.generate import DIFFICULTIES, GENERATORS
from tasks.math.grading import (
    DEFAULT_MAX_ANSWER_CHARS,
    DEFAULT_TIMEOUT_S,
    gold_problems,
    grade_answer,
)
from tasks.math.loader import load_math_file
from tasks.workers import deadline_errors

ALL_KINDS = ",".join(GENERATORS)
MAX_TIMEOUT_S = 600.0


class MathTask(SingleAnswerTask):
    """Competition-style math with a LaTeX gold answer, graded by math-verify.

    Without ``--data-path`` problems are generated (``kinds``, ``difficulty``); with it, MATH-500,
    AIME 2024 / 2025 or project JSONL files are loaded (:meth:`load`). The final message is graded
    by its last ``\\boxed{}`` (or an ``Answer:`` last line) with math-verify, gold first, under a
    hard per-answer deadline (see ``docs/tasks/math.md``).

    Args:
        kinds: generator kinds, a comma-separated string or a list (``linear``, ``fraction``,
            ``polynomial``, ``system``, ``quadratic``); each sample picks one uniformly.
        difficulty: 1, 2 or 3.
        split: the split generated problems are labelled with.
        require_think_format: grade only the text after the last ``</think>``; a reply without it
            scores 0 with reason ``missing_think_close``.
        timeout_s: the per-answer verification deadline in seconds.
        max_answer_chars: longer extracted answers are not parsed (reason ``answer_too_long``).

    Raises:
        TaskConfigError: listing every invalid argument at once.
    """

    name = "math"
    description = "Generated algebra, MATH-500 and AIME; last \\boxed{} graded by math-verify."

    def __init__(
        self,
        kinds: str | Sequence[str] = ALL_KINDS,
        difficulty: int = 1,
        split: str = "train",
        require_think_format: bool = False,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS,
    ) -> None:
        errors: list[str] = []
        names = _kind_names(kinds, errors)
        if not is_int(difficulty) or difficulty not in DIFFICULTIES:
            errors.append(f"difficulty must be one of {DIFFICULTIES}, got {difficulty!r}")
        if split not in SPLITS:
            errors.append(f"split must be one of {SPLITS}, got {split!r}")
        if not isinstance(require_think_format, bool):
            errors.append(
                f"require_think_format must be true or false, got {require_think_format!r}"
            )
        errors += deadline_errors("timeout_s", timeout_s, MAX_TIMEOUT_S)
        if not is_int(max_answer_chars) or not 1 <= max_answer_chars <= 100_000:
            errors.append(
                f"max_answer_chars must be an integer in 1..100000, got {max_answer_chars!r}"
            )
        if errors:
            raise TaskConfigError("MathTask", errors)
        self.kinds = names
        self.difficulty = difficulty
        self.split = split
        self.require_think_format = require_think_format
        self.timeout_s = float(timeout_s)
        self.max_answer_chars = max_answer_chars

    def sample(self, rng: np.random.Generator) -> Problem:
        """A generated problem of this task's split (train/validation/test partition the problem
        space by a hash of the id, so held-out problems never appear in training)."""
        return self.draw_in_split(rng, self._draw, self.split)  # type: ignore[arg-type]

    def _draw(self, rng: np.random.Generator) -> Problem:
        kind = self.kinds[int(rng.integers(len(self.kinds)))]
        made = GENERATORS[kind](rng, self.difficulty)
        digest = hashlib.sha1(made.question.encode("utf-8")).hexdigest()[:12]
        return Problem(
            id=f"math:{kind}:d{self.difficulty}:{digest}",
            data={"problem": made.question},
            answer=made.answer,
            split=self.split,  # type: ignore[arg-type]
            meta={
                "source": "generated",
                "kind": kind,
                "subject": made.subject,
                "level": self.difficulty,
            },
        )

    def load(self, path: str | Path, *, split: str = "test") -> list[Problem]:
        """Loads MATH-500, AIME 2024 / 2025 (field aliases included) or project JSONL.

        Official rows are labelled ``split`` (``"test"`` by default); errors name file and line.
        A gold answer longer than ``max_answer_chars`` is kept with a warning: no answer can
        match it (answers that long are not parsed), so even the scripted expert scores 0.
        """
        problems = load_math_file(path, split=split)
        too_long = [p for p in problems if len(str(p.answer)) > self.max_answer_chars]
        if too_long:
            named = ", ".join(f"{p.id} ({len(str(p.answer)):,} characters)" for p in too_long[:5])
            more = f" and {len(too_long) - 5} more" if len(too_long) > 5 else ""
            warnings.warn(
                f"{path}: {len(too_long)} gold answer(s) longer than max_answer_chars "
                f"({self.max_answer_chars}), which no answer can match: {named}{more}",
                UserWarning,
                stacklevel=2,
            )
        skipped = {p.id for p in too_long}
        rest = [(p.id, str(p.answer)) for p in problems if p.id not in skipped]
        untrusted = gold_problems(rest, timeout_s=self.timeout_s)
        if untrusted:
            more = f" and {len(untrusted) - 5} more" if len(untrusted) > 5 else ""
            warnings.warn(
                f"{path}: {len(untrusted)} gold answer(s) the grader cannot be trusted on: "
                + "; ".join(untrusted[:5])
                + more,
                UserWarning,
                stacklevel=2,
            )
        return problems

    def prompt(self, problem: Problem) -> str:
        text = str(problem.data.get("problem", "")).strip()
        if self.require_think_format:
            instruction = (
                "Think step by step inside <think> ... </think>, then after </think> put your "
                "final answer within \\boxed{}."
            )
        else:
            instruction = "Reason step by step, and put your final answer within \\boxed{}."
        return f"{text}\n\n{instruction}"

    def grade(self, problem: Problem, text: str) -> Score:
        return grade_answer(
            problem.answer,
            text,
            require_think_format=self.require_think_format,
            timeout_s=self.timeout_s,
            max_answer_chars=self.max_answer_chars,
        )

    def expert_reply(
        self,
        context: str,
        rng: np.random.Generator,
        *,
        make_error: bool,
        problem: Problem | None = None,
    ) -> str:
        """Boxes the gold answer of ``problem`` (privileged); with ``make_error``, a perturbed
        answer that this task's grader marks wrong. Without the problem it cannot answer."""
        if problem is None or not isinstance(problem.answer, str):
            return "I cannot find the problem statement in my context, so I have no answer."
        answer = problem.answer
        if make_error:
            answer = self._wrong_answer(problem, rng)
        return expert_text(answer, think=self.require_think_format)

    def _wrong_answer(self, problem: Problem, rng: np.random.Generator) -> str:
        candidates = wrong_candidates(problem.answer, rng)
        for candidate in candidates:
            text = expert_text(candidate, think=self.require_think_format)
            if self.grade(problem, text).details.get("reason") == "wrong_answer":
                return candidate
        return candidates[-1]


def _kind_names(kinds: object, errors: list[str]) -> tuple[str, ...]:
    """Parses ``kinds`` (comma-separated string or list of names); appends every error."""
    if isinstance(kinds, str):
        raw = [k.strip() for k in kinds.split(",")]
    elif isinstance(kinds, (list, tuple)) and all(isinstance(k, str) for k in kinds):
        raw = [k.strip() for k in kinds]
    else:
        errors.append(f"kinds must be a comma-separated string or a list of names, got {kinds!r}")
        return ()
    raw = [k for k in raw if k]
    if not raw:
        errors.append(f"kinds must name at least one of {sorted(GENERATORS)}, got {kinds!r}")
    for kind in raw:
        if kind not in GENERATORS:
            close = difflib.get_close_matches(kind, list(GENERATORS), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            errors.append(f"unknown kind {kind!r}.{hint} Known kinds: {sorted(GENERATORS)}.")
    return tuple(dict.fromkeys(raw))
