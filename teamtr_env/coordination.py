"""Coordination metrics from transcripts: does the team agree on the right answer, and do later
agents fix earlier mistakes or overturn correct answers?

Every agent message of an episode is graded on its own with the task's ``grade`` (single-answer
tasks only); messages without an extractable answer are skipped. Then, per episode:

* **consensus-on-correct**: the team's final answer is correct *and* every agent's last answer
  equals it (agents that never gave an answer break consensus).
* **agreement**: every agent's last answer is the same (right or wrong).
* **regression**: a later answer by a *different* agent is wrong right after a correct one;
  the rate is ``regressions / transitions that started from a correct answer``.
* **fix**: a later answer by a different agent is correct right after a wrong one; the rate is
  ``fixes / transitions that started from a wrong answer``.
* **correct-then-lost** (episodes): some message was correct but the final answer is wrong.
* **wrong-then-fixed** (episodes): the first answer was wrong and the final answer is correct.

Transitions follow the transcript's order; with private contexts (``visibility="own"``) later
agents never saw the earlier answers, so regression/fix rates only mean "disagreement" there.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tasks.base import Problem, Score
from teamtr_env.rollout import EpisodeRecord


@dataclass(frozen=True)
class Coordination:
    """Team-level coordination metrics over a set of episodes (see the module docstring).

    Rates whose denominator is zero are ``None``."""

    episodes: int
    consensus_on_correct: float | None
    agreement: float | None
    regression_rate: float | None
    fix_rate: float | None
    correct_then_lost: float | None
    wrong_then_fixed: float | None
    transitions_from_correct: int
    transitions_from_wrong: int
    regressions: int
    fixes: int
    answered_messages: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def coordination_metrics(
    episodes: Sequence[EpisodeRecord],
    problems: Mapping[str, Problem],
    grade: Callable[[Problem, str], Score],
) -> Coordination:
    """Computes :class:`Coordination` for ``episodes``.

    Args:
        episodes: the rollout's episode records (their transcripts and final scores).
        problems: the problems by id.
        grade: the task's per-message grader (``task.grade``); its errors count as no answer.
    """
    consensus = agree = lost = fixed_eps = 0
    from_correct = from_wrong = regressions = fixes = answered = 0
    counted = 0
    for ep in episodes:
        problem = problems.get(ep.problem_id)
        if problem is None:
            continue
        counted += 1
        graded: list[tuple[str, str, bool]] = []  # (speaker, answer, correct)
        last: dict[str, str | None] = {}
        for msg in ep.transcript:
            if msg.get("role") != "agent":
                continue
            try:
                score = grade(problem, str(msg.get("text", "")))
            except Exception:  # a grader bug is no answer, never a crash of the report
                score = Score(0.0, False, None, {})
            speaker = str(msg.get("speaker"))
            if score.answer is None:
                last.setdefault(speaker, None)
                continue
            graded.append((speaker, str(score.answer), bool(score.correct)))
            last[speaker] = str(score.answer)
        answered += len(graded)
        finals = set(last.values())
        team_agrees = bool(last) and None not in finals and len(finals) == 1
        final_answer = None if ep.answer is None else str(ep.answer)
        agree += team_agrees
        consensus += bool(ep.correct and team_agrees and finals == {final_answer})
        if graded:
            lost += any(c for _, _, c in graded) and not ep.correct
            fixed_eps += (not graded[0][2]) and bool(ep.correct)
        for (s0, _, c0), (s1, _, c1) in itertools.pairwise(graded):
            if s0 == s1:
                continue
            if c0:
                from_correct += 1
                regressions += not c1
            else:
                from_wrong += 1
                fixes += c1
    return Coordination(
        episodes=counted,
        consensus_on_correct=_rate(consensus, counted),
        agreement=_rate(agree, counted),
        regression_rate=_rate(regressions, from_correct),
        fix_rate=_rate(fixes, from_wrong),
        correct_then_lost=_rate(lost, counted),
        wrong_then_fixed=_rate(fixed_eps, counted),
        transitions_from_correct=from_correct,
        transitions_from_wrong=from_wrong,
        regressions=regressions,
        fixes=fixes,
        answered_messages=answered,
    )
