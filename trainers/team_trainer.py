"""The stage machinery shared by TeamTR, naive sequential and joint learners.

One stage updates every trainable agent once, in an update order sigma (fixed, reverse or random):

* ``teamtr``: before EVERY agent update (every ``resample_every`` updates in the ablation) fresh
  rollouts are sampled under the partially updated team pi_hat^{i-1};
* ``naive_sequential``: rollouts are sampled ONCE at the stage start (under pi_hat^0) and reused for
  every update of the stage (optionally reweighted by the already-updated agents' ratios);
* ``joint``: one batch, every agent updated on it. With separate parameters per agent and no
  reweighting, joint and naive sequential produce the same parameters; they differ in what is
  measured (joint has no intermediate teams, so no stale-gap diagnostics).

Every update is an ``update_agent`` call (trust region enforced there). Diagnostics per update: the
stale gap |L_stale - L_inter| between the new parameters' surrogate on stage-start rollouts and on
rollouts of the intermediate team (naive/joint sample those extra intermediate batches only for the
diagnostic, outside the training budget).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from adapters.base import SamplingParams, TrainablePolicy
from teamtr_env.env import TeamEnv
from teamtr_env.rollout import MessageRecord, RolloutBatch
from teamtr_env.runner import Runner, derive_seed
from trainers.advantages import GroupAdvantages, group_advantages
from trainers.config import TrainConfig
from trainers.surrogate import surrogate_value
from trainers.update import (
    UpdateSettings,
    adapt_beta,
    adapt_delta,
    concat_logprobs,
    score,
    update_agent,
)

_ORDER_STREAM, _TRAIN_STREAM, _DIAG_STREAM, _PROBLEM_STREAM = 11, 13, 17, 19


@dataclass
class AgentSlot:
    """A trainable agent: its policy, optimizer and trust-region state."""

    policy: TrainablePolicy
    optimizer: torch.optim.Optimizer
    beta: float
    delta: float
    version: int = 0  # accepted updates so far: which parameters produced a rollout


@dataclass(frozen=True)
class SampleEvent:
    """One call to the sampler (tests check who produced which rollouts)."""

    stage: int
    index: int
    purpose: str  # "train" or "diagnostic"
    versions: Mapping[str, int]
    episodes: int
    tokens: int


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
    """

    def __init__(
        self, config: TrainConfig, env_fn: Callable[[], TeamEnv], policies: Mapping[str, Any]
    ):
        self.config = config
        self.runner = Runner(
            env_fn,
            dict(policies),
            SamplingParams(temperature=config.temperature, max_new_tokens=config.max_new_tokens),
            progress=False,
        )
        self.agents = list(self.runner.agents)
        tr, opt = config.trust_region, config.optim
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
        self.settings = UpdateSettings(
            epochs=opt.epochs,
            micro_batch_size=opt.micro_batch_size,
            ratio_clip=opt.ratio_clip,
            max_grad_norm=opt.max_grad_norm,
            max_backtracks=tr.max_backtracks,
            monitor_subsample=tr.monitor_subsample,
            score_temperature=config.temperature if config.temperature > 0 else 1.0,
        )
        self.stage = 0  # completed stages
        self.samples: list[SampleEvent] = []
        self.totals: dict[str, float] = defaultdict(float)

    # -- sampling ---------------------------------------------------------------------------
    def sample(self, stage: int, index: int, problems: int, purpose: str = "train") -> RolloutBatch:
        """Rollouts under the CURRENT parameters of every agent (seeded by stage and index)."""
        stream = _TRAIN_STREAM if purpose == "train" else _DIAG_STREAM
        seed = derive_seed(self.config.seed, stream, stage, index)
        batch = self.runner.rollout(
            self.runner.sample_problems(problems, seed=derive_seed(seed, _PROBLEM_STREAM)),
            group_size=self.config.schedule.group_size,
            seed=seed,
        )
        versions = {a: s.version for a, s in self.slots.items()}
        tokens = batch.stats.tokens_generated or batch.stats.chars_generated
        self.samples.append(SampleEvent(stage, index, purpose, versions, batch.stats.envs, tokens))
        key = "rollouts" if purpose == "train" else "diagnostic_rollouts"
        self.totals[key] += batch.stats.envs
        self.totals["tokens" if purpose == "train" else "diagnostic_tokens"] += tokens
        return batch

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
    def run_stage(self, on_update: Callable[[int, int], None] | None = None) -> StageReport:
        """Runs stage ``self.stage`` and advances it. ``on_update(i, n)`` reports progress."""
        cfg, sched = self.config, self.config.schedule
        stage, order = self.stage, self.update_order(self.stage)
        n, r = len(order), sched.resample_every
        per_event = sched.problems_per_batch
        events = math.ceil(n / r)
        t_stage = time.perf_counter()
        timing: dict[str, float] = defaultdict(float)
        report = StageReport()

        def timed_sample(index: int, problems: int, purpose: str) -> RolloutBatch:
            t0 = time.perf_counter()
            batch = self.sample(stage, index, problems, purpose)
            timing["rollout_s" if purpose == "train" else "diagnostic_s"] += (
                time.perf_counter() - t0
            )
            return batch

        single = sched.method != "teamtr"
        first = per_event * events if single and sched.budget == "matched" else per_event
        stage_start = batch = timed_sample(0, first, "train")
        rewards = [float(batch.rewards().mean())]
        stale_log_ratio = torch.zeros(len(batch.episodes), dtype=torch.float64)
        for i, agent in enumerate(order):
            if not single and i > 0 and i % r == 0:
                batch = timed_sample(i, per_event, "train")
                rewards.append(float(batch.rewards().mean()))
            slot = self.slots[agent]
            messages = batch.messages_of(agent)
            groups = self._advantages(batch)
            adv = groups.advantages.flatten()
            msg_adv = torch.tensor([float(adv[m.episode]) for m in messages], dtype=torch.float32)
            weights = (
                self._stale_weights(messages, stale_log_ratio)
                if sched.importance_weighting
                else None
            )
            behaviour = score(
                slot.policy,
                messages,
                self.settings.micro_batch_size,
                self.settings.score_temperature,
            )
            diag = (
                self._diagnostic_inputs(i, agent, batch, stage_start, timed_sample, behaviour)
                if cfg.diagnostics
                else None
            )
            delta = None if cfg.trust_region.delta_mode == "none" else slot.delta
            result = update_agent(
                slot.policy,
                slot.optimizer,
                messages,
                msg_adv,
                beta=slot.beta,
                delta=delta,
                settings=self.settings,
                weights=weights,
                behaviour=behaviour,
            )
            timing["update_s"] += result.update_s
            timing["monitor_s"] += result.monitor_s
            if result.accepted and result.step_scale > 0:
                slot.version += 1
            if cfg.trust_region.adapt_beta and delta is not None:
                slot.beta = adapt_beta(slot.beta, result.kl_raw, delta)
            if cfg.trust_region.delta_mode == "adaptive":
                tr = cfg.trust_region
                slot.delta = adapt_delta(slot.delta, result, low=tr.delta_min, high=tr.delta_max)
            gap = self._stale_gap(agent, diag, result.l_seq) if diag is not None else math.nan
            if sched.importance_weighting:  # naive only: the update batch is the stage-start batch
                stale_log_ratio += self._episode_log_ratio(agent, stage_start, behaviour)
            record = {
                "stage": stage,
                "index": i,
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
                "stale_gap": gap,
                "ratio_clip_frac": result.ratio_clip_frac,
                "adv_clip_frac": groups.clip_frac,
                "messages": result.n_messages,
                "tokens": result.n_tokens,
            }
            report.updates.append(record)
            if on_update is not None:
                on_update(i + 1, n)

        gaps = [u["stale_gap"] for u in report.updates if not math.isnan(u["stale_gap"])]
        kls = [u["kl_raw"] for u in report.updates if math.isfinite(u["kl_raw"])]
        report.metrics.update(
            {
                "stage/reward_mean": float(np.mean(rewards)),
                "stage/delta_stale": float(sum(gaps)) if gaps else math.nan,
                "stage/kl_tok_mean": float(np.mean(kls)) if kls else math.nan,
                "stage/kl_tok_max": float(np.max(kls)) if kls else math.nan,
                "stage/out_of_region_rate": float(
                    np.mean([u["out_of_region_raw"] for u in report.updates])
                ),
                "stage/accepted_rate": float(np.mean([u["accepted"] for u in report.updates])),
                "stage/rollouts": float(
                    sum(
                        e.episodes
                        for e in self.samples
                        if e.stage == stage and e.purpose == "train"
                    )
                ),
                "stage/tokens": float(
                    sum(e.tokens for e in self.samples if e.stage == stage and e.purpose == "train")
                ),
                "stage/wall_s": time.perf_counter() - t_stage,
                **{f"stage/{k}": v for k, v in timing.items()},
            }
        )
        for u in report.updates:
            prefix = f"agent/{u['agent']}/"
            for key in (
                "kl_tok",
                "kl_raw",
                "beta",
                "delta",
                "backtracks",
                "l_seq",
                "stale_gap",
                "ratio_clip_frac",
                "adv_clip_frac",
                "accepted",
                "in_region",
            ):
                value = u[key]
                if isinstance(value, float) and not math.isfinite(value):
                    continue  # e.g. no stale gap for a stage's first update, no radius without TR
                report.metrics[prefix + key] = float(value)
        for key, value in timing.items():
            self.totals[key] += value
        self.totals["stage_wall_s"] += report.metrics["stage/wall_s"]
        self.stage += 1
        return report

    # -- helpers -------------------------------------------------------------------------------
    def _advantages(self, batch: RolloutBatch) -> GroupAdvantages:
        o = self.config.optim
        rewards = torch.tensor(batch.group_rewards(), dtype=torch.float32)
        return group_advantages(
            rewards, eps_std=o.eps_std, a_clip=o.a_clip, normalize=o.normalize_advantages
        )

    def _diagnostic_inputs(
        self,
        i: int,
        agent: str,
        batch: RolloutBatch,
        stage_start: RolloutBatch,
        sample: Callable[..., RolloutBatch],
        behaviour: Any,
    ) -> dict[str, Any] | None:
        """Behaviour log-probs of the agent on stage-start and intermediate rollouts, taken before
        its update (the agent is still at its stage-start parameters). ``behaviour`` are the
        log-probs already computed on the update batch ``batch``: reused, not recomputed, when
        the intermediate batch is the update batch (TeamTR)."""
        if i == 0 or self.config.schedule.method == "joint":
            return None
        inter = (
            batch
            if batch is not stage_start
            else sample(i, self.config.schedule.problems_per_batch, "diagnostic")
        )
        slot, mb, temp = (
            self.slots[agent],
            self.settings.micro_batch_size,
            self.settings.score_temperature,
        )
        out = {}
        for name, b in (("stale", stage_start), ("inter", inter)):
            msgs = b.messages_of(agent)
            adv = self._advantages(b).advantages.flatten()
            old = behaviour if b is batch else score(slot.policy, msgs, mb, temp)
            out[name] = (msgs, torch.tensor([float(adv[m.episode]) for m in msgs]), old)
        return out

    def _stale_gap(self, agent: str, diag: dict[str, Any], l_seq: float) -> float:
        values = {}
        slot, mb, temp = (
            self.slots[agent],
            self.settings.micro_batch_size,
            self.settings.score_temperature,
        )
        for name, (msgs, adv, old) in diag.items():
            if not msgs:
                return math.nan
            new = score(slot.policy, msgs, mb, temp)
            values[name] = surrogate_value(*_joined(new, old), adv)
        return abs(values["stale"] - values["inter"])

    def _stale_weights(
        self, messages: list[MessageRecord], log_ratio: torch.Tensor
    ) -> torch.Tensor:
        return torch.exp(torch.tensor([float(log_ratio[m.episode]) for m in messages])).float()

    def _episode_log_ratio(self, agent: str, batch: RolloutBatch, behaviour: Any) -> torch.Tensor:
        """Per episode, the sum over ``agent``'s messages of log(pi_new / pi_old): this agent's
        factor of the trajectory weight w^{0->i} (``behaviour`` = its log-probs before the update)."""
        slot, mb, temp = (
            self.slots[agent],
            self.settings.micro_batch_size,
            self.settings.score_temperature,
        )
        msgs = batch.messages_of(agent)
        new_lp, old_lp, mask = _joined(score(slot.policy, msgs, mb, temp), behaviour)
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
                }
                for a, s in self.slots.items()
            },
            "torch_rng": torch.get_rng_state(),
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
        torch.set_rng_state(state["torch_rng"])


def _joined(new: Any, old: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    new_lp, mask = concat_logprobs(new)
    old_lp, _ = concat_logprobs(old)
    return new_lp, old_lp, mask
