"""Benchmark learners on one team task at an equal budget: ``teamtr compare``.

Every run trains from the same behaviour-cloned start (cloned once, ``sft.cache_dir`` under the
output directory: the clone depends on ``sft.seed``, not on the run's seed) with the same
configuration: within a seed only the learner differs, and the seeds vary the training rollouts
and the evaluation problems. The comparison

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
- writes ``compare.json`` (``paired``: one entry per other learner with ``learner``, ``mean``,
  ``ci``), ``compare.md`` (the table) and ``compare.png`` (learning curves).

Example::

    from trainers.tools.compare import CompareSpec, compare

    result = compare(CompareSpec("teamtr/Relay-v0", ("teamtr", "naive_sequential"), (0, 1),
                                 out="runs/cmp", quick=True))
    print(result["paired"])
"""

from __future__ import annotations

import io
import json
import math
import re
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
from trainers.config import TrainConfig
from trainers.learners.callbacks import Callback
from trainers.learners.registry import RegistryError, learner_spec
from trainers.run import rundir
from trainers.run.config_file import load_train_config
from trainers.run.recipe import TrainingRecipe, load_checkpoint, run_training
from trainers.run.report import json_finite
from trainers.run.warm_start import behaviour_clone_cache
from trainers.tools.compare_out import SPEC_FILE, check_out, start_out
from trainers.tools.compare_stats import (
    BUDGET_KEYS,
    EXACT_KEY,
    gain_over_seeds,
    generation_line,
    markdown,
    measured_budget,
    paired_difference,
    paired_exact,
    per_problem_avg,
    plot,
    reward_curve,
    sum_finite,
)

#: What ``quick`` adds before the user's overrides: a minutes-long smoke comparison (its
#: ``sft.*`` settings only where the runs behaviour-clone: a config's ``sft: null`` stays off).
QUICK_OVERRIDES = (
    "schedule.stages=2",
    "schedule.problems_per_batch=8",
    "sft.steps=200",
    "sft.problems=300",
    "eval.problems=40",
    "eval.train_distribution=false",
)


@dataclass(frozen=True)
class CompareSpec:
    """What to compare.

    Attributes:
        task: the registered task id.
        learners: learner ids or short names (``teamtr learners``), each optionally a variant
            with settings of its own, ``NAME:KEY=VALUE[,KEY=VALUE...]`` (for an ablation:
            ``at_grpo:learner_options.trust_region=true``; :func:`learner_entry`); the first is the
            reference of the paired differences.
        seeds: the seeds (of the training rollouts and the evaluation problems; every run
            starts from the one behaviour clone).
        out: the output directory (runs, the clone cache, the reports).
        config_file: a training config file (YAML/JSON), if any.
        overrides: ``KEY=VALUE`` settings on top of it (as ``teamtr train --set``).
        quick: prepend :data:`QUICK_OVERRIDES` (a smoke comparison in minutes).
        ray: run the seeds in parallel on Ray.
        ray_address: the Ray cluster's address (``None``: a local Ray).
        overwrite: replace a comparison already in ``out`` (without it, ``out`` must be new,
            empty, or hold a comparison of the same settings, which is continued).
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
    overwrite: bool = False


def run_configs(spec: CompareSpec) -> dict[str, dict[int, TrainConfig]]:
    """Every run's configuration, ``learner id -> seed -> config``: the spec's configuration
    with the learner, the seed, the run directory and the shared clone cache set.

    Raises:
        ConfigError: every problem at once (unknown learners, no seeds, repeated entries, a bad
            configuration).
    """
    errors = []
    entries: dict[str, tuple[str, tuple[str, ...]]] = {}  # label -> (learner id, its settings)
    labels = []
    for name in spec.learners:
        try:
            label, learner, sets = learner_entry(name)
        except (RegistryError, ConfigError) as exc:
            errors.append(str(exc))
            continue
        labels.append(label)
        entries[label] = (learner, sets)
    if len(spec.learners) < 2:
        errors.append(f"compare needs at least two learners, got {list(spec.learners)}")
    if len(set(labels)) < len(labels):
        errors.append(f"a learner is named twice: {list(spec.learners)}")
    if not spec.seeds or len(set(spec.seeds)) < len(spec.seeds):
        errors.append(f"seeds must be distinct and at least one, got {list(spec.seeds)}")
    errors += [f"seeds: {e}" for s in spec.seeds for e in seed_errors(s)]
    if errors:
        raise ConfigError("compare", errors)
    out = Path(spec.out)
    quick = QUICK_OVERRIDES if spec.quick else ()
    # Whether the runs behaviour-clone is the config's (or the user's) to say: quick's `sft.`
    # settings, and the shared clone's folder, are added only where they do (any `sft.` key
    # would turn a config's `sft: null` on).
    quick_no_sft = [o for o in quick if not o.startswith("sft.")]
    user = [*spec.overrides, f"task={spec.task}"]
    cache = f"sft.cache_dir={out / 'bc-cache'}"
    configs: dict[str, dict[int, TrainConfig]] = {}
    for label, (learner, sets) in entries.items():
        configs[label] = {}
        for seed in spec.seeds:
            run = out / "runs" / f"{_folder_name(label)}-seed{seed}"
            own = [*sets, f"schedule.learner={learner}", f"seed={seed}", f"run_dir={run}"]
            own.append("progress=false")
            config = load_train_config(spec.config_file, [*quick_no_sft, *user, *own])
            if config.sft is not None:
                config = load_train_config(spec.config_file, [*quick, *user, *own, cache])
            configs[label][seed] = config
    return configs


def learner_entry(entry: str) -> tuple[str, str, tuple[str, ...]]:
    """A ``--learners`` entry as ``(label, learner id, its own settings)``: ``NAME`` gives the
    registered id (a short name resolved) and no settings; a variant ``NAME:KEY=VALUE[,...]``
    gives ``id:KEY=VALUE,...`` as its label and its ``KEY=VALUE`` settings, applied on top of the
    comparison's own (``teamtr train --set``'s syntax); ``LABEL=NAME:KEY=VALUE[,...]`` names
    the variant ``LABEL`` (letters, digits and ``_.+-``).

    Raises:
        RegistryError: no learner registered as ``NAME``.
        ConfigError: a setting without ``=``, or a label with other characters.
    """
    head, _, rest = entry.partition(":")
    label = None
    if "=" in head:
        label, head = (part.strip() for part in head.split("=", 1))
        if not re.fullmatch(r"[A-Za-z0-9_.+-]+", label):
            raise ConfigError(
                "compare", [f"learner {entry!r}: a label is letters, digits and _.+- only"]
            )
    learner = learner_spec(head.strip()).id
    if not rest:
        return label or learner, learner, ()
    sets = tuple(s.strip() for s in rest.split(",") if s.strip())
    bad = [s for s in sets if "=" not in s]
    if bad or not sets:
        raise ConfigError(
            "compare",
            [
                f"learner {entry!r}: a variant is NAME:KEY=VALUE[,KEY=VALUE...] (e.g. "
                f"at_grpo:learner_options.trust_region=true), got {bad or [rest]}"
            ],
        )
    return label or f"{learner}:{','.join(sets)}", learner, sets


def _folder_name(label: str) -> str:
    """A learner label as a folder name: ``teamtr/TeamTR-v0:trust_region.delta_mode=none`` ->
    ``teamtr_TeamTR-v0_trust_region.delta_mode-none``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label.replace("=", "-"))


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


def run_one(
    config: TrainConfig, console: Console | None = None, label: str | None = None
) -> dict[str, Any]:
    """One run of a comparison, resumable: its ``summary.json`` when it finished, else resumed
    from its last checkpoint, else started (a directory that holds no checkpoint yet is
    restarted: nothing of it can be kept). With a ``console``, a line per stage (and a note
    before a behaviour cloning that is not cached yet), named ``label`` (a variant's; default:
    the learner)."""
    run_dir = Path(config.run_dir)
    done = run_dir / "summary.json"
    quiet = Console(file=io.StringIO())
    if done.exists():
        return dict(json.loads(done.read_text()))
    name = f"{label or config.schedule.learner} seed {config.seed}"
    progress = [StageProgress(console, name, config.schedule.stages)] if console else []
    if run_dir.exists() and load_checkpoint(run_dir) is not None:
        if console is not None:
            console.print(f"resuming {run_dir}")
        return run_training(config, resume=True, console=quiet, callbacks=progress)
    cache = behaviour_clone_cache(config)
    if console is not None and cache is not None and not cache.exists():
        console.print(f"  {name}: behaviour cloning the shared start first")
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
    configs: Sequence[TrainConfig],
    threads: int = 0,
    lines: Any = None,
    labels: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """The runs of one seed, one after another (the first run of the comparison clones the team,
    the others load the clone); ``threads > 0`` sets torch's threads first (parallel seeds share
    the cores), and a Ray queue ``lines`` receives the runs' progress lines (one per stage),
    named by ``labels`` (the comparison's learner labels)."""
    if threads > 0:
        import torch

        torch.set_num_threads(threads)
    console = None
    if lines is not None:
        console = Console(file=_LineRelay(lines), width=200, color_system=None)
    names = list(labels) if labels is not None else [None] * len(configs)
    return [run_one(c, console, label=name) for c, name in zip(configs, names)]


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
        remote.remote([configs[learner][seed] for learner in learners], 1, lines, learners): seed
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
            summary = run_one(configs[learner][seed], console, label=learner)
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


def report(
    spec: CompareSpec,
    configs: Mapping[str, Mapping[int, TrainConfig]],
    results: Mapping[str, Mapping[int, Mapping[str, Any]]],
) -> dict[str, Any]:
    """The comparison's JSON: the declared and measured budget, each learner's per-seed
    results and curves, and the paired differences against the first learner."""
    learners = list(results)
    first_config = next(iter(configs[learners[0]].values()))
    spec_sets = {label: sets for label, _, sets in map(learner_entry, spec.learners)}
    k = first_config.eval.k
    key = f"eval/avg@{k}"
    per_problem = {
        learner: {seed: per_problem_avg(s) for seed, s in runs.items()}
        for learner, runs in results.items()
    }
    rows: dict[str, dict[str, Any]] = {}
    for learner, runs in results.items():
        before = [runs[s]["before"][key] for s in sorted(runs)]
        after = [runs[s]["after"][key] for s in sorted(runs)]
        rows[learner] = {
            "seeds": sorted(runs),
            "before": before,
            "after": after,
            "after_mean": float(np.mean(after)),
            "gain": gain_over_seeds(before, after),
            "after_std": float(np.std(after, ddof=1)) if len(after) > 1 else 0.0,
            "eval_problems_distinct": [runs[s].get("eval_problems_distinct") for s in sorted(runs)],
            "delta_stale": [
                sum_finite(u.get("stale_gap") for u in runs[s]["updates"]) for s in sorted(runs)
            ],
            "noise_floor": [
                sum_finite(u.get("noise_floor") for u in runs[s]["updates"]) for s in sorted(runs)
            ],
            # D_occ by likelihood ratios (diagnostics: full), summed over the run's updates
            "d_occ_lr": [
                sum_finite(u.get("d_occ_lr_term") for u in runs[s]["updates"]) for s in sorted(runs)
            ],
            "wall_s": [runs[s]["wall_s"] for s in sorted(runs)],
            "curves": [reward_curve(runs[s]) for s in sorted(runs)],
        }
        exact = [runs[s]["after"].get(EXACT_KEY) for s in sorted(runs)]
        if all(v is not None for v in exact):  # a tabular team on a task with an exact J
            rows[learner]["exact_before"] = [runs[s]["before"][EXACT_KEY] for s in sorted(runs)]
            rows[learner]["exact_after"] = exact
    paired = [
        {
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
        "variants": {
            label: {"learner": c.schedule.learner, "settings": list(spec_sets[label])}
            for label, c in ((lb, next(iter(configs[lb].values()))) for lb in learners)
            if spec_sets.get(label)
        },
        "results": rows,
        "paired": paired,
        "command": " ".join(sys.argv),
    }


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
    shared = shared_settings(first)
    check_out(out, shared, spec.overwrite)  # refused before the lock makes the folder
    made = not out.exists()
    lock = rundir.DirectoryLock(out).acquire("compare --out")
    try:
        start_out(out, shared, spec.overwrite, console)
    except BaseException:
        lock.release()
        rundir.remove_if_empty(out, made)
        raise
    with lock:
        return _compare(spec, configs, out, first, console, run_all)


def _compare(
    spec: CompareSpec,
    configs: dict[str, dict[int, TrainConfig]],
    out: Path,
    first: TrainConfig,
    console: Console,
    run_all: Callable[..., dict[str, dict[int, dict[str, Any]]]] | None,
) -> dict[str, Any]:
    """:func:`compare` once its ``--out`` is locked and started."""
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
    if data["budget"]["generation_equal"] is False:
        console.print(
            f"note: the learners' training updates are equal, their generation is not: "
            f"{generation_line(data['budget'])}",
            soft_wrap=True,
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
    "SPEC_FILE",
    "CompareSpec",
    "check_out",
    "compare",
    "declared_budget",
    "learner_entry",
    "measured_budget",
    "paired_difference",
    "run_configs",
    "run_one",
    "run_seed",
]
