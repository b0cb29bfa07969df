"""One stage of a learner: the machinery a :class:`~trainers.learners.base.Learner` calls.

A stage updates every trainable agent once, in the stage's update order. The learner decides
what is sampled and which agent is updated on what (``trainers/learners/``); :class:`Stage` owns
the stage's state (its index, order, rewards, timing, the clipped-message counts, the report) and
does the rest of each update: group advantages of the team reward, the policy step and the
trust region (:func:`trainers.optim.update.update_agent`, run by the agent's updater: here or in a Ray
agent actor, :mod:`trainers.placement.updaters`), the beta and delta adaptation, the update's
record. Diagnostics observe the stage (:class:`trainers.learners.stage_diagnostics.StageDiagnostics`:
its start, every training batch, each update before and after, its end) and add their fields
and metrics; the stage does not compute them.

Reading one TeamTR stage: ``trainers/learners/teamtr.py`` (what is sampled when), this file
(:meth:`Stage.sample` and :meth:`Stage.update`), ``trainers/optim/update.py`` (policy step and trust
region) and ``trainers/optim/advantages.py`` (group advantages).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from teamtr_core.errors import LearnerError
from teamtr_core.policy import TokenLogprobs, syncs_since
from teamtr_env.rollout import EpisodeRecord, MessageRecord, RolloutBatch
from teamtr_env.runners.tree import Tree
from trainers.config import ScheduleConfig, TrainConfig
from trainers.learners.callbacks import CallbackList
from trainers.learners.stage_diagnostics import RunDiagnostics, StageDiagnostics
from trainers.learners.update_index import update_index_problem
from trainers.optim.advantages import GroupAdvantages, group_advantages
from trainers.optim.records import AGENT_METRIC_KEYS, UpdateRecord
from trainers.optim.result import UpdateResult
from trainers.optim.scoring import joined_logprobs
from trainers.placement.agents import TrainedAgent


@dataclass(frozen=True)
class SampleEvent:
    """One sampling of a stage: its purpose (``"train"`` or ``"diagnostic"``), the versions of
    the agents that played, and its size: episodes, generated tokens (characters for policies
    that report no tokens) and generated messages (tests check who produced which rollouts;
    ``teamtr compare`` compares what the learners generated)."""

    stage: int
    index: int
    purpose: str
    versions: Mapping[str, int]
    episodes: int
    tokens: int
    # What a distributed runner's workers report they played (None on the local runner).
    worker_versions: Mapping[str, int] | None = None
    # Messages generated (a tree's candidates and continuations all count).
    messages: int = 0


class Sampler(Protocol):
    """Draws ``prompts`` prompts x G rollouts under the team's current parameters, seeded by the
    stage and ``index`` (:meth:`trainers.learners.team_trainer.TeamTrainer.sample`)."""

    def __call__(
        self, stage: int, index: int, prompts: int, purpose: str, *, strategy: Tree | None = None
    ) -> tuple[RolloutBatch, SampleEvent]: ...


@dataclass
class StageReport:
    """Metrics of one stage (namespaced keys, ready for the logger), its update records and its
    samplings."""

    metrics: dict[str, float] = field(default_factory=dict)
    updates: list[UpdateRecord] = field(default_factory=list)
    samples: list[SampleEvent] = field(default_factory=list)


class Stage:
    """One stage in progress: the shared machinery a :class:`Learner` calls to sample and update.

    Built by :meth:`TeamTrainer.run_stage` with what a stage needs and nothing more; a learner
    reads ``order`` (the stage's update order), ``n`` and ``schedule``, and calls
    :meth:`sample`, :meth:`part`, :meth:`update` and :meth:`log`. :meth:`finish` returns the
    stage's report and costs; the trainer then advances.

    Args:
        config: the run's configuration.
        index: the stage (0-based).
        order: the stage's update order (trainable agents).
        agents: every trainable agent's owner (:mod:`trainers.placement.agents`).
        sampler: draws rollouts under the team's current parameters.
        diagnostics: the run's diagnostics (``None``: off).
        callbacks: told of every update.
        engine_syncs: the run's weight syncs into rollout engines so far.
        stale_diagnostics: the learner has intermediate teams (the stale gap is measured).
    """

    def __init__(
        self,
        config: TrainConfig,
        index: int,
        order: list[str],
        agents: Mapping[str, TrainedAgent],
        sampler: Sampler,
        *,
        diagnostics: RunDiagnostics | None = None,
        callbacks: CallbackList | None = None,
        engine_syncs: Callable[[], dict[str, float] | None] = lambda: None,
        stale_diagnostics: bool = True,
        options: Any = None,
    ) -> None:
        self.config = config
        self.schedule: ScheduleConfig = config.schedule
        #: The learner's own settings (its ``options`` dataclass, from ``learner_options``).
        self.options = options
        self.index = index
        self.order = order
        self.n = len(order)
        self.agents = agents
        self.stale_diagnostics = stale_diagnostics
        self._sampler = sampler
        self._callbacks = callbacks if callbacks is not None else CallbackList([])
        self._engine_syncs = engine_syncs
        self.flip_trials = config.diagnostics.flip_trials if config.diagnostics.cheap else 0
        self.report = StageReport()
        self.rewards: list[float] = []
        self.timing: dict[str, float] = defaultdict(float)
        # per agent: [messages that hit the token limit, messages] of the training rollouts
        self.messages: dict[str, list[int]] = {}
        self._t0 = time.perf_counter()
        self._last_index = -1  # the index of the stage's latest update (-1: none yet)
        # id(batch) -> (batch, the versions that sampled it): batches of this stage and parts
        self._sampled: dict[int, tuple[RolloutBatch, Mapping[str, int]]] = {}
        # (agent, id(batch)) -> (batch, the sampler's log-probs of the agent's messages in it)
        self._sampler_lp: dict[tuple[str, int], tuple[RolloutBatch, list[TokenLogprobs]]] = {}
        self._syncs = engine_syncs()
        self.diag = StageDiagnostics(diagnostics, self.n) if diagnostics is not None else None
        if self.diag is not None:
            self.diag.stage_started(self)

    def sample(self, index: int, prompts: int, *, strategy: Tree | None = None) -> RolloutBatch:
        """``prompts`` prompts x G rollouts under the team's current parameters (seeded by the
        stage and ``index``; counted in the training budget and the stage's mean reward).

        With ``strategy=Tree(select)``, tree-structured sampling instead (AT-GRPO's,
        :mod:`teamtr_env.runners.tree`): at every turn of each prompt's main path the acting
        agent writes G candidates, each finished under the current team and scored by
        ``select(episode, agent)``, the best continuing; the batch's groups are the tree's nodes
        and its messages the candidates. The stage's reward (``stage/reward_start``,
        ``stage/reward_mean``) of a tree is its first depth's: the first agent's G candidates per
        prompt, each finished under the team, are a plain batch of the team."""
        t0 = time.perf_counter()
        batch, event = self._sampler(self.index, index, prompts, "train", strategy=strategy)
        self.report.samples.append(event)
        self.timing["rollout_s"] += time.perf_counter() - t0
        self._sampled[id(batch)] = (batch, dict(event.versions))
        for m in batch.messages:
            counts = self.messages.setdefault(m.agent, [0, 0])
            counts[0] += m.clipped
            counts[1] += 1
        if self.diag is not None:
            self.diag.train_batch(batch, event.versions)
        # A tree's later depths start from greedily chosen prefixes; its first depth (the first
        # `prompts` groups) is a plain batch of the team: B prompts x G episodes, each from the
        # prompt alone. Its reward is the one comparable across learners.
        plain = batch if strategy is None else batch.groups(0, min(prompts, batch.num_groups))
        self.rewards.append(float(plain.rewards().mean()))
        return batch

    def part(self, batch: RolloutBatch, j: int, covered: int) -> tuple[RolloutBatch, int]:
        """The ``j``-th of ``covered`` disjoint slices of ``batch`` under the ``disjoint`` budget
        (the whole batch otherwise), and the index of its first episode in ``batch``."""
        if not self.schedule.sliced(covered):
            return batch, 0
        size = batch.num_groups // covered
        part = batch.groups(j * size, (j + 1) * size)
        if id(batch) in self._sampled:  # a part was sampled when its batch was
            self._sampled[id(part)] = (part, self._sampled[id(batch)][1])
        return part, j * size * batch.group_size

    def split(self, batch: RolloutBatch, agents: Sequence[str]) -> list[tuple[str, RolloutBatch]]:
        """``(agent, its part of batch)`` for the updates of ``agents`` that ``batch`` serves, in
        order: the disjoint slices of :meth:`part` (the whole batch for each when the budget
        does not slice), with the sampler's log-probs kept for a shared model
        (:meth:`keep_sampler_logprobs`)."""
        updates = [(a, self.part(batch, j, len(agents))[0]) for j, a in enumerate(agents)]
        self.keep_sampler_logprobs(updates)
        return updates

    def keep_sampler_logprobs(self, updates: Sequence[tuple[str, RolloutBatch]]) -> None:
        """Declares the updates that batches sampled now will serve, in the order they will run
        (``(agent, batch it is updated on)``), before the first of them.

        In a role-sharing team (one model plays several agents) an update moves the model every
        later agent of the stage plays, so a later update on a batch sampled before it would
        take its behaviour log-probs from the moved model: its ratio would start at 1 although
        the model no longer is the sampler. For every update whose model an earlier update of
        ``updates`` trains, the agent's messages are scored now, while the model is still the
        sampler, and :meth:`update` gives the loss those log-probs (PettingLLMs likewise
        computes the old log-probs once, before its update). Agents with a model of their own
        cost nothing: their model is the sampler until their own update. Every learner that
        updates several agents from one batch calls this; :meth:`update` refuses an update on a
        batch whose sampler's log-probs it no longer has."""
        trained: set[str] = set()
        for agent, batch in updates:
            model = self.agents[agent].model_key
            if model in trained and batch.messages_of(agent):
                logprobs = self.score(agent, batch.messages_of(agent))
                self._sampler_lp[(agent, id(batch))] = (batch, logprobs)
            trained.add(model)

    def sample_diagnostic(self, index: int, prompts: int) -> RolloutBatch:
        """Rollouts for the diagnostics (outside the training budget; seeded by their own
        stream)."""
        batch, event = self._sampler(self.index, index, prompts, "diagnostic")
        self.report.samples.append(event)
        return batch

    def versions(self) -> dict[str, int]:
        """Each trainable agent's accepted updates so far: which parameters play now."""
        return {a: s.version for a, s in self.agents.items()}

    def score(self, agent: str, messages: list[MessageRecord]) -> list[Any]:
        """``agent``'s current log-probs of ``messages`` (no gradient), computed where its
        model lives."""
        return self.agents[agent].score(messages)

    def advantages(self, batch: RolloutBatch, agent: str | None = None) -> GroupAdvantages:
        """Group advantages of ``batch``'s rewards (the config's ``optim`` baseline,
        normalisation and clipping): of ``agent``'s mixed reward (``reward.team`` x the team
        reward + ``reward.local`` x its local reward) when given, of the team reward when not."""
        return batch_advantages(batch, self.config, agent)

    def message_advantages(
        self, batch: RolloutBatch, agent: str, groups: GroupAdvantages | None = None
    ) -> tuple[list[MessageRecord], torch.Tensor]:
        """``agent``'s messages in ``batch`` and ``[N]`` advantages: each message gets its
        episode's group advantage (``groups``: :meth:`advantages` of ``batch``, computed when
        not given)."""
        return message_advantages(
            batch, agent, self.advantages(batch, agent) if groups is None else groups
        )

    def trajectory_weights(
        self, messages: list[MessageRecord], log_ratio: torch.Tensor, offset: int
    ) -> torch.Tensor:
        """Per message, ``exp(log_ratio)`` of its episode: the trajectory weights
        ``w^{0->i-1}`` of the update batch's messages (episode ``e`` of a disjoint slice is
        episode ``offset + e`` of the stage-start batch ``log_ratio`` indexes)."""
        return torch.exp(
            torch.tensor([float(log_ratio[offset + m.episode]) for m in messages])
        ).float()

    def episode_log_ratio(self, agent: str, batch: RolloutBatch, before: Any) -> torch.Tensor:
        """Per episode of ``batch``, the sum over ``agent``'s messages of log(pi_now /
        pi_before): this agent's factor of the trajectory weight w^{0->i} (``before``:
        :meth:`score` of those messages before the update)."""
        msgs = batch.messages_of(agent)
        new_lp, old_lp, mask = joined_logprobs(self.score(agent, msgs), before)
        per_msg = ((new_lp - old_lp) * mask).sum(-1).double()
        out = torch.zeros(len(batch.episodes), dtype=torch.float64)
        out.index_add_(0, torch.tensor([m.episode for m in msgs], dtype=torch.long), per_msg)
        return out

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
    ) -> UpdateRecord:
        """Updates ``agent`` on its messages in ``batch`` and returns the update's record.

        Group advantages of the team reward, the clipped surrogate with the KL penalty
        (``optim``), the token-KL trust region with backtracking (``trust_region``; off when
        ``trust_region=False`` or ``delta_mode: none``), beta and delta adaptation; the
        diagnostics observe the update before and after it.

        Args:
            agent: a trainable agent.
            batch: rollouts that contain the agent's messages.
            index: the update's 0-based position in the order the learner runs the stage's
                updates (see :class:`~trainers.learners.base.Learner`): it seeds the diagnostic
                batch, and the stale gap and D_occ term are measured for ``index >= 1``.
            weights: per-message importance weights (``[N]``), if any.
            trust_region: enforce the trust region for this update.

        Raises:
            LearnerError: ``index`` outside ``0..n-1`` or not above the previous update's.
        """
        problem = update_index_problem(index, self.n, self._last_index)
        if problem is not None:
            raise LearnerError(f"stage.update(agent={agent!r}, index={index!r}): {problem}")
        owner = self.agents[agent]
        behaviour = self._sampler_logprobs(agent, batch, owner.version)
        self._last_index = int(index)
        groups = self.advantages(batch, agent)
        messages, msg_adv = self.message_advantages(batch, agent, groups)
        if self.diag is not None:
            self.diag.before_update(self, agent, index)
        delta = owner.region.radius(enforce=trust_region)
        result, reference_s = owner.update(
            messages,
            msg_adv,
            delta=delta,
            flip_trials=self.flip_trials,
            weights=weights,
            behaviour=behaviour,
        )
        if owner.has_reference:
            self.timing["reference_s"] += reference_s
        self.timing["update_s"] += result.update_s
        self.timing["monitor_s"] += result.monitor_s
        if result.changed_weights:
            owner.accept()
        owner.region.adapt(result, delta)
        record = self._record(agent, index, batch, groups.clip_frac, result, delta)
        if self.diag is not None:
            record = record.with_fields(
                self.diag.after_update(self, agent, groups, batch, messages, weights, result)
            )
        if batch.has_local_rewards():  # the agent's own credit, beside the team's reward
            self.log(f"agent/{agent}/local_reward", float(batch.local_rewards(agent).mean()))
        self.report.updates.append(record)
        self._callbacks.on_update(record)
        return record

    def _sampler_logprobs(
        self, agent: str, batch: RolloutBatch, version: int
    ) -> list[TokenLogprobs] | None:
        """The sampler's log-probs of ``agent``'s messages in ``batch`` when its model moved since
        ``batch`` was sampled (kept by :meth:`keep_sampler_logprobs`); ``None`` when the model is
        still the sampler (the update's first pass gives them)."""
        kept = self._sampler_lp.get((agent, id(batch)))
        if kept is not None:
            return kept[1]
        sampled = self._sampled.get(id(batch))
        if sampled is None or sampled[1].get(agent, version) == version:
            return None
        raise LearnerError(
            f"stage.update(agent={agent!r}): the model {agent!r} plays changed since this batch "
            f"was sampled (version {sampled[1][agent]} sampled it, {version} plays now: an "
            "earlier update of a model it shares), so its messages' behaviour log-probs are "
            "gone; call stage.keep_sampler_logprobs([(agent, batch), ...]) with the stage's "
            "updates right after sampling (docs/adding-a-trainer.md)"
        )

    def _record(
        self,
        agent: str,
        index: int,
        batch: RolloutBatch,
        adv_clip_frac: float,
        result: UpdateResult,
        delta: float | None,
    ) -> UpdateRecord:
        """An update's record (the diagnostics' fields NaN until they fill them)."""
        return UpdateRecord(
            stage=self.index,
            index=index,
            agent=agent,
            result=result,
            out_of_region_raw=delta is not None and result.kl_raw > delta,
            beta=self.agents[agent].region.beta,
            delta=math.inf if delta is None else delta,
            adv_clip_frac=adv_clip_frac,
            groups=batch.num_groups,
            episodes=len(batch.episodes),
        )

    def finish(self) -> tuple[StageReport, dict[str, float]]:
        """The stage's report (its metrics computed) and costs (seconds by kind)."""
        if self.diag is not None:
            self.report.metrics.update(self.diag.stage_finished(self))
            self.timing["diagnostic_s"] = sum(self.diag.timing.values())
        self._metrics()
        return self.report, dict(self.timing)

    def _rollout_metrics(self) -> None:
        """With a rollout engine: the stage's weight syncs into the engines (``rollout/sync_count``,
        ``rollout/sync_bytes``, ``rollout/sync_s``: one per accepted update that was followed by
        a sampling) and the engine-trainer mismatch of its updates (``rollout/logprob_gap``,
        ``rollout/engine_kl``, and ``rollout/tis_mean`` with the importance correction: means
        over the updates)."""
        made = syncs_since(self._syncs, self._engine_syncs())
        if made is None:
            return
        metrics = self.report.metrics
        for key, name in (("count", "sync_count"), ("bytes", "sync_bytes"), ("seconds", "sync_s")):
            metrics[f"rollout/{name}"] = made[key]
        for key in ("logprob_gap", "engine_kl", "tis_mean"):
            values = [u.value(key) for u in self.report.updates if math.isfinite(u.value(key))]
            if values:
                metrics[f"rollout/{key}"] = float(np.mean(values))

    def _metrics(self) -> None:
        """Fills the report's metrics: the stage's means and sums, and each agent's namespaced
        keys; per agent, the share of its training messages cut off at the token limit
        (``agent/<name>/clipped_ratio``, ``stage/clipped_ratio``; TRL's clipped_ratio)."""
        report, updates = self.report, self.report.updates
        gaps = [u.stale_gap for u in updates if not math.isnan(u.stale_gap)]
        floors = [u.noise_floor for u in updates if not math.isnan(u.noise_floor)]
        kls = [u.kl_raw for u in updates if math.isfinite(u.kl_raw)]
        train = [e for e in report.samples if e.purpose == "train"]
        report.metrics.update(
            {
                "stage/reward_mean": float(np.mean(self.rewards)),
                # the stage's first batch, under the stage-start team: comparable across
                # learners (TeamTR's later batches come from partially updated teams; of a
                # tree, its first depth: see sample)
                "stage/reward_start": self.rewards[0],
                "stage/kl_tok_mean": float(np.mean(kls)) if kls else math.nan,
                "stage/kl_tok_max": float(np.max(kls)) if kls else math.nan,
                "stage/out_of_region_rate": float(np.mean([u.out_of_region_raw for u in updates])),
                "stage/accepted_rate": float(np.mean([u.accepted for u in updates])),
                "stage/rollouts": float(sum(e.episodes for e in train)),
                "stage/tokens": float(sum(e.tokens for e in train)),
                "stage/messages": float(sum(e.messages for e in train)),
                "stage/wall_s": time.perf_counter() - self._t0,
                **{f"stage/{k}": v for k, v in self.timing.items()},
            }
        )
        if self.messages:
            for agent, (clipped, written) in self.messages.items():
                report.metrics[f"agent/{agent}/clipped_ratio"] = clipped / max(written, 1)
            clipped_all = sum(c for c, _ in self.messages.values())
            written_all = sum(w for _, w in self.messages.values())
            report.metrics["stage/clipped_ratio"] = clipped_all / max(written_all, 1)
        self._rollout_metrics()
        if gaps:  # measured only with diagnostics on, for naive sequential and TeamTR
            report.metrics["stage/delta_stale"] = float(sum(gaps))
            report.metrics["stage/delta_stale_noise_floor"] = float(sum(floors))
        for u in updates:
            prefix = f"agent/{u.agent}/"
            for key in AGENT_METRIC_KEYS:
                value = u.value(key)
                if isinstance(value, float) and not math.isfinite(value):
                    continue  # e.g. no stale gap for a stage's first update, no radius without TR
                report.metrics[prefix + key] = float(value)


def agent_rewards(batch: RolloutBatch, config: TrainConfig, agent: str | None) -> np.ndarray:
    """``[B, G]`` rewards ``agent`` learns from: ``reward.team`` x the team reward +
    ``reward.local`` x its local reward (:class:`~trainers.config.RewardConfig`). The team
    reward as it is with the default mix (1, 0) or no ``agent``."""
    mix = config.reward
    if agent is None or (mix.team == 1.0 and mix.local == 0.0):
        return batch.group_rewards()
    score = agent_rewards_of(config)
    return np.array([score(e, agent) for e in batch.episodes]).reshape(-1, batch.group_size)


def agent_rewards_of(config: TrainConfig) -> Callable[[EpisodeRecord, str], float]:
    """How an episode scores for an agent under ``config.reward``'s mix: ``team`` x its team
    reward + ``local`` x the agent's local reward (how a tree rollout's ``Tree(select)`` scores a candidate)."""
    mix = config.reward

    def mixed(episode: EpisodeRecord, agent: str) -> float:
        return mix.team * episode.reward + mix.local * float(episode.local_rewards.get(agent, 0.0))

    return mixed


def batch_advantages(
    batch: RolloutBatch, config: TrainConfig, agent: str | None = None
) -> GroupAdvantages:
    """Group advantages of ``batch``'s rewards for ``agent`` (:func:`agent_rewards`; the team
    reward without ``agent``), with ``config.optim``'s baseline, normalisation and clipping."""
    o = config.optim
    rewards = torch.tensor(agent_rewards(batch, config, agent), dtype=torch.float32)
    return group_advantages(
        rewards,
        eps_std=o.eps_std,
        a_clip=o.a_clip,
        normalize=o.normalize_advantages,
        estimator=o.advantage,
        std=o.advantage_std,
    )


def message_advantages(
    batch: RolloutBatch, agent: str, groups: GroupAdvantages
) -> tuple[list[MessageRecord], torch.Tensor]:
    """``agent``'s messages in ``batch`` and ``[N]`` advantages: each message gets its episode's
    group advantage (``groups``: :func:`batch_advantages` of ``batch`` for ``agent``)."""
    messages = batch.messages_of(agent)
    adv = groups.advantages.flatten()
    return messages, torch.tensor([float(adv[m.episode]) for m in messages], dtype=torch.float32)
