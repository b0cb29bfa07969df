"""Evaluate a team: K samples per problem through the runner, then pass@k / avg@K / maj@K with
bootstrap confidence intervals."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tasks.base import Problem
from teamtr_env.metrics import MetricEstimate, ProblemSamples, majority_answer, summarize
from teamtr_env.rollout import RolloutBatch
from teamtr_env.runner import Runner


@dataclass(frozen=True)
class EvalReport:
    """The result of :func:`evaluate`.

    Attributes:
        k: samples per problem.
        metrics: ``"pass@1"``, ``"pass@K"``, ``"avg@K"``, ``"maj@K"`` (and ``"pass^k"`` when asked)
            with bootstrap confidence intervals over problems.
        per_problem: one dict per problem: id, samples, correct count, answers, majority answer.
        batch: the underlying rollouts (transcripts, stats).
    """

    k: int
    metrics: dict[str, MetricEstimate]
    per_problem: list[dict[str, Any]]
    batch: RolloutBatch

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary (without the per-message records)."""
        stats = self.batch.stats
        return {
            "k": self.k,
            "n_problems": len(self.per_problem),
            "metrics": {name: dataclasses.asdict(m) for name, m in self.metrics.items()},
            "per_problem": self.per_problem,
            "stats": {
                **dataclasses.asdict(stats),
                "overhead_s": stats.overhead_s,
                "total_policy_calls": stats.total_policy_calls,
            },
        }


def evaluate(
    runner: Runner,
    problems: Sequence[Problem],
    k: int,
    *,
    seed: int = 0,
    confidence: float = 0.95,
    include_pass_hat: bool = False,
) -> EvalReport:
    """Samples ``k`` episodes per problem with ``runner`` and aggregates the metrics.

    Args:
        runner: a runner holding the team's policies.
        problems: the problems to evaluate (e.g. ``runner.sample_problems(n, seed)``).
        k: samples per problem (pass@1 and pass@k are unbiased estimates from these k).
        seed: the rollout seed.
        confidence: the bootstrap interval's confidence level.
        include_pass_hat: also report tau-bench's pass^k (for interactive tasks).
    """
    batch = runner.rollout(problems, group_size=k, seed=seed)
    samples, per_problem = [], []
    for g, problem in enumerate(problems):
        eps = batch.episodes[g * k : (g + 1) * k]
        correct = tuple(e.correct for e in eps)
        answers = tuple(e.answer for e in eps)
        samples.append(ProblemSamples(correct=correct, answers=answers))
        per_problem.append(
            {
                "problem_id": problem.id,
                "samples": k,
                "correct": sum(correct),
                "answers": list(answers),
                "majority": majority_answer(answers),
                "meta": dict(problem.meta),
            }
        )
    metrics = summarize(
        samples, confidence=confidence, seed=seed, include_pass_hat=include_pass_hat
    )
    return EvalReport(k, metrics, per_problem, batch)
