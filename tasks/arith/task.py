"""The ``teamtr/Arith-v0`` task plugin: generated integer arithmetic, exact integer verifier."""

from __future__ import annotations

import re

import numpy as np

from tasks.arith import rules
from tasks.base import Problem, Score, SingleAnswerTask, Split, TaskConfigError, is_int
from teamtr_core.choices import choice_errors

_PROBLEM_LINE = re.compile(r"^Compute: ([0-9+\-* ]+)$", re.MULTILINE)


class ArithTask(SingleAnswerTask):
    """Integer arithmetic: ``Compute: 37 + 85`` -> ``Answer: 122``.

    Args:
        digits: digits of every operand (1-9).
        operators: which of ``+ - *`` may appear, e.g. ``"+"`` or ``"+-*"``.
        operands: how many numbers per expression (2-6).
        split: the split generated problems are labelled with.

    Raises:
        TaskConfigError: listing every invalid argument at once.
    """

    name = "arith"
    description = "Generated integer arithmetic (+, -, *), exact integer verifier."

    def __init__(
        self, digits: int = 2, operators: str = "+", operands: int = 2, split: str = "train"
    ) -> None:
        errors = []
        if not is_int(digits) or not 1 <= digits <= 9:
            errors.append(f"digits must be an integer in 1..9, got {digits!r}")
        if not isinstance(operators, str) or not operators or set(operators) - set(rules.OPERATORS):
            errors.append(
                f"operators must be a non-empty string of {rules.OPERATORS!r}, got {operators!r}"
            )
        if not is_int(operands) or not 2 <= operands <= 6:
            errors.append(f"operands must be an integer in 2..6, got {operands!r}")
        errors += choice_errors("split", split, Split)
        if errors:
            raise TaskConfigError("ArithTask", errors)
        self.digits = digits
        self.operators = "".join(dict.fromkeys(operators))
        self.operands = operands
        self.split = split

    def sample(self, rng: np.random.Generator) -> Problem:
        """A problem of this task's split: the train, validation and test generators partition the
        expressions by a hash of their id (``tasks.base.split_of``), so they never overlap."""
        return self.draw_in_split(rng, self._draw, self.split)  # type: ignore[arg-type]

    def _draw(self, rng: np.random.Generator) -> Problem:
        numbers, ops = rules.generate(rng, self.digits, self.operators, self.operands)
        expression = rules.render(numbers, ops)
        return Problem(
            id="arith:" + expression.replace(" ", ""),
            data={"expression": expression},
            answer=rules.evaluate(numbers, ops),
            split=self.split,  # type: ignore[arg-type]
            meta={"digits": self.digits, "operators": "".join(sorted(set(ops)))},
        )

    def prompt(self, problem: Problem) -> str:
        return f"Compute: {problem.data['expression']}\nReply with: Answer: <integer>"

    def check_problem(self, problem: Problem) -> list[str]:
        """A loaded row needs ``data["expression"]`` (``"12 + 3"``) and an integer answer."""
        issues = []
        expression = problem.data.get("expression")
        if not isinstance(expression, str) or rules.parse_expression(expression) is None:
            issues.append(
                "data.expression: expected an expression such as '12 + 3 * 4', got "
                f"{expression!r:.80}"
            )
        if not is_int(problem.answer):
            issues.append(f"answer: expected an integer, got {problem.answer!r:.80}")
        return issues

    def grade(self, problem: Problem, text: str) -> Score:
        value, how = rules.extract_answer(text)
        if value is None:
            return Score(0.0, False, None, {"reason": "no_integer_found"})
        gold = problem.answer
        if not is_int(gold):
            return Score(
                0.0, False, str(value), {"reason": "invalid_gold_answer", "gold": repr(gold)}
            )
        correct = value == gold
        details = {"reason": "correct" if correct else "wrong_answer", "extraction": how}
        return Score(float(correct), correct, str(value), details)

    def expert_reply(
        self,
        context: str,
        rng: np.random.Generator,
        *,
        make_error: bool,
        problem: Problem | None = None,
    ) -> str:
        """Solves the first ``Compute:`` line of the context; off by 1-10 when ``make_error``."""
        match = _PROBLEM_LINE.search(context)
        parsed = rules.parse_expression(match.group(1)) if match else None
        if parsed is None:
            return "I cannot find the problem."
        value = rules.evaluate(*parsed)
        if make_error:
            value += int(rng.choice([-1, 1])) * int(rng.integers(1, 11))
        return f"Answer: {value}"
