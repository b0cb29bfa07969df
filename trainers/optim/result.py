"""What one policy update did (:class:`UpdateResult`, returned by
:func:`trainers.optim.update.update_agent` wherever the agent lives) and what its policy step did
(:class:`PolicyStep`).

A field of :class:`UpdateResult` marked ``logged`` is a key of the update's plain-data record
(``summary.json``'s ``updates``; :class:`trainers.optim.records.UpdateRecord` embeds the result);
one marked ``agent_metric`` is also logged per stage as ``agent/<name>/<key>``. The marks are the
one place these lists are declared.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from teamtr_core.policy import TokenLogprobs

#: Field metadata: a key of the update's plain-data record.
LOGGED = {"logged": True}
#: Field metadata: a key of the record that is also a per-agent stage metric.
AGENT_METRIC = {"logged": True, "agent_metric": True}


@dataclass(frozen=True)
class UpdateResult:
    """What happened in one agent update (all floats are plain Python numbers for logging).

    Attributes:
        accepted: the new parameters were kept (possibly after backtracking).
        reason: ``"ok"``, ``"backtracked"``, ``"out_of_region"`` (reverted),
            ``"nonfinite_loss"``, ``"nonfinite_grad"`` or ``"nonfinite_kl"`` (rejected: nothing
            changed), ``"nonfinite_stopped"`` (no trust region: the finite epochs before a
            non-finite one are kept) or ``"no_messages"``.
        kl_raw: monitored KL of the full step (before backtracking).
        kl_tok: monitored token KL of the kept parameters (0 when reverted).
        in_region: ``kl_tok <= delta`` for the kept parameters.
        backtracks: how many times the step was halved.
        step_scale: the kept fraction of the step (0 when reverted).
        l_seq: the surrogate estimate mean(w A) of the kept parameters on this batch.
        ratio_clip_frac: fraction of messages whose ratio was clipped (last epoch).
        messages, tokens: the agent's messages and their tokens in the batch.
        update_s, monitor_s: wall time of the gradient steps and of KL monitoring/backtracking.
        ref_kl: the k3 estimate of KL(pi_new || pi_ref) on the batch in the last epoch (NaN
            without a reference policy).
        logprob_gap, engine_kl: with a rollout engine, the mean absolute difference between the
            engine's and the trainer's log-probs of the sampled tokens, and the k3 estimate of
            KL(engine || trainer) on them (NaN without engine log-probs).
        tis_mean: the mean truncated importance weight of the messages (NaN when off).
        diagnostics: with ``settings.flip_trials > 0``, what the kept parameters' monitoring pass
            gives for free: ``zeta_ratio`` (App. G.3), ``flip_rate_25`` and ``flip_rate_50``
            (App. G.4; with a trust region), and the seconds they took (``zeta_s``, ``flip_s``).
    """

    accepted: bool = dataclasses.field(metadata=AGENT_METRIC)
    reason: str = dataclasses.field(metadata=LOGGED)
    kl_raw: float = dataclasses.field(metadata=AGENT_METRIC)
    kl_tok: float = dataclasses.field(metadata=AGENT_METRIC)
    in_region: bool = dataclasses.field(metadata=AGENT_METRIC)
    backtracks: int = dataclasses.field(metadata=AGENT_METRIC)
    step_scale: float = dataclasses.field(metadata=LOGGED)
    l_seq: float = dataclasses.field(metadata=AGENT_METRIC)
    ratio_clip_frac: float = dataclasses.field(metadata=AGENT_METRIC)
    messages: int = dataclasses.field(metadata=LOGGED)
    tokens: int = dataclasses.field(metadata=LOGGED)
    update_s: float
    monitor_s: float
    ref_kl: float = dataclasses.field(default=math.nan, metadata=LOGGED)
    diagnostics: dict[str, float] = dataclasses.field(default_factory=dict)
    logprob_gap: float = dataclasses.field(default=math.nan, metadata=AGENT_METRIC)
    engine_kl: float = dataclasses.field(default=math.nan, metadata=AGENT_METRIC)
    tis_mean: float = dataclasses.field(default=math.nan, metadata=AGENT_METRIC)

    @classmethod
    def kept(
        cls,
        step: PolicyStep,
        n_messages: int,
        *,
        kl_raw: float = math.nan,
        kl: float = math.nan,
        delta: float | None = None,
        backtracks: int = 0,
        scale: float = 1.0,
        l_seq: float = math.nan,
        monitor_s: float = 0.0,
        diagnostics: dict[str, float] | None = None,
    ) -> UpdateResult:
        """An accepted update of ``step`` (monitored: ``kl``/``l_seq``; NaN when unmonitored)."""
        return cls(
            accepted=True,
            reason="backtracked" if backtracks else "ok",
            kl_raw=kl_raw,
            kl_tok=kl,
            in_region=delta is None or kl <= delta,
            backtracks=backtracks,
            step_scale=scale,
            l_seq=l_seq,
            ratio_clip_frac=step.clip_frac,
            messages=n_messages,
            tokens=step.n_tokens,
            update_s=step.seconds,
            monitor_s=monitor_s,
            ref_kl=step.ref_kl,
            diagnostics=diagnostics or {},
        )

    @property
    def changed_weights(self) -> bool:
        """Whether the update left the agent's weights changed (kept, and some of the step kept):
        the one test of whether a new version plays and a rollout engine needs a sync."""
        return self.accepted and self.step_scale > 0

    @classmethod
    def no_messages(cls) -> UpdateResult:
        """The update of an agent with no messages in its batch: nothing changed."""
        return dataclasses.replace(
            cls.kept(PolicyStep([], 0), 0, kl_raw=0.0, kl=0.0),
            reason="no_messages",
            step_scale=0.0,
            l_seq=0.0,
        )

    @classmethod
    def rejected(
        cls,
        reason: str,
        step: PolicyStep,
        n_messages: int,
        *,
        kl_raw: float = math.nan,
        monitor_s: float = 0.0,
    ) -> UpdateResult:
        """An update of ``step`` whose parameters and optimizer state were restored
        (``reason``)."""
        return cls(
            accepted=False,
            reason=reason,
            kl_raw=kl_raw,
            kl_tok=0.0,
            in_region=True,
            backtracks=0,
            step_scale=0.0,
            l_seq=0.0,
            ratio_clip_frac=0.0,
            messages=n_messages,
            tokens=step.n_tokens,
            update_s=step.seconds,
            monitor_s=monitor_s,
        )


@dataclass
class PolicyStep:
    """What :func:`policy_step` did: the behaviour log-probs of the messages (from the first
    epoch's forward pass unless given), their token count, the last epoch's clipped fraction and
    reference KL, the seconds it took, and ``failed`` (``"nonfinite_loss"`` or ``"nonfinite_grad"``)
    when it stopped before an optimizer step (after ``epochs_done`` of them)."""

    behaviour: list[TokenLogprobs]
    n_tokens: int
    clip_frac: float = 0.0
    ref_kl: float = math.nan
    seconds: float = 0.0
    failed: str | None = None
    # optimizer steps taken (one per epoch) before the end or a failure
    epochs_done: int = 0
    # the truncated importance weights of the engine-trainer correction, per message ([N]); None
    # without it
    tis: torch.Tensor | None = None
