"""The statistics and reports of ``teamtr compare``: the measured budget, paired differences of
held-out avg@K with bootstrap CIs (seeds, and problems within a seed), the Markdown table and the
learning-curve plot (:mod:`trainers.tools.compare` runs the comparison)."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from teamtr_env.metrics import bootstrap, percentile_interval
from trainers.run.recipe import PER_PROBLEM_FILE

#: The settings that fix one update's data and gradient work: equal for every learner.
BUDGET_KEYS = (
    "schedule.budget",
    "schedule.problems_per_batch",
    "schedule.group_size",
    "schedule.stages",
    "optim.epochs",
    "optim.micro_batch_size",
    "optim.lr",
    "trust_region.delta",
    "trust_region.delta_mode",
)
_BOOTSTRAP = 2000


#: What a run generated, summed over its stages (:func:`generated`): metric key -> name.
GENERATED_KEYS = {
    "stage/messages": "messages",
    "stage/tokens": "tokens",
    "stage/rollouts": "episodes",
}


def measured_budget(
    results: Mapping[str, Mapping[int, Mapping[str, Any]]],
) -> dict[str, Any]:
    """The check of the declared budget, on what the runs did:

    * ``messages_per_update``: the messages of every update of every run, and ``equal``: whether
      every learner's updates of a seed saw the same (the training budget);
    * ``generated``: what every run generated for training (:func:`generated`: messages,
      tokens, episodes), ``generated_ratio``: per learner, the mean over seeds of its generated
      messages and tokens over the first learner's, and ``generation_equal``: whether every
      learner generated as many messages as the first on every seed (``None`` when a run
      did not log them)."""
    messages = {
        learner: {seed: [u["messages"] for u in s["updates"]] for seed, s in runs.items()}
        for learner, runs in results.items()
    }
    first = next(iter(messages.values()))
    equal = all(
        sorted(per_seed.get(seed, [])) == sorted(counts)
        for per_seed in messages.values()
        for seed, counts in first.items()
    )
    made = {
        learner: {seed: generated(s) for seed, s in runs.items()}
        for learner, runs in results.items()
    }
    ratio, generation_equal = _generation_ratio(made)
    return {
        "equal": equal,
        "messages_per_update": messages,
        "generated": made,
        "generated_ratio": ratio,
        "generation_equal": generation_equal,
    }


def generated(summary: Mapping[str, Any]) -> dict[str, float] | None:
    """What a finished run generated for training, summed over its stages: ``messages``,
    ``tokens`` and ``episodes`` (its metrics' ``stage/messages``, ``stage/tokens``,
    ``stage/rollouts``), and ``stages``; ``None`` without a metrics file that logs messages."""
    path = summary.get("paths", {}).get("metrics")
    if not path or not Path(path).exists():
        return None
    by_step: dict[int, dict[str, float]] = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            if "stage/messages" in row:  # a resumed run logs a stage again: the last counts
                by_step[row["step"]] = {
                    n: float(row.get(k, 0.0)) for k, n in GENERATED_KEYS.items()
                }
    if not by_step:
        return None
    total = {n: sum(r[n] for r in by_step.values()) for n in GENERATED_KEYS.values()}
    return {**total, "stages": float(len(by_step))}


def _generation_ratio(
    made: Mapping[str, Mapping[int, Mapping[str, float] | None]],
) -> tuple[dict[str, dict[str, float]], bool | None]:
    """Per learner, the mean over seeds of its generated messages and tokens over the first
    learner's on the same seed, and whether the messages are equal on every seed."""
    learners = list(made)
    ref = made[learners[0]]
    ratio: dict[str, dict[str, float]] = {}
    equal: bool | None = True
    for learner in learners:
        pairs: list[tuple[Mapping[str, float], Mapping[str, float]]] = []
        for seed, first in ref.items():
            mine = made[learner].get(seed)
            if first is not None and mine is not None:
                pairs.append((first, mine))
        if not pairs or len(pairs) < len(ref):
            equal = None
        if not pairs:
            continue
        ratio[learner] = {
            key: float(np.mean([b[key] / a[key] for a, b in pairs if a[key] > 0] or [math.nan]))
            for key in ("messages", "tokens")
        }
        if equal and any(a["messages"] != b["messages"] for a, b in pairs):
            equal = False
    return ratio, equal


def short_label(label: str) -> str:
    """A learner's label for a table or a plot: ``teamtr/NaiveSequential-v0`` ->
    ``NaiveSequential``; a variant's settings by their last key,
    ``teamtr/TeamTR-v0:trust_region.delta_mode=none`` -> ``TeamTR (delta_mode=none)``."""
    learner, _, sets = label.partition(":")
    if "/" not in learner:  # a variant's own label
        return learner
    name = learner.split("/")[-1].rsplit("-v", 1)[0]
    if not sets:
        return name
    short = [
        f"{k.rsplit('.', 1)[-1]}={v}" for k, _, v in (s.partition("=") for s in sets.split(","))
    ]
    return f"{name} ({', '.join(short)})"


def generation_line(budget: Mapping[str, Any]) -> str:
    """The budget line's generation part: equal, or each learner's generated messages and
    tokens against the first learner's when they differ."""
    equal = budget.get("generation_equal")
    if equal is None:
        return "generated messages: not logged by every run"
    ratio = budget.get("generated_ratio", {})
    learners = list(ratio)
    if equal:
        return "generated messages: equal"
    parts = [
        f"{short_label(learner)} {r['messages']:.2f}x messages, {r['tokens']:.2f}x tokens"
        for learner, r in ratio.items()
        if learner != learners[0]
    ]
    return f"generated messages: NOT EQUAL, against {short_label(learners[0])}'s: " + "; ".join(
        parts
    )


def per_problem_avg(summary: Mapping[str, Any]) -> dict[str, float]:
    """A finished run's held-out avg@K per problem id (its ``eval_per_problem.json``)."""
    path = Path(summary["paths"]["run_dir"]) / PER_PROBLEM_FILE
    return dict(json.loads(path.read_text())["avg"])


def paired_difference(
    first: Mapping[int, Mapping[str, float]],
    other: Mapping[int, Mapping[str, float]],
    *,
    samples: int = _BOOTSTRAP,
    seed: int = 0,
) -> dict[str, Any]:
    """``other - first`` in held-out avg@K, paired by seed and problem: the mean over seeds of
    each seed's mean per-problem difference, and a 95% bootstrap CI that resamples seeds and,
    within each resampled seed, problems.

    Args:
        first, other: ``seed -> problem id -> avg@K`` (the same problems per seed).
        samples: bootstrap resamples.
        seed: the bootstrap's seed.
    """
    seeds = sorted(set(first) & set(other))
    diffs = []
    for s in seeds:
        ids = sorted(set(first[s]) & set(other[s]))
        diffs.append(np.array([other[s][i] - first[s][i] for i in ids], dtype=float))
    per_seed = [float(d.mean()) if d.size else math.nan for d in diffs]
    if not seeds or any(d.size == 0 for d in diffs):
        return {"mean": math.nan, "ci": [math.nan, math.nan], "per_seed": per_seed}
    rng = np.random.default_rng(seed)

    def mean_of(idx: list[np.ndarray]) -> float:  # seeds resampled, then each seed's problems
        picked = [diffs[j] for j in idx[0]]
        return float(np.mean([d[rng.integers(d.size, size=d.size)].mean() for d in picked]))

    means = bootstrap(mean_of, [len(diffs)], resamples=samples, rng=rng)
    low, high = percentile_interval(means)
    return {
        "mean": float(np.mean(per_seed)),
        "ci": [float(low), float(high)],
        "per_seed": per_seed,
        "seeds": seeds,
    }


# Student's t, two-sided 95%: the 0.975 quantile for 1..30 degrees of freedom (beyond: 1.96 is
# within 2% of it). numpy has no t quantile, and a table of 30 constants spares a scipy dependency.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def gain_over_seeds(before: Sequence[float], after: Sequence[float]) -> dict[str, Any]:
    """What training gained, ``after - before`` in held-out avg@K per seed, and a 95% Student-t
    CI of its mean over seeds (each seed's before and after are evaluated on the same problems,
    so a seed's gain carries its problems' noise; the seeds are the independent units).

    Returns:
        ``mean``, ``ci`` (``[nan, nan]`` with fewer than 2 seeds) and ``per_seed``.
    """
    gains = [float(a) - float(b) for b, a in zip(before, after, strict=True)]
    if not gains:
        return {"mean": math.nan, "ci": [math.nan, math.nan], "per_seed": []}
    mean = float(np.mean(gains))
    if len(gains) < 2:
        return {"mean": mean, "ci": [math.nan, math.nan], "per_seed": gains}
    df = len(gains) - 1
    half = (
        (_T975[df - 1] if df <= len(_T975) else 1.96) * statistics.stdev(gains) / len(gains) ** 0.5
    )
    return {"mean": mean, "ci": [mean - half, mean + half], "per_seed": gains}


#: A tabular team's exact expected reward after training (``trainers.run.team_eval.exact_key``).
EXACT_KEY = "eval/exact_J"


def paired_exact(first: Mapping[int, float], other: Mapping[int, float]) -> dict[str, Any]:
    """``other - first`` in exact J, paired by seed: :func:`paired_difference` with one value
    per seed (J is exact, so the bootstrap resamples seeds alone: the initial tables and the
    sampled batches are the only noise)."""
    return paired_difference(
        {s: {EXACT_KEY: v} for s, v in first.items()},
        {s: {EXACT_KEY: v} for s, v in other.items()},
    )


def reward_curve(summary: Mapping[str, Any]) -> list[float]:
    """The run's training reward per stage under the stage-start team (``stage/reward_start``)."""
    path = Path(summary["paths"]["metrics"])
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    by_step = {r["step"]: r["stage/reward_start"] for r in rows if "stage/reward_start" in r}
    return [by_step[s] for s in sorted(by_step)]


def sum_finite(values: Any) -> float | None:
    """The sum of the finite numbers in ``values`` (``None`` when there are none)."""
    kept = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return float(sum(kept)) if kept else None


def markdown(data: Mapping[str, Any]) -> str:
    """The comparison as a markdown table (mean ± std over seeds; paired CIs)."""
    metric, ref = data["metric"], data["reference"]
    lines = [
        f"# {data['task']}: {', '.join(data['learners'])} on seeds {data['seeds']}",
        "",
        f"Held-out {metric} ({data['eval_split']} split), mean ± std over seeds; paired "
        f"difference against {ref} (learner - {ref}) with a 95% bootstrap CI over seeds and "
        "problems; gain: after - before, with a 95% t CI over seeds.",
        "",
        "| learner | before | after | gain [95% CI] | paired diff | 95% CI | Δ_stale / run "
        "| floor / run | generated / stage (messages, tokens) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    paired = {p["learner"]: p for p in data["paired"]}
    for learner, row in data["results"].items():
        p = paired.get(learner)
        diff = "-" if p is None else f"{p['mean']:+.3f}"
        ci = "-" if p is None else f"[{p['ci'][0]:+.3f}, {p['ci'][1]:+.3f}]"
        gaps = [g for g in row["delta_stale"] if g is not None]
        floors = [g for g in row["noise_floor"] if g is not None]
        lines.append(
            f"| {learner} | {_mean_std(row['before'])} | {_mean_std(row['after'])} | "
            f"{_with_ci(row['gain'])} | {diff} | {ci} | {_mean_std(gaps) if gaps else '-'} | "
            f"{_mean_std(floors) if floors else '-'} | "
            f"{_per_stage(data['budget'].get('generated', {}).get(learner, {}))} |"
        )
    if any("exact" in p for p in data["paired"]):
        lines += [
            "",
            f"Exact J of the trained tabular team (mean ± std over seeds); paired difference "
            f"against {ref} with a 95% bootstrap CI over seeds.",
            "",
            "| learner | before | after | paired diff | 95% CI |",
            "|---|---|---|---|---|",
        ]
        for learner, row in data["results"].items():
            if "exact_after" not in row:
                continue
            p = paired.get(learner)
            exact = None if p is None else p.get("exact")
            diff = "-" if exact is None else f"{exact['mean']:+.3f}"
            ci = "-" if exact is None else f"[{exact['ci'][0]:+.3f}, {exact['ci'][1]:+.3f}]"
            lines.append(
                f"| {learner} | {_mean_std(row['exact_before'])} | "
                f"{_mean_std(row['exact_after'])} | {diff} | {ci} |"
            )
    budget = data["budget"]
    declared = ", ".join(f"{k}={budget[k]}" for k in BUDGET_KEYS)
    check = "equal" if budget["equal"] else "NOT EQUAL (see compare.json: budget)"
    lines += [
        "",
        f"Budget per update: {declared}; messages per update: {check}; "
        f"{generation_line(budget)} (compare.json: budget.generated).",
        "",
    ]
    variants = data.get("variants", {})
    if variants:
        lines += [
            "Variants (their own settings on top of the comparison's): "
            + "; ".join(
                f"{label}: {v['learner']} with {', '.join(v['settings'])}"
                for label, v in variants.items()
            )
            + ".",
            "",
        ]
    return "\n".join(lines)


def _per_stage(made: Mapping[Any, Mapping[str, float] | None]) -> str:
    """A learner's generated messages and tokens per stage, mean over seeds."""
    runs = [m for m in made.values() if m is not None and m["stages"] > 0]
    if not runs:
        return "-"
    msgs = np.mean([m["messages"] / m["stages"] for m in runs])
    toks = np.mean([m["tokens"] / m["stages"] for m in runs])
    return f"{msgs:.0f}, {toks:.0f}"


def _with_ci(gain: Mapping[str, Any]) -> str:
    low, high = gain["ci"]
    if math.isnan(low):
        return f"{gain['mean']:+.3f}"
    return f"{gain['mean']:+.3f} [{low:+.3f}, {high:+.3f}]"


def _mean_std(values: Sequence[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def plot(data: Mapping[str, Any], path: Path) -> None:
    """Learning curves (training reward of the stage-start team, mean over seeds) and the
    held-out result of each learner."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4))
    ax1, ax2 = fig.subplots(1, 2)
    for learner, row in data["results"].items():
        curves = [c for c in row["curves"] if c]
        if curves:
            width = min(len(c) for c in curves)
            mean = np.mean([c[:width] for c in curves], axis=0)
            ax1.plot(range(1, width + 1), mean, marker="o", label=short_label(learner))
    ax1.set_xlabel("stage")
    ax1.set_title("training reward, stage-start team (mean over seeds)")
    ax1.legend()
    names = list(data["results"])
    ax2.bar(
        range(len(names)),
        [data["results"][n]["after_mean"] for n in names],
        yerr=[data["results"][n]["after_std"] for n in names],
    )
    # "teamtr/NaiveSequential-v0" -> "NaiveSequential": the bars' labels stay apart
    ax2.set_xticks(range(len(names)), [short_label(n) for n in names])
    ax2.tick_params(axis="x", labelrotation=20)
    ax2.set_title(f"held-out {data['metric']} after training (± std over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
