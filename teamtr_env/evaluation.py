"""Evaluate a team: K samples per problem through the runner, then pass@k / avg@K / maj@K (and
pass^k) with bootstrap confidence intervals, per-subset breakdowns, coordination metrics from the
transcripts, tokens and wall time. ``EvalReport.to_dict`` is the JSON report described by the
published schema ``teamtr_env/schemas/eval_report.schema.json`` (``teamtr eval --schema``)."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from tasks.base import GRADER_FAILED, Problem
from teamtr_env.coordination import coordination_metrics
from teamtr_env.metrics import MetricEstimate, ProblemSamples, majority_answer, summarize
from teamtr_env.rollout import RolloutBatch
from teamtr_env.runners import Runner, distinct_by_id

log = logging.getLogger(__name__)

MAX_BREAKDOWN_VALUES = 20
"""A ``meta`` key is broken down automatically when it has 2..20 distinct scalar values."""

MAX_EVAL_EPISODES = 100_000
"""The most episodes (distinct problems x K, summed over protocols) ``teamtr eval`` starts
(``--max-episodes`` raises it). The runner keeps one environment per episode of a rollout and
every episode's record: about 55 KB per episode for teamtr/Arith-v0, so 100k episodes are ~5.5 GB."""

MAX_EVAL_MESSAGES = 1_000_000
"""The most messages (episodes x messages per episode, summed over protocols) ``teamtr eval``
starts (``--max-messages`` raises it). Every message is kept with the context its agent saw: about
1 KB for short tasks, up to ``max_context_chars`` characters for long ones."""


CLIPPED_WARN_RATIO = 0.2
"""``teamtr eval`` and ``teamtr train`` warn when more than this share of an agent's messages hit
the token limit (``MessageRecord.clipped``): its answers are being cut off, so raise
``max_new_tokens``."""


GRADER_FAILURE_ALARM_RATIO = 0.1
"""``teamtr eval`` and ``teamtr train`` print any answer the grader failed on (a timeout, a crash
of its code, a problem it could not rebuild: :data:`tasks.base.GRADER_FAILED`); above this share
of the episodes the warning says the metrics measure the grader, not the team."""

MAX_FAILURE_EXAMPLES = 3
"""Grader failures quoted in the report (problem id, reason and error), to start the diagnosis."""


@dataclass(frozen=True)
class GraderFailures:
    """The episodes whose final answer the grader failed on, for a reason of its own.

    Attributes:
        episodes: how many episodes.
        total: the episodes evaluated.
        reasons: ``details["reason"] -> count`` (``scorer_timeout``, ``verifier_error``, ...).
        examples: up to :data:`MAX_FAILURE_EXAMPLES` of them: problem id, reason and error.
    """

    episodes: int
    total: int
    reasons: dict[str, int] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def share(self) -> float:
        """The failed episodes' share of all (0 when none were evaluated)."""
        return self.episodes / self.total if self.total else 0.0

    @property
    def alarming(self) -> bool:
        """More than :data:`GRADER_FAILURE_ALARM_RATIO` of the episodes failed in the grader: the
        metrics say more about the grader than about the team."""
        return self.share > GRADER_FAILURE_ALARM_RATIO

    def to_dict(self) -> dict[str, Any]:
        return {
            "episodes": self.episodes,
            "total": self.total,
            "share": self.share,
            "reasons": dict(self.reasons),
            "examples": list(self.examples),
        }

    def message(self) -> str | None:
        """One console line: what failed and how often, and what the metrics then mean (``None``
        when nothing failed)."""
        if not self.episodes:
            return None
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(self.reasons.items()))
        head = (
            f"the grader failed on {self.episodes} of {self.total} answers ({self.share:.0%}: "
            f"{reasons}); they score 0 as if wrong"
        )
        errors = sorted({str(e["error"]) for e in self.examples if e.get("error")})
        seen = f"; its error: {errors[0]}" if errors else ""
        if not self.alarming:
            return f"{head}{seen}"
        return (
            f"{head}, so these metrics measure the grader, not the team{seen}. Check the task's "
            "grader options (a timeout_s too small for the grader: raise it) and the transcripts' "
            "details.reason"
        )


def grader_failures(episodes: Sequence[Any]) -> GraderFailures:
    """The :class:`GraderFailures` of ``episodes`` (records with ``details`` and ``problem_id``)."""
    failed = [e for e in episodes if e.details.get(GRADER_FAILED)]
    reasons: dict[str, int] = {}
    for e in failed:
        reason = str(e.details.get("reason", "grader_failed"))
        reasons[reason] = reasons.get(reason, 0) + 1
    examples = [
        {
            "problem_id": e.problem_id,
            "reason": e.details.get("reason"),
            "error": str(e.details.get("error", ""))[:200] or None,
        }
        for e in failed[:MAX_FAILURE_EXAMPLES]
    ]
    return GraderFailures(len(failed), len(episodes), reasons, examples)


def report_schema() -> dict[str, Any]:
    """The published JSON Schema of the evaluation report (``EvalReport.to_dict`` plus the CLI's
    run fields)."""
    text = resources.files("teamtr_env").joinpath("schemas/eval_report.schema.json").read_text()
    return dict(json.loads(text))


@dataclass(frozen=True)
class EvalReport:
    """The result of :func:`evaluate`.

    Attributes:
        k: samples per problem.
        metrics: ``"pass@1"``, ``"pass@K"``, ``"avg@K"``, ``"maj@K"`` (and ``"pass^k"`` when asked)
            with bootstrap confidence intervals over the distinct problems.
        per_problem: one dict per distinct problem: id, split, samples, correct count, answers,
            majority.
        batch: the underlying rollouts (transcripts, stats).
        breakdowns: ``meta key -> value -> {"n_problems", "metrics"}`` (e.g. subject, level,
            size bucket), each subset with its own bootstrap intervals.
        coordination: consensus-on-correct, regression and fix rates (single-answer tasks; see
            :mod:`teamtr_env.coordination`), or ``None``.
        task_metrics: the task's own aggregates over all episodes (e.g. ZebraLogic's pooled cell
            accuracy), from its optional ``aggregate_details(details)`` hook.
        splits: how many evaluated (distinct) problems carry each split label.
        n_problems: the problems given to :func:`evaluate`, repeats included (``None``: as many as
            were evaluated).
    """

    k: int
    metrics: dict[str, MetricEstimate]
    per_problem: list[dict[str, Any]]
    batch: RolloutBatch
    breakdowns: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    coordination: dict[str, Any] | None = None
    task_metrics: dict[str, float] = field(default_factory=dict)
    splits: dict[str, int] = field(default_factory=dict)
    n_problems: int | None = None

    @property
    def context_truncated(self) -> int:
        """Episodes in which some agent's context was cut to ``max_context_chars`` (that agent
        did not see the whole problem or conversation)."""
        return sum(e.context_truncated for e in self.batch.episodes)

    @property
    def clipped_ratio(self) -> dict[str, float]:
        """Per agent, the share of its messages that stopped at the token limit without an end
        token or stop string (:meth:`RolloutBatch.clipped_ratios`): a high share means
        ``max_new_tokens`` is too small for the task's answers."""
        return self.batch.clipped_ratios()

    @property
    def local_rewards(self) -> dict[str, float]:
        """Per agent, its mean local reward over the evaluated episodes (a task that gives local
        rewards, :class:`tasks.SupportsLocalRewards`; empty otherwise). Logged beside the team's
        metrics, never in their place."""
        episodes = self.batch.episodes
        if not self.batch.has_local_rewards():
            return {}
        agents = sorted({a for e in episodes for a in e.local_rewards})
        return {a: float(self.batch.local_rewards(a).mean()) for a in agents}

    @property
    def grader_failures(self) -> GraderFailures:
        """The episodes whose answer the grader failed on (a timeout, an error of its code):
        scored 0, but not the team's failure (:data:`tasks.base.GRADER_FAILED`)."""
        return grader_failures(self.batch.episodes)

    @property
    def n_problems_distinct(self) -> int:
        """The distinct problems evaluated: the units of every metric and interval."""
        return len(self.per_problem)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary (without the per-message records)."""
        stats = self.batch.stats
        episodes = max(stats.envs, 1)
        return {
            "k": self.k,
            "n_problems": self.n_problems_distinct if self.n_problems is None else self.n_problems,
            "n_problems_distinct": self.n_problems_distinct,
            "splits": dict(self.splits),
            "metrics": _metrics_dict(self.metrics),
            "breakdowns": {
                key: {
                    value: {
                        "n_problems": sub["n_problems"],
                        "metrics": _metrics_dict(sub["metrics"]),
                    }
                    for value, sub in groups.items()
                }
                for key, groups in self.breakdowns.items()
            },
            "coordination": self.coordination,
            "task_metrics": dict(self.task_metrics),
            "tokens": {
                "total": stats.tokens_generated,
                "per_episode": stats.tokens_generated / episodes,
                "messages_per_episode": stats.messages / episodes,
            },
            "wall_s": stats.wall_s,
            "context_truncated": self.context_truncated,
            "clipped_ratio": self.clipped_ratio,
            "local_rewards": self.local_rewards,
            "grader_failures": self.grader_failures.to_dict(),
            "per_problem": self.per_problem,
            "stats": {
                **dataclasses.asdict(stats),
                "overhead_s": stats.overhead_s,
                "total_policy_calls": stats.total_policy_calls,
            },
        }


def _metrics_dict(metrics: dict[str, MetricEstimate]) -> dict[str, dict[str, Any]]:
    return {name: dataclasses.asdict(m) for name, m in metrics.items()}


def evaluate(
    runner: Runner,
    problems: Sequence[Problem],
    k: int,
    *,
    seed: int = 0,
    confidence: float = 0.95,
    include_pass_hat: bool = False,
    breakdown_keys: Sequence[str] | None = None,
    coordination: bool = True,
) -> EvalReport:
    """Samples ``k`` episodes per problem with ``runner`` and aggregates the metrics.

    A repeated problem is never counted as an independent one: problems with an id seen earlier in
    ``problems`` are dropped (with a logged warning), so each distinct problem gets exactly ``k``
    samples and the bootstrap intervals resample distinct problems. The report keeps both counts
    (``n_problems`` as given, ``n_problems_distinct`` evaluated).

    Args:
        runner: a runner holding the team's policies.
        problems: the problems to evaluate (e.g. ``runner.sample_problems(n, seed)``, which are
            already distinct).
        k: samples per problem (pass@1 and pass@k are unbiased estimates from these k).
        seed: the rollout seed.
        confidence: the bootstrap interval's confidence level.
        include_pass_hat: also report tau-bench's pass^k (for interactive tasks).
        breakdown_keys: ``Problem.meta`` keys to break the metrics down by; default every key with
            2..20 distinct scalar values among the problems.
        coordination: grade every message for the coordination metrics (single-answer tasks).
    """
    given = len(problems)
    problems = _distinct(problems)
    batch = runner.rollout(problems, group_size=k, seed=seed)
    samples, per_problem = _per_problem(problems, batch, k)
    options = {"confidence": confidence, "seed": seed, "include_pass_hat": include_pass_hat}
    metrics = summarize(samples, **options)  # type: ignore[arg-type]
    keys = _breakdown_keys(problems) if breakdown_keys is None else list(breakdown_keys)
    breakdowns = _breakdowns(problems, samples, keys, options)
    task = runner.env.task
    coord = None
    grade = getattr(task, "grade", None)
    if coordination and callable(grade) and not getattr(task, "interactive", False):
        by_id = {p.id: p for p in problems}
        coord = coordination_metrics(batch.episodes, by_id, grade).to_dict()
    task_metrics: dict[str, float] = {}
    aggregate = getattr(task, "aggregate_details", None)
    if callable(aggregate):
        task_metrics = dict(aggregate([e.details for e in batch.episodes]))
    splits: dict[str, int] = {}
    for problem in problems:
        splits[problem.split] = splits.get(problem.split, 0) + 1
    return EvalReport(
        k, metrics, per_problem, batch, breakdowns, coord, task_metrics, splits, n_problems=given
    )


def _distinct(problems: Sequence[Problem]) -> list[Problem]:
    """``problems`` without those whose id repeats an earlier one (logged)."""
    given = len(problems)
    kept = distinct_by_id(problems)
    if len(kept) < given:
        log.warning(
            "evaluate: %d of the %d problems repeat an earlier problem id and are dropped; "
            "%d distinct problems are evaluated (a repeated problem is not an independent one)",
            given - len(kept),
            given,
            len(kept),
        )
    return list(kept)


def _per_problem(
    problems: Sequence[Problem], batch: RolloutBatch, k: int
) -> tuple[list[ProblemSamples], list[dict[str, Any]]]:
    """Each problem's ``k`` samples (for the estimators) and its row of the report."""
    samples, rows = [], []
    for g, problem in enumerate(problems):
        eps = batch.episodes[g * k : (g + 1) * k]
        correct = tuple(e.correct for e in eps)
        answers = tuple(None if e.answer is None else str(e.answer) for e in eps)
        samples.append(ProblemSamples(correct=correct, answers=answers))
        rows.append(
            {
                "problem_id": problem.id,
                "split": problem.split,
                "samples": k,
                "correct": sum(correct),
                "answers": [e.answer for e in eps],
                "majority": majority_answer(answers),
                "meta": dict(problem.meta),
            }
        )
    return samples, rows


def _breakdowns(
    problems: Sequence[Problem],
    samples: Sequence[ProblemSamples],
    keys: Sequence[str],
    options: dict[str, Any],
) -> dict[str, dict[str, dict[str, Any]]]:
    """The metrics per value of each ``Problem.meta`` key in ``keys``."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for key in keys:
        groups: dict[str, list[int]] = {}
        for i, problem in enumerate(problems):
            if key in problem.meta:
                groups.setdefault(str(problem.meta[key]), []).append(i)
        out[key] = {
            value: {
                "n_problems": len(idx),
                "metrics": summarize([samples[i] for i in idx], **options),
            }
            for value, idx in sorted(groups.items())
        }
    return out


def _breakdown_keys(problems: Sequence[Problem]) -> list[str]:
    values: dict[str, set[str]] = {}
    for problem in problems:
        for key, value in problem.meta.items():
            if isinstance(value, str | int | bool) or value is None:
                values.setdefault(key, set()).add(str(value))
    return sorted(k for k, v in values.items() if 2 <= len(v) <= MAX_BREAKDOWN_VALUES)
