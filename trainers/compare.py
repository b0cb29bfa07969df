"""Benchmark learners on one team task at an equal budget: ``teamtr compare``.

For every seed, every learner trains from the same behaviour-cloned start (one clone per seed,
``sft.cache_dir`` under the output directory) with the same configuration: only the learner
differs. The comparison

- declares the budget every learner gets (the settings that fix the data and the gradient work
  of one update) and checks it after the runs: every learner's updates of a seed saw the same
  number of messages;
- is resumable: a finished run is read back, an interrupted one resumes from its last
  checkpoint, so a rerun of the same command continues where it stopped (a rerun with other
  settings is refused: an output directory never mixes results);
- runs the seeds one after another, or in parallel on Ray (``ray=True``; the workers' stage
  lines are printed as they come);
- reports, for every other learner, the paired difference of held-out avg@K against the first
  learner (``other - first``), with a bootstrap CI that resamples seeds and, within a seed, the
  held-out problems (the runs of a seed are evaluated on the same problems);
- writes ``compare.json`` (``paired``: one entry per other learner with ``trainer``, ``mean``,
  ``ci``), ``compare.md`` (the table) and ``compare.png`` (learning curves).

Example::

    from trainers.compare import CompareSpec, compare

    result = compare(CompareSpec("teamtr/Relay-v0", ("teamtr", "naive_sequential"), (0, 1),
                                 out="runs/cmp", quick=True))
    print(result["paired"])
"""

from __future__ import annotations

import io
import json
import math
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from teamtr_core.config import to_dict
from teamtr_core.errors import ConfigError
from teamtr_core.seeds import seed_errors
from trainers import rundir
from trainers.callbacks import Callback
from trainers.config import TrainConfig, load_train_config
from trainers.recipe import PER_PROBLEM_FILE, TrainingRecipe, load_checkpoint, run_training
from trainers.registry import RegistryError, learner_spec
from trainers.run_report import json_finite
from trainers.warm_start import behaviour_clone_cache

#: What ``quick`` adds before the user's overrides: a minutes-long smoke comparison.
QUICK_OVERRIDES = (
    "schedule.stages=2",
    "schedule.problems_per_batch=8",
    "sft.steps=200",
    "sft.problems=300",
    "eval.problems=40",
    "eval.train_distribution=false",
)
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
SPEC_FILE = "compare-spec.json"
_BOOTSTRAP = 2000


@dataclass(frozen=True)
class CompareSpec:
    """What to compare.

    Attributes:
        task: the registered task id.
        learners: learner ids or short names (``teamtr learners``); the first is the reference
            of the paired differences.
        seeds: the seeds; each gets its own behaviour-cloned start, shared by its learners.
        out: the output directory (runs, the clone cache, the reports).
        config_file: a training config file (YAML/JSON), if any.
        overrides: ``KEY=VALUE`` settings on top of it (as ``teamtr train --set``).
        quick: prepend :data:`QUICK_OVERRIDES` (a smoke comparison in minutes).
        ray: run the seeds in parallel on Ray.
        ray_address: the Ray cluster's address (``None``: a local Ray).
    """

    task: str
    learners: tuple[str, ...]
    seeds: tuple[int, ...]
    out: str | Path
    config_file: str | Path | None = None
    overrides: tuple[str, ...] = ()
    quick: bool = False
    ray: bool = False
    ray_address: str | None = None


def run_configs(spec: CompareSpec) -> dict[str, dict[int, TrainConfig]]:
    """Every run's configuration, ``learner id -> seed -> config``: the spec's configuration
    with the learner, the seed, the run directory and the shared clone cache set.

    Raises:
        ConfigError: every problem at once (unknown learners, no seeds, repeated entries, a bad
            configuration).
    """
    errors = []
    ids = []
    for name in spec.learners:
        try:
            ids.append(learner_spec(name).id)
        except RegistryError as exc:
            errors.append(str(exc))
    if len(spec.learners) < 2:
        errors.append(f"compare needs at least two learners, got {list(spec.learners)}")
    if len(set(ids)) < len(ids):
        errors.append(f"a learner is named twice: {list(spec.learners)}")
    if not spec.seeds or len(set(spec.seeds)) < len(spec.seeds):
        errors.append(f"seeds must be distinct and at least one, got {list(spec.seeds)}")
    errors += [f"seeds: {e}" for s in spec.seeds for e in seed_errors(s)]
    if errors:
        raise ConfigError("compare", errors)
    out = Path(spec.out)
    base = [*(QUICK_OVERRIDES if spec.quick else ()), *spec.overrides, f"task={spec.task}"]
    configs: dict[str, dict[int, TrainConfig]] = {}
    for learner in ids:
        configs[learner] = {}
        for seed in spec.seeds:
            run = out / "runs" / f"{learner.replace('/', '_')}-seed{seed}"
            configs[learner][seed] = load_train_config(
                spec.config_file,
                [
                    *base,
                    f"schedule.learner={learner}",
                    f"seed={seed}",
                    f"run_dir={run}",
                    f"sft.cache_dir={out / 'bc-cache'}",
                    "progress=false",
                ],
            )
    return configs


def declared_budget(config: TrainConfig) -> dict[str, Any]:
    """The settings of :data:`BUDGET_KEYS` in ``config``: the budget every learner gets."""
    data = to_dict(config)
    out = {}
    for key in BUDGET_KEYS:
        value: Any = data
        for part in key.split("."):
            value = value[part]
        out[key] = value
    return out


def shared_settings(config: TrainConfig) -> dict[str, Any]:
    """``config`` without what differs between the runs of a comparison (the learner, the seed,
    the run directory): what every run shares and a rerun must keep."""
    data = to_dict(config)
    data.pop("seed")
    data.pop("run_dir")
    data["schedule"] = {k: v for k, v in data["schedule"].items() if k != "learner"}
    return data


def _check_spec_file(out: Path, shared: dict[str, Any]) -> None:
    """Records the shared settings in ``out``; a rerun with other settings is refused."""
    path = out / SPEC_FILE
    if path.exists():
        recorded = json.loads(path.read_text())
        now, then = _flat(_plain(shared)), _flat(recorded)
        if now != then:
            differ = sorted(k for k in set(now) | set(then) if now.get(k) != then.get(k))
            raise ConfigError(
                "compare",
                [
                    f"{out} holds a comparison with other settings (they differ in {differ}); "
                    "rerun with the same settings to continue it, or choose another --out"
                ],
            )
        return
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(shared, indent=1, default=str))


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _flat(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"optim": {"lr": 1}}`` -> ``{"optim.lr": 1}``."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


class StageProgress(Callback):
    """One line per finished stage of a comparison's run (its own output is kept quiet)."""

    def __init__(self, console: Console, label: str, stages: int) -> None:
        self.console, self.label, self.stages = console, label, stages

    def on_stage_end(self, stage: int, metrics: Mapping[str, float]) -> bool | None:
        reward = metrics.get("stage/reward_start", math.nan)
        self.console.print(
            f"  {self.label}: stage {stage}/{self.stages}, reward of the stage-start team "
            f"{reward:.3f}",
            highlight=False,
        )
        return None


def run_one(config: TrainConfig, console: Console | None = None) -> dict[str, Any]:
    """One run of a comparison, resumable: its ``summary.json`` when it finished, else resumed
    from its last checkpoint, else started (a directory that holds no checkpoint yet is
    restarted: nothing of it can be kept). With a ``console``, a line per stage (and a note
    before a behaviour cloning that is not cached yet)."""
    run_dir = Path(config.run_dir)
    done = run_dir / "summary.json"
    quiet = Console(file=io.StringIO())
    if done.exists():
        return dict(json.loads(done.read_text()))
    label = f"{config.schedule.learner} seed {config.seed}"
    progress = [StageProgress(console, label, config.schedule.stages)] if console else []
    if run_dir.exists() and load_checkpoint(run_dir) is not None:
        if console is not None:
            console.print(f"resuming {run_dir}")
        return run_training(config, resume=True, console=quiet, callbacks=progress)
    cache = behaviour_clone_cache(config)
    if console is not None and cache is not None and not cache.exists():
        console.print(f"  {label}: behaviour cloning the seed's shared start first")
    return run_training(config, console=quiet, overwrite=run_dir.exists(), callbacks=progress)


class _LineRelay(io.StringIO):
    """The file of a Ray worker's console: every finished line goes to a Ray queue, and the
    driver prints it (``init_ray`` turns Ray's own forwarding of worker output off)."""

    def __init__(self, queue: Any) -> None:
        super().__init__()
        self.queue, self.pending = queue, ""

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            self.queue.put(line)
        return len(text)


def run_seed(
    configs: Sequence[TrainConfig], threads: int = 0, lines: Any = None
) -> list[dict[str, Any]]:
    """The runs of one seed, one after another (the first clones the team, the others load the
    clone); ``threads > 0`` sets torch's threads first (parallel seeds share the cores), and a
    Ray queue ``lines`` receives the runs' progress lines (one per stage)."""
    if threads > 0:
        import torch

        torch.set_num_threads(threads)
    console = None
    if lines is not None:
        console = Console(file=_LineRelay(lines), width=200, color_system=None)
    return [run_one(c, console) for c in configs]


def _print_lines(lines: Any, console: Console) -> None:
    """Prints what the workers have put on the queue ``lines`` so far."""
    for line in lines.get_nowait_batch(lines.qsize()):
        console.print(line, highlight=False)


def _run_on_ray(
    spec: CompareSpec,
    configs: Mapping[str, Mapping[int, TrainConfig]],
    console: Console,
) -> dict[str, dict[int, dict[str, Any]]]:
    """Every seed as one Ray task (its learners one after another, one torch thread), with the
    workers' stage lines printed as they come and each seed's results as it finishes."""
    from ray.util.queue import Queue

    from teamtr_env.runners.ray import init_ray

    ray = init_ray(spec.ray_address)
    learners = list(configs)
    results: dict[str, dict[int, dict[str, Any]]] = {learner: {} for learner in learners}
    lines = Queue()
    remote = ray.remote(num_cpus=1)(run_seed)
    seeds = {
        remote.remote([configs[learner][seed] for learner in learners], 1, lines): seed
        for seed in spec.seeds
    }
    console.print(f"running {len(seeds)} seeds on Ray")
    pending = list(seeds)
    while pending:
        done, pending = ray.wait(pending, num_returns=1, timeout=1.0)
        _print_lines(lines, console)
        for ref in done:
            seed = seeds[ref]
            for learner, summary in zip(learners, ray.get(ref)):
                results[learner][seed] = summary
                console.print(f"{learner} seed {seed}: {_after_line(summary)}")
    lines.shutdown()
    return results


def _run_all(
    spec: CompareSpec,
    configs: Mapping[str, Mapping[int, TrainConfig]],
    console: Console,
) -> dict[str, dict[int, dict[str, Any]]]:
    """Every run's summary, ``learner -> seed -> summary``."""
    if spec.ray:
        return _run_on_ray(spec, configs, console)
    learners = list(configs)
    results: dict[str, dict[int, dict[str, Any]]] = {learner: {} for learner in learners}
    for seed in spec.seeds:
        for learner in learners:
            console.print(f"{learner} seed {seed} ...")
            summary = run_one(configs[learner][seed], console)
            results[learner][seed] = summary
            console.print(f"{learner} seed {seed}: {_after_line(summary)}")
    return results


def _after_line(summary: Mapping[str, Any]) -> str:
    k = summary["config"]["eval"]["k"]
    before, after = summary["before"], summary["after"]
    return (
        f"held-out avg@{k} {before.get(f'eval/avg@{k}', math.nan):.3f} -> "
        f"{after.get(f'eval/avg@{k}', math.nan):.3f}, {summary['wall_s']:.0f} s"
    )


def measured_budget(
    results: Mapping[str, Mapping[int, Mapping[str, Any]]],
) -> dict[str, Any]:
    """Messages per update of every run, and whether every learner of a seed saw the same
    (``equal``): the check of the declared budget."""
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
    return {"equal": equal, "messages_per_update": messages}


def _per_problem(summary: Mapping[str, Any]) -> dict[str, float]:
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
    means = np.empty(samples)
    for b in range(samples):
        picked = [diffs[j] for j in rng.integers(len(diffs), size=len(diffs))]
        means[b] = np.mean([d[rng.integers(d.size, size=d.size)].mean() for d in picked])
    low, high = np.quantile(means, [0.025, 0.975])
    return {
        "mean": float(np.mean(per_seed)),
        "ci": [float(low), float(high)],
        "per_seed": per_seed,
        "seeds": seeds,
    }


#: A tabular team's exact expected reward after training (``trainers.team_eval.exact_key``).
EXACT_KEY = "eval/exact_J"


def paired_exact(first: Mapping[int, float], other: Mapping[int, float]) -> dict[str, Any]:
    """``other - first`` in exact J, paired by seed: :func:`paired_difference` with one value
    per seed (J is exact, so the bootstrap resamples seeds alone: the initial tables and the
    sampled batches are the only noise)."""
    return paired_difference(
        {s: {EXACT_KEY: v} for s, v in first.items()},
        {s: {EXACT_KEY: v} for s, v in other.items()},
    )


def _curve(summary: Mapping[str, Any]) -> list[float]:
    """The run's training reward per stage under the stage-start team (``stage/reward_start``)."""
    path = Path(summary["paths"]["metrics"])
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    by_step = {r["step"]: r["stage/reward_start"] for r in rows if "stage/reward_start" in r}
    return [by_step[s] for s in sorted(by_step)]


def report(
    spec: CompareSpec,
    configs: Mapping[str, Mapping[int, TrainConfig]],
    results: Mapping[str, Mapping[int, Mapping[str, Any]]],
) -> dict[str, Any]:
    """The comparison's JSON: the declared and measured budget, each learner's per-seed
    results and curves, and the paired differences against the first learner."""
    learners = list(results)
    first_config = next(iter(configs[learners[0]].values()))
    k = first_config.eval.k
    key = f"eval/avg@{k}"
    per_problem = {
        learner: {seed: _per_problem(s) for seed, s in runs.items()}
        for learner, runs in results.items()
    }
    rows: dict[str, dict[str, Any]] = {}
    for learner, runs in results.items():
        after = [runs[s]["after"][key] for s in sorted(runs)]
        rows[learner] = {
            "seeds": sorted(runs),
            "before": [runs[s]["before"][key] for s in sorted(runs)],
            "after": after,
            "after_mean": float(np.mean(after)),
            "after_std": float(np.std(after, ddof=1)) if len(after) > 1 else 0.0,
            "eval_problems_distinct": [runs[s].get("eval_problems_distinct") for s in sorted(runs)],
            "delta_stale": [
                _sum_finite(u.get("stale_gap") for u in runs[s]["updates"]) for s in sorted(runs)
            ],
            "noise_floor": [
                _sum_finite(u.get("noise_floor") for u in runs[s]["updates"]) for s in sorted(runs)
            ],
            "wall_s": [runs[s]["wall_s"] for s in sorted(runs)],
            "curves": [_curve(runs[s]) for s in sorted(runs)],
        }
        exact = [runs[s]["after"].get(EXACT_KEY) for s in sorted(runs)]
        if all(v is not None for v in exact):  # a tabular team on a task with an exact J
            rows[learner]["exact_before"] = [runs[s]["before"][EXACT_KEY] for s in sorted(runs)]
            rows[learner]["exact_after"] = exact
    paired = [
        {
            "trainer": learner,
            "learner": learner,
            **paired_difference(per_problem[learners[0]], per_problem[learner]),
        }
        for learner in learners[1:]
    ]
    for entry in paired:
        if "exact_after" in rows[entry["learner"]] and "exact_after" in rows[learners[0]]:
            entry["exact"] = paired_exact(
                dict(zip(rows[learners[0]]["seeds"], rows[learners[0]]["exact_after"])),
                dict(zip(rows[entry["learner"]]["seeds"], rows[entry["learner"]]["exact_after"])),
            )
    return {
        "task": spec.task,
        "learners": learners,
        "reference": learners[0],
        "seeds": list(spec.seeds),
        "metric": key,
        "eval_split": first_config.eval.split,
        "budget": {**declared_budget(first_config), **measured_budget(results)},
        "results": rows,
        "paired": paired,
        "command": " ".join(sys.argv),
    }


def _sum_finite(values: Any) -> float | None:
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
        "problems.",
        "",
        "| learner | before | after | paired diff | 95% CI | Δ_stale / run | floor / run |",
        "|---|---|---|---|---|---|---|",
    ]
    paired = {p["trainer"]: p for p in data["paired"]}
    for learner, row in data["results"].items():
        p = paired.get(learner)
        diff = "-" if p is None else f"{p['mean']:+.3f}"
        ci = "-" if p is None else f"[{p['ci'][0]:+.3f}, {p['ci'][1]:+.3f}]"
        gaps = [g for g in row["delta_stale"] if g is not None]
        floors = [g for g in row["noise_floor"] if g is not None]
        lines.append(
            f"| {learner} | {_mean_std(row['before'])} | {_mean_std(row['after'])} | {diff} | "
            f"{ci} | {_mean_std(gaps) if gaps else '-'} | {_mean_std(floors) if floors else '-'} |"
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
    lines += ["", f"Budget per update: {declared}; messages per update: {check}.", ""]
    return "\n".join(lines)


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
            ax1.plot(range(1, width + 1), mean, marker="o", label=learner)
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
    ax2.set_xticks(range(len(names)), [n.split("/")[-1].rsplit("-v", 1)[0] for n in names])
    ax2.tick_params(axis="x", labelrotation=20)
    ax2.set_title(f"held-out {data['metric']} after training (± std over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def compare(
    spec: CompareSpec,
    console: Console | None = None,
    run_all: Callable[..., dict[str, dict[int, dict[str, Any]]]] | None = None,
) -> dict[str, Any]:
    """Runs (or continues) the comparison of ``spec`` and writes its reports under
    ``spec.out``; returns ``compare.json``'s content.

    Raises:
        ConfigError: every problem with the spec or the configuration at once, or an output
            directory that holds a comparison with other settings.
    """
    console = console or Console()
    configs = run_configs(spec)
    out = Path(spec.out)
    first = next(iter(next(iter(configs.values())).values()))
    # what every run would refuse (the task and its options, the team, the splits) is refused
    # before --out is touched; the runs differ only in learner and seed, checked with the config
    TrainingRecipe(first, console=Console(file=io.StringIO())).check()
    with rundir.DirectoryLock(out).acquire("compare --out"):
        return _compare(spec, configs, out, first, console, run_all)


def _compare(
    spec: CompareSpec,
    configs: dict[str, dict[int, TrainConfig]],
    out: Path,
    first: TrainConfig,
    console: Console,
    run_all: Callable[..., dict[str, dict[int, dict[str, Any]]]] | None,
) -> dict[str, Any]:
    """:func:`compare` once its ``--out`` is locked."""
    _check_spec_file(out, shared_settings(first))
    budget = declared_budget(first)
    console.print(
        f"compare {', '.join(configs)} on {spec.task}, seeds {list(spec.seeds)}; every learner "
        "gets the same budget per update: " + ", ".join(f"{k}={v}" for k, v in budget.items()),
        soft_wrap=True,
    )
    results = (run_all or _run_all)(spec, configs, console)
    data = report(spec, configs, results)
    if not data["budget"]["equal"]:
        console.print(
            "[yellow]warning:[/] the learners' updates did not see the same number of messages "
            "(compare.json: budget.messages_per_update): the comparison is not at an equal budget"
        )
    (out / "compare.json").write_text(json.dumps(json_finite(data), indent=2))
    (out / "compare.md").write_text(markdown(data))
    plot(data, out / "compare.png")
    console.print(markdown(data), highlight=False, soft_wrap=True, markup=False)
    console.print(
        f"wrote {out / 'compare.json'}, {out / 'compare.md'} and {out / 'compare.png'}",
        soft_wrap=True,
    )
    return data


__all__ = [
    "BUDGET_KEYS",
    "QUICK_OVERRIDES",
    "CompareSpec",
    "compare",
    "declared_budget",
    "measured_budget",
    "paired_difference",
    "run_configs",
    "run_one",
    "run_seed",
]
