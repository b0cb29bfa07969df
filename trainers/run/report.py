"""A training run's report: the plain line printed after each stage, ``summary.json``'s contents,
and the before/after table printed at the end."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from teamtr_core.errors import ConfigError
from trainers.config import TrainConfig
from trainers.learners.registry import learner_spec
from trainers.learners.team_trainer import TeamTrainer
from trainers.run.logger import read_jsonl
from trainers.run.state import RunState
from trainers.run.team_eval import distinct_key


def stage_line(config: TrainConfig, stage: int, metrics: dict[str, float], elapsed: float) -> str:
    """``stage 2/6: 31.2 s (elapsed 63 s), reward mean 0.250, KL 0.0123, val avg@4 0.312 (8
    problems)``: the plain progress line printed after every stage when there are no bars."""
    k = config.eval.k
    kl = metrics.get("stage/kl_tok_mean", math.nan)
    line = (
        f"stage {stage}/{config.schedule.stages}: {metrics.get('stage/wall_s', math.nan):.1f} s "
        f"(elapsed {elapsed:.0f} s), reward mean {metrics.get('stage/reward_mean', math.nan):.3f}, "
        + (f"KL {kl:.4f}" if math.isfinite(kl) else "KL not monitored")
    )
    if metrics.get("stage/clipped_ratio", 0.0) > 0:
        line += f", {metrics['stage/clipped_ratio']:.0%} of messages cut off at the token limit"
    if "diag/d_occ" in metrics:
        line += f", D_occ {metrics['diag/d_occ']:.3f}"
        if "diag/d_occ_noise_floor" in metrics:
            line += f" (floor {metrics['diag/d_occ_noise_floor']:.3f})"
    if "diag/improvement" in metrics:
        line += (
            f", J {metrics['diag/improvement']:+.3f} (bound {metrics['diag/certificate_lb']:.2f})"
        )
    if f"val/avg@{k}" in metrics:
        line += f", val avg@{k} {metrics[f'val/avg@{k}']:.3f}"
        if distinct_key("val") in metrics:
            line += f" ({metrics[distinct_key('val')]:.0f} problems)"
    return line


def build_summary(
    config: TrainConfig,
    trainer: TeamTrainer,
    state: RunState,
    after: dict[str, float],
    seconds: float,
    run_dir: Path,
) -> dict[str, Any]:
    updates = state.updates
    kls = [u.kl_raw for u in updates if math.isfinite(u.kl_raw)]
    before = state.before

    def metrics_only(values: dict[str, float]) -> dict[str, float]:
        return {k: v for k, v in values.items() if not k.startswith(("problems/", "ci/"))}

    def intervals(values: dict[str, float]) -> dict[str, list[float]]:
        """``{"eval/avg@4": [low, high], ...}``: the 95% bootstrap CIs over distinct problems."""
        return {
            k[3:-4]: [v, values[k[:-4] + "_high"]]
            for k, v in values.items()
            if k.startswith("ci/") and k.endswith("_low")
        }

    def distinct(prefix: str) -> int | None:
        value = after.get(distinct_key(prefix), before.get(distinct_key(prefix)))
        return None if value is None else int(value)

    return {
        "learner": learner_spec(config.schedule.learner).id,
        "task": config.task,
        "seed": config.seed,
        "stages": trainer.stage,
        "stopped_early": state.stopped_early,
        "before": metrics_only(before),
        "after": metrics_only(after),
        "before_ci": intervals(before),
        "after_ci": intervals(after),
        "eval_split": config.eval.split,
        "eval_problems": config.eval.problems,
        "eval_problems_distinct": distinct("eval"),
        "train_eval_problems_distinct": distinct("train_eval"),
        "selected_stage": state.best.stage if state.best else trainer.stage,
        "sft": state.sft,
        "totals": dict(trainer.totals),
        "updates": [u.to_dict() for u in updates],
        "out_of_region_rate": sum(u.out_of_region_raw for u in updates) / max(len(updates), 1),
        "accepted_in_region": all(u.in_region for u in updates if u.accepted),
        "kl_raw_mean": sum(kls) / len(kls) if kls else None,
        "diagnostics": diagnostics_summary(trainer, state.diagnostics),
        "wall_s": seconds,
        "config": dataclasses.asdict(config),
        "paths": {
            "run_dir": str(run_dir),
            "metrics": str(run_dir / "metrics.jsonl"),
            "tensorboard": str(run_dir / "tb") if "tensorboard" in config.loggers else None,
            "checkpoints": str(run_dir / "checkpoints"),
            "plot": str(run_dir / "curves.png") if config.plot else None,
            "summary": str(run_dir / "summary.json"),
            "eval_per_problem": str(run_dir / "eval_per_problem.json"),
        },
    }


def diagnostics_summary(trainer: TeamTrainer, stages: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary's ``diagnostics`` block: the level, how the quantities were measured, each
    stage's ``diag/*`` metrics and the certificate's tracking over the stages."""
    cfg = trainer.config.diagnostics
    out: dict[str, Any] = {"level": cfg.level}
    run = trainer.diagnostics
    if run is None:
        return out
    out.update(
        {
            "occupancy_features": run.features,
            "gamma": run.gamma,
            "certificate_units": "J" if run.j_units else "standardised advantages",
            "stages": stages,
        }
    )
    if run.lower_bounds:
        # NaN (undefined) becomes null in summary.json
        out["violation_rate"], out["rank_corr"] = run.tracking()
    return out


def metrics_line(label: str, metrics: dict[str, float], k: int) -> str:
    line = f"{label}: held-out avg@{k} {metrics.get(f'eval/avg@{k}', math.nan):.3f}  pass@{k} {metrics.get(f'eval/pass@{k}', math.nan):.3f}"
    if f"train_eval/avg@{k}" in metrics:
        line += f"; train split avg@{k} {metrics[f'train_eval/avg@{k}']:.3f}"
    return line


def with_ci(value: float, ci: list[float] | None) -> str:
    return f"{value:.3f}" if not ci else f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def print_summary(
    console: Console, config: TrainConfig, summary: dict[str, Any], run_dir: Path
) -> None:
    k = config.eval.k
    table = Table(
        title=f"{learner_spec(config.schedule.learner).id} on {config.task}: {summary['stages']} stages, "
        f"{summary['wall_s']:.0f} s; 95% bootstrap CIs over distinct problems"
    )
    for col in ("metric", "before", "after"):
        table.add_column(col, justify="right" if col != "metric" else "left")
    for prefix, label in (("eval", config.eval.split), ("train_eval", "train split")):
        for metric in (f"avg@{k}", f"pass@{k}", f"maj@{k}"):
            name = f"{prefix}/{metric}"
            before, after = summary["before"].get(name), summary["after"].get(name)
            if after is not None:
                table.add_row(
                    f"{metric} ({label})",
                    "-" if before is None else with_ci(before, summary["before_ci"].get(name)),
                    with_ci(after, summary["after_ci"].get(name)),
                )
        name = f"{prefix}/exact_J"  # a tabular team on a task with an exact reward (no CI)
        before, after = summary["before"].get(name), summary["after"].get(name)
        if after is not None:
            table.add_row(
                f"exact J ({label})", "-" if before is None else f"{before:.3f}", f"{after:.3f}"
            )
    console.print(table)
    asked = summary["eval_problems"]
    for key, label in (
        ("eval_problems_distinct", f"held-out ({config.eval.split})"),
        ("train_eval_problems_distinct", "train split"),
    ):
        found = summary.get(key)
        if found is None:
            continue
        why = "" if found >= asked else f" (asked for {asked}: the split has no more)"
        console.print(f"{label} evaluation: {found} distinct problems x K={k}{why}")
    console.print(
        f"updates: {len(summary['updates'])}, raw KL out-of-region rate {summary['out_of_region_rate']:.2f}, "
        f"every accepted update inside its trust region: {summary['accepted_in_region']}; "
        f"rollouts {summary['totals'].get('rollouts', 0):.0f}, tokens {summary['totals'].get('tokens', 0):.0f}"
    )
    for name, path in summary["paths"].items():
        if path is not None:
            console.print(f"  {name:12s} {path}")


def json_finite(value: Any) -> Any:
    """JSON has no NaN/inf: they become null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_finite(v) for v in value]
    return value


def run_diagnostics(run_dir: str | Path) -> list[dict[str, float]]:
    """Each finished stage's diagnostics of a run directory, read from its ``metrics.jsonl``
    (so a run in progress can be inspected): ``{"stage": s, "diag/...": value, ...}``.

    Raises:
        ConfigError: the directory has no ``metrics.jsonl``.
    """
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise ConfigError(
            "teamtr diagnostics", [f"{path} does not exist: is {run_dir} a training run?"]
        )
    out = []
    for record in read_jsonl(path):
        keys = {
            k: v
            for k, v in record.items()
            if k.startswith("diag/") or k.startswith("stage/delta_stale")
        }
        if keys:
            out.append({"stage": record["step"], **keys})
    return out
