"""The paper's diagnostics as a run computes them, stage by stage (docs/diagnostics.md).

:class:`RunDiagnostics` holds what lasts a run (the state featurisation of the occupancy, the
certificate's settings, the per-stage history of the certificate against the measured
improvement); :class:`StageDiagnostics` gathers one stage's quantities while the learner runs
and turns them into namespaced metrics. The math is in :mod:`trainers.diagnostics.estimators`,
:mod:`trainers.diagnostics.certificate` and :mod:`trainers.optim.kl`; this module decides what is measured on
which batch, at which ``diagnostics.level``, and times each diagnostic:

* ``cheap`` (no rollouts beyond training): per update the zeta proxies (App. G.3), the
  KL-monitor flip rates at 25% and 50% (App. G.4), the importance-weight summary when the
  learner reweights (App. G.5); per stage the certificate (Thm. 3.6 / Cor. E.10) and, when the
  learner's training batches come from the intermediate teams (TeamTR), the occupancy drift
  D_occ on them (App. G.1);
* ``full`` adds independent batches outside the budget: the stale gap with its noise floor, D_occ
  for every learner with intermediate teams with its noise floor, D_occ by likelihood ratios
  (:mod:`trainers.diagnostics.d_occ_lr`, ``diag/d_occ_lr``: no context need repeat), and the measured improvement
  J(after) - J(before) of the stage, with the violation rate and rank correlation of the
  certificate across stages (Sec. 5.6).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import torch

from tasks.capabilities import SupportsStateKey
from teamtr_core.errors import ConfigError
from teamtr_core.seeds import J_INDEX, STALE_INDEX
from teamtr_env.rollout import MessageRecord, RolloutBatch
from trainers.config import TrainConfig
from trainers.diagnostics.certificate import (
    certificate_lower_bound,
    rank_correlation,
    violation_rate,
)
from trainers.diagnostics.d_occ_lr import DOccLR, Score
from trainers.diagnostics.estimators import (
    drift_noise_floor,
    episode_log_weights,
    hashed_state,
    importance_weight_stats,
    total_variation,
    zeta_proxies,
)
from trainers.optim.advantages import GroupAdvantages
from trainers.optim.records import UPDATE_KEYS, UpdateRecord
from trainers.optim.scoring import concat_logprobs, joined_logprobs
from trainers.optim.surrogate import surrogate_value

_IW_KEYS = ("ess_over_b", "p95", "p99", "max", "frac_gt_10")


class ObservedStage(Protocol):
    """What the diagnostics read of a stage (:class:`trainers.learners.stage.Stage`)."""

    index: int
    n: int
    config: TrainConfig
    stale_diagnostics: bool  # the learner has intermediate teams
    report: Any  # the StageReport: its updates

    def sample_diagnostic(self, index: int, prompts: int) -> RolloutBatch:
        """Rollouts under the team's current parameters, outside the training budget."""
        ...

    def score(self, agent: str, messages: list[MessageRecord]) -> list[Any]:
        """``agent``'s current log-probs of ``messages``."""
        ...

    def message_advantages(
        self, batch: RolloutBatch, agent: str
    ) -> tuple[list[MessageRecord], torch.Tensor]:
        """``agent``'s messages in ``batch`` and their advantages."""
        ...

    def versions(self) -> dict[str, int]:
        """Each trainable agent's accepted updates so far."""
        ...


class RunDiagnostics:
    """What the diagnostics of a whole run share.

    Args:
        config: the run's configuration (``diagnostics``, ``optim``, ``schedule``).
        task: the environment's task (its ``state_key`` featurises states exactly, when it has
            one and ``diagnostics.occupancy`` is ``task`` or ``auto``).
        turns: the episode's turn limit ``T`` (the certificate's default ``gamma = 1 - 1/T``).

    Raises:
        ConfigError: ``occupancy: task`` for a task without a ``state_key``.
    """

    def __init__(self, config: TrainConfig, task: Any, turns: int) -> None:
        self.config = config
        self.settings = config.diagnostics
        mode = self.settings.occupancy
        exact = isinstance(task, SupportsStateKey)
        if mode == "task" and not exact:
            raise ConfigError(
                "training config",
                [
                    f"diagnostics.occupancy: task needs a task with a state_key; "
                    f"{type(task).__name__} has none (use hash or auto)"
                ],
            )
        self.exact = exact and mode != "hash"
        self._task = task
        self.features = (
            "(turn, task.state_key(context))"
            if self.exact
            else f"(turn, blake2b(context) mod {self.settings.buckets})"
        )
        self.turns = max(int(turns), 1)
        # gamma = 1 - 1/T, so 1/(1 - gamma) = T (the effective horizon); T = 1 has no later turn
        # to drift, and a gamma near 0 gives the certificate no drift penalty.
        self.gamma = self.settings.gamma or max(1.0 - 1.0 / self.turns, 1e-9)
        o = config.optim
        self.j_units = not o.normalize_advantages and o.a_clip is None and o.advantage != "none"
        # the group mean's bias (1 - 1/G) is already undone by the leave-one-out baseline
        self.loo = o.advantage == "leave_one_out"
        self.lower_bounds: list[float] = []
        self.improvements: list[float] = []

    def state(self, message: MessageRecord) -> Hashable:
        """A message's featurised state: ``(turn, key)`` of the context its agent saw."""
        if self.exact:
            return (message.turn, self._task.state_key(message.context))
        return (message.turn, hashed_state(message.context, self.settings.buckets))

    def states(self, batch: RolloutBatch) -> list[Hashable]:
        """Every message's featurised state: a sample of the team's occupancy."""
        return [self.state(m) for m in batch.messages]

    def certificate(self, updates: Sequence[UpdateRecord]) -> dict[str, float]:
        """The stage's certificate from its update records (``l_seq``, ``kl_tok``,
        ``zeta_proxy``, ``messages``, ``groups``, ``episodes``).

        ``L_i^seq`` is the update's logged surrogate; with raw centred advantages
        (``optim.normalize_advantages: false``, ``optim.a_clip: null``) it is put in J units
        as ``l_seq * m_i / (1 - 1/G)`` (``m_i``: the agent's messages per episode, see
        :mod:`trainers.exact.run`; ``l_seq * m_i`` with the leave-one-out baseline, which has
        no ``1 - 1/G`` bias), otherwise (normalised, clipped, or without a baseline) it stays in
        advantage units and the bound is not comparable with J. ``delta_i`` is the measured KL of the kept parameters
        (0 for a reverted update), ``zeta_i`` the zeta proxy.
        """
        s, g = self.settings, self.config.schedule.group_size
        l_seq, deltas, zetas, groups = [], [], [], []
        for u in updates:
            kl, zeta, value = u.kl_tok, u.zeta_proxy, u.l_seq
            if not (math.isfinite(kl) and math.isfinite(zeta) and math.isfinite(value)):
                return {"diag/certificate_lb": math.nan}
            scale = 1.0
            if self.j_units and g > 1:
                scale = u.messages / max(u.episodes, 1) / (1.0 if self.loo else 1.0 - 1.0 / g)
            l_seq.append(value * scale)
            deltas.append(max(kl, 0.0) if u.accepted else 0.0)
            zetas.append(max(zeta, 0.0))
            groups.append(max(int(u.groups), 1))
        if not l_seq:
            return {"diag/certificate_lb": math.nan}
        o = self.config.optim
        cert = certificate_lower_bound(
            l_seq,
            deltas,
            zetas,
            gamma=self.gamma,
            a_max=s.a_max,
            hoeffding=s.hoeffding,
            n_samples=groups,
            a_clip=o.a_clip if o.a_clip is not None else s.a_max,
            ratio_bound=1.0 + o.ratio_clip,
            confidence=s.confidence,
        )
        return {
            "diag/certificate_lb": cert.lower_bound,
            "diag/certificate_surrogate": cert.surrogate_sum,
            "diag/certificate_kl_term": cert.kl_term,
            "diag/certificate_zeta_term": cert.zeta_term,
            "diag/certificate_hoeffding_term": cert.hoeffding_term + cert.ratio_bias_term,
        }

    def track(self, lower_bound: float, improvement: float) -> dict[str, float]:
        """Adds a stage's (bound, measured improvement) and returns the violation rate and the
        rank correlation over the stages so far (absent with fewer than 2 stages, or while either
        series is constant)."""
        if not (math.isfinite(lower_bound) and math.isfinite(improvement)):
            return {}
        self.lower_bounds.append(lower_bound)
        self.improvements.append(improvement)
        violations, rho = self.tracking()
        out = {"diag/violation_rate": violations}
        if math.isfinite(rho):  # undefined while either series is constant
            out["diag/rank_corr"] = rho
        return out

    def tracking(self) -> tuple[float, float]:
        """``(violation rate, rank correlation)`` of the bound against the measured improvement
        over the stages tracked so far (NaN for either when undefined: no stage, fewer than 2)."""
        if not self.lower_bounds:
            return math.nan, math.nan
        rho = (
            rank_correlation(self.lower_bounds, self.improvements)
            if len(self.lower_bounds) >= 2
            else math.nan
        )
        return violation_rate(self.lower_bounds, self.improvements), rho

    def state_dict(self) -> dict[str, Any]:
        return {"lower_bounds": list(self.lower_bounds), "improvements": list(self.improvements)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.lower_bounds = [float(x) for x in state.get("lower_bounds", [])]
        self.improvements = [float(x) for x in state.get("improvements", [])]


class StageDiagnostics:
    """One stage's diagnostics: an observer of the stage (:class:`trainers.learners.stage.Stage` calls
    :meth:`stage_started`, :meth:`train_batch`, :meth:`before_update`, :meth:`after_update` and
    :meth:`stage_finished`) that samples its own batches outside the training budget at
    ``full`` and returns the update records' fields and the stage's metrics.

    Args:
        run: the run's :class:`RunDiagnostics`.
        n: updates in the stage.
    """

    def __init__(self, run: RunDiagnostics, n: int) -> None:
        self.run = run
        self.n = n
        self.timing: dict[str, float] = defaultdict(float)
        self._start: list[Hashable] | None = None
        self._start_versions: Mapping[str, int] | None = None
        self._floor: float = math.nan
        self._from_diagnostic_batches = False
        self._latest: tuple[RolloutBatch, Mapping[str, int]] | None = None
        self._drift_measurable = True
        self.j_before: float = math.nan
        self.j_after: float = math.nan
        self._stale: tuple[RolloutBatch, RolloutBatch] | None = None
        self._inputs: dict[str, tuple[list[MessageRecord], torch.Tensor, list[Any]]] | None = None
        self._d_occ_term = math.nan
        self._d_occ_lr: DOccLR | None = None  # D_occ by likelihood ratios (``full``)
        self._d_occ_lr_term = math.nan

    # -- the observer ---------------------------------------------------------------------------
    def stage_started(self, stage: ObservedStage) -> None:
        """At ``full``: two independent stage-start batches (the stale surrogate and its noise
        floor, D_occ and its floor; learners with ``stale_diagnostics`` and n > 1) and the
        batch that measures J before the stage."""
        config = stage.config
        if not config.diagnostics.full:
            return
        b = config.schedule.problems_per_batch
        if stage.stale_diagnostics and self.n > 1:
            with self.timed("stale"):
                self._stale = (
                    stage.sample_diagnostic(STALE_INDEX, b),
                    stage.sample_diagnostic(STALE_INDEX + 1, b),
                )
            self.stage_start_batches(*self._stale)
            with self.timed("occupancy_lr"):
                versions = stage.versions()  # every trainable agent's
                self._d_occ_lr = DOccLR(
                    self._stale[0], list(versions), _summed(stage.score), versions
                )
        with self.timed("improvement"):
            j_prompts = self._j_prompts(config)
            if self._stale is not None and j_prompts == b:
                before = self._stale[0]  # independent of the update data: J(before) too
            else:
                before = stage.sample_diagnostic(J_INDEX, j_prompts)
            self.j_before = float(before.rewards().mean())

    def before_update(self, stage: ObservedStage, agent: str, index: int) -> None:
        """Before update ``index`` of ``agent``: at ``full`` (``index >= 1``) a batch of the
        intermediate team and the agent's log-probs of the three diagnostic batches before its
        update; the update's D_occ term."""
        self._inputs, inter = None, None
        if self._stale is not None and index > 0:
            with self.timed("stale"):
                b = stage.config.schedule.problems_per_batch
                inter = stage.sample_diagnostic(index, b)
                batches = {"stale": self._stale[0], "floor": self._stale[1], "inter": inter}
                self._inputs = {}
                for name, batch in batches.items():
                    msgs, adv = stage.message_advantages(batch, agent)
                    self._inputs[name] = (msgs, adv, stage.score(agent, msgs))
        self._d_occ_term = self.drift_term(index, stage.versions(), inter)
        self._d_occ_lr_term = math.nan
        if self._d_occ_lr is not None and index > 0:
            with self.timed("occupancy_lr"):
                self._d_occ_lr_term = self._d_occ_lr.term()

    def after_update(
        self,
        stage: ObservedStage,
        agent: str,
        groups: GroupAdvantages,
        batch: RolloutBatch,
        messages: Sequence[MessageRecord],
        weights: torch.Tensor | None,
        result: Any,
    ) -> dict[str, float]:
        """The update record's diagnostic fields: the updated agent's surrogate ``mean(w A)``
        on each diagnostic batch (``stale`` on a stage-start batch, ``inter`` on a batch of the
        intermediate team, ``floor`` on a second stage-start batch; the stale gap
        ``|L_stale - L_inter|`` and its noise floor ``|L_stale - L_stale'|``), the zeta proxies,
        flip rates, importance-weight summary and D_occ term."""
        out: dict[str, float] = {}
        if self._inputs is not None:
            with self.timed("stale"):
                values = {}
                for name, (msgs, adv, old) in self._inputs.items():
                    if not msgs:
                        values[name] = math.nan
                        continue
                    new_lp, old_lp, mask = joined_logprobs(stage.score(agent, msgs), old)
                    values[name] = surrogate_value(new_lp, old_lp, mask, adv)
            out.update(
                {
                    "l_stale": values["stale"],
                    "l_inter": values["inter"],
                    "stale_gap": abs(values["stale"] - values["inter"]),
                    "noise_floor": abs(values["stale"] - values["floor"]),
                }
            )
        fields = self.update_fields(
            groups, batch.group_rewards(), messages, weights, result.diagnostics
        )
        out.update(fields)
        out["d_occ_term"] = self._d_occ_term
        out["d_occ_lr_term"] = self._d_occ_lr_term
        if self._d_occ_lr is not None:
            with self.timed("occupancy_lr"):
                self._d_occ_lr.updated(stage.versions())
        return out

    def stage_finished(self, stage: ObservedStage) -> dict[str, float]:
        """At ``full`` the batch that measures J after the stage; the stage's ``diag/*`` metrics
        and each diagnostic's cost."""
        if stage.config.diagnostics.full:
            with self.timed("improvement"):
                prompts = self._j_prompts(stage.config)
                after = stage.sample_diagnostic(J_INDEX + 1, prompts)
                self.j_after = float(after.rewards().mean())
        return self.metrics(stage.report.updates)

    @staticmethod
    def _j_prompts(config: TrainConfig) -> int:
        """Prompts of each batch that measures J before and after the stage (``full``)."""
        return config.diagnostics.eval_problems or config.schedule.problems_per_batch

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Adds the block's seconds to diagnostic ``name``'s cost."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timing[name] += time.perf_counter() - t0

    # -- occupancy drift ----------------------------------------------------------------------
    def stage_start_batches(self, a: RolloutBatch, b: RolloutBatch) -> None:
        """Two independent batches of the stage-start team (``full``): D_occ compares every
        intermediate batch with ``a``, and its noise floor is ``(n - 1) TV(a, b)``."""
        with self.timed("occupancy"):
            self._start = self.run.states(a)
            self._floor = drift_noise_floor(self._start, self.run.states(b), self.n - 1)
            self._from_diagnostic_batches = True

    def train_batch(self, batch: RolloutBatch, versions: Mapping[str, int]) -> None:
        """A training batch and the agents' versions it was sampled under (``cheap``: the
        stage's first one is the stage-start sample of the occupancy)."""
        self._latest = (batch, dict(versions))
        if self._start is None and not self._from_diagnostic_batches:
            with self.timed("occupancy"):
                self._start = self.run.states(batch)
                self._start_versions = dict(versions)

    def drift_term(
        self, index: int, versions: Mapping[str, int], inter: RolloutBatch | None
    ) -> float:
        """Update ``index``'s term ``TV(d^{pi_hat^{index-1}}, d^{pi_hat^0})`` of D_occ, before the
        update (``versions``: the agents' versions now, i.e. of ``pi_hat^{index-1}``). From
        ``inter`` (an independent batch of the current team, ``full``) or, without one, from the
        latest training batch when it was sampled under the current team (NaN otherwise: a
        learner that trains on stale batches has no sample of its intermediate teams)."""
        if index < 1 or self._start is None:
            return math.nan
        with self.timed("occupancy"):
            if self._from_diagnostic_batches:
                if inter is None:
                    self._drift_measurable = False
                    return math.nan
                return total_variation(self.run.states(inter), self._start)
            if self._latest is None or dict(self._latest[1]) != dict(versions):
                self._drift_measurable = False
                return math.nan
            if dict(versions) == self._start_versions:
                return 0.0  # the team has not changed yet: pi_hat^{index-1} = pi_hat^0
            return total_variation(self.run.states(self._latest[0]), self._start)

    # -- per update ---------------------------------------------------------------------------
    def update_fields(
        self,
        groups: GroupAdvantages,
        rewards: np.ndarray,
        messages: Sequence[MessageRecord],
        weights: torch.Tensor | None,
        update_diagnostics: Mapping[str, float],
    ) -> dict[str, float]:
        """The update's zeta proxies, flip rates and importance-weight summary."""
        out = dict.fromkeys(UPDATE_KEYS, math.nan)
        with self.timed("zeta"):
            r = torch.as_tensor(rewards, dtype=torch.float64)
            centred = r - r.mean(dim=1, keepdim=True)
            standardized = groups.standardized.double()
            # with normalize_advantages off the advantages are the centred rewards themselves
            z = zeta_proxies(
                standardized,
                groups.advantages.double(),
                torch.ones_like(standardized),
                centred_adv=centred,
            )
            out["zeta_clip"], out["zeta_norm"] = z.zeta_clip, z.zeta_norm
        self.timing["zeta"] += update_diagnostics.get("zeta_s", 0.0)
        self.timing["flip_rate"] += update_diagnostics.get("flip_s", 0.0)
        ratio_part = update_diagnostics.get("zeta_ratio", math.nan)
        out["zeta_ratio"] = ratio_part
        out["zeta_proxy"] = out["zeta_clip"] + ratio_part + out["zeta_norm"]
        for key in ("flip_rate_25", "flip_rate_50"):
            out[key] = update_diagnostics.get(key, math.nan)
        if weights is not None and len(messages):
            with self.timed("importance_weights"):
                stats = importance_weight_stats(
                    episode_log_weights([m.episode for m in messages], weights)
                )
                for key in _IW_KEYS:
                    out[f"iw_{key}"] = stats[key]
        return out

    # -- the stage's metrics ------------------------------------------------------------------
    def metrics(self, updates: Sequence[UpdateRecord]) -> dict[str, float]:
        """The stage's ``diag/*`` metrics and each diagnostic's cost (``stage/diag_*_s``)."""
        out: dict[str, float] = {}
        terms = [u.d_occ_term for u in updates if u.index >= 1]
        if (
            self._start is not None
            and self._drift_measurable
            and all(math.isfinite(t) for t in terms)
        ):
            out["diag/d_occ"] = float(sum(terms))
            if math.isfinite(self._floor):
                out["diag/d_occ_noise_floor"] = self._floor
        if self._d_occ_lr is not None and self._d_occ_lr.terms:
            out["diag/d_occ_lr"], out["diag/d_occ_lr_se"] = self._d_occ_lr.total()
        for key in ("zeta_clip", "zeta_ratio", "zeta_norm", "zeta_proxy"):
            values = [u.value(key) for u in updates if math.isfinite(u.value(key))]
            if values:
                out[f"diag/{key}"] = float(sum(values))
        for key in ("flip_rate_25", "flip_rate_50"):
            values = [u.value(key) for u in updates if math.isfinite(u.value(key))]
            if values:
                out[f"diag/{key}"] = float(np.mean(values))
            # the paper's conditioning: updates whose monitored KL is within 20% of the radius
            near = [
                u.value(key)
                for u in updates
                if math.isfinite(u.value(key)) and 0.8 * u.delta <= u.kl_tok <= 1.2 * u.delta
            ]
            if near:  # absent (not NaN) when no update was near its radius
                out[f"diag/{key}_near_delta"] = float(np.mean(near))
        ess = [u.iw_ess_over_b for u in updates if math.isfinite(u.iw_ess_over_b)]
        if ess:
            out["diag/iw_ess_over_b"] = float(np.mean(ess))
            out["diag/iw_ess_over_b_min"] = float(np.min(ess))
            for key in ("p95", "p99", "max", "frac_gt_10"):
                values = [
                    u.value(f"iw_{key}") for u in updates if math.isfinite(u.value(f"iw_{key}"))
                ]
                out[f"diag/iw_{key}"] = float(np.max(values) if key == "max" else np.mean(values))
        with self.timed("certificate"):
            out.update(self.run.certificate(updates))
        if math.isfinite(self.j_before) and math.isfinite(self.j_after):
            improvement = self.j_after - self.j_before
            out.update(
                {
                    "diag/j_before": self.j_before,
                    "diag/j_after": self.j_after,
                    "diag/improvement": improvement,
                }
            )
            out.update(self.run.track(out["diag/certificate_lb"], improvement))
        for name, seconds in self.timing.items():
            out[f"stage/diag_{name}_s"] = seconds
        return out


def _summed(score: Callable[[str, list[MessageRecord]], list[Any]]) -> Score:
    """An agent's log-probs of messages (per micro-batch, per token) as each message's total."""

    def each(agent: str, messages: list[MessageRecord]) -> np.ndarray:
        lp, mask = concat_logprobs(score(agent, messages))
        return (lp.double() * mask).sum(-1).numpy()

    return each
