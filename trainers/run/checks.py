"""Everything that can reject a training run, checked before anything is written (every problem
of a part at once): the learner, the loggers and optional packages, behaviour cloning, the team
config and its GPU placement, the training split, every split the run draws from and every
``task_schedule`` entry; and the environments of a split (:func:`env_factory`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console

import teamtr_env
from tasks.capabilities import SupportsLocalRewards, no_expert_reason
from teamtr_core.config import from_dict, to_dict
from teamtr_core.errors import ConfigError
from trainers.config import Gang, TrainConfig
from trainers.config.task_schedule import schedule_stage_errors, scheduled_options
from trainers.learners.registry import RegistryError, learner_errors, make_learner
from trainers.placement.agents import role_sharing_errors
from trainers.run.logger import missing_loggers
from trainers.run.team_eval import TRAINABLE_BACKENDS


def env_factory(
    config: TrainConfig, split: str, task_options: dict[str, Any] | None = None
) -> Callable[[], Any]:
    """Environments of ``split``: tasks with a ``split`` option generate that split's partition;
    a problem file (``data_path``) or an explicit ``split`` option is used as given.
    ``task_options``: other options than the config's (a ``task_schedule`` stage's)."""
    options = dict(config.task_options if task_options is None else task_options)
    if (
        "split" not in options
        and "data_path" not in options
        and teamtr_env.spec(config.task).accepts("split")
    ):
        options["split"] = split
    teamtr_env.make(config.task, **options)  # fail fast with every problem of the options
    return lambda: teamtr_env.make(config.task, **options)


def check_before_writing(config: TrainConfig, env: Any) -> None:
    """The checks of the loggers, the team config and behaviour cloning (the task needs a
    scripted expert) and the learner's (registered, and its own check of the configuration), done
    before the run directory is touched (every problem at once)."""
    from adapters.availability import VLLM_INSTALL, missing_package

    errors = learner_errors(config)
    errors += [f"loggers: {p}" for p in missing_loggers(config.loggers)]
    if config.rollout.engine == "vllm" and missing_package("vllm"):
        errors.append(f"rollout.engine: vllm needs vLLM, not installed here: {VLLM_INSTALL}")
    on_ray = {"runner.backend": config.runner.backend, "runner.agents": config.runner.agents}
    for key, where in on_ray.items():
        if where == "ray" and missing_package("ray"):
            errors.append(f"{key}: ray needs Ray, not installed here: pip install -e '.[ray]'")
    if config.reward.local and not isinstance(env.task, SupportsLocalRewards):
        errors.append(
            f"reward.local: {config.task} gives no local rewards (tasks that do: "
            "docs/rewards.md); set reward.local to 0"
        )
    missing = no_expert_reason(env.task)
    if config.sft is not None and missing:
        errors.append(f"sft: nothing to behaviour-clone: {missing}; set sft: null (--set sft=null)")
    errors += _shard_errors(config)
    errors += _stage_size_errors(config, env)
    if config.team is not None:
        from adapters.team import check_team

        try:  # with the task: tabular tables, scripted agents' expert
            chosen = check_team(config.team, env.possible_agents, task=env.task)
        except ConfigError as exc:
            errors += [f"team: {e}" for e in exc.errors]
        else:
            errors += _gpu_placement_errors(config, chosen)
            if any(len(slot) > 1 for slot in config.team.slots(env.possible_agents)):
                errors += [f"team.shared_policy: {e}" for e in role_sharing_errors(config)]
            if not any(agent.backend in TRAINABLE_BACKENDS for agent in chosen.values()):
                errors.append(
                    "team: no agent has a trainable policy: give at least one agent backend "
                    f"{' or '.join(repr(b) for b in TRAINABLE_BACKENDS)} (the others stay fixed)"
                )
    if errors:
        raise ConfigError("training config", errors)


def _stage_size_errors(config: TrainConfig, env: Any) -> list[str]:
    """A stage past ``schedule.max_stage_episodes`` by its learner's estimate (refused before
    the run starts, as ``teamtr eval`` refuses past ``--max-episodes``)."""
    try:
        learner = make_learner(config.schedule.learner)
    except RegistryError:  # learner_errors names it
        return []
    agents, turns = len(env.possible_agents), int(env.protocol.turn_limit)
    episodes, how = learner.stage_episodes(config.schedule, agents, turns)
    limit = config.schedule.max_stage_episodes
    if episodes <= limit:
        return []
    return [
        f"schedule: {config.schedule.learner} would sample about {episodes:,} episodes per stage "
        f"({how}), over schedule.max_stage_episodes={limit:,}: lower schedule.group_size or "
        "schedule.problems_per_batch, or raise schedule.max_stage_episodes (every episode's "
        "records stay in memory until the stage's updates)"
    ]


def _shard_errors(config: TrainConfig) -> list[str]:
    """What the run's gang (:class:`~trainers.config.Gang`) cannot train."""
    team = config.team
    agents = [] if team is None else [team.default, *team.agents.values()]
    lora = any(a is not None and (a.lora or a.adapter_path) for a in agents)
    return Gang.of(config).refusals(lora=lora)


def _gpu_placement_errors(config: TrainConfig, chosen: dict[str, Any]) -> list[str]:
    """Agent actors see only the GPUs Ray gives them: a trainable agent on ``cuda`` needs
    ``runner.agent_gpus`` (Ray hides every GPU from an actor that asks for none)."""
    if config.runner.agents != "ray" or config.runner.agent_gpus > 0:
        return []
    return [
        f"team: agents.{name}.device is {agent.device!r}, but its agent actor asks Ray for no "
        "GPU and would see none: set runner.agent_gpus (e.g. --set runner.agent_gpus=1), or "
        "device: cpu"
        for name, agent in chosen.items()
        if agent.backend == "hf" and str(agent.device).startswith("cuda")
    ]


def normalised_config(data: Any) -> dict[str, Any]:
    """Config data as this version writes it (every default filled in), for comparisons."""
    try:
        return to_dict(from_dict(TrainConfig, data, what="the run's config"))
    except ConfigError:
        return dict(data) if isinstance(data, dict) else {}


def check_training_split(
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


def check_drawable(
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


def check_task_schedule(config: TrainConfig) -> None:
    """Makes the training environment of every ``task_schedule`` entry, so that a bad option in
    a later stage is refused before anything is written (every entry's problems at once), and
    refuses an entry that starts after the last stage (it would never apply)."""
    errors = schedule_stage_errors(to_dict(config), config.schedule.stages)
    for entry in sorted(config.task_schedule, key=lambda e: e.from_stage):
        options = scheduled_options(config.task_options, config.task_schedule, entry.from_stage)
        try:
            env_factory(config, "train", options)().reset(seed=config.seed)
        except ConfigError as exc:
            errors += [f"task_schedule from_stage {entry.from_stage}: {e}" for e in exc.errors]
    if errors:
        raise ConfigError("training config", errors)
