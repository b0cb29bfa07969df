"""The training recipe: one object owns a run from set-up to summary.

``TrainingRecipe(config).run()`` is what ``teamtr train`` does (and :func:`run_training`, its
one-call form); its steps are public for swap, the benchmarks and your own drivers:

==================  =========================================================================
``setup()``         every check that can reject the run (before anything is written), the run
                    directory's rules (:mod:`trainers.run.rundir`), the team, the trainer, loggers
``resume()``        the newest intact checkpoint's trainer and :class:`RunState`, if any
``warm_start()``    behaviour cloning from the task's scripted expert (``sft``; cached)
``evaluate()``      held-out (and training-split) avg@K / pass@K with bootstrap CIs
``train()``         the stages: validation, model selection, callbacks, a checkpoint each
``save()``          an atomic checkpoint of the trainer and the run state
``finish()``        the final evaluation, the plot, ``summary.json`` and the printed table
==================  =========================================================================

Layout of ``config.run_dir``::

    config.yaml          the resolved configuration
    models/tiny/         the tiny model (when the config names no team)
    metrics.jsonl        every logged metric (one JSON object per step)
    tb/                  TensorBoard event files (loggers: [tensorboard])
    checkpoints/         stage_XXXX.pt (all agents, optimizers, beta, delta, counters, RNG, the
                         run state) + latest
    curves.png           learning curves (plot: true)
    summary.json         before/after evaluation, totals, per-update records

Resuming continues after the last intact checkpoint and gives the same result as an
uninterrupted run with the same seed: every random draw derives from (seed, stage, index).
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from adapters.rollout_engine import close_engines
from teamtr_core.config import dump_config, to_dict
from teamtr_core.errors import ConfigError
from teamtr_core.policy import TrainablePolicy
from trainers.config import TrainConfig
from trainers.config.task_schedule import scheduled_options
from trainers.learners.callbacks import (
    Callback,
    CallbackList,
    EarlyStopping,
    OnUpdate,
    load_callbacks,
)
from trainers.learners.registry import learner_spec
from trainers.learners.team_trainer import TeamTrainer
from trainers.placement.gang import actor_updater
from trainers.placement.updaters import (
    ActorPolicy,
    AgentActorLost,
    check_actor_resources,
)
from trainers.run import rundir
from trainers.run.checks import (
    check_before_writing,
    check_drawable,
    check_task_schedule,
    check_training_split,
    env_factory,
    normalised_config,
)
from trainers.run.logger import (
    JsonlLogger,
    MetricsLogger,
    MultiLogger,
    make_loggers,
)
from trainers.run.memory_plan import check_memory
from trainers.run.report import build_summary, json_finite, metrics_line, print_summary, stage_line
from trainers.run.run_figure import plot_run_figure
from trainers.run.state import BestStage, RunState
from trainers.run.team_eval import (
    TeamSource,
    agent_sampling,
    build_policies,
    clipped_warnings,
    evaluate_all,
    evaluate_team,
    grader_warnings,
    tiny_model_dir,
)
from trainers.run.warm_start import warm_start

log = logging.getLogger(__name__)


class TrainingRecipe:
    """One training run: set up, warm-start, evaluate, train, save, resume, finish.

    Args:
        config: the run configuration.
        console: where to print; a default console when ``None``.
        callbacks: :class:`trainers.learners.callbacks.Callback` objects, called before the config's
            ``callbacks`` and ``eval.early_stop_patience``'s early stopping.
        loggers: extra metric loggers (anything with ``log(metrics, step)`` and ``close()``),
            beside ``metrics.jsonl`` and the config's ``loggers``.

    After :meth:`setup`: ``policies`` (each agent's), ``trainer`` (the :class:`TeamTrainer`),
    ``state`` (:class:`RunState`) and ``logger`` are set.
    """

    def __init__(
        self,
        config: TrainConfig,
        *,
        console: Console | None = None,
        callbacks: Sequence[Callback] = (),
        loggers: Sequence[MetricsLogger] = (),
    ) -> None:
        self.config = config
        self.console = console or Console()
        self.run_dir = Path(config.run_dir)
        self.train_env = env_factory(config, "train")
        self._train_options = dict(config.task_options)  # the options training draws with now
        self.eval_env = env_factory(config, config.eval.split)
        self.val_env = env_factory(config, "validation")
        self.hooks = CallbackList([*callbacks, *load_callbacks(config.callbacks)])
        if config.eval.early_stop_patience:
            self.hooks.callbacks.append(
                EarlyStopping(f"val/avg@{config.eval.k}", patience=config.eval.early_stop_patience)
            )
        self.extra_loggers = list(loggers)
        self.state = RunState()
        self.restarts = 0  # stages replayed after a Ray agent actor died
        self.policies: Mapping[str, Any] = {}
        self.trainer: TeamTrainer | None = None
        self.logger: MultiLogger | None = None
        self._found: rundir.LoadedCheckpoint | None = None
        self._lock = rundir.DirectoryLock(self.run_dir)
        self.env = self.train_env()  # one training environment for the checks, team and clone

    # -- set-up ---------------------------------------------------------------------------------
    def check(self, *, resume: bool = False) -> None:
        """Everything that can reject the run, before anything is written (every problem of a
        part at once): the learner, loggers, behaviour cloning, the team config, a resume's
        configuration, the training split, every split the run draws from, and the memory plan
        on this machine's devices.

        Raises:
            ConfigError: naming the errors.
        """
        config, env = self.config, self.env
        check_before_writing(config, env)
        if config.runner.agents == "ray":  # agent actors the cluster cannot place
            agents = tuple(env.possible_agents)
            trainable = TeamSource(config, str(self.run_dir), self.train_env, agents).trainable()
            if trainable:
                check_actor_resources(config, len(trainable))
        self._found = rundir.load(self.run_dir / "checkpoints") if resume else None
        if resume:
            rundir.check_resume(
                self.run_dir, normalised_config(to_dict(config)), self._found, normalised_config
            )
        check_training_split(config, env, self.eval_env(), self.console)
        check_drawable(config, self.train_env, self.eval_env, self.val_env)
        check_task_schedule(config)
        check_memory(config, env)  # the plan on this machine's devices (teamtr plan)

    def setup(self, *, resume: bool = False, overwrite: bool = False) -> None:
        """Checks the run (:meth:`check`), prepares its directory (a new run needs an empty one
        or ``overwrite``), writes ``config.yaml``, builds the team, the trainer and the loggers,
        and with ``resume`` loads the newest intact checkpoint (:meth:`resume`).

        Raises:
            ConfigError: a problem with the config, the run directory or its checkpoints, listed
                before anything is written.
        """
        config, console = self.config, self.console
        if config.torch_threads > 0:
            torch.set_num_threads(config.torch_threads)
        self.check(resume=resume)
        made = not self.run_dir.exists()  # the lock makes it: a refused run removes it again
        self._lock.acquire("run directory")  # released by close(), or when the process ends
        try:
            deleted = rundir.prepare(self.run_dir, resume=resume, overwrite=overwrite)
        except BaseException:
            self._lock.release()  # a refused directory is left as it was
            rundir.remove_if_empty(self.run_dir, made)
            raise
        if deleted:
            others = sorted(p.name for p in self.run_dir.iterdir() if p.name != rundir.LOCK_FILE)
            kept = f"; left alone: {', '.join(others)}" if others else ""
            console.print(f"--overwrite: deleted {', '.join(deleted)} in {self.run_dir}{kept}")
        for reason in self._found.skipped if self._found else ():
            console.print(f"[yellow]skipped a checkpoint:[/] {reason}")
        if resume and self._found is None:
            console.print(f"no checkpoint in {self.run_dir}: starting from scratch")
        present = {p.name for p in self.run_dir.iterdir()}
        try:
            self._build()
        except BaseException:
            # Every check that can fail comes before the first write (check()); should anything
            # still fail here, a new run takes back what it wrote, so the folder is as it was
            # and the corrected command runs in it. A resumed run's files are the run's own.
            if self.logger is not None:
                self.logger.close()
            if not resume:
                rundir.remove_new_entries(self.run_dir, present)
                self._lock.release()
                rundir.remove_if_empty(self.run_dir, made)
            raise
        self.resume()

    def _build(self) -> None:
        """Writes ``config.yaml`` and builds the team, the trainer and the loggers."""
        config = self.config
        self.run_dir.mkdir(parents=True, exist_ok=True)
        agents = tuple(self.env.possible_agents)
        source = TeamSource(config, str(self.run_dir), self.train_env, agents)
        self.policies = self._build_team(source)
        if not any(isinstance(p, TrainablePolicy) for p in self.policies.values()):
            raise ConfigError(
                "train", ["no agent has a trainable policy (backend 'hf' or a TrainablePolicy)"]
            )
        dump_config(config, self.run_dir / "config.yaml")
        sampling = agent_sampling(config, list(self.policies))
        self.trainer = TeamTrainer(
            config,
            self.train_env,
            self.policies,
            sampling=sampling,
            callbacks=self.hooks,
            team=source if config.runner.agents == "ray" else None,
        )
        start_step = self._found.state["trainer"]["stage"] if self._found else None
        self.logger = MultiLogger(
            JsonlLogger(self.run_dir / "metrics.jsonl", resume_step=start_step),
            *make_loggers(config.loggers, self.run_dir, to_dict(config), config.logger_options),
            *self.extra_loggers,
        )

    def _build_team(self, source: TeamSource) -> Mapping[str, Any]:
        """Every agent's policy. With agent actors (``runner.agents: ray``) each trainable
        agent's model is built in its own actor and the driver holds an
        :class:`~trainers.placement.updaters.ActorPolicy` for it (fixed teammates are built here)."""
        config = self.config
        if config.runner.agents != "ray":
            return build_policies(config, self.env, self.run_dir)
        trainable = source.trainable()
        if not trainable:
            return source.build()  # refused by the caller
        if config.team is None:
            tiny_model_dir(config, self.run_dir)  # the files the actors load
        fixed = [a for a in source.agents if a not in trainable]
        built = source.build(fixed) if fixed else {}
        check_actor_resources(config, len(trainable))
        actors = {a: actor_updater(a, source.agent(a), config) for a in trainable}
        return {a: ActorPolicy(actors[a]) if a in actors else built[a] for a in source.agents}

    def resume(self) -> bool:
        """Loads the checkpoint :meth:`setup` found (``resume=True``) into the trainer and the
        run state; ``False`` when there is none (a new run)."""
        if self._found is None:
            return False
        trainer = self._trainer()
        trainer.load_state_dict(self._found.state["trainer"])
        self.state = RunState.from_checkpoint(self._found.state["extra"])
        self.console.print(
            f"resumed {self.run_dir} after stage {trainer.stage} ({self._found.path.name})"
        )
        return True

    # -- the run's steps ------------------------------------------------------------------------
    def warm_start(self) -> dict[str, Any] | None:
        """Behaviour cloning from the task's scripted expert (``config.sft``; ``None``: skipped),
        loaded from ``sft.cache_dir`` when the same clone was made before."""
        if self.config.sft is None:
            return None
        self.state.sft = warm_start(
            self.config, self.train_env, self.env, self.policies, self.console
        )
        return self.state.sft

    def evaluate(
        self, step: int | None = None, per_problem: dict[str, float] | None = None
    ) -> dict[str, float]:
        """The held-out evaluation (``eval/``) and, with ``eval.train_distribution``, the
        training split's (``train_eval/``), logged at ``step`` (the trainer's stage by default)
        and passed to the callbacks; ``per_problem`` receives each held-out problem's avg@K."""
        out = evaluate_all(
            self.config,
            self.eval_env,
            self.train_env,
            self.policies,
            per_problem=per_problem,
            runner_for=self._trainer().evaluation_runner,
        )
        step = self._trainer().stage if step is None else step
        self._logger().log(out, step=step)
        for line in grader_warnings(out):
            log.info("warning: %s", line)
            self.console.print(f"[bold red]warning:[/] {escape(line)}", highlight=False)
        self.hooks.on_eval("eval", step, out)
        return out

    def evaluate_before(self) -> dict[str, float]:
        """The evaluation before training (:meth:`evaluate` at step 0), printed, with a warning
        for each agent whose messages hit the token limit too often."""
        self.state.before = self.evaluate(step=0)
        self.console.print(metrics_line("before training", self.state.before, self.config.eval.k))
        for line in clipped_warnings(self.state.before, self._trainer().runner.sampling):
            # Said once, on the console; the log keeps it at INFO (a WARNING record is printed
            # a second time by Python's last-resort handler when no logging is configured).
            log.info("warning: %s", line)
            self.console.print(f"[yellow]warning:[/] {line}", highlight=False)
        return self.state.before

    def train(self) -> None:
        """The remaining stages: after each, validation (``eval.every``) and model selection,
        the logs, a checkpoint (:meth:`save`), the progress line, the callbacks (which may stop
        the run: :meth:`Callback.on_stage_end`)."""
        config, trainer, console = self.config, self._trainer(), self.console
        total = config.schedule.stages
        # Rich bars on a terminal; otherwise (piped, e.g. `make demo | tee log`, or bars off) one
        # plain line per stage, so a run never goes silent for minutes.
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
                f"{learner_spec(config.schedule.learner).id} stages",
                total=total,
                completed=trainer.stage,
            )
            if config.runner.agents == "ray" and self._found is None:
                trainer.start_agents()
                self.save()  # an agent actor lost in the first stage restarts from here
            while trainer.stage < total:
                update_bar = progress.add_task(
                    f"stage {trainer.stage + 1} updates", total=len(trainer.slots)
                )
                bar = OnUpdate(functools.partial(_advance, progress, update_bar))
                self.hooks.append(bar)
                self._schedule_task(trainer.stage + 1)
                try:
                    report = self._run_stage()
                finally:
                    self.hooks.remove(bar)
                progress.remove_task(update_bar)
                metrics = dict(report.metrics)
                stop = self._validate(metrics)
                self._logger().log(metrics, step=trainer.stage)
                self.state.updates.extend(report.updates)
                diag = {k: v for k, v in report.metrics.items() if k.startswith("diag/")}
                if diag:
                    self.state.diagnostics.append({"stage": trainer.stage, **diag})
                self.save()
                progress.update(stages_bar, completed=trainer.stage)
                log.info("stage %d: %s", trainer.stage, metrics)
                if not bars:
                    line = stage_line(config, trainer.stage, metrics, time.perf_counter() - t_start)
                    console.print(line, markup=False, highlight=False)
                stop = self.hooks.on_stage_end(trainer.stage, metrics) or stop
                if stop is not None and trainer.stage < total:
                    self.state.stopped_early = {"stage": trainer.stage, "by": stop}
                    console.print(f"{stop} stopped the run after stage {trainer.stage} of {total}")
                    break

    def _schedule_task(self, stage: int) -> None:
        """Draws the training problems of ``stage`` (1-based) with the ``task_schedule``'s
        options for it (a curriculum); nothing changes between its entries."""
        config = self.config
        if not config.task_schedule:
            return
        options = scheduled_options(config.task_options, config.task_schedule, stage)
        if options == self._train_options:
            return
        self._train_options = options
        self._trainer().use_env(env_factory(config, "train", options))
        changed = {k: v for k, v in options.items() if config.task_options.get(k) != v}
        self.console.print(f"stage {stage}: training problems with {changed} (task_schedule)")

    def _run_stage(self) -> Any:
        """One stage. When a Ray agent actor dies in it, the last checkpoint (the end of the
        previous stage) is loaded into new actors and the stage is played again, so nothing of
        the lost attempt is kept or counted (its updates reached ``on_update`` callbacks only);
        ``runner.max_restarts`` such replays in the whole run, then the error stands."""
        trainer = self._trainer()
        while True:
            try:
                return trainer.run_stage()
            except AgentActorLost as exc:
                found = rundir.load(self.run_dir / "checkpoints")
                if found is None or self.restarts >= self.config.runner.max_restarts:
                    raise
                self.restarts += 1
                self.console.print(
                    f"{exc}. Restoring {found.path.name} into new agent actors and replaying "
                    f"stage {found.state['trainer']['stage'] + 1} "
                    f"(restart {self.restarts} of at most {self.config.runner.max_restarts})"
                )
                trainer.restart_agents()
                trainer.load_state_dict(found.state["trainer"])

    def _validate(self, metrics: dict[str, float]) -> str | None:
        """Validation after a stage (``eval.every``) into ``metrics``, keeping the best team for
        ``eval.select: best_validation``; a callback's request to stop, if any."""
        config, stage = self.config, self._trainer().stage
        if not (config.eval.every and stage % config.eval.every == 0):
            return None
        runner = self._trainer().evaluation_runner(self.val_env)
        val = evaluate_team(config, self.val_env, self.policies, prefix="val", runner=runner)
        metrics.update(val)
        stop = self.hooks.on_eval("val", stage, val)
        value = val[f"val/avg@{config.eval.k}"]
        best = self.state.best
        if config.eval.select == "best_validation" and (best is None or value > best.value):
            _save_best(self.run_dir, self.policies)
            self.state.best = BestStage(stage, value)
        return stop

    def save(self, keep: int = 2) -> Path:
        """Atomically writes ``checkpoints/stage_XXXX.pt`` (the trainer, the run state and the
        configuration that determines the results), points ``latest`` at it and keeps the last
        ``keep`` stages."""
        return save_checkpoint(self.run_dir, self._trainer(), self.state, keep)

    def finish(self, seconds: float) -> dict[str, Any]:
        """The final evaluation (of the best validation stage's team with ``eval.select:
        best_validation``), the plot, ``summary.json`` and the printed table; returns the
        summary."""
        config, trainer, console = self.config, self._trainer(), self.console
        try:
            best = self.state.best
            if config.eval.select == "best_validation" and best is not None:
                _load_best(self.run_dir, trainer)
                console.print(
                    f"final evaluation uses the team of stage {best.stage} "
                    f"(best validation avg@{config.eval.k} {best.value:.3f})"
                )
            per_problem: dict[str, float] = {}
            after = self.evaluate(per_problem=per_problem)
        finally:
            self._logger().close()
        per_problem_text = json.dumps(
            {"split": config.eval.split, "k": config.eval.k, "avg": per_problem}, indent=1
        )
        (self.run_dir / PER_PROBLEM_FILE).write_text(per_problem_text)
        summary = build_summary(config, trainer, self.state, after, seconds, self.run_dir)
        if config.plot:
            plot_run_figure(
                self.run_dir / "metrics.jsonl",
                summary,
                self.run_dir / "curves.png",
                k=config.eval.k,
                title=f"{learner_spec(config.schedule.learner).id} on {config.task}",
            )
        summary_text = json.dumps(json_finite(summary), indent=2, default=str)
        (self.run_dir / "summary.json").write_text(summary_text)
        print_summary(console, config, summary, self.run_dir)
        return summary

    def run(self, *, resume: bool = False, overwrite: bool = False) -> dict[str, Any]:
        """The whole run (see the module docstring) and its summary (also ``summary.json``)."""
        self.setup(resume=resume, overwrite=overwrite)
        t0 = time.perf_counter()
        try:
            if self._found is None:
                self.warm_start()
                self.evaluate_before()
            self.train()
        except BaseException:
            self._logger().close()
            raise
        return self.finish(time.perf_counter() - t0)

    def close(self) -> None:
        """Stops the rollout engines the run started in this process (``rollout.engine: vllm``;
        nothing otherwise) and releases the run directory's lock (:meth:`setup` takes it, so no
        other process writes the directory meanwhile). :meth:`run` leaves both, so the trained
        team can still sample through its engines; :func:`run_training` closes them when the
        run ends."""
        try:
            close_engines(self.policies.values())
        finally:
            self._lock.release()

    def _trainer(self) -> TeamTrainer:
        if self.trainer is None:
            raise RuntimeError("TrainingRecipe.setup() has not run")
        return self.trainer

    def _logger(self) -> MultiLogger:
        if self.logger is None:
            raise RuntimeError("TrainingRecipe.setup() has not run")
        return self.logger


#: The final held-out evaluation's avg@K per problem (``{"split", "k", "avg": {id: value}}``),
#: written beside ``summary.json``: what paired comparisons of runs resample.
PER_PROBLEM_FILE = "eval_per_problem.json"


def run_training(
    config: TrainConfig,
    *,
    resume: bool = False,
    console: Console | None = None,
    overwrite: bool = False,
    callbacks: Sequence[Callback] = (),
    loggers: Sequence[MetricsLogger] = (),
) -> dict[str, Any]:
    """Runs (or resumes) a training run and returns its summary (also saved as summary.json):
    ``TrainingRecipe(config, ...).run(...)``.

    Args:
        config: the run configuration.
        resume: continue after the last intact checkpoint in ``config.run_dir``.
        console: where to print; a default console when ``None``.
        overwrite: replace a run already in ``config.run_dir`` (its files are deleted first).
        callbacks: :class:`trainers.learners.callbacks.Callback` objects (see :class:`TrainingRecipe`).
        loggers: extra metric loggers (see :class:`TrainingRecipe`).

    Raises:
        ConfigError: a problem with the config, the run directory or its checkpoints, listed
            before anything is written.
    """
    recipe = TrainingRecipe(config, console=console, callbacks=callbacks, loggers=loggers)
    try:
        return recipe.run(resume=resume, overwrite=overwrite)
    finally:  # the next run in this process (teamtr compare) gets their memory
        recipe.close()


def save_checkpoint(run_dir: Path, trainer: TeamTrainer, state: RunState, keep: int = 2) -> Path:
    """Atomically writes ``checkpoints/stage_XXXX.pt`` with the trainer, the run state and the
    configuration that determines the results, points ``latest`` at it and keeps the last
    ``keep`` stages (``trainers.run.rundir``)."""
    data = {
        "trainer": trainer.state_dict(),
        "extra": state.to_checkpoint(),
        "config": rundir.result_config(to_dict(trainer.config)),
    }
    return rundir.save(run_dir / "checkpoints", trainer.stage, data, keep)


def load_checkpoint(run_dir: Path) -> dict[str, Any] | None:
    """The newest intact checkpoint's contents (``None``: there is none); see
    :func:`trainers.run.rundir.load` (weights-only; an unreadable latest falls back)."""
    found = rundir.load(run_dir / "checkpoints")
    return found.state if found else None


def _save_best(run_dir: Path, policies: Mapping[str, Any]) -> None:
    folder = run_dir / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    states = {a: p.state_dict() for a, p in policies.items() if isinstance(p, TrainablePolicy)}
    rundir.write_file(folder / "best.pt", states)


def _load_best(run_dir: Path, trainer: TeamTrainer) -> None:
    states = rundir.read_file(run_dir / "checkpoints" / "best.pt")
    for agent, state in states.items():
        trainer.load_policy(agent, state)


def _advance(progress: Progress, bar: TaskID, record: Any) -> None:
    """An update's step of a stage's progress bar."""
    progress.advance(bar)
