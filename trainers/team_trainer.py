"""The stage machinery shared by every learner (TeamTR, naive sequential, joint and plugins).

One stage updates every trainable agent once, in an update order sigma (fixed, reverse or random).
What a stage samples and which agent is updated on what is the learner's (``trainers/learners/``,
looked up by ``schedule.method`` in ``trainers/registry.py``):

* ``teamtr/TeamTR-v0``: before EVERY agent update (every ``resample_every`` updates in the ablation)
  fresh rollouts are sampled under the partially updated team pi_hat^{i-1};
* ``teamtr/NaiveSequential-v0``: rollouts are sampled ONCE at the stage start (under pi_hat^0) and
  reused for every update of the stage (optionally reweighted by the already-updated agents'
  ratios);
* ``teamtr/Joint-v0``: one batch, every agent updated on it. With separate parameters per agent
  and no reweighting, joint and naive sequential produce the same parameters; they differ in what
  is measured (joint has no intermediate teams, so no stale-gap diagnostics).

:class:`Stage` is what a learner calls: every update is an ``update_agent`` call (trust region
enforced there). The ``disjoint`` budget (the default) gives every update its own B prompts x G
rollouts: naive sequential and joint sample n*B prompts at the stage start and update agent i on
the i-th disjoint slice, TeamTR samples B fresh prompts per update, so the learners differ only in
staleness.

Diagnostics (``config.diagnostics``; :mod:`trainers.stage_diagnostics`, docs/diagnostics.md). At
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

import copy
import math
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from teamtr_core.errors import ConfigError
from teamtr_core.policy import SamplingParams, TrainablePolicy
from teamtr_env.env import TeamEnv
from teamtr_env.rollout import MessageRecord, RolloutBatch
from teamtr_env.runners import derive_seed, make_runner
from trainers.advantages import GroupAdvantages, group_advantages
from trainers.config import ScheduleConfig, TrainConfig
from trainers.learners.base import Learner, SamplingEvent
from trainers.registry import make_learner
from trainers.stage_diagnostics import UPDATE_KEYS, RunDiagnostics, StageDiagnostics
from trainers.surrogate import surrogate_value
from trainers.update import (
    adapt_beta,
    adapt_delta,
    concat_logprobs,
    score,
    update_agent,
)

_ORDER_STREAM, _TRAIN_STREAM, _DIAG_STREAM, _PROBLEM_STREAM = 11, 13, 17, 19
_STALE_INDEX = 1_000  # sample index of the stage-start diagnostic batches (updates use 0..n-1)
_J_INDEX = 2_000  # sample index of the batches that measure J before and after a stage


@dataclass
class AgentSlot:
    """A trainable agent: its policy, optimizer and trust-region state."""

    policy: TrainablePolicy
    optimizer: torch.optim.Optimizer
    beta: float
    delta: float
    version: int = 0  # accepted updates so far: which parameters produced a rollout
    synced: int | None = None  # the version last sent to a distributed runner's workers
    reference: TrainablePolicy | None = None  # frozen at the first stage (optim.ref_kl_coef > 0)


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


@dataclass
class StageReport:
    """Metrics of one stage (namespaced keys, ready for the logger) and per-update records."""

    metrics: dict[str, float] = field(default_factory=dict)
    updates: list[dict[str, Any]] = field(default_factory=list)


class TeamTrainer:
    """Trains a team's agents on one environment with the configured schedule.

    Args:
        config: the run configuration (schedule, trust region, optimisation, diagnostics).
        env_fn: builds the team environment.
        policies: one policy per agent; agents whose policy is not a ``TrainablePolicy`` take part
            in rollouts but are never updated (fixed teammates).
        learner: what each stage samples and updates; default: the learner registered as
            ``config.schedule.method`` (see :mod:`trainers.registry`).
        sampling: each agent's rollout sampling (``trainers.team_eval.agent_sampling``: a team
            config's per-agent values); default: ``config.sampling`` for every agent. Each agent's messages are scored at its
            own temperature.

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
    ):
        self.config = config
        self.learner = learner if learner is not None else make_learner(config.schedule.method)
        problems = self.learner.check(config)
        if problems:
            raise ConfigError("training config", problems)
        shared = config.sampling
        self.runner = make_runner(
            env_fn,
            dict(policies),
            dict(sampling) if sampling else shared,
            settings=config.runner,
            progress=False,
        )
        self.agents = list(self.runner.agents)
        tr, opt = config.trust_region, config.optim
        if opt.gradient_checkpointing:
            for p in policies.values():
                if isinstance(p, TrainablePolicy) and hasattr(p, "enable_gradient_checkpointing"):
                    p.enable_gradient_checkpointing()
        self.slots = {
            a: AgentSlot(
                p,
                torch.optim.AdamW(p.parameters(), lr=opt.lr, weight_decay=opt.weight_decay),
                tr.beta,
                tr.delta,
            )
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
        # Called with each update's record (run_training's callbacks use it).
        self.update_hooks: list[Callable[[dict[str, Any]], None]] = []
        self.diagnostics: RunDiagnostics | None = None
        if config.diagnostics.cheap:
            probe = env_fn()
            self.diagnostics = RunDiagnostics(config, probe.task, probe.protocol.turn_limit)

    # -- sampling ---------------------------------------------------------------------------
    def sample(self, stage: int, index: int, problems: int, purpose: str = "train") -> RolloutBatch:
        """Rollouts under the CURRENT parameters of every agent (seeded by stage and index)."""
        stream = _TRAIN_STREAM if purpose == "train" else _DIAG_STREAM
        seed = derive_seed(self.config.seed, stream, stage, index)
        for agent, slot in self.slots.items():  # workers play the current weights, never stale
            if slot.synced != slot.version:
                self.runner.sync(agent, slot.policy, slot.version)
                slot.synced = slot.version
        batch = self.runner.rollout(
            # i.i.d. draws: a training batch samples the distribution the objective averages
            # over (a problem may repeat), unlike an evaluation set.
            self.runner.sample_problems(
                problems, seed=derive_seed(seed, _PROBLEM_STREAM), distinct=False
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
            rng = np.random.default_rng(derive_seed(self.config.seed, _ORDER_STREAM, stage))
            return [order[i] for i in rng.permutation(len(order))]
        return order

    # -- one stage ----------------------------------------------------------------------------
    def sampling_plan(self, n: int) -> list[SamplingEvent]:
        """The stage's sampling events as ``(first update, updates covered, problems)``: the
        learner's plan (TeamTR samples before every ``resample_every``-th update; naive sequential
        and joint once, at the stage start), sized by ``schedule.budget``."""
        return self.learner.sampling_plan(n, self.config.schedule)

    def run_stage(self, on_update: Callable[[int, int], None] | None = None) -> StageReport:
        """Runs stage ``self.stage`` with the learner and advances it. ``on_update(i, n)``
        reports progress."""
        lr = self.config.optim.lr_at(self.stage, self.config.schedule.stages)
        for slot in self.slots.values():
            for group in slot.optimizer.param_groups:
                group["lr"] = lr
            if self.config.optim.ref_kl_coef > 0 and slot.reference is None:
                slot.reference = _frozen_copy(slot.policy)  # the team as training starts
        stage = Stage(self, on_update)
        self.learner.run_stage(stage)
        report = stage.finish()
        report.metrics["stage/lr"] = lr
        return report

    def _stage_metrics(
        self,
        report: StageReport,
        stage: int,
        rewards: list[float],
        timing: Mapping[str, float],
        t_stage: float,
        messages: Mapping[str, tuple[int, int]] | None = None,
    ) -> None:
        """Fills ``report.metrics``: the stage's means and sums, and each agent's namespaced keys.
        ``messages``: per agent, ``(clipped, written)`` messages of the stage's training
        rollouts (``agent/<name>/clipped_ratio`` and ``stage/clipped_ratio``)."""
        updates = report.updates
        gaps = [u["stale_gap"] for u in updates if not math.isnan(u["stale_gap"])]
        floors = [u["noise_floor"] for u in updates if not math.isnan(u["noise_floor"])]
        kls = [u["kl_raw"] for u in updates if math.isfinite(u["kl_raw"])]
        train = [e for e in self.samples if e.stage == stage and e.purpose == "train"]
        report.metrics.update(
            {
                "stage/reward_mean": float(np.mean(rewards)),
                # the stage's first batch, under the stage-start team: comparable across
                # learners (TeamTR's later batches come from partially updated teams)
                "stage/reward_start": rewards[0],
                "stage/kl_tok_mean": float(np.mean(kls)) if kls else math.nan,
                "stage/kl_tok_max": float(np.max(kls)) if kls else math.nan,
                "stage/out_of_region_rate": float(
                    np.mean([u["out_of_region_raw"] for u in updates])
                ),
                "stage/accepted_rate": float(np.mean([u["accepted"] for u in updates])),
                "stage/rollouts": float(sum(e.episodes for e in train)),
                "stage/tokens": float(sum(e.tokens for e in train)),
                "stage/wall_s": time.perf_counter() - t_stage,
                **{f"stage/{k}": v for k, v in timing.items()},
            }
        )
        if messages:  # the share of messages cut off at the token limit (TRL: clipped_ratio)
            for agent, (clipped, written) in messages.items():
                report.metrics[f"agent/{agent}/clipped_ratio"] = clipped / max(written, 1)
            clipped_all = sum(c for c, _ in messages.values())
            written_all = sum(w for _, w in messages.values())
            report.metrics["stage/clipped_ratio"] = clipped_all / max(written_all, 1)
        if gaps:  # measured only with diagnostics on, for naive sequential and TeamTR
            report.metrics["stage/delta_stale"] = float(sum(gaps))
            report.metrics["stage/delta_stale_noise_floor"] = float(sum(floors))
        keys = (
            "kl_tok",
            "kl_raw",
            "beta",
            "delta",
            "backtracks",
            "l_seq",
            "stale_gap",
            "noise_floor",
            "ratio_clip_frac",
            "adv_clip_frac",
            "accepted",
            "in_region",
            "zeta_proxy",
            "flip_rate_25",
            "flip_rate_50",
            "iw_ess_over_b",
            "d_occ_term",
        )
        for u in updates:
            prefix = f"agent/{u['agent']}/"
            for key in keys:
                value = u[key]
                if isinstance(value, float) and not math.isfinite(value):
                    continue  # e.g. no stale gap for a stage's first update, no radius without TR
                report.metrics[prefix + key] = float(value)

    # -- helpers -------------------------------------------------------------------------------
    def _score(self, agent: str, messages: list[MessageRecord]) -> list[Any]:
        """``agent``'s current log-probs of ``messages`` (no gradient)."""
        return score(
            self.slots[agent].policy,
            messages,
            self.config.optim.micro_batch_size,
            self.temperatures[agent],
        )

    def message_advantages(
        self, batch: RolloutBatch, agent: str
    ) -> tuple[list[MessageRecord], torch.Tensor]:
        """``agent``'s messages in ``batch`` and ``[N]`` advantages: each message gets its
        episode's group advantage (the config's ``optim`` normalisation and clipping)."""
        messages = batch.messages_of(agent)
        return messages, _per_message(self._advantages(batch), messages)

    def _advantages(self, batch: RolloutBatch) -> GroupAdvantages:
        o = self.config.optim
        rewards = torch.tensor(batch.group_rewards(), dtype=torch.float32)
        return group_advantages(
            rewards, eps_std=o.eps_std, a_clip=o.a_clip, normalize=o.normalize_advantages
        )

    def _diagnostic_inputs(
        self, agent: str, batches: Mapping[str, RolloutBatch]
    ) -> dict[str, tuple[list[MessageRecord], torch.Tensor, list[Any]]]:
        """For each diagnostic batch: the agent's messages, their advantages and the agent's
        log-probs BEFORE its update (the behaviour policy of the surrogate's ratio)."""
        out = {}
        for name, b in batches.items():
            msgs = b.messages_of(agent)
            out[name] = (msgs, _per_message(self._advantages(b), msgs), self._score(agent, msgs))
        return out

    def _surrogates(
        self, agent: str, diag: Mapping[str, tuple[list[MessageRecord], torch.Tensor, list[Any]]]
    ) -> dict[str, float]:
        """The updated agent's surrogate ``mean(w A)`` on each diagnostic batch (independent of
        the update batch and of equal size): ``stale`` on a stage-start batch, ``inter`` on a
        batch of the intermediate team, ``floor`` on a second stage-start batch."""
        values = {}
        for name, (msgs, adv, old) in diag.items():
            if not msgs:
                values[name] = math.nan
                continue
            values[name] = surrogate_value(*_joined(self._score(agent, msgs), old), adv)
        return values

    def _stale_weights(
        self, messages: list[MessageRecord], log_ratio: torch.Tensor, offset: int
    ) -> torch.Tensor:
        """Trajectory weights ``w^{0->i-1}`` of the update batch's messages (episode ``e`` of a
        disjoint slice is episode ``offset + e`` of the stage-start batch)."""
        return torch.exp(
            torch.tensor([float(log_ratio[offset + m.episode]) for m in messages])
        ).float()

    def _episode_log_ratio(self, agent: str, batch: RolloutBatch, behaviour: Any) -> torch.Tensor:
        """Per episode, the sum over ``agent``'s messages of log(pi_new / pi_old): this agent's
        factor of the trajectory weight w^{0->i} (``behaviour`` = its log-probs before the update)."""
        msgs = batch.messages_of(agent)
        new_lp, old_lp, mask = _joined(self._score(agent, msgs), behaviour)
        per_msg = ((new_lp - old_lp) * mask).sum(-1).double()
        out = torch.zeros(len(batch.episodes), dtype=torch.float64)
        out.index_add_(0, torch.tensor([m.episode for m in msgs], dtype=torch.long), per_msg)
        return out

    # -- checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "totals": dict(self.totals),
            "samples": [e.__dict__ for e in self.samples],
            "slots": {
                a: {
                    "policy": s.policy.state_dict(),
                    "optimizer": s.optimizer.state_dict(),
                    "beta": s.beta,
                    "delta": s.delta,
                    "version": s.version,
                    **({"reference": s.reference.state_dict()} if s.reference is not None else {}),
                }
                for a, s in self.slots.items()
            },
            "torch_rng": torch.get_rng_state(),
            **({"diagnostics": self.diagnostics.state_dict()} if self.diagnostics else {}),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.stage = int(state["stage"])
        self.totals = defaultdict(float, state["totals"])
        self.samples = [SampleEvent(**e) for e in state["samples"]]
        for a, s in state["slots"].items():
            slot = self.slots[a]
            slot.policy.load_state_dict(s["policy"])
            slot.optimizer.load_state_dict(s["optimizer"])
            slot.beta, slot.delta, slot.version = s["beta"], s["delta"], s["version"]
            if "reference" in s:
                slot.reference = _frozen_copy(slot.policy)
                slot.reference.load_state_dict(s["reference"])
        torch.set_rng_state(state["torch_rng"])
        if self.diagnostics is not None:
            self.diagnostics.load_state_dict(state.get("diagnostics", {}))


class Stage:
    """One stage in progress: the shared machinery a :class:`Learner` calls to sample and update.

    Built by :meth:`TeamTrainer.run_stage`; a learner reads ``order`` (the stage's update order),
    ``n`` and ``schedule``, and calls :meth:`sample`, :meth:`part`, :meth:`update` and
    :meth:`log`. With diagnostics on (and a learner with ``stale_diagnostics``), two independent
    stage-start batches are sampled first: the stale surrogate and its noise floor.
    """

    def __init__(
        self, trainer: TeamTrainer, on_update: Callable[[int, int], None] | None = None
    ) -> None:
        self.trainer = trainer
        self.config: TrainConfig = trainer.config
        self.schedule: ScheduleConfig = trainer.config.schedule
        self.index = trainer.stage
        self.order = trainer.update_order(self.index)
        self.n = len(self.order)
        self.report = StageReport()
        self.rewards: list[float] = []
        self.timing: dict[str, float] = defaultdict(float)
        # per agent: [messages that hit the token limit, messages] of the training rollouts
        self.messages: dict[str, list[int]] = {}
        self._on_update = on_update
        self._t0 = time.perf_counter()
        self._stale: tuple[RolloutBatch, RolloutBatch] | None = None
        run_diag = trainer.diagnostics
        self.diag = StageDiagnostics(run_diag, self.n) if run_diag is not None else None
        full = self.diag is not None and self.config.diagnostics.full
        if full and trainer.learner.stale_diagnostics and self.n > 1:
            # Two independent stage-start batches: L_stale on one, the noise floor against the
            # other (and the same for the occupancy drift D_occ).
            assert self.diag is not None
            b = self.schedule.problems_per_batch
            with self.diag.timed("stale"):
                self._stale = (
                    self._sample(_STALE_INDEX, b, "diagnostic"),
                    self._sample(_STALE_INDEX + 1, b, "diagnostic"),
                )
            self.diag.stage_start_batches(*self._stale)
        if full:
            assert self.diag is not None
            with self.diag.timed("improvement"):
                j_problems = self._j_problems()
                if self._stale is not None and j_problems == self.schedule.problems_per_batch:
                    before = self._stale[0]  # independent of the update data: J(before) too
                else:
                    before = self._sample(_J_INDEX, j_problems, "diagnostic")
                self.diag.j_before = float(before.rewards().mean())

    def _j_problems(self) -> int:
        """Prompts of each batch that measures J before and after the stage (``full``)."""
        return self.config.diagnostics.eval_problems or self.schedule.problems_per_batch

    def _sample(self, index: int, problems: int, purpose: str) -> RolloutBatch:
        t0 = time.perf_counter()
        batch = self.trainer.sample(self.index, index, problems, purpose)
        if purpose == "train":  # diagnostic batches are timed by the diagnostic they serve
            self.timing["rollout_s"] += time.perf_counter() - t0
            for m in batch.messages:
                counts = self.messages.setdefault(m.agent, [0, 0])
                counts[0] += m.clipped
                counts[1] += 1
            if self.diag is not None:
                self.diag.train_batch(batch, self.trainer.samples[-1].versions)
        return batch

    def sample(self, index: int, problems: int) -> RolloutBatch:
        """``problems`` prompts x G rollouts under the team's current parameters (seeded by the
        stage and ``index``; counted in the training budget and the stage's mean reward)."""
        batch = self._sample(index, problems, "train")
        self.rewards.append(float(batch.rewards().mean()))
        return batch

    def part(self, batch: RolloutBatch, j: int, covered: int) -> tuple[RolloutBatch, int]:
        """The ``j``-th of ``covered`` disjoint slices of ``batch`` under the ``disjoint`` budget
        (the whole batch otherwise), and the index of its first episode in ``batch``."""
        if self.schedule.budget != "disjoint" or covered <= 1:
            return batch, 0
        size = batch.num_groups // covered
        return batch.groups(j * size, (j + 1) * size), j * size * batch.group_size

    def score(self, agent: str, messages: list[MessageRecord]) -> list[Any]:
        """``agent``'s current log-probs of ``messages`` (no gradient)."""
        return self.trainer._score(agent, messages)

    def trajectory_weights(
        self, messages: list[MessageRecord], log_ratio: torch.Tensor, offset: int
    ) -> torch.Tensor:
        """Per message, ``exp(log_ratio)`` of its episode (episode ``e`` of a slice is episode
        ``offset + e`` of the batch ``log_ratio`` indexes)."""
        return self.trainer._stale_weights(messages, log_ratio, offset)

    def episode_log_ratio(self, agent: str, batch: RolloutBatch, before: Any) -> torch.Tensor:
        """Per episode of ``batch``, the sum over ``agent``'s messages of log(pi_now / pi_before)
        (``before``: :meth:`score` of those messages before the update)."""
        return self.trainer._episode_log_ratio(agent, batch, before)

    def log(self, key: str, value: float) -> None:
        """An extra metric of this stage (logged as ``key``)."""
        self.report.metrics[key] = float(value)

    def update(
        self,
        agent: str,
        batch: RolloutBatch,
        *,
        index: int,
        weights: torch.Tensor | None = None,
        trust_region: bool = True,
    ) -> dict[str, Any]:
        """Updates ``agent`` on its messages in ``batch`` and returns the update's record.

        Group advantages of the team reward, the clipped surrogate with the KL penalty
        (``optim``), the token-KL trust region with backtracking (``trust_region``; off when
        ``trust_region=False`` or ``delta_mode: none``), beta and delta adaptation and, with
        diagnostics, the stale gap and its noise floor for ``index >= 1``.

        Args:
            agent: a trainable agent.
            batch: rollouts that contain the agent's messages.
            index: the update's position in the stage (seeds the diagnostic batch).
            weights: per-message importance weights (``[N]``), if any.
            trust_region: enforce the trust region for this update.
        """
        trainer, cfg = self.trainer, self.config
        slot = trainer.slots[agent]
        messages = batch.messages_of(agent)
        groups = trainer._advantages(batch)
        msg_adv = _per_message(groups, messages)
        diag, inter = None, None
        if self._stale is not None and index > 0:
            assert self.diag is not None
            with self.diag.timed("stale"):
                inter = trainer.sample(
                    self.index, index, self.schedule.problems_per_batch, "diagnostic"
                )
                diag = trainer._diagnostic_inputs(
                    agent, {"stale": self._stale[0], "floor": self._stale[1], "inter": inter}
                )
        d_occ_term = math.nan
        if self.diag is not None:
            d_occ_term = self.diag.drift_term(index, trainer.versions(), inter)
        off = not trust_region or cfg.trust_region.delta_mode == "none"
        delta = None if off else slot.delta
        reference = None
        if slot.reference is not None:
            t0 = time.perf_counter()
            reference = score(
                slot.reference,
                messages,
                cfg.optim.micro_batch_size,
                trainer.temperatures[agent],
            )
            self.timing["reference_s"] += time.perf_counter() - t0
        result = update_agent(
            slot.policy,
            slot.optimizer,
            messages,
            msg_adv,
            beta=slot.beta,
            delta=delta,
            optim=cfg.optim,
            region=cfg.trust_region,
            temperature=trainer.temperatures[agent],
            flip_trials=trainer.flip_trials,
            weights=weights,
            reference=reference,
        )
        self.timing["update_s"] += result.update_s
        self.timing["monitor_s"] += result.monitor_s
        if result.accepted and result.step_scale > 0:
            slot.version += 1
        if cfg.trust_region.adapt_beta and delta is not None:
            slot.beta = adapt_beta(slot.beta, result, delta)
        if cfg.trust_region.delta_mode == "adaptive":
            tr = cfg.trust_region
            slot.delta = adapt_delta(slot.delta, result, low=tr.delta_min, high=tr.delta_max)
        surrogates = {"stale": math.nan, "inter": math.nan, "floor": math.nan}
        if diag is not None:
            assert self.diag is not None
            with self.diag.timed("stale"):
                surrogates = trainer._surrogates(agent, diag)
        record = {
            "stage": self.index,
            "index": index,
            "agent": agent,
            "accepted": result.accepted,
            "reason": result.reason,
            "kl_tok": result.kl,
            "kl_raw": result.kl_raw,
            "in_region": result.in_region,
            "out_of_region_raw": delta is not None and result.kl_raw > delta,
            "backtracks": result.backtracks,
            "step_scale": result.step_scale,
            "beta": slot.beta,
            "delta": math.inf if delta is None else delta,
            "l_seq": result.l_seq,
            "l_stale": surrogates["stale"],
            "l_inter": surrogates["inter"],
            "stale_gap": abs(surrogates["stale"] - surrogates["inter"]),
            "noise_floor": abs(surrogates["stale"] - surrogates["floor"]),
            "ratio_clip_frac": result.ratio_clip_frac,
            "adv_clip_frac": groups.clip_frac,
            "messages": result.n_messages,
            "tokens": result.n_tokens,
            "ref_kl": result.ref_kl,
            "groups": batch.num_groups,
            "episodes": len(batch.episodes),
            **dict.fromkeys(UPDATE_KEYS, math.nan),
        }
        if self.diag is not None:
            record.update(
                self.diag.update_fields(
                    groups, batch.group_rewards(), messages, weights, result.diagnostics
                )
            )
            record["d_occ_term"] = d_occ_term
        self.report.updates.append(record)
        for hook in trainer.update_hooks:
            hook(record)
        if self._on_update is not None:
            self._on_update(len(self.report.updates), self.n)
        return record

    def finish(self) -> StageReport:
        """Computes the stage's metrics, adds its costs to the totals and advances the stage."""
        trainer = self.trainer
        if self.diag is not None:
            if self.config.diagnostics.full:
                with self.diag.timed("improvement"):
                    after = self._sample(_J_INDEX + 1, self._j_problems(), "diagnostic")
                    self.diag.j_after = float(after.rewards().mean())
            self.report.metrics.update(self.diag.metrics(self.report.updates))
            self.timing["diagnostic_s"] = sum(self.diag.timing.values())
        messages = {a: (c, n) for a, (c, n) in self.messages.items()}
        trainer._stage_metrics(
            self.report, self.index, self.rewards, self.timing, self._t0, messages
        )
        for key, value in self.timing.items():
            trainer.totals[key] += value
        trainer.totals["stage_wall_s"] += self.report.metrics["stage/wall_s"]
        trainer.stage += 1
        return self.report


def _frozen_copy(policy: TrainablePolicy) -> TrainablePolicy:
    """A copy of ``policy`` whose parameters take no gradient (the reference policy)."""
    reference = copy.deepcopy(policy)
    for p in reference.parameters():
        p.requires_grad_(False)
    return reference


def _score_temperature(sampling: SamplingParams) -> float:
    """The temperature an agent's messages are scored at: its sampling temperature (1 for
    greedy decoding, whose messages have no sampling distribution to match)."""
    return sampling.temperature if sampling.temperature > 0 else 1.0


def _per_message(groups: GroupAdvantages, messages: list[MessageRecord]) -> torch.Tensor:
    """``[N]`` float32: each message gets its episode's advantage."""
    adv = groups.advantages.flatten()
    return torch.tensor([float(adv[m.episode]) for m in messages], dtype=torch.float32)


def _joined(new: Any, old: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    new_lp, mask = concat_logprobs(new)
    old_lp, _ = concat_logprobs(old)
    return new_lp, old_lp, mask
