"""The team's trainer, shared by every learner (TeamTR, naive sequential, joint and plugins): one
owner per trainable agent (:mod:`trainers.placement.agents`: beta, delta, version and where its
model lives), seeded sampling under the current parameters, the update order, checkpoints;
``run_stage`` runs one :class:`trainers.learners.stage.Stage` with the learner and advances.

One stage updates every trainable agent once, in an update order sigma (fixed, reverse or random).
What a stage samples and which agent is updated on what is the learner's (``trainers/learners/``,
looked up by ``schedule.learner`` in ``trainers/learners/registry.py``):

* ``teamtr/TeamTR-v0``: before EVERY agent update (every ``learner_options.resample_every``
  updates in the ablation)
  fresh rollouts are sampled under the partially updated team pi_hat^{i-1};
* ``teamtr/NaiveSequential-v0``: rollouts are sampled ONCE at the stage start (under pi_hat^0) and
  reused for every update of the stage (optionally reweighted by the already-updated agents'
  ratios);
* ``teamtr/Joint-v0``: one batch, every agent updated on it. With separate parameters per agent
  and no reweighting, joint and naive sequential produce the same parameters; they differ in what
  is measured (joint has no intermediate teams, so no stale-gap diagnostics).

:class:`trainers.learners.stage.Stage` is what a learner calls: every update is an ``update_agent`` call
(trust region enforced there). The ``disjoint`` budget (the default) gives every update its own B prompts x G
rollouts: naive sequential and joint sample n*B prompts at the stage start and update agent i on
the i-th disjoint slice, TeamTR samples B fresh prompts per update, so the learners differ only in
staleness.

Diagnostics (``config.diagnostics``; :mod:`trainers.learners.stage_diagnostics`, docs/diagnostics.md)
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
from typing import Any

import numpy as np
import torch

from teamtr_core.errors import ConfigError, RegistryError
from teamtr_core.policy import SamplingParams, TrainablePolicy, add_syncs, engine_syncs
from teamtr_core.seeds import ORDER_STREAM, derive_seed
from teamtr_core.team import Team
from teamtr_env.env import TeamEnv
from teamtr_env.runners import Runner, make_runner
from trainers.config import TrainConfig
from trainers.learners.base import Learner
from trainers.learners.callbacks import Callback, CallbackList
from trainers.learners.registry import make_learner
from trainers.learners.sampling import TeamSampler
from trainers.learners.stage import Stage, StageReport
from trainers.learners.stage_diagnostics import RunDiagnostics
from trainers.placement.agents import RemoteAgent, TrainedAgent, is_remote, slot_owners
from trainers.placement.updaters import check_actor_resources, prepared

#: Totals a run keeps across stages (``totals``), summed from each stage's report.
_SAMPLE_TOTALS = {
    "train": ("rollouts", "tokens"),
    "diagnostic": ("diagnostic_rollouts", "diagnostic_tokens"),
}


class TeamTrainer:
    """Trains a team's agents on one environment with the configured schedule.

    Args:
        config: the run configuration (schedule, trust region, optimisation, diagnostics).
        env_fn: builds the team environment.
        policies: one policy per agent; agents whose policy is not a ``TrainablePolicy`` take part
            in rollouts but are never updated (fixed teammates). Agents given the same policy
            object (a role-sharing team) train one model with one optimizer: each agent's update
            steps it on that agent's messages.
        learner: what each stage samples and updates; default: the learner registered as
            ``config.schedule.learner`` (see :mod:`trainers.learners.registry`).
        sampling: each agent's rollout sampling (``trainers.run.team_eval.agent_sampling``: a
            team config's per-agent values); default: ``config.sampling`` for every agent. Each
            agent's messages are scored at its own temperature.
        callbacks: :class:`trainers.learners.callbacks.Callback` objects; ``on_update`` is called
            after every update with its record (``trainer.callbacks.append`` adds more).
        team: a picklable builder of every agent's policy (``trainers.run.team_eval.TeamSource``)
            for a Ray runner's workers to build their replicas with (see
            :class:`~teamtr_env.runners.ray.RayRunner`); needed when ``policies`` holds
            :class:`~trainers.placement.updaters.ActorPolicy` stand-ins and rollouts run on Ray.

    Each trainable agent gets its owner (:func:`trainers.placement.agents.trained_agent`): with
    ``runner.agents: ray``, an agent given as an
    :class:`~trainers.placement.updaters.ActorPolicy` is trained by that actor and the driver
    holds no copy of it (what ``teamtr train`` does); an agent given as a policy object gets a
    agent actor started from a copy of it at the first stage, and the driver's object is
    reloaded after every accepted update.

    Raises:
        ConfigError: the learner is not registered, or rejects the configuration (every problem
            listed).
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
        # The configuration's fields were checked when it was built; its learner (this one, or a
        # learner object given here) checks the rest.
        try:
            self.learner = learner if learner is not None else make_learner(config.schedule.learner)
        except RegistryError as exc:
            raise ConfigError("training config", [f"schedule.learner: {exc}"]) from None
        errors = self.learner.check(config)
        if errors:
            raise ConfigError("training config", errors)
        runner = make_runner(
            env_fn,
            dict(policies),
            dict(sampling) if sampling else config.sampling,
            settings=config.runner,
            progress=False,
            team=team,
        )
        self.agents = list(runner.agents)
        for p in policies.values():
            if isinstance(p, TrainablePolicy):
                prepared(p, config)
        #: The trainable agents' owners (fixed teammates have none), one per slot of the team:
        #: the agents of a shared policy (a role-sharing team) share its optimizer and version.
        self.slots: dict[str, TrainedAgent] = {}
        for slot in Team.of(policies).slots:
            if not isinstance(slot.policy, TrainablePolicy):
                continue
            if slot.shared:
                errors = self.learner.role_sharing_errors(config)
                if errors:
                    raise ConfigError("training config", errors)
            self.slots.update(slot_owners(slot, config, runner.sampling))
        self.slots = {a: self.slots[a] for a in policies if a in self.slots}  # the team's order
        #: Draws every stage's rollouts (handed to the stage): it owns the runner.
        self.sampler = TeamSampler(config, runner, self.slots)
        self.stage = 0  # completed stages
        self.totals: dict[str, float] = defaultdict(float)
        # Called after every update with its record (the recipe's callbacks, progress bars).
        self.callbacks = (
            callbacks if isinstance(callbacks, CallbackList) else CallbackList(callbacks)
        )
        self.diagnostics: RunDiagnostics | None = None
        if config.diagnostics.cheap:
            probe = env_fn()
            self.diagnostics = RunDiagnostics(config, probe.task, probe.protocol.turn_limit)

    @property
    def temperatures(self) -> dict[str, float]:
        """Each trainable agent's scoring temperature (its sampling temperature; 1 for greedy)."""
        return {a: s.temperature for a, s in self.slots.items()}

    # -- sampling ---------------------------------------------------------------------------
    @property
    def runner(self) -> Any:
        """What plays the episodes (the sampler's runner)."""
        return self.sampler.runner

    @property
    def sample(self) -> TeamSampler:
        """Draws rollouts under the CURRENT parameters of every agent: call it as
        ``trainer.sample(stage, index, prompts, purpose="train", strategy=None)``
        (:class:`TeamSampler`: ``prompts`` prompts x G rollouts seeded by stage and index, and
        what was sampled; ``strategy=Tree(select)``: a tree)."""
        return self.sampler

    def sync_workers(self) -> None:
        """Sends changed weights to a distributed runner's workers (:class:`TeamSampler`)."""
        self.sampler.sync_workers()

    @property
    def policies(self) -> dict[str, Any]:
        """The team the trainer plays: every agent's policy (an
        :class:`~trainers.placement.updaters.ActorPolicy` for an agent trained in a learner
        actor)."""
        return self.runner.policies

    def use_env(self, env_fn: Callable[[], TeamEnv]) -> None:
        """Samples the training rollouts from ``env_fn``'s environments from now on (a task
        schedule's next options): a Ray runner's workers, with the same weights, build them."""
        for_env = getattr(self.runner, "for_env", None)
        if for_env is not None:
            self.sampler.runner = for_env(env_fn, description="rollout")
        else:
            runner = Runner(env_fn, self.policies, self.runner.sampling, progress=False)
            self.sampler.runner = runner

    def evaluation_runner(self, env_fn: Callable[[], TeamEnv]) -> Runner:
        """A runner of the current team on ``env_fn``'s environments (a held-out or validation
        split): a Ray runner's workers (synced first), else a local runner of :attr:`policies`
        (an agent in an agent actor then writes its messages there)."""
        for_env = getattr(self.runner, "for_env", None)
        if for_env is not None:
            self.sync_workers()
            view: Runner = for_env(env_fn, description="evaluation")
            return view
        return Runner(env_fn, self.policies, self.runner.sampling, progress=False)

    def load_policy(self, agent: str, state: Mapping[str, Any]) -> None:
        """Loads ``agent``'s policy weights (a best-validation team) wherever they live; the
        workers of a distributed runner get them before their next rollout."""
        self.slots[agent].load_weights(state)

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
    def run_stage(self) -> StageReport:
        """Runs stage ``self.stage`` with the learner and advances it (``callbacks`` hear of
        every update)."""
        config = self.config
        lr = config.optim.lr_at(self.stage, config.schedule.stages)
        self.start_agents()
        for agent in self.slots.values():
            agent.begin_stage(lr, freeze_reference=config.optim.ref_kl_coef > 0)
        stage = Stage(
            config,
            self.stage,
            self.update_order(self.stage),
            self.slots,
            self.sampler,
            diagnostics=self.diagnostics,
            callbacks=self.callbacks,
            engine_syncs=self.sync_totals,
            stale_diagnostics=self.learner.stale_diagnostics,
            options=self.learner.settings(config),
        )
        self.learner.run_stage(stage)
        report, costs = stage.finish()
        report.metrics["stage/lr"] = lr
        for key, value in costs.items():
            self.totals[key] += value
        for event in report.samples:
            rollouts, tokens = _SAMPLE_TOTALS[event.purpose]
            self.totals[rollouts] += event.episodes
            self.totals[tokens] += event.tokens
        self.totals["stage_wall_s"] += report.metrics["stage/wall_s"]
        self.stage += 1
        return report

    # -- where updates run ---------------------------------------------------------------------
    def start_agents(self) -> None:
        """Starts where every agent's updates run (Ray agent actors, from the agents' current
        policies: after the warm start, or before a checkpoint is loaded), checked against the
        cluster's resources first; nothing when all have started."""
        pending = [a for a in self._remote() if not a.started]
        if pending:
            check_actor_resources(self.config, len(pending))
            for agent in pending:
                agent.start()

    def restart_agents(self) -> None:
        """Replaces every agent actor with a new one built as it was (after one died): the
        caller loads a checkpoint. Nothing happens to agents updated in this process."""
        remote = self._remote()
        for agent in remote:
            agent.shutdown()
        if remote:
            check_actor_resources(self.config, len(remote))
        for agent in remote:
            agent.restart()

    def _remote(self) -> list[RemoteAgent]:
        """The agents trained in agent actors."""
        return [a for a in self.slots.values() if is_remote(a)]

    def sync_totals(self) -> dict[str, float] | None:
        """The weight syncs into every rollout engine of the run so far (``count``, ``tensors``,
        ``bytes``, ``seconds`` summed over agents): the engines in this process, in the learner
        actors (``runner.agents: ray``) and on the Ray rollout workers
        (``runner.backend: ray``). ``None`` while no engine has started anywhere
        (``rollout.engine: hf``)."""
        parts = [engine_syncs(self.policies.values())]  # an ActorPolicy holds no engine
        parts += [agent.actor_engine_syncs() for agent in self._remote()]
        on_workers = getattr(self.runner, "engine_syncs", None)
        if callable(on_workers):
            parts.append(on_workers())
        return add_syncs(parts)

    # -- checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs: the stage, the totals, every agent's owner state, the
        torch RNG and the diagnostics' state (nothing grows with the run's length). Every
        agent's updates must have started (:meth:`start_agents`)."""
        return {
            "stage": self.stage,
            "totals": dict(self.totals),
            "slots": {a: s.state_dict() for a, s in self.slots.items()},
            "torch_rng": torch.get_rng_state(),
            **({"diagnostics": self.diagnostics.state_dict()} if self.diagnostics else {}),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restores :meth:`state_dict` (a checkpoint of an earlier version may carry a
        ``samples`` list: it is ignored)."""
        self.stage = int(state["stage"])
        self.totals = defaultdict(float, state["totals"])
        self.start_agents()
        for a, s in state["slots"].items():
            self.slots[a].load_state_dict(s)
        torch.set_rng_state(state["torch_rng"])
        if self.diagnostics is not None:
            self.diagnostics.load_state_dict(state.get("diagnostics", {}))
