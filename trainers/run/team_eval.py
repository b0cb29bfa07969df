"""A training run's team and its evaluations: each agent's policy and sampling, avg@K / pass@K on
distinct held-out problems with bootstrap CIs, and the share of messages cut off at the token
limit (warned about before training)."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from adapters.hf_progress import transformers_progress
from teamtr_core.policy import SamplingParams
from teamtr_core.seeds import EVAL_STREAM, INIT_STREAM, derive_seed
from teamtr_core.team import Slot, Team
from teamtr_env.evaluation import CLIPPED_WARN_RATIO, GRADER_FAILURE_ALARM_RATIO, evaluate
from teamtr_env.runners import Runner
from trainers.config import TrainConfig

log = logging.getLogger(__name__)


def build_policies(
    config: TrainConfig,
    env: Any,
    run_dir: Path,
    only: Sequence[str] | None = None,
    *,
    tiny_path: Path | None = None,
) -> Team:
    """Every agent's policy (``only``: these agents'), as a :class:`~teamtr_core.team.Team`
    (its slots: which agents play one policy): the team config's, or a separate copy of
    the tiny model each (from ``tiny_path``, default the run's ``models/tiny``, built there if
    missing). A team config's fresh weights (new LoRA adapters) are drawn from the
    run's seed, each agent's from its own stream, so a run and its rerun, a separate and a
    shared-base team, and an agent built alone in its agent actor all start alike. With
    ``config.progress`` off, transformers' own bars (loading, writing the tiny model) are too."""
    agents = list(env.possible_agents)
    with transformers_progress(config.progress):
        if config.team is not None:
            from adapters.team import build_team

            init_seed = derive_seed(config.seed, INIT_STREAM)
            policies, _ = build_team(config.team, agents, env.task, only=only, init_seed=init_seed)
            return with_rollout_engines(config, policies)
        from adapters.hf import HFPolicy
        from adapters.team import AgentPolicyConfig

        path = tiny_path or tiny_model_dir(config, run_dir)
        tiny = AgentPolicyConfig(backend="hf", path=str(Path(path).resolve()))
        slots = [
            Slot(HFPolicy.from_pretrained(path), (a,), tiny)
            for a in agents
            if only is None or a in only
        ]
        return with_rollout_engines(config, Team(slots))


def with_rollout_engines(config: TrainConfig, team: Team) -> Team:
    """With ``rollout.engine: vllm``, every trainable ``hf`` agent samples through a vLLM engine
    (:class:`~adapters.rollout_engine.EngineRollouts`): a full-weight or separate LoRA agent
    through an engine of its own on its model directory (LoRA merged at each sync), a
    ``shared_base`` LoRA agent through the one multi-LoRA engine of its base (its adapter
    alone is synced), a shared policy (a slot of several agents) through one engine for all its
    agents. Each slot's agent config (``Slot.config``) says which model it serves. Engines
    start at their first sampling. Other agents, and a slot without an agent config (a policy
    given as an object: no model folder to serve), are unchanged. Returns the team slot by
    slot."""
    if config.rollout.engine != "vllm":
        return team
    from adapters.rollout_engine import EngineRollouts
    from adapters.team import shared_base_key

    on_base = config.team is not None and config.team.shared_base
    shared: dict[Any, _SharedLoraEngine] = {}
    slots: list[Slot] = []
    for slot in team.slots:  # a shared policy (one slot) gets one engine for its agents
        name, policy, agent = slot.agents[0], slot.policy, slot.config
        if agent is None or agent.backend != "hf":
            slots.append(slot)
            continue
        path = str(agent.path)  # an hf agent has a model path (check_team)
        options = _engine_options(config, policy, agent)
        key = shared_base_key(agent) if on_base else None
        if key is not None:
            holder = shared.setdefault(key, _SharedLoraEngine(path, options))
            holder.rank = max(holder.rank, agent.lora.r if agent.lora else _saved_rank(agent))
            factory: Callable[[], Any] = functools.partial(holder.agent, name)
        else:
            factory = functools.partial(_full_engine, path, options)
        slots.append(Slot(EngineRollouts(policy, factory), slot.agents, agent))
    return Team(slots, list(team))


def _engine_options(config: TrainConfig, policy: Any, agent: Any) -> dict[str, Any]:
    """The engine settings of one agent: the run's ``rollout`` section, and the prompt budget,
    chat template and dtype of the policy it serves (so both condition on the same tokens)."""
    roll = config.rollout
    # in-process: the engine core and its one worker both run in this process
    placement = {"distributed_executor_backend": "uni"} if roll.in_process else {}
    return {
        **placement,
        "max_prompt_tokens": getattr(policy, "max_prompt_tokens", None),
        "chat_template": agent.chat_template,
        "dtype": agent.dtype,
        "seed": config.seed,
        "gpu_memory_utilization": roll.gpu_memory_utilization,
        "max_model_len": roll.max_model_len,
        "env": {
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0" if roll.in_process else "1",
            "VLLM_CPU_KVCACHE_SPACE": f"{roll.kv_cache_gib:g}",
        },
    }


def _set_engine_env(options: dict[str, Any]) -> dict[str, Any]:
    """Sets the engine's environment variables (read by vLLM when it starts) and returns the
    ``VLLMPolicy`` arguments."""
    import os

    rest = dict(options)
    for key, value in rest.pop("env").items():
        os.environ[key] = value
    # vLLM logs every engine start at INFO (dozens of lines each); keep its warnings only
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    return rest


def _full_engine(path: str, options: dict[str, Any]) -> Any:
    """An engine of its own on ``path`` for one agent."""
    from adapters.vllm_policy import VLLMPolicy

    kwargs = _set_engine_env(options)
    log.info("starting a vLLM rollout engine on %s", path)
    return VLLMPolicy(path, **kwargs)


class _SharedLoraEngine:
    """The one multi-LoRA engine of a shared base, started when its first agent samples."""

    def __init__(self, path: str, options: dict[str, Any]) -> None:
        self.path, self.options = path, options
        self.rank = 16  # the largest adapter rank it serves (at least 16)
        self.team: Any = None

    def agent(self, name: str) -> Any:
        if self.team is None:
            import tempfile

            from adapters.vllm_policy import VLLMLoraTeam

            kwargs = _set_engine_env(self.options)
            log.info("starting a multi-LoRA vLLM rollout engine on %s", self.path)
            self.team = VLLMLoraTeam(
                self.path,
                adapter_dir=tempfile.mkdtemp(prefix="teamtr-vllm-adapters-"),
                max_lora_rank=self.rank,
                **kwargs,
            )
        return self.team.agent(name)

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "options": self.options, "rank": self.rank, "team": None}


def _saved_rank(agent: Any) -> int:
    """The rank of an agent's saved adapter (``adapter_path``), 0 when unreadable."""
    from adapters.team import _adapter_rank

    return _adapter_rank(agent)


def tiny_model_dir(config: TrainConfig, run_dir: Path) -> Path:
    """The run's tiny model (``models/tiny`` in the run directory), built there if missing.

    It is built in a temporary folder of this process beside it (``tiny.PID.tmp``) and renamed
    into place, so a run killed while writing it leaves no half-written model for ``--resume``
    to load: the folder exists whole or not at all (a killed build leaves only its own
    ``tiny.PID.tmp``). A process that finds the model in place when its own is built (another
    one, on the same run directory, was first) keeps that one."""
    import shutil

    from adapters.tiny import build_tiny_model

    path = Path(run_dir) / "models" / "tiny"
    if (path / "config.json").exists():
        return path
    tmp = path.with_name(f"tiny.{os.getpid()}.tmp")
    with transformers_progress(config.progress):  # no "Writing model shards" bar when off
        build_tiny_model(tmp, config.tiny_model)
    if (path / "config.json").exists():
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        shutil.rmtree(path, ignore_errors=True)  # an empty folder, or an older run's partial one
        os.replace(tmp, path)
    return path


#: The team-config backends whose policies a run trains.
TRAINABLE_BACKENDS = ("hf", "tabular")


@dataclass(frozen=True)
class TeamSource:
    """How a training run builds its team, as a picklable object: with agent actors
    (``runner.agents: ray``) each actor builds its own agent's model from it and each Ray
    rollout worker the whole team, so the driver loads no model. Model paths (a team config's,
    the run directory's tiny model) must be readable where the actors run. Building model
    agents alone makes no environment (a task registered only in the driver's session is
    still fine for the agent actors; Ray rollout workers make environments and need it
    registered where they run).

    Args:
        config: the run's configuration.
        run_dir: the run directory (for the tiny model).
        env_fn: builds the training environment (the task, for scripted teammates).
        agents: the environment's agents (``env.possible_agents``), in order.
    """

    config: TrainConfig
    run_dir: str
    env_fn: Callable[[], Any]
    agents: tuple[str, ...]

    def trainable(self) -> list[str]:
        """The agents whose policies are trainable (``hf`` and ``tabular``; every agent with the
        tiny model), told from the configuration without building anything."""
        return [a for a, backend in self._backends().items() if backend in TRAINABLE_BACKENDS]

    def _backends(self) -> dict[str, str]:
        if self.config.team is None:
            return dict.fromkeys(self.agents, "hf")
        from adapters.team import check_team

        chosen = check_team(self.config.team, self.agents)
        return {a: agent.backend for a, agent in chosen.items()}

    def build(self, only: Sequence[str] | None = None) -> Team:
        """The policies of every agent (``only``: of these), as :func:`build_policies`; the
        environment is made only when a scripted or tabular agent needs its task."""
        backends = self._backends()
        scripted = any(backends[a] in ("scripted", "tabular") for a in (only or self.agents))
        task = self.env_fn().task if scripted else None
        team = SimpleNamespace(possible_agents=list(self.agents), task=task)
        return build_policies(self.config, team, Path(self.run_dir), only)

    def __call__(self) -> Team:
        """The whole team (a Ray rollout worker's)."""
        return self.build()

    def agent(self, name: str) -> Callable[[], Any]:
        """A picklable builder of agent ``name``'s policy alone (an agent actor's)."""
        return functools.partial(_build_agent, self, name)


def _build_agent(source: TeamSource, name: str) -> Any:
    return source.build([name])[name]


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
    policies: Mapping[str, Any],
    prefix: str = "eval",
    per_problem: dict[str, float] | None = None,
    runner: Runner | None = None,
) -> dict[str, float]:
    """avg@K / pass@K (and maj@K) on up to ``config.eval.problems`` distinct problems of
    ``env_fn``'s problem set (for generated tasks, the held-out split's partition: disjoint from
    the training problems); a small split gives fewer (``Runner.sample_distinct``).

    ``prefix`` namespaces the keys: ``eval/`` for the before/after (test) evaluation, ``val/`` for
    the validation evaluations used for model selection. ``problems/{prefix}_distinct`` is the
    number of distinct problems evaluated (logged, not plotted); ``{prefix}/<agent>/clipped_ratio``
    the share of each agent's messages that hit the token limit (cut off);
    ``grader/{prefix}_failed_share`` the share of answers the grader failed on. ``per_problem``, when
    given, receives each problem's avg@K (``problem id -> correct / K``): what paired
    comparisons of two teams on the same problems resample. ``runner``: who plays the
    episodes (``TeamTrainer.evaluation_runner``: a Ray runner's workers); default: a local
    runner of ``policies`` on ``env_fn``'s environments."""
    if runner is None:
        sampling = agent_sampling(config, list(policies))
        runner = Runner(env_fn, policies, sampling, progress=False)
    seed = derive_seed(config.seed, EVAL_STREAM)
    problems, draw = runner.sample_distinct(config.eval.problems, seed=seed)
    if draw.shortfall:
        log.info("%s evaluation: %s", prefix, draw.message)
    report = evaluate(runner, problems, config.eval.k, seed=seed)
    if per_problem is not None:
        per_problem.update(
            {r["problem_id"]: r["correct"] / r["samples"] for r in report.per_problem}
        )
    out: dict[str, float] = {f"{prefix}/{name}": m.mean for name, m in report.metrics.items()}
    for name, m in report.metrics.items():  # bootstrap CIs over distinct problems (not plotted)
        out[f"ci/{prefix}/{name}_low"], out[f"ci/{prefix}/{name}_high"] = m.ci_low, m.ci_high
    out[distinct_key(prefix)] = report.n_problems_distinct
    for agent, ratio in report.clipped_ratio.items():
        out[clipped_key(prefix, agent)] = ratio
    out[grader_key(prefix)] = report.grader_failures.share
    for agent, value in report.local_rewards.items():
        out[local_key(prefix, agent)] = value
    if is_tabular_team(policies):  # an environment is made only for a team that can have J
        exact = exact_team_reward(env_fn(), policies, runner.sampling)
        if exact is not None:
            out[exact_key(prefix)] = exact
    return out


def local_key(prefix: str, agent: str) -> str:
    """The metric key of an agent's mean local reward in an evaluation
    (``eval/<agent>/local_reward``: named as the training metric ``agent/<agent>/local_reward``
    is, the evaluation's prefix in place of ``agent``)."""
    return f"{prefix}/{agent}/local_reward"


def exact_key(prefix: str) -> str:
    """The metric key of a tabular team's exact expected reward (``eval/exact_J``)."""
    return f"{prefix}/exact_J"


def is_tabular_team(policies: Mapping[str, Any]) -> bool:
    """Every agent is a local :class:`~adapters.tabular.TabularPolicy` (the first condition of
    :func:`exact_team_reward`)."""
    from adapters.tabular import TabularPolicy

    return bool(policies) and all(isinstance(p, TabularPolicy) for p in policies.values())


def exact_team_reward(
    env: Any, policies: Mapping[str, Any], sampling: Mapping[str, SamplingParams]
) -> float | None:
    """The exact expected reward J of a team of tabular agents that samples as ``sampling`` says
    (softmax of the logits at each agent's temperature; 0: greedy), where the task can compute
    it (``tasks.capabilities.SupportsExactReward``: the relay), or ``None``: any agent not a local
    :class:`~adapters.tabular.TabularPolicy` on the task's own states and messages, top-k or
    top-p sampling, a speaking order other than round robin, or a visibility other than
    ``previous`` (the exact game's)."""
    if not is_tabular_team(policies):
        return None
    task: Any = getattr(env, "task", None)
    exact = getattr(task, "exact_reward", None)
    protocol = getattr(env, "protocol", None)
    if not callable(exact) or protocol is None or protocol.visibility != "previous":
        return None
    from teamtr_env.router import RoundRobin

    if protocol.full_view or not isinstance(getattr(env, "router", None), RoundRobin):
        return None
    import torch

    states, messages = tuple(task.tabular_states()), tuple(task.tabular_messages())
    tables = []
    for agent in protocol.agents:
        policy, params = policies.get(agent), sampling.get(agent)
        if policy is None or params is None:
            return None
        if (policy.states, policy.messages) != (states, messages):
            return None
        if params.top_k or params.top_p < 1.0:
            return None
        t = params.temperature if policy.temperature_applies else 1.0
        with torch.no_grad():
            logits = policy.logits.detach().double()
            if t == 0:
                table = torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).double()
            else:
                table = torch.softmax(logits / t, dim=-1)
        tables.append(table.numpy())
    return float(exact(tables, protocol.turn_limit))


def clipped_key(prefix: str, agent: str) -> str:
    """The metric key of ``agent``'s share of messages cut off at the token limit in an
    evaluation (``eval/solver/clipped_ratio``, as ``agent/solver/clipped_ratio`` in training)."""
    return f"{prefix}/{agent}/clipped_ratio"


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


def grader_key(prefix: str) -> str:
    """The metric key of the share of an evaluation's answers the grader failed on
    (``grader/eval_failed_share``; :data:`tasks.base.GRADER_FAILED`)."""
    return f"grader/{prefix}_failed_share"


def grader_warnings(metrics: Mapping[str, float]) -> list[str]:
    """One line per evaluation in ``metrics`` (``eval``, ``train_eval``, ``val``) in which the
    grader failed on some answers for a reason of its own (a timeout, an error of its code):
    those score 0 as if wrong, so the evaluation (and the rewards training sees) understate the
    team; above ``GRADER_FAILURE_ALARM_RATIO`` they measure the grader."""
    lines = []
    for prefix in ("eval", "train_eval", "val"):
        share = metrics.get(grader_key(prefix), 0.0)
        if share <= 0:
            continue
        line = (
            f"the grader failed on {share:.0%} of the answers in the {prefix}/ evaluation (a "
            "timeout or an error of its own; scored 0 as if wrong, in training rewards too)"
        )
        if share > GRADER_FAILURE_ALARM_RATIO:
            line += (
                ": the metrics measure the grader, not the team. Check the task's grader options "
                "(timeout_s) and the episodes' details.reason"
            )
        lines.append(line)
    return lines


def distinct_key(prefix: str) -> str:
    """The metric key of the number of distinct problems an evaluation used."""
    return f"problems/{prefix}_distinct"


def evaluate_all(
    config: TrainConfig,
    eval_fn: Callable[[], Any],
    train_fn: Callable[[], Any],
    policies: Mapping[str, Any],
    per_problem: dict[str, float] | None = None,
    runner_for: Callable[[Callable[[], Any]], Runner] | None = None,
) -> dict[str, float]:
    """The held-out evaluation (``eval/``) and, if asked, the training split's (``train_eval/``),
    each with its number of distinct problems (``problems/eval_distinct``,
    ``problems/train_eval_distinct``); ``per_problem`` receives the held-out problems' avg@K
    (see :func:`evaluate_team`); ``runner_for`` gives the runner of an environment factory
    (default: local runners of ``policies``)."""

    def runner(env_fn: Callable[[], Any]) -> Runner | None:
        return runner_for(env_fn) if runner_for is not None else None

    out = evaluate_team(config, eval_fn, policies, per_problem=per_problem, runner=runner(eval_fn))
    if config.eval.train_distribution:
        train = evaluate_team(config, train_fn, policies, "train_eval", runner=runner(train_fn))
        out.update(train)
    return out
