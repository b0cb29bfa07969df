"""The team's trainer, shared by every learner (TeamTR, naive sequential, joint and plugins): the
agents' slots (policy, optimizer, beta, delta, version), seeded sampling under the current
parameters, the update order, advantages, scoring, checkpoints; ``run_stage`` runs one
:class:`trainers.stage.Stage` with the learner and advances.

One stage updates every trainable agent once, in an update order sigma (fixed, reverse or random).
What a stage samples and which agent is updated on what is the learner's (``trainers/learners/``,
looked up by ``schedule.learner`` in ``trainers/registry.py``):

* ``teamtr/TeamTR-v0``: before EVERY agent update (every ``resample_every`` updates in the ablation)
  fresh rollouts are sampled under the partially updated team pi_hat^{i-1};
* ``teamtr/NaiveSequential-v0``: rollouts are sampled ONCE at the stage start (under pi_hat^0) and
  reused for every update of the stage (optionally reweighted by the already-updated agents'
  ratios);
* ``teamtr/Joint-v0``: one batch, every agent updated on it. With separate parameters per agent
  and no reweighting, joint and naive sequential produce the same parameters; they differ in what
  is measured (joint has no intermediate teams, so no stale-gap diagnostics).

:class:`trainers.stage.Stage` is what a learner calls: every update is an ``update_agent`` call
(trust region enforced there). The ``disjoint`` budget (the default) gives every update its own B prompts x G
rollouts: naive sequential and joint sample n*B prompts at the stage start and update agent i on
the i-th disjoint slice, TeamTR samples B fresh prompts per update, so the learners differ only in
staleness.

Diagnostics (``config.diagnostics``; :mod:`trainers.stage_diagnostics`, docs/diagnostics.md)
observe each stage. At
``cheap`` (the default) each update record gets its zeta proxies, KL-monitor flip rates and, for
the importance-weighting ablation, the weights' ESS and tails; each stage the certificate and,
when the learner trains on batches of its intermediate teams (TeamTR), the occupancy drift D_occ.
At ``full``, per update i >= 1 (naive sequential and TeamTR; outside the training budget): the
updated agent's surrogate ``mean(w A)`` on three batches of B prompts that are independent of the
update batch: ``L_stale`` on a stage-start batch, ``L_inter`` on a fresh batch of the intermediate
team pi_hat^{i-1}, and the same surrogate on a second stage-start batch. ``stale_gap = |L_stale -
L_inter|`` (summed: Delta_stale) and ``noise_floor = |L_stale - L_stale'|``, the gap two
independent batches of the same team show by sampling noise alone; the same batches give D_occ and
its noise floor, and one more batch after the stage measures J(after) - J(before).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch

from teamtr_core.errors import ConfigError
from teamtr_core.policy import SamplingParams, TrainablePolicy, add_syncs, engine_syncs
from teamtr_core.seeds import DIAG_STREAM, ORDER_STREAM, PROBLEM_STREAM, TRAIN_STREAM, derive_seed
from teamtr_env.env import TeamEnv
from teamtr_env.rollout import MessageRecord, RolloutBatch
from teamtr_env.runners import Runner, make_runner
from trainers.advantages import GroupAdvantages, group_advantages
from trainers.callbacks import Callback, CallbackList
from trainers.config import TrainConfig
from trainers.learners.base import Learner, SamplePlan
from trainers.registry import make_learner
from trainers.stage import Stage, StageReport
from trainers.stage_diagnostics import RunDiagnostics
from trainers.update import (
    score,
)
from trainers.updaters import (
    ActorPolicy,
    LocalUpdater,
    RayUpdater,
    Updater,
    check_learner_resources,
    start_learner_actors,
)


@dataclass
class AgentSlot:
    """A trainable agent: the policy the team plays, its updater (optimizer, reference, where
    its updates run: :mod:`trainers.updaters`) and its trust-region state."""

    policy: TrainablePolicy
    updater: Updater | None  # None until a Ray learner actor is started (first stage or load)
    beta: float
    delta: float
    version: int = 0  # accepted updates so far: which parameters produced a rollout
    synced: int | None = None  # the version last sent to a distributed runner's workers

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The optimizer of an agent updated in this process."""
        return self._local().optimizer

    @property
    def reference(self) -> TrainablePolicy | None:
        """The frozen reference of an agent updated in this process (``optim.ref_kl_coef``)."""
        return self._local().reference

    def _local(self) -> LocalUpdater:
        if not isinstance(self.updater, LocalUpdater):
            raise AttributeError("this agent's updates run in a Ray learner actor")
        return self.updater


@dataclass(frozen=True)
class SampleEvent:
    """One call to the sampler (tests check who produced which rollouts)."""

    stage: int
    index: int
    purpose: str  # "train" or "diagnostic"
    versions: Mapping[str, int]
    episodes: int
    tokens: int
    # What a distributed runner's workers report they played (None on the local runner).
    worker_versions: Mapping[str, int] | None = None


class TeamTrainer:
    """Trains a team's agents on one environment with the configured schedule.

    Args:
        config: the run configuration (schedule, trust region, optimisation, diagnostics).
        env_fn: builds the team environment.
        policies: one policy per agent; agents whose policy is not a ``TrainablePolicy`` take part
            in rollouts but are never updated (fixed teammates).
        learner: what each stage samples and updates; default: the learner registered as
            ``config.schedule.learner`` (see :mod:`trainers.registry`).
        sampling: each agent's rollout sampling (``trainers.team_eval.agent_sampling``: a team
            config's per-agent values); default: ``config.sampling`` for every agent. Each agent's messages are scored at its
            own temperature.
        callbacks: :class:`trainers.callbacks.Callback` objects; ``on_update`` is called after
            every update with its record (``trainer.callbacks.append`` adds more).
        team: a picklable builder of every agent's policy (``trainers.team_eval.TeamSource``)
            for a Ray runner's workers to build their replicas with (see
            :class:`~teamtr_env.runners.ray.RayRunner`); needed when ``policies`` holds
            :class:`~trainers.updaters.ActorPolicy` stand-ins and rollouts run on Ray.

    With ``trainer.backend: ray``, an agent given as an :class:`~trainers.updaters.ActorPolicy`
    is trained by that actor and the driver holds no copy of it (what ``teamtr train`` does); an
    agent given as a policy object gets a learner actor started from a copy of it at the first
    stage, and the driver's object is reloaded after every accepted update.

    Raises:
        ConfigError: the learner rejects the configuration (every problem listed).
    """

    def __init__(
        self,
        config: TrainConfig,
        env_fn: Callable[[], TeamEnv],
        policies: Mapping[str, Any],
        learner: Learner | None = None,
        sampling: Mapping[str, SamplingParams] | None = None,
        callbacks: CallbackList | Sequence[Callback] = (),
        team: Callable[[], Mapping[str, Any]] | None = None,
    ):
        self.config = config
        # A TrainConfig was checked by its own learner when it was built; a learner object given
        # here may be another, so it checks the configuration itself.
        self.learner = learner if learner is not None else make_learner(config.schedule.learner)
        errors = self.learner.check(config) if learner is not None else []
        if errors:
            raise ConfigError("training config", errors)
        shared = config.sampling
        self.runner = make_runner(
            env_fn,
            dict(policies),
            dict(sampling) if sampling else shared,
            settings=config.runner,
            progress=False,
            team=team,
        )
        self.agents = list(self.runner.agents)
        tr, opt = config.trust_region, config.optim
        if opt.gradient_checkpointing:
            for p in policies.values():
                if isinstance(p, TrainablePolicy) and hasattr(p, "enable_gradient_checkpointing"):
                    p.enable_gradient_checkpointing()
        remote = config.trainer.backend == "ray"
        self.slots = {
            a: AgentSlot(p, _updater(p, config, remote), tr.beta, tr.delta)
            for a, p in policies.items()
            if isinstance(p, TrainablePolicy)
        }
        # Each agent's messages are scored at the temperature they were sampled at.
        self.temperatures = {
            a: _score_temperature(p) for a, p in self.runner.sampling.items() if a in self.slots
        }
        self.flip_trials = config.diagnostics.flip_trials if config.diagnostics.cheap else 0
        self.stage = 0  # completed stages
        self.samples: list[SampleEvent] = []
        self.totals: dict[str, float] = defaultdict(float)
        # Called after every update with its record (the recipe's callbacks, progress bars).
        self.callbacks = (
            callbacks if isinstance(callbacks, CallbackList) else CallbackList(callbacks)
        )
        self.diagnostics: RunDiagnostics | None = None
        if config.diagnostics.cheap:
            probe = env_fn()
            self.diagnostics = RunDiagnostics(config, probe.task, probe.protocol.turn_limit)

    # -- sampling ---------------------------------------------------------------------------
    def sample(self, stage: int, index: int, prompts: int, purpose: str = "train") -> RolloutBatch:
        """``prompts`` prompts x G rollouts under the CURRENT parameters of every agent (seeded by
        stage and index)."""
        stream = TRAIN_STREAM if purpose == "train" else DIAG_STREAM
        seed = derive_seed(self.config.seed, stream, stage, index)
        self.sync_workers()
        batch = self.runner.rollout(
            # i.i.d. draws: a training batch samples the distribution the objective averages
            # over (a problem may repeat), unlike an evaluation set.
            self.runner.sample_problems(
                prompts, seed=derive_seed(seed, PROBLEM_STREAM), distinct=False
            ),
            group_size=self.config.schedule.group_size,
            seed=seed,
        )
        versions = self.versions()
        tokens = batch.stats.tokens_generated or batch.stats.chars_generated
        played = getattr(self.runner, "last_versions", None)
        self.samples.append(
            SampleEvent(stage, index, purpose, versions, batch.stats.envs, tokens, played)
        )
        key = "rollouts" if purpose == "train" else "diagnostic_rollouts"
        self.totals[key] += batch.stats.envs
        self.totals["tokens" if purpose == "train" else "diagnostic_tokens"] += tokens
        return batch

    def sync_workers(self) -> None:
        """Sends every agent's weights that changed since the last sync to a distributed
        runner's workers (from a learner actor straight through the object store), so they
        never play stale weights; nothing to send on the local runner."""
        sync_ref = getattr(self.runner, "sync_ref", None)
        for agent, slot in self.slots.items():
            if slot.synced != slot.version:
                if isinstance(slot.updater, RayUpdater) and sync_ref is not None:
                    sync_ref(agent, slot.updater.weights_ref(), slot.version)  # actor -> workers
                else:
                    self.runner.sync(agent, slot.policy, slot.version)
                slot.synced = slot.version

    @property
    def policies(self) -> dict[str, Any]:
        """The team the trainer plays: every agent's policy (an
        :class:`~trainers.updaters.ActorPolicy` for an agent trained in a learner actor)."""
        return self.runner.policies

    def use_env(self, env_fn: Callable[[], TeamEnv]) -> None:
        """Samples the training rollouts from ``env_fn``'s environments from now on (a task
        schedule's next options): a Ray runner's workers, with the same weights, build them."""
        for_env = getattr(self.runner, "for_env", None)
        if for_env is not None:
            self.runner = for_env(env_fn, description="rollout")
        else:
            self.runner = Runner(env_fn, self.policies, self.runner.sampling, progress=False)

    def evaluation_runner(self, env_fn: Callable[[], TeamEnv]) -> Runner:
        """A runner of the current team on ``env_fn``'s environments (a held-out or validation
        split): a Ray runner's workers (synced first), else a local runner of :attr:`policies`
        (an agent in a learner actor then writes its messages there)."""
        for_env = getattr(self.runner, "for_env", None)
        if for_env is not None:
            self.sync_workers()
            view: Runner = for_env(env_fn, description="evaluation")
            return view
        return Runner(env_fn, self.policies, self.runner.sampling, progress=False)

    def load_policy(self, agent: str, state: Mapping[str, Any]) -> None:
        """Loads ``agent``'s policy weights (a best-validation team) wherever they live; the
        workers of a distributed runner get them before their next rollout."""
        slot = self.slots[agent]
        slot.policy.load_state_dict(state)
        if isinstance(slot.updater, RayUpdater) and not isinstance(slot.policy, ActorPolicy):
            slot.updater.load_weights(state)
        slot.synced = None

    def versions(self) -> dict[str, int]:
        """Each trainable agent's accepted updates so far: which parameters play now."""
        return {a: s.version for a, s in self.slots.items()}

    def update_order(self, stage: int) -> list[str]:
        """sigma for this stage, over the trainable agents."""
        order = [a for a in self.agents if a in self.slots]
        how = self.config.schedule.order
        if how == "reverse":
            return order[::-1]
        if how == "random":
            rng = np.random.default_rng(derive_seed(self.config.seed, ORDER_STREAM, stage))
            return [order[i] for i in rng.permutation(len(order))]
        return order

    # -- one stage ----------------------------------------------------------------------------
    def sampling_plan(self, n: int) -> list[SamplePlan]:
        """The stage's sampling events as ``(first update, updates covered, prompts)``: the
        learner's plan (TeamTR samples before every ``resample_every``-th update; naive sequential
        and joint once, at the stage start), sized by ``schedule.budget``."""
        return self.learner.sampling_plan(n, self.config.schedule)

    def run_stage(self) -> StageReport:
        """Runs stage ``self.stage`` with the learner and advances it (``callbacks`` hear of
        every update)."""
        lr = self.config.optim.lr_at(self.stage, self.config.schedule.stages)
        for slot in self.updaters():
            updater = cast(Updater, slot.updater)
            updater.set_lr(lr)
            if self.config.optim.ref_kl_coef > 0:
                updater.freeze_reference()  # the team as training starts (once)
        stage = Stage(self)
        self.learner.run_stage(stage)
        report, costs = stage.finish()
        report.metrics["stage/lr"] = lr
        for key, value in costs.items():
            self.totals[key] += value
        self.totals["stage_wall_s"] += report.metrics["stage/wall_s"]
        self.stage += 1
        return report

    # -- where updates run ---------------------------------------------------------------------
    def updaters(self) -> list[AgentSlot]:
        """The slots, each with its updater (Ray learner actors are started here, from the
        agents' current policies: after the warm start, or before a checkpoint is loaded)."""
        missing = {a: slot.policy for a, slot in self.slots.items() if slot.updater is None}
        if missing:
            for agent, updater in start_learner_actors(self.config, missing).items():
                self.slots[agent].updater = updater
        return list(self.slots.values())

    def restart_updaters(self) -> None:
        """Replaces every Ray learner actor with a new one built as it was (after one died):
        the caller loads a checkpoint."""
        remote = [s.updater for s in self.slots.values() if isinstance(s.updater, RayUpdater)]
        for updater in remote:
            updater.shutdown()
        if remote:
            check_learner_resources(self.config, len(remote))
        for updater in remote:
            updater.restart()
        for slot in self.slots.values():
            slot.synced = None  # the workers get the restored weights again

    def apply_update(self, agent: str) -> None:
        """After an accepted update: the team plays the updater's new weights (the policy the
        driver holds is reloaded from a Ray learner actor; a local updater changed it in
        place)."""
        slot = self.slots[agent]
        slot.version += 1
        if isinstance(slot.updater, RayUpdater) and not isinstance(slot.policy, ActorPolicy):
            slot.policy.load_state_dict(slot.updater.weights())

    def sync_totals(self) -> dict[str, float] | None:
        """The weight syncs into every rollout engine of the run so far (``count``, ``tensors``,
        ``bytes``, ``seconds`` summed over agents): the engines in this process, in the learner
        actors (``trainer.backend: ray``) and on the Ray rollout workers
        (``runner.backend: ray``). ``None`` while no engine has started anywhere
        (``rollout.engine: hf``)."""
        parts = [engine_syncs(self.policies.values())]  # an ActorPolicy holds no engine
        parts += [
            s.updater.call("engine_syncs")
            for s in self.slots.values()
            if isinstance(s.updater, RayUpdater)
        ]
        on_workers = getattr(self.runner, "engine_syncs", None)
        if callable(on_workers):
            parts.append(on_workers())
        return add_syncs(parts)

    # -- helpers -------------------------------------------------------------------------------
    def score(self, agent: str, messages: list[MessageRecord]) -> list[Any]:
        """``agent``'s current log-probs of ``messages`` (no gradient), computed where its
        model lives (in its learner actor with ``trainer.backend: ray``)."""
        slot = self.slots[agent]
        if slot.updater is not None:
            return slot.updater.score(messages, self.temperatures[agent])
        return score(
            slot.policy, messages, self.config.optim.micro_batch_size, self.temperatures[agent]
        )

    def message_advantages(
        self, batch: RolloutBatch, agent: str, groups: GroupAdvantages | None = None
    ) -> tuple[list[MessageRecord], torch.Tensor]:
        """``agent``'s messages in ``batch`` and ``[N]`` advantages: each message gets its
        episode's group advantage (``groups``: :meth:`advantages` of ``batch``, computed when
        not given)."""
        messages = batch.messages_of(agent)
        groups = self.advantages(batch) if groups is None else groups
        adv = groups.advantages.flatten()
        return messages, torch.tensor(
            [float(adv[m.episode]) for m in messages], dtype=torch.float32
        )

    def advantages(self, batch: RolloutBatch) -> GroupAdvantages:
        """Group advantages of ``batch``'s team rewards (the config's ``optim`` baseline,
        normalisation and clipping)."""
        o = self.config.optim
        rewards = torch.tensor(batch.group_rewards(), dtype=torch.float32)
        return group_advantages(
            rewards,
            eps_std=o.eps_std,
            a_clip=o.a_clip,
            normalize=o.normalize_advantages,
            estimator=o.advantage,
        )

    # -- checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "totals": dict(self.totals),
            "samples": [e.__dict__ for e in self.samples],
            "slots": {
                a: {
                    **cast(Updater, s.updater).state_dict(),
                    "beta": s.beta,
                    "delta": s.delta,
                    "version": s.version,
                }
                for a, s in zip(self.slots, self.updaters())
            },
            "torch_rng": torch.get_rng_state(),
            **({"diagnostics": self.diagnostics.state_dict()} if self.diagnostics else {}),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.stage = int(state["stage"])
        self.totals = defaultdict(float, state["totals"])
        self.samples = [SampleEvent(**e) for e in state["samples"]]
        self.updaters()
        for a, s in state["slots"].items():
            slot = self.slots[a]
            cast(Updater, slot.updater).load_state_dict(s)
            if not isinstance(slot.updater, LocalUpdater) and not isinstance(
                slot.policy, ActorPolicy
            ):  # the driver's copy of an agent trained in a learner actor
                slot.policy.load_state_dict(s["policy"])
            slot.synced = None
            slot.beta, slot.delta, slot.version = s["beta"], s["delta"], s["version"]
        torch.set_rng_state(state["torch_rng"])
        if self.diagnostics is not None:
            self.diagnostics.load_state_dict(state.get("diagnostics", {}))


def _updater(policy: Any, config: TrainConfig, remote: bool) -> Updater | None:
    """A slot's updater: the learner actor behind an ``ActorPolicy``, a local one, or ``None``
    (a learner actor started from the policy at the first stage)."""
    if isinstance(policy, ActorPolicy):
        if not remote:
            raise ConfigError(
                "trainer", ["an ActorPolicy's agent is trained in its actor: trainer.backend: ray"]
            )
        return policy.updater
    return None if remote else LocalUpdater(policy, config)


def _score_temperature(sampling: SamplingParams) -> float:
    """The temperature an agent's messages are scored at: its sampling temperature (1 for
    greedy decoding, whose messages have no sampling distribution to match)."""
    return sampling.temperature if sampling.temperature > 0 else 1.0
