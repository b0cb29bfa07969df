"""The typed record of one agent update: what :meth:`trainers.stage.Stage.update` returns, what
callbacks' ``on_update`` receives, and what a run keeps (``summary.json``'s ``updates``, the
checkpoint's run state)."""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_NAN = math.nan


@dataclass(frozen=True)
class UpdateRecord:
    """One agent update of a stage.

    The first group of fields comes from the update itself (:class:`trainers.update.UpdateResult`
    and the agent's trust-region state); the second from the stage diagnostics
    (:mod:`trainers.stage_diagnostics`), NaN where they were not measured.

    Attributes:
        stage: the stage's index (0-based).
        index: the update's position in the stage.
        agent: the updated agent.
        accepted: the new parameters were kept (possibly after backtracking).
        reason: ``ok``, ``backtracked``, ``out_of_region``, ``nonfinite_loss``, ``nonfinite_kl``
            or ``no_messages``.
        kl_tok: the monitored token KL of the kept parameters (0 when reverted).
        kl_raw: the monitored token KL of the full step, before backtracking.
        in_region: ``kl_tok <= delta``.
        out_of_region_raw: the full step left the region (``kl_raw > delta``).
        backtracks: how many times the step was halved.
        step_scale: the kept fraction of the step (0 when reverted).
        beta: the agent's KL-penalty coefficient after the update (adapted, if so configured).
        delta: the radius the update was held to (``inf`` without a trust region).
        l_seq: the surrogate ``mean(w A)`` of the kept parameters on the update's batch.
        ratio_clip_frac: the share of messages whose ratio was clipped (last epoch).
        adv_clip_frac: the share of advantages clipped at ``optim.a_clip``.
        messages, tokens: the agent's messages in the batch and their tokens.
        ref_kl: the k3 KL to the frozen reference policy (NaN without one).
        groups, episodes: the batch's prompt groups and episodes.
        l_stale, l_inter: the surrogate on a stage-start and on an intermediate-team batch.
        stale_gap, noise_floor: ``|l_stale - l_inter|`` and its sampling-noise floor.
        zeta_clip, zeta_ratio, zeta_norm, zeta_proxy: the zeta proxies (App. G.3).
        flip_rate_25, flip_rate_50: the KL monitor's flip rates at 25% and 50% (App. G.4).
        iw_ess_over_b, iw_p95, iw_p99, iw_max, iw_frac_gt_10: the importance weights' summary.
        d_occ_term: the update's occupancy-drift term.
        logprob_gap, engine_kl: with a rollout engine (``rollout.engine: vllm``), the mean
            absolute difference between the engine's and the trainer's log-probs of the sampled
            tokens, and the k3 estimate of KL(engine || trainer) on them (NaN without engine
            log-probs).
        tis_mean: the mean truncated importance weight of the update's messages
            (``rollout.importance_correction: tis``; NaN when off).
    """

    stage: int
    index: int
    agent: str
    accepted: bool
    reason: str
    kl_tok: float
    kl_raw: float
    in_region: bool
    out_of_region_raw: bool
    backtracks: int
    step_scale: float
    beta: float
    delta: float
    l_seq: float
    ratio_clip_frac: float
    adv_clip_frac: float
    messages: int
    tokens: int
    ref_kl: float
    groups: int
    episodes: int
    l_stale: float = _NAN
    l_inter: float = _NAN
    stale_gap: float = _NAN
    noise_floor: float = _NAN
    zeta_clip: float = _NAN
    zeta_ratio: float = _NAN
    zeta_norm: float = _NAN
    zeta_proxy: float = _NAN
    flip_rate_25: float = _NAN
    flip_rate_50: float = _NAN
    iw_ess_over_b: float = _NAN
    iw_p95: float = _NAN
    iw_p99: float = _NAN
    iw_max: float = _NAN
    iw_frac_gt_10: float = _NAN
    d_occ_term: float = _NAN
    logprob_gap: float = _NAN
    engine_kl: float = _NAN
    tis_mean: float = _NAN

    def value(self, key: str) -> Any:
        """The field named ``key`` (for code that iterates over field names)."""
        if key not in FIELD_NAMES:
            raise KeyError(f"an update record has no field {key!r}")
        return getattr(self, key)

    def __getitem__(self, key: str) -> Any:
        """``record["kl_tok"]``: the dict-style access of earlier versions, where the record was
        a dict (deprecated: read the attribute)."""
        warnings.warn(
            f"update records are typed now: read record.{key} instead of record[{key!r}]",
            FutureWarning,
            stacklevel=2,
        )
        return self.value(key)

    def with_fields(self, fields: Mapping[str, Any]) -> UpdateRecord:
        """A copy with ``fields`` set (the diagnostics' measurements)."""
        return dataclasses.replace(self, **fields)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (``summary.json``'s ``updates``, checkpoints)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UpdateRecord:
        """The record :meth:`to_dict` wrote (keys it does not know are ignored)."""
        return cls(**{k: v for k, v in data.items() if k in FIELD_NAMES})


#: Every field of an update record, in order.
FIELD_NAMES = tuple(f.name for f in dataclasses.fields(UpdateRecord))
