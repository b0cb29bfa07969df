"""The typed record of one agent update: what :meth:`trainers.learners.stage.Stage.update` returns,
what callbacks' ``on_update`` receives, and what a run keeps (``summary.json``'s ``updates``, the
checkpoint's run state).

The record embeds the update's :class:`~trainers.optim.result.UpdateResult` and adds where it
happened, the agent's trust-region state and the stage diagnostics' measurements. Which fields
are plain data and which are also per-agent stage metrics is declared once, on the fields
(``LOGGED`` / ``AGENT_METRIC`` metadata): :data:`FIELD_NAMES` and :data:`AGENT_METRIC_KEYS` are
derived from it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainers.optim.result import AGENT_METRIC, LOGGED, UpdateResult

_NAN = math.nan


def _diag(kind: str, *, agent_metric: bool = False) -> Any:
    """A field the stage diagnostics measure (NaN until they do): ``kind`` ``"stale"`` for the
    stale-gap surrogates (``full``), ``"update"`` for what every observed update gets."""
    return field(
        default=_NAN, metadata={"logged": True, "diagnostic": kind, "agent_metric": agent_metric}
    )


@dataclass(frozen=True)
class UpdateRecord:
    """One agent update of a stage.

    Read the update's own fields as attributes (``record.kl_tok``, ``record.accepted``, ...:
    :class:`~trainers.optim.result.UpdateResult`, embedded as ``result``); the rest:

    Attributes:
        stage: the stage's index (0-based).
        index: the update's position in the stage.
        agent: the updated agent.
        result: what the update did (accepted, reason, kl_tok, kl_raw, in_region, backtracks,
            step_scale, l_seq, ratio_clip_frac, messages, tokens, ref_kl, logprob_gap,
            engine_kl, tis_mean, and its timing).
        out_of_region_raw: the full step left the region (``kl_raw > delta``).
        beta: the agent's KL-penalty coefficient after the update (adapted, if so configured).
        delta: the radius the update was held to (``inf`` without a trust region).
        adv_clip_frac: the share of advantages clipped at ``optim.a_clip``.
        groups, episodes: the batch's prompt groups and episodes.
        l_stale, l_inter: the surrogate on a stage-start and on an intermediate-team batch.
        stale_gap, noise_floor: ``|l_stale - l_inter|`` and its sampling-noise floor.
        zeta_clip, zeta_ratio, zeta_norm, zeta_proxy: the zeta proxies (App. G.3).
        flip_rate_25, flip_rate_50: the KL monitor's flip rates at 25% and 50% (App. G.4).
        iw_ess_over_b, iw_p95, iw_p99, iw_max, iw_frac_gt_10: the importance weights' summary.
        d_occ_term: the update's occupancy-drift term.
        d_occ_lr_term: the same term by likelihood ratios (``diagnostics: full``; no context
            need repeat: :mod:`trainers.diagnostics.d_occ_lr`).
    """

    stage: int = field(metadata=LOGGED)
    index: int = field(metadata=LOGGED)
    agent: str = field(metadata=LOGGED)
    result: UpdateResult
    out_of_region_raw: bool = field(metadata=LOGGED)
    beta: float = field(metadata=AGENT_METRIC)
    delta: float = field(metadata=AGENT_METRIC)
    adv_clip_frac: float = field(metadata=AGENT_METRIC)
    groups: int = field(metadata=LOGGED)
    episodes: int = field(metadata=LOGGED)
    l_stale: float = _diag("stale")
    l_inter: float = _diag("stale")
    stale_gap: float = _diag("stale", agent_metric=True)
    noise_floor: float = _diag("stale", agent_metric=True)
    zeta_clip: float = _diag("update")
    zeta_ratio: float = _diag("update")
    zeta_norm: float = _diag("update")
    zeta_proxy: float = _diag("update", agent_metric=True)
    flip_rate_25: float = _diag("update", agent_metric=True)
    flip_rate_50: float = _diag("update", agent_metric=True)
    iw_ess_over_b: float = _diag("update", agent_metric=True)
    iw_p95: float = _diag("update")
    iw_p99: float = _diag("update")
    iw_max: float = _diag("update")
    iw_frac_gt_10: float = _diag("update")
    d_occ_term: float = _diag("update", agent_metric=True)
    d_occ_lr_term: float = _diag("update", agent_metric=True)

    @property
    def accepted(self) -> bool:
        """The update's ``accepted`` (:class:`~trainers.optim.result.UpdateResult`)."""
        return self.result.accepted

    @property
    def reason(self) -> str:
        """The update's ``reason`` (:class:`~trainers.optim.result.UpdateResult`)."""
        return self.result.reason

    @property
    def kl_tok(self) -> float:
        """The update's ``kl_tok`` (:class:`~trainers.optim.result.UpdateResult`)."""
        return self.result.kl_tok

    @property
    def kl_raw(self) -> float:
        """The update's ``kl_raw`` (:class:`~trainers.optim.result.UpdateResult`)."""
        return self.result.kl_raw

    @property
    def in_region(self) -> bool:
        """The update's ``in_region`` (:class:`~trainers.optim.result.UpdateResult`)."""
        return self.result.in_region

    @property
    def backtracks(self) -> int:
        """The update's ``backtracks`` (:class:`~trainers.optim.result.UpdateResult`)."""
        return self.result.backtracks

    @property
    def step_scale(self) -> float:
        """The update's ``step_scale`` (:class:`~trainers.optim.result.UpdateResult`)."""
        return self.result.step_scale

    @property
    def l_seq(self) -> float:
        """The update's ``l_seq`` (:class:`~trainers.optim.result.UpdateResult`)."""
        return self.result.l_seq

    @property
    def ratio_clip_frac(self) -> float:
        """The update's ``ratio_clip_frac`` (:class:`~trainers.optim.result.UpdateResult`)."""
        return self.result.ratio_clip_frac

    @property
    def messages(self) -> int:
        """The update's ``messages`` (:class:`~trainers.optim.result.UpdateResult`)."""
        return self.result.messages

    @property
    def tokens(self) -> int:
        """The update's ``tokens`` (:class:`~trainers.optim.result.UpdateResult`)."""
        return self.result.tokens

    @property
    def ref_kl(self) -> float:
        """The update's ``ref_kl`` (:class:`~trainers.optim.result.UpdateResult`)."""
        return self.result.ref_kl

    @property
    def logprob_gap(self) -> float:
        """The update's ``logprob_gap`` (:class:`~trainers.optim.result.UpdateResult`)."""
        return self.result.logprob_gap

    @property
    def engine_kl(self) -> float:
        """The update's ``engine_kl`` (:class:`~trainers.optim.result.UpdateResult`)."""
        return self.result.engine_kl

    @property
    def tis_mean(self) -> float:
        """The update's ``tis_mean`` (:class:`~trainers.optim.result.UpdateResult`)."""
        return self.result.tis_mean

    def value(self, key: str) -> Any:
        """The plain-data field named ``key`` (for code that iterates over field names)."""
        if key not in FIELD_NAMES:
            raise KeyError(f"an update record has no field {key!r}")
        return getattr(self, key)

    def with_fields(self, fields: Mapping[str, Any]) -> UpdateRecord:
        """A copy with ``fields`` set (the diagnostics' measurements)."""
        return dataclasses.replace(self, **fields)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (``summary.json``'s ``updates``, checkpoints): every logged field, the
        result's flattened in."""
        return {key: getattr(self, key) for key in FIELD_NAMES}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UpdateRecord:
        """The record :meth:`to_dict` wrote (keys it does not know are ignored; the result's
        timing and diagnostics, which are not kept, read as zero and empty)."""
        result = UpdateResult(
            **{k: data[k] for k in _RESULT_KEYS if k in data}, update_s=0.0, monitor_s=0.0
        )
        own = {k: data[k] for k in _RECORD_KEYS if k in data}
        return cls(result=result, **own)


def _logged(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("logged"))


_RESULT_KEYS = _logged(UpdateResult)
_RECORD_KEYS = _logged(UpdateRecord)
#: Every plain-data field of an update record, in order (the record's own, with the result's
#: after ``agent``).
FIELD_NAMES = (*_RECORD_KEYS[:3], *_RESULT_KEYS, *_RECORD_KEYS[3:])
#: The fields logged per agent as ``agent/<name>/<key>`` in the stage metrics.
AGENT_METRIC_KEYS = tuple(
    f.name
    for cls in (UpdateResult, UpdateRecord)
    for f in dataclasses.fields(cls)
    if f.metadata.get("agent_metric")
)
#: The fields the stage diagnostics fill for every observed update (NaN until they do; the
#: stale-gap fields are measured at ``diagnostics: full`` only).
UPDATE_KEYS = tuple(
    f.name for f in dataclasses.fields(UpdateRecord) if f.metadata.get("diagnostic") == "update"
)
