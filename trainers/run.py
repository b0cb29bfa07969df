"""A whole training run: models, behaviour cloning, evaluation, stages, checkpoints, logs, plot.

``run_training(config)`` is what ``teamtr train`` calls. Layout of ``config.run_dir``::

    config.yaml          the resolved configuration
    models/tiny/         the tiny model (when the config names no team)
    metrics.jsonl        every logged metric (one JSON object per step)
    tb/                  TensorBoard event files
    checkpoints/         stage_XXXX.pt (all agents, optimizers, beta, delta, counters, RNG) + latest
    curves.png           learning curves
    summary.json         before/after evaluation, totals, per-update records

Resuming (``resume=True``) continues after the last intact checkpoint and gives the same result
as an uninterrupted run with the same seed: every random draw derives from (seed, stage, index).
A new run needs an empty directory (or ``overwrite=True``), and a resume must have the run's own
configuration: see :mod:`trainers.rundir`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

import teamtr_env
from tasks.base import SupportsExpert
from teamtr_core.config import dump_config, from_dict, to_dict
from teamtr_core.errors import ConfigError
from teamtr_core.policy import SamplingParams, TrainablePolicy
from teamtr_env.evaluation import CLIPPED_WARN_RATIO, evaluate
from teamtr_env.runners import Runner, derive_seed
from trainers import rundir
from trainers.callbacks import Callback, CallbackList, EarlyStopping, load_callbacks
from trainers.config import TrainConfig
from trainers.logger import (
    JsonlLogger,
    MetricsLogger,
    MultiLogger,
    make_loggers,
    missing_loggers,
    plot_learning_curves,
)
from trainers.registry import trainer_spec
from trainers.team_trainer import TeamTrainer

log = logging.getLogger(__name__)
_EVAL_STREAM = 999_983


class StopTraining(Exception):
    """Raised by a ``stop_after`` hook (tests simulate a crash with it)."""


def build_policies(config: TrainConfig, env: Any, run_dir: Path) -> dict[str, Any]:
    """Every agent's policy: the team config's, or a separate copy of the tiny model each."""
    if config.team is not None:
        from adapters.team import build_team

        policies, _ = build_team(config.team, env.possible_agents, env.task)
        return policies
    from adapters.hf import HFPolicy
    from adapters.tiny import build_tiny_model

    path = run_dir / "models" / "tiny"
    if not (path / "config.json").exists():
        build_tiny_model(path, config.tiny_model)
    return {a: HFPolicy.from_pretrained(path) for a in env.possible_agents}


def agent_sampling(config: TrainConfig, agents: Sequence[str]) -> dict[str, SamplingParams]:
    """Each agent's rollout sampling: its own ``sampling`` in the team config, else the team's,
    else the run's ``sampling`` (every agent's when there is no team config)."""
    if config.team is not None:
        from adapters.team import team_sampling

        return team_sampling(config.team, agents, base=config.sampling)
    return dict.fromkeys(agents, config.sampling)


def evaluate_team(
    config: TrainConfig,
    env_fn: Callable[[], Any],
    policies: dict[str, Any],
    prefix: str = "eval",
) -> dict[str, float]:
    """avg@K / pass@K (and maj@K) on up to ``config.eval.problems`` distinct problems of
    ``env_fn``'s problem set (for generated tasks, the held-out split's partition: disjoint from
    the training problems); a small split gives fewer (``Runner.sample_distinct``).

    ``prefix`` namespaces the keys: ``eval/`` for the before/after (test) evaluation, ``val/`` for
    the validation evaluations used for model selection. ``problems/{prefix}_distinct`` is the
    number of distinct problems evaluated (logged, not plotted); ``{prefix}/clipped_ratio/<agent>``
    the share of each agent's messages that hit the token limit (cut off)."""
    sampling = agent_sampling(config, list(policies))
    runner = Runner(env_fn, policies, sampling, progress=False)
    seed = derive_seed(config.seed, _EVAL_STREAM)
    problems, draw = runner.sample_distinct(config.eval.problems, seed=seed)
    if draw.shortfall:
        log.info("%s evaluation: %s", prefix, draw.message)
    report = evaluate(runner, problems, config.eval.k, seed=seed)
    out: dict[str, float] = {f"{prefix}/{name}": m.mean for name, m in report.metrics.items()}
    for name, m in report.metrics.items():  # bootstrap CIs over distinct problems (not plotted)
        out[f"ci/{prefix}/{name}_low"], out[f"ci/{prefix}/{name}_high"] = m.ci_low, m.ci_high
    out[_distinct_key(prefix)] = report.n_problems_distinct
    for agent, ratio in report.clipped_ratio.items():
        out[clipped_key(prefix, agent)] = ratio
    return out


def clipped_key(prefix: str, agent: str) -> str:
    """The metric key of ``agent``'s share of messages cut off at the token limit in an
    evaluation (``eval/clipped_ratio/solver``)."""
    return f"{prefix}/clipped_ratio/{agent}"


def clipped_warnings(
    metrics: Mapping[str, float], sampling: Mapping[str, SamplingParams]
) -> list[str]:
    """One line per agent whose share of messages that hit the token limit exceeds
    ``CLIPPED_WARN_RATIO`` in the evaluations of ``metrics`` (its highest share over ``eval/``
    and ``train_eval/``), naming the share and the agent's ``sampling.max_new_tokens``."""
    lines = []
    for agent, params in sampling.items():
        shares = [
            metrics[key]
            for key in (clipped_key("eval", agent), clipped_key("train_eval", agent))
            if key in metrics
        ]
        share = max(shares, default=0.0)
        if share > CLIPPED_WARN_RATIO:
            lines.append(
                f"{share:.0%} of {agent}'s messages in the evaluation before training hit the "
                f"token limit (sampling.max_new_tokens = {params.max_new_tokens}) without an end "
                "token: its messages are being cut off. Raise sampling.max_new_tokens (e.g. "
                "--set sampling.max_new_tokens=N; with a team config, the agent's own sampling "
                "section if it sets one) to at least the longest answer in tokens plus one for "
                "the end token."
            )
    return lines


def _distinct_key(prefix: str) -> str:
    return f"problems/{prefix}_distinct"


def _evaluate_all(
    config: TrainConfig,
    eval_fn: Callable[[], Any],
    train_fn: Callable[[], Any],
    policies: dict[str, Any],
) -> dict[str, float]:
    """The held-out evaluation (``eval/``) and, if asked, the training split's (``train_eval/``),
    each with its number of distinct problems (``problems/eval_distinct``,
    ``problems/train_eval_distinct``)."""
    out = evaluate_team(config, eval_fn, policies)
    if config.eval.train_distribution:
        out.update(evaluate_team(config, train_fn, policies, prefix="train_eval"))
    return out


def save_checkpoint(
    run_dir: Path, trainer: TeamTrainer, extra: dict[str, Any], keep: int = 2
) -> Path:
    """Atomically writes ``checkpoints/stage_XXXX.pt`` with the configuration that determines the
    results, points ``latest`` at it and keeps the last ``keep`` stages (``trainers.rundir``)."""
    state = {"trainer": trainer.state_dict(), "extra": extra, "config": _result_config(trainer)}
    return rundir.save(run_dir / "checkpoints", trainer.stage, state, keep)


def _result_config(trainer: TeamTrainer) -> dict[str, Any]:
    return rundir.result_config(to_dict(trainer.config))


def load_checkpoint(run_dir: Path) -> dict[str, Any] | None:
    """The newest intact checkpoint's contents (``None``: there is none); see
    :func:`trainers.rundir.load` (weights-only; an unreadable latest falls back)."""
    found = rundir.load(run_dir / "checkpoints")
    return found.state if found else None


def run_training(
    config: TrainConfig,
    *,
    resume: bool = False,
    console: Console | None = None,
    stop_after: int | None = None,
    overwrite: bool = False,
    callbacks: Sequence[Callback] = (),
    loggers: Sequence[MetricsLogger] = (),
) -> dict[str, Any]:
    """Runs (or resumes) a training run and returns its summary (also saved as summary.json).

    The configuration is checked completely before anything is written, and the run directory
    rules of :mod:`trainers.rundir` apply: a new run needs an empty directory (or
    ``overwrite``), a resume must have the run's own configuration.

    Args:
        config: the run configuration.
        resume: continue after the last intact checkpoint in ``config.run_dir``.
        console: where to print; a default console when ``None``.
        stop_after: raise ``StopTraining`` after this many completed stages (crash simulation).
        overwrite: replace a run already in ``config.run_dir`` (its files are deleted first).
        callbacks: :class:`trainers.callbacks.Callback` objects, called before the config's
            ``callbacks`` and ``eval.early_stop_patience``'s early stopping.
        loggers: extra metric loggers (anything with ``log(metrics, step)`` and ``close()``),
            beside ``metrics.jsonl`` and the config's ``loggers``.

    Raises:
        ConfigError: a problem with the config, the run directory or its checkpoints, listed
            before anything is written.
    """
    console = console or Console()
    if config.torch_threads > 0:
        torch.set_num_threads(config.torch_threads)
    run_dir = Path(config.run_dir)
    # Everything that can reject the run comes before anything is written.
    env_fn = _env_factory(config, "train")
    eval_fn = _env_factory(config, config.eval.split)
    val_fn = _env_factory(config, "validation")
    env = env_fn()
    _check_before_writing(config, env)
    hooks = CallbackList([*callbacks, *load_callbacks(config.callbacks)])
    if config.eval.early_stop_patience:
        hooks.callbacks.append(
            EarlyStopping(f"val/avg@{config.eval.k}", patience=config.eval.early_stop_patience)
        )
    found = rundir.load(run_dir / "checkpoints") if resume else None
    if resume:
        rundir.check_resume(run_dir, _normalised(to_dict(config)), found, _normalised)
    _check_training_split(config, env, eval_fn(), console)
    _check_drawable(config, env_fn, eval_fn, val_fn)
    deleted = rundir.prepare(run_dir, resume=resume, overwrite=overwrite)
    if deleted:
        others = sorted(p.name for p in run_dir.iterdir())
        kept = f"; left alone: {', '.join(others)}" if others else ""
        console.print(f"--overwrite: deleted {', '.join(deleted)} in {run_dir}{kept}")
    for reason in found.skipped if found else ():
        console.print(f"[yellow]skipped a checkpoint:[/] {reason}")
    checkpoint = found.state if found else None
    if resume and checkpoint is None:
        console.print(f"no checkpoint in {run_dir}: starting from scratch")
    run_dir.mkdir(parents=True, exist_ok=True)
    dump_config(config, run_dir / "config.yaml")
    policies = build_policies(config, env, run_dir)
    if not any(isinstance(p, TrainablePolicy) for p in policies.values()):
        raise ConfigError(
            "train", ["no agent has a trainable policy (backend 'hf' or a TrainablePolicy)"]
        )
    trainer = TeamTrainer(config, env_fn, policies, sampling=agent_sampling(config, list(policies)))
    start_step = checkpoint["trainer"]["stage"] if checkpoint else None
    trainer.update_hooks.append(hooks.on_update)
    logger = MultiLogger(
        JsonlLogger(run_dir / "metrics.jsonl", resume_step=start_step),
        *make_loggers(config.loggers, run_dir, to_dict(config), config.logger_options),
        *loggers,
    )
    t0 = time.perf_counter()
    try:
        if checkpoint is not None:
            trainer.load_state_dict(checkpoint["trainer"])
            extra = checkpoint["extra"]
            console.print(f"resumed {run_dir} after stage {trainer.stage} ({found.path.name})")  # type: ignore[union-attr]
        else:
            extra = {"updates": [], "sft": None}
            if config.sft is not None:
                extra["sft"] = _behaviour_clone(config, env_fn, env, policies, console)
            extra["before"] = _evaluate_all(config, eval_fn, env_fn, policies)
            logger.log(extra["before"], step=0)
            hooks.on_eval("eval", 0, extra["before"])
            console.print(_metrics_line("before training", extra["before"], config.eval.k))
            for line in clipped_warnings(extra["before"], trainer.runner.sampling):
                log.warning("%s", line)
                console.print(f"[yellow]warning:[/] {line}", highlight=False)
        _run_stages(
            config, trainer, logger, extra, run_dir, val_fn, policies, console, stop_after, hooks
        )
        if config.eval.select == "best_validation" and extra.get("best"):
            _load_best(run_dir, policies)
            best = extra["best"]
            console.print(
                f"final evaluation uses the team of stage {best['stage']} "
                f"(best validation avg@{config.eval.k} {best['value']:.3f})"
            )
        after = _evaluate_all(config, eval_fn, env_fn, policies)
        logger.log(after, step=trainer.stage)
        hooks.on_eval("eval", trainer.stage, after)
    finally:
        logger.close()
    summary = _summary(config, trainer, extra, after, time.perf_counter() - t0, run_dir)
    if config.plot:
        plot_learning_curves(
            run_dir / "metrics.jsonl",
            run_dir / "curves.png",
            title=f"{trainer_spec(config.schedule.method).id} on {config.task}",
        )
    (run_dir / "summary.json").write_text(json.dumps(_finite(summary), indent=2, default=str))
    _print_summary(console, config, summary, run_dir)
    return summary


def _check_before_writing(config: TrainConfig, env: Any) -> None:
    """The checks of the learner, the team config and behaviour cloning (the task needs a
    scripted expert) that building the trainer would make, done before the run directory is
    touched (every problem at once)."""
    from trainers.registry import make_learner

    problems = list(make_learner(config.schedule.method).check(config))
    problems += [f"loggers: {p}" for p in missing_loggers(config.loggers)]
    if config.sft is not None and not isinstance(env.task, SupportsExpert):
        problems.append(
            f"sft: {config.task} has no scripted expert to behaviour-clone (its task does not "
            "implement expert_reply); set sft: null (--set sft=null)"
        )
    if config.team is not None:
        from adapters.team import check_team

        try:
            check_team(config.team, env.possible_agents)
        except ConfigError as exc:
            problems += [f"team: {p}" for p in exc.problems]
    if problems:
        raise ConfigError("training config", problems)


def _normalised(data: Any) -> dict[str, Any]:
    """Config data as this version writes it (old key names renamed), for comparisons."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        try:
            return to_dict(from_dict(TrainConfig, data, what="the run's config"))
        except ConfigError:
            return dict(data) if isinstance(data, dict) else {}


def _env_factory(config: TrainConfig, split: str) -> Callable[[], Any]:
    """Environments of ``split``: tasks with a ``split`` option generate that split's partition;
    a problem file (``data_path``) or an explicit ``split`` option is used as given."""
    options = dict(config.task_options)
    if (
        "split" not in options
        and "data_path" not in options
        and teamtr_env.spec(config.task).accepts("split")
    ):
        options["split"] = split
    teamtr_env.make(config.task, **options)  # fail fast with every problem of the options
    return lambda: teamtr_env.make(config.task, **options)


def _check_training_split(
    config: TrainConfig, train_env: Any, eval_env: Any, console: Console
) -> None:
    """Refuses to train on held-out problems; warns when evaluation cannot be held out."""
    if train_env.problems is not None:
        held = [p.id for p in train_env.problems if p.split != "train"]
        if held:
            raise ConfigError(
                "train",
                [
                    f"{len(held)} of the {len(train_env.problems)} training problems are labelled "
                    f"validation/test (e.g. {held[0]!r}); training on held-out data is refused. "
                    "Give a file of 'train' problems (tasks.save_problems with split='train')."
                ],
            )
    same = (
        eval_env.problems is None and getattr(eval_env.task, "split", None) != config.eval.split
    ) or (eval_env.problems is not None and eval_env.problems is train_env.problems)
    if same:
        console.print(
            f"[yellow]warning:[/] {config.task} has no '{config.eval.split}' split: the "
            "evaluation draws from the training distribution"
        )


def _check_drawable(
    config: TrainConfig,
    env_fn: Callable[[], Any],
    eval_fn: Callable[[], Any],
    val_fn: Callable[[], Any],
) -> None:
    """Draws one problem of every split the run will use, so that a split a task cannot draw
    from (e.g. a dataset without test rows) is refused before anything is written."""
    factories = [env_fn, eval_fn] + ([val_fn] if config.eval.every > 0 else [])
    for make in factories:
        make().reset(seed=config.seed)


def _save_best(run_dir: Path, policies: dict[str, Any]) -> None:
    folder = run_dir / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    states = {a: p.state_dict() for a, p in policies.items() if isinstance(p, TrainablePolicy)}
    torch.save(rundir.plain(states), folder / "best.tmp")
    os.replace(folder / "best.tmp", folder / "best.pt")


def _load_best(run_dir: Path, policies: dict[str, Any]) -> None:
    states = rundir.torch_load_plain(run_dir / "checkpoints" / "best.pt")
    for agent, state in states.items():
        policies[agent].load_state_dict(state)


def _behaviour_clone(
    config: TrainConfig,
    env_fn: Callable[[], Any],
    env: Any,
    policies: dict[str, Any],
    console: Console,
) -> dict[str, Any]:
    """Behaviour cloning from the task's scripted expert. With ``sft_shared`` one model learns
    every agent's expert messages (in their own contexts) and each agent starts from a copy of it
    (separate parameters from then on): a third of the cost for a three-agent team."""
    from trainers.sft import behaviour_clone, collect_expert_data

    sft = config.sft
    assert sft is not None
    trainable = {a: p for a, p in policies.items() if isinstance(p, TrainablePolicy)}
    t0 = time.perf_counter()
    cache = _bc_cache_path(config)
    if cache is not None and cache.exists():
        try:
            cached = rundir.torch_load_plain(cache)
            for agent, policy in trainable.items():
                policy.load_state_dict(cached["states"][agent])
        except Exception as exc:  # truncated, crafted or stale: clone again
            console.print(
                f"behaviour cloning: the cache {cache} is unusable ({exc}); cloning again"
            )
        else:
            console.print(f"behaviour cloning: loaded from the cache {cache}")
            return {**cached["info"], "cached": str(cache)}
    data = collect_expert_data(
        env_fn,
        env.task,
        list(trainable),
        sft.problems,
        error_rate=sft.expert_error_rate,
        seed=sft.seed,
    )
    first = next(iter(trainable))
    shared = config.sft_shared and _same_shapes(list(trainable.values()))
    if shared:
        merged = [pair for agent in trainable for pair in data[agent]]
        curves = behaviour_clone(
            {first: trainable[first]}, {first: merged}, sft, progress=config.progress
        )
        for agent, policy in trainable.items():
            if agent != first:
                policy.load_state_dict(trainable[first].state_dict())
    else:
        curves = behaviour_clone(trainable, data, sft, progress=config.progress)
    seconds = time.perf_counter() - t0
    what = "one shared model" if shared else f"{len(trainable)} agents"
    steps = max((len(c) for c in curves.values()), default=0)
    stopped = (
        f" (stopped early at the target accuracy; limit {sft.steps})" if steps < sft.steps else ""
    )
    console.print(f"behaviour cloning: {what} x {steps} steps{stopped} in {seconds:.1f} s")
    info = {
        "seconds": seconds,
        "shared": shared,
        "steps": steps,
        "final_loss": {a: c[-1] if c else None for a, c in curves.items()},
    }
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        states = {a: p.state_dict() for a, p in trainable.items()}
        torch.save(rundir.plain({"states": states, "info": info}), cache.with_suffix(".tmp"))
        os.replace(cache.with_suffix(".tmp"), cache)
    return info


def _bc_cache_path(config: TrainConfig) -> Path | None:
    """Where ``sft.cache_dir`` keeps this run's behaviour-cloned weights (``None``: no cache)."""
    if config.sft is None or config.sft.cache_dir is None:
        return None
    key = {
        "task": config.task,
        "task_options": config.task_options,
        "team": dataclasses.asdict(config.team) if config.team is not None else None,
        "tiny_model": dataclasses.asdict(config.tiny_model),
        "sft": {k: v for k, v in dataclasses.asdict(config.sft).items() if k != "cache_dir"},
        "sft_shared": config.sft_shared,
        "seed": config.seed,
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()
    return Path(config.sft.cache_dir) / f"bc-{digest[:16]}.pt"


def _same_shapes(policies: list[Any]) -> bool:
    shapes = [{k: tuple(v.shape) for k, v in p.state_dict().items()} for p in policies]
    return all(s == shapes[0] for s in shapes)


def _run_stages(
    config: TrainConfig,
    trainer: TeamTrainer,
    logger: Any,
    extra: dict[str, Any],
    run_dir: Path,
    val_fn: Callable[[], Any],
    policies: dict[str, Any],
    console: Console,
    stop_after: int | None,
    hooks: CallbackList,
) -> None:
    total = config.schedule.stages
    # Rich bars on a terminal; otherwise (piped, e.g. `make demo | tee log`, or bars off) one plain
    # line per stage, so a run never goes silent for minutes.
    bars = config.progress and console.is_terminal
    t_start = time.perf_counter()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not bars,
        transient=True,
    ) as progress:
        stages_bar = progress.add_task(
            f"{trainer_spec(config.schedule.method).id} stages",
            total=total,
            completed=trainer.stage,
        )
        while trainer.stage < total:
            update_bar = progress.add_task(
                f"stage {trainer.stage + 1} updates", total=len(trainer.slots)
            )

            def advance(i: int, n: int, bar: TaskID = update_bar) -> None:
                progress.update(bar, completed=i)

            report = trainer.run_stage(on_update=advance)
            progress.remove_task(update_bar)
            metrics = dict(report.metrics)
            stop = None
            if config.eval.every and trainer.stage % config.eval.every == 0:
                val = evaluate_team(config, val_fn, policies, prefix="val")
                metrics.update(val)
                stop = hooks.on_eval("val", trainer.stage, val)
                value = val[f"val/avg@{config.eval.k}"]
                if config.eval.select == "best_validation" and (
                    not extra.get("best") or value > extra["best"]["value"]
                ):
                    _save_best(run_dir, policies)
                    extra["best"] = {"stage": trainer.stage, "value": value}
            logger.log(metrics, step=trainer.stage)
            extra["updates"].extend(report.updates)
            diag = {k: v for k, v in report.metrics.items() if k.startswith("diag/")}
            if diag:
                extra.setdefault("diagnostics", []).append({"stage": trainer.stage, **diag})
            save_checkpoint(run_dir, trainer, extra)
            progress.update(stages_bar, completed=trainer.stage)
            log.info("stage %d: %s", trainer.stage, metrics)
            if not bars:
                line = _stage_line(config, trainer.stage, metrics, time.perf_counter() - t_start)
                console.print(line, markup=False, highlight=False)
            stop = hooks.on_stage_end(trainer.stage, metrics) or stop
            if stop is not None and trainer.stage < total:
                extra["stopped_early"] = {"stage": trainer.stage, "by": stop}
                console.print(f"{stop} stopped the run after stage {trainer.stage} of {total}")
                break
            if stop_after is not None and trainer.stage >= stop_after:
                raise StopTraining(f"stopped after stage {trainer.stage}")


def _stage_line(config: TrainConfig, stage: int, metrics: dict[str, float], elapsed: float) -> str:
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
        if _distinct_key("val") in metrics:
            line += f" ({metrics[_distinct_key('val')]:.0f} problems)"
    return line


def _summary(
    config: TrainConfig,
    trainer: TeamTrainer,
    extra: dict[str, Any],
    after: dict[str, float],
    seconds: float,
    run_dir: Path,
) -> dict[str, Any]:
    updates = extra["updates"]
    kls = [u["kl_raw"] for u in updates if math.isfinite(u["kl_raw"])]
    before = extra.get("before", {})

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
        value = after.get(_distinct_key(prefix), before.get(_distinct_key(prefix)))
        return None if value is None else int(value)

    return {
        "method": trainer_spec(config.schedule.method).id,
        "task": config.task,
        "seed": config.seed,
        "stages": trainer.stage,
        "stopped_early": extra.get("stopped_early"),
        "before": metrics_only(before),
        "after": metrics_only(after),
        "before_ci": intervals(before),
        "after_ci": intervals(after),
        "eval_split": config.eval.split,
        "eval_problems": config.eval.problems,
        "eval_problems_distinct": distinct("eval"),
        "train_eval_problems_distinct": distinct("train_eval"),
        "selected_stage": (extra.get("best") or {}).get("stage", trainer.stage),
        "sft": extra.get("sft"),
        "totals": dict(trainer.totals),
        "updates": updates,
        "out_of_region_rate": sum(u["out_of_region_raw"] for u in updates) / max(len(updates), 1),
        "accepted_in_region": all(u["in_region"] for u in updates if u["accepted"]),
        "kl_raw_mean": sum(kls) / len(kls) if kls else None,
        "diagnostics": _diagnostics_summary(trainer, extra.get("diagnostics", [])),
        "wall_s": seconds,
        "config": dataclasses.asdict(config),
        "paths": {
            "run_dir": str(run_dir),
            "metrics": str(run_dir / "metrics.jsonl"),
            "tensorboard": str(run_dir / "tb") if "tensorboard" in config.loggers else None,
            "checkpoints": str(run_dir / "checkpoints"),
            "plot": str(run_dir / "curves.png") if config.plot else None,
            "summary": str(run_dir / "summary.json"),
        },
    }


def _diagnostics_summary(trainer: TeamTrainer, stages: list[dict[str, Any]]) -> dict[str, Any]:
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


def _metrics_line(label: str, metrics: dict[str, float], k: int) -> str:
    line = f"{label}: held-out avg@{k} {metrics.get(f'eval/avg@{k}', math.nan):.3f}  pass@{k} {metrics.get(f'eval/pass@{k}', math.nan):.3f}"
    if f"train_eval/avg@{k}" in metrics:
        line += f"; train split avg@{k} {metrics[f'train_eval/avg@{k}']:.3f}"
    return line


def _with_ci(value: float, ci: list[float] | None) -> str:
    return f"{value:.3f}" if not ci else f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def _print_summary(
    console: Console, config: TrainConfig, summary: dict[str, Any], run_dir: Path
) -> None:
    k = config.eval.k
    table = Table(
        title=f"{trainer_spec(config.schedule.method).id} on {config.task}: {summary['stages']} stages, "
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
                    "-" if before is None else _with_ci(before, summary["before_ci"].get(name)),
                    _with_ci(after, summary["after_ci"].get(name)),
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


def _finite(value: Any) -> Any:
    """JSON has no NaN/inf: they become null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
