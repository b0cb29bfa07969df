"""The scripted expert's texts: the gold answer boxed, or a plausible wrong answer.

A wrong answer perturbs one number of the gold (``\\frac{14}{3}`` -> ``\\frac{14}{5}``,
``(2, -3)`` -> ``(2, -7)``). Since a perturbation can leave the value unchanged
(``\\frac{0}{3}`` -> ``\\frac{0}{4}``), the task checks each candidate with its own grader and
keeps the first that is graded wrong.
"""

from __future__ import annotations

import re

import numpy as np

_NUMBER = re.compile(r"\d{1,30}")


def expert_text(answer: str, *, think: bool) -> str:
    """The expert's message for ``answer`` (with a think block when the format requires one)."""
    body = f"Working through the problem carefully, the final answer is $\\boxed{{{answer}}}$."
    return f"<think>Solve it step by step, then check.</think>\n{body}" if think else body


def wrong_candidates(gold: str, rng: np.random.Generator, count: int = 6) -> list[str]:
    """Plausible wrong answers: one number of ``gold`` moved by 1-9 (never below 0, so no sign is
    created), then ``gold + 1`` as a last resort for golds without digits."""
    numbers = list(_NUMBER.finditer(gold))
    out: list[str] = []
    for _ in range(count if numbers else 0):
        match = numbers[int(rng.integers(len(numbers)))]
        value = int(match.group())
        delta = int(rng.integers(1, 10)) * (1 if rng.random() < 0.5 else -1)
        new = value + delta if value + delta >= 0 else value - delta
        candidate = gold[: match.start()] + str(new) + gold[match.end() :]
        if candidate not in out:
            out.append(candidate)
    out.append(f"{gold} + 1")
    return out
