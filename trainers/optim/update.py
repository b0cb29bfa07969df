"""One agent's policy update inside its token-level KL trust region (paper Sec. 4, App. F.6).

``update_agent`` (:func:`policy_step`, then :func:`enforce_trust_region`) maximises the clipped message-level surrogate minus ``beta`` times a KL penalty on
the agent's own messages of one rollout batch, then ENFORCES the trust region on the same rollouts:
the monitored token KL (Eq. 18) of the new parameters against the behaviour parameters must be at
most ``delta``. If it is not, the step is scaled back toward the old parameters (halving) until it
is; if that fails, the update is reverted. A non-finite loss, gradient or KL rejects the update and
restores the parameters and optimizer state. Every accepted update therefore satisfies
KL_tok <= delta on its batch.

Memory: with a trust region the update keeps one snapshot of the trainable parameters and one of
the optimizer state (:class:`trainers.optim.trust_region.Snapshot`, taken just before the first
optimizer step); without one it keeps none: the loss and the gradients are checked for non-finite
values before each optimizer step, so a failure in the first epoch changes nothing, and one in a
later epoch keeps the epochs before it (reason ``nonfinite_stopped``).

On a gang (a sharded agent) every rank is called with the same arguments, the messages as its
:class:`~trainers.optim.collective.Share` of the batch: each backpropagates its share's passes,
the gradients sum over the ranks to the full batch's, the behaviour and monitored log-probs are
gathered by the share, and the snapshot, backtracks and revert act on each rank's own shards:
every rank returns the same result. Nothing here names a rank.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Any

import torch

from teamtr_core.policy import TokenLogprobs, TrainablePolicy
from teamtr_core.seeds import MONITOR_SEED
from teamtr_env.rollout import MessageRecord
from trainers.config import OptimConfig, TrustRegionConfig
from trainers.diagnostics.estimators import zeta_proxies
from trainers.optim.collective import MicroBatch, Share, as_share
from trainers.optim.engine import engine_mismatch, truncated_is_weights
from trainers.optim.kl import (
    kl_penalty,
    message_subset,
    monitor_flip_rate,
    reference_kl,
    token_kl_monitor,
)
from trainers.optim.result import PolicyStep, UpdateResult
from trainers.optim.scoring import (
    concat_logprobs,
    gathered,
    joined,
    score,
    scored,
    scored_rows,
    to_width,
)
from trainers.optim.sharding import whole
from trainers.optim.surrogate import (
    clipped_surrogate,
    message_log_ratio,
    surrogate_value,
    token_clipped_surrogate,
)
from trainers.optim.trust_region import Snapshot


def policy_step(
    policy: TrainablePolicy,
    optimizer: torch.optim.Optimizer,
    messages: Sequence[MessageRecord],
    advantages: torch.Tensor,
    *,
    beta: float,
    optim: OptimConfig,
    temperature: float = 1.0,
    weights: torch.Tensor | None = None,
    behaviour: Sequence[TokenLogprobs] | None = None,
    reference: Sequence[TokenLogprobs] | None = None,
    tis_cap: float | None = None,
    snapshot: Snapshot | None = None,
) -> PolicyStep:
    """``optim.epochs`` full-batch gradient steps on the clipped message-level surrogate minus
    ``beta`` times the KL penalty (plus ``optim.ref_kl_coef`` times the KL to ``reference``),
    gradients accumulated over micro-batches and clipped to ``optim.max_grad_norm``; stops before
    an optimizer step at a non-finite loss or gradient norm (``failed``, after ``epochs_done``).
    ``messages``: the batch, or this process's :class:`~trainers.optim.collective.Share` of it
    (the module docstring). ``snapshot`` is taken just before the first optimizer step.
    ``behaviour``: the sampler's log-probs for the loss (see :func:`update_agent`); the step's
    own ``behaviour`` (what the trust region measures from) is always the first epoch's forward
    pass. ``optim.ratio_level: token`` takes a ratio per token and averages the surrogate over
    the batch's tokens (verl's token-mean), scoring the behaviour log-probs first when not
    given. ``tis_cap``: each message's weight times ``min(pi_trainer(m) / pi_engine(m),
    tis_cap)`` (1 without engine log-probs), kept in ``step.tis``."""
    t0 = time.perf_counter()
    batch = as_share(messages)
    passes = batch.micro_batches(optim.micro_batch_size)
    given, tokens = _loss_behaviour(policy, batch, behaviour, optim, temperature)
    first = _FirstPass(given, tis_cap)
    ref_rows = joined(reference) if reference is not None and optim.ref_kl_coef > 0 else None
    step = PolicyStep(first.own, 0)
    params = list(policy.parameters())
    for epoch in range(optim.epochs):
        optimizer.zero_grad(set_to_none=True)
        clipped = ref_sum = 0.0
        for i, part in enumerate(passes):
            new = score(
                policy, part.messages, optim.micro_batch_size, temperature, grad=True,
                autocast=optim.autocast,
            )[0]  # fmt: skip
            if epoch == 0:
                first.add(new, part)
            ref_lp = None if ref_rows is None else _rows(ref_rows.logprobs, part, new)
            loss, clip_frac, ref_kl = _loss(
                new, first.behaviour[i], advantages[part.index], first.weights(i, part, weights),
                beta, optim, ref_lp, part.fraction, tokens,
            )  # fmt: skip
            # Accumulate the full-batch mean: micro-batching-invariant (and, scaled by the
            # share, ranks-invariant: a sharded model averages the ranks' gradients).
            loss = loss * batch.loss_scale
            if batch.any(not bool(torch.isfinite(loss))):
                return _stopped(step, "nonfinite_loss", t0)
            loss.backward()
            clipped += clip_frac
            ref_sum += ref_kl * part.fraction
        norm = whole(torch.nn.utils.clip_grad_norm_(params, optim.max_grad_norm))
        if not math.isfinite(float(norm)):  # checked before the step: nothing to undo
            return _stopped(step, "nonfinite_grad", t0)
        if snapshot is not None:
            snapshot.take()
        optimizer.step()
        step.epochs_done = epoch + 1
        if epoch == 0:
            first.record(step, batch)
        step.clip_frac, ref_kl = batch.sum([clipped, ref_sum])
        step.ref_kl = ref_kl if ref_rows is not None else math.nan
    step.seconds = time.perf_counter() - t0
    return step


def _stopped(step: PolicyStep, reason: str, t0: float) -> PolicyStep:
    step.failed, step.seconds = reason, time.perf_counter() - t0
    return step


def _rows(values: torch.Tensor, part: MicroBatch, new: TokenLogprobs) -> torch.Tensor:
    """A pass's rows of the batch's ``[N, T]`` ``values``, at the pass's width."""
    return to_width(values[part.index], new.logprobs.shape[1])


class _FirstPass:
    """What the first epoch's passes give the update: each pass's own log-probs of its messages
    (detached: what the trust region measures from), the loss's behaviour log-probs per pass
    (the given ones' rows, else its own), the token count, and the engine correction's truncated
    importance weights (``tis_cap``)."""

    def __init__(self, given: TokenLogprobs | None, tis_cap: float | None) -> None:
        self.given, self.tis_cap = given, tis_cap
        self.own: list[TokenLogprobs] = []  # passes that hold messages: their rows
        self.behaviour: list[TokenLogprobs] = []  # every pass (a padding one weighs nothing)
        self.tis: list[torch.Tensor] = []
        self.tokens = 0

    def add(self, new: TokenLogprobs, part: MicroBatch) -> None:
        own = TokenLogprobs(new.logprobs.detach(), new.mask, new.token_ids)
        self.behaviour.append(_behaviour(own, self.given, part.rows) if part else own)
        if part:
            self.own.append(own)
            self.tokens += int(own.mask.sum())
        if self.tis_cap is not None:
            tis = truncated_is_weights(part.messages, self.behaviour[-1], self.tis_cap)
            self.tis.append(part.own(tis))

    def weights(
        self, i: int, part: MicroBatch, weights: torch.Tensor | None
    ) -> torch.Tensor | None:
        """A pass's message weights: the given importance weights' rows times the truncated
        importance weights of the engine correction, either or both (``None``: neither)."""
        w = weights[part.index] if weights is not None else None
        tis = self.tis[i] if self.tis and part else None
        if tis is None:
            return w
        return tis if w is None else w * tis

    def record(self, step: PolicyStep, batch: Share) -> None:
        """The whole batch's behaviour log-probs, token count and importance weights, into
        ``step``."""
        step.behaviour = gathered(batch, self.own)
        step.n_tokens = int(batch.sum([float(self.tokens)])[0])
        step.tis = batch.rows(torch.cat(self.tis)) if self.tis else None


def _loss_behaviour(
    policy: TrainablePolicy,
    batch: Share,
    behaviour: Sequence[TokenLogprobs] | None,
    optim: OptimConfig,
    temperature: float,
) -> tuple[TokenLogprobs | None, float]:
    """The loss's behaviour log-probs (the ratio's denominator, the KL penalty's anchor), joined,
    and the batch's token count for a token-mean loss (0 otherwise).

    The given ones (the sampler's, when the model moved since: a role-sharing team), else
    ``None``: the first epoch's own forward pass, detached, gives them (the parameters do not
    change within an epoch, one optimizer step per epoch, so a separate scoring pass is saved).
    A token-mean loss needs the token count before its first backward pass, so with
    ``optim.ratio_level: token`` they are scored first when not given (verl's old_log_prob
    pass). The trust region is measured from the update's own start either way."""
    token_level = optim.ratio_level == "token"
    if token_level and behaviour is None:
        behaviour = scored(policy, batch, optim.micro_batch_size, temperature, optim.autocast)
    given = joined(behaviour) if behaviour is not None else None
    tokens = float(given.mask.sum()) if token_level and given is not None else 0.0
    return given, tokens


def _loss(
    new: TokenLogprobs,
    cur: TokenLogprobs,
    adv: torch.Tensor,
    weights: torch.Tensor | None,
    beta: float,
    optim: OptimConfig,
    ref_lp: torch.Tensor | None,
    share: float,
    tokens: float,
) -> tuple[torch.Tensor, float, float]:
    """One micro-batch's part of the batch's loss (Eq. 17): the clipped surrogate (per message,
    its mean times ``share``, the micro-batch's fraction of the messages; per token with
    ``optim.ratio_level: token``, its token sum over the batch's ``tokens``), plus ``beta`` times
    the KL penalty against the behaviour log-probs ``cur`` and, with a reference's log-probs,
    that KL times ``optim.ref_kl_coef`` (both means over messages, times ``share``). Returns the
    loss, its part of the batch's clipped fraction (of messages, or of tokens) and the reference
    KL (0 without one). An empty micro-batch (``share`` 0) weighs nothing."""
    if optim.ratio_level == "token":
        tok = token_clipped_surrogate(
            new.logprobs,
            cur.logprobs,
            cur.mask,
            adv,
            eps=optim.ratio_clip,
            dual_clip=optim.dual_clip,
            weights=weights,
        )
        scale = 1.0 / tokens if share > 0 and tokens > 0 else 0.0
        loss = tok.loss_sum * scale
        clip_frac = tok.clipped_tokens * scale
    else:
        sur = clipped_surrogate(
            new.logprobs, cur.logprobs, cur.mask, adv, eps=optim.ratio_clip, weights=weights
        )
        loss, clip_frac = sur.loss * share, sur.clip_frac * share
    if beta:
        loss = loss + beta * kl_penalty(cur.logprobs, new.logprobs, cur.mask) * share
    if ref_lp is None:
        return loss, clip_frac, 0.0
    ref_term = reference_kl(ref_lp, new.logprobs, cur.mask)
    return loss + optim.ref_kl_coef * ref_term * share, clip_frac, float(ref_term.detach())


def _behaviour(own: TokenLogprobs, given: TokenLogprobs | None, rows: range) -> TokenLogprobs:
    """A micro-batch's behaviour log-probs: the given ones' rows (at this pass's width), else the
    pass's own (detached)."""
    if given is None:
        return own
    index = torch.tensor(list(rows), dtype=torch.long)
    width = own.logprobs.shape[1]
    mask = to_width(given.mask[index].float(), width).bool()
    return TokenLogprobs(to_width(given.logprobs[index], width), mask, own.token_ids)


class _Monitor:
    """The monitored token KL (Eq. 18) of the policy's current parameters against the behaviour
    log-probs, on the same seeded subset of the messages at every call
    (``region.monitor_messages``) and a seeded subset of their tokens
    (``region.monitor_subsample``)."""

    def __init__(
        self,
        policy: TrainablePolicy,
        messages: Sequence[MessageRecord],
        step: PolicyStep,
        region: TrustRegionConfig,
        optim: OptimConfig,
        temperature: float,
    ) -> None:
        self.policy, self.region, self.optim, self.temperature = policy, region, optim, temperature
        batch = as_share(messages)
        self.old_lp, self.mask = concat_logprobs(step.behaviour)
        self.generator = torch.Generator().manual_seed(MONITOR_SEED)
        n = len(messages)
        frac = region.monitor_messages
        self.subset = None if frac >= 1 else message_subset(n, frac, self.generator)
        self.checked = (
            batch if self.subset is None else batch.subset([batch[int(i)] for i in self.subset])
        )
        if self.subset is not None:
            self.old_lp, self.mask = self.old_lp[self.subset], self.mask[self.subset]

    def __call__(self) -> tuple[float, torch.Tensor]:
        """The monitored KL and the checked messages' new log-probs."""
        o = self.optim
        new_lp = scored_rows(
            self.policy, self.checked, o.micro_batch_size, self.temperature, o.autocast
        )
        new_lp = to_width(new_lp, self.old_lp.shape[1])
        est = token_kl_monitor(
            self.old_lp,
            new_lp,
            self.mask,
            subsample=self.region.monitor_subsample,
            generator=self.generator,
        )
        return est.value, new_lp

    def checked_rows(self, values: torch.Tensor | None, n: int) -> torch.Tensor | None:
        """``values`` (per message, ``[N]``) of the checked messages."""
        if values is None:
            return None
        return values[:n] if self.subset is None else values[:n][self.subset]


def _backtrack(
    snapshot: Snapshot,
    monitor: _Monitor,
    kl: float,
    new_lp: torch.Tensor,
    delta: float | None,
    max_backtracks: int,
) -> tuple[float, torch.Tensor, float, int]:
    """Halves the step toward ``snapshot`` while the monitored KL exceeds ``delta`` (at most
    ``max_backtracks`` times), in place (:meth:`Snapshot.pull_back`): the kept KL, its
    log-probs, the kept fraction of the step and the number of halvings."""
    scale, backtracks = 1.0, 0
    while delta is not None and kl > delta and backtracks < max_backtracks:
        scale *= 0.5
        backtracks += 1
        snapshot.pull_back()
        kl, new_lp = monitor()
    return kl, new_lp, scale, backtracks


def enforce_trust_region(
    policy: TrainablePolicy,
    messages: Sequence[MessageRecord],
    advantages: torch.Tensor,
    step: PolicyStep,
    snapshot: Snapshot | None,
    *,
    delta: float | None,
    region: TrustRegionConfig,
    optim: OptimConfig,
    temperature: float = 1.0,
    flip_trials: int = 0,
    weights: torch.Tensor | None = None,
) -> UpdateResult:
    """Measures the monitored token KL (Eq. 18) of the stepped parameters against the behaviour
    log-probs on ``messages`` and, while it exceeds ``delta``, scales the step back toward
    ``snapshot`` (halving, at most ``region.max_backtracks`` times). Returns the kept step's
    record; ``accepted`` is False (``out_of_region`` / ``nonfinite_kl``) when no scaled step fits,
    and the caller then restores the parameters and the optimizer state. Without a region
    (``delta`` None, ``snapshot`` None) the KL is only measured: a non-finite one is logged as
    NaN and the step kept.

    ``region.monitor_messages < 1`` checks a seeded uniform subset of the messages (the same for
    every backtrack), ``region.monitor_subsample < 1`` a subset of their tokens: unbiased, at
    that fraction of the cost. With ``flip_trials > 0`` the record carries the update's
    diagnostics (:func:`_update_diagnostics`)."""
    n = len(messages)
    t1 = time.perf_counter()
    monitor = _Monitor(policy, messages, step, region, optim, temperature)
    kl_raw, new_lp = monitor()
    if not math.isfinite(kl_raw):
        if delta is None:  # nothing to enforce, and no snapshot to return to
            return UpdateResult.kept(step, n, monitor_s=time.perf_counter() - t1)
        return UpdateResult.rejected(
            "nonfinite_kl", step, n, kl_raw=math.nan, monitor_s=time.perf_counter() - t1
        )
    kl, scale, backtracks = kl_raw, 1.0, 0
    if delta is not None and kl > delta:
        assert snapshot is not None, "a trust region's update keeps a snapshot"
        kl, new_lp, scale, backtracks = _backtrack(
            snapshot, monitor, kl_raw, new_lp, delta, region.max_backtracks
        )
    monitor_s = time.perf_counter() - t1
    if delta is not None and kl > delta:
        return UpdateResult.rejected("out_of_region", step, n, kl_raw=kl_raw, monitor_s=monitor_s)
    old_lp, mask = monitor.old_lp, monitor.mask
    adv = monitor.checked_rows(advantages, n)
    assert adv is not None
    l_seq = surrogate_value(new_lp, old_lp, mask, adv, weights=monitor.checked_rows(weights, n))
    diagnostics = {}
    if flip_trials > 0:
        diagnostics = _update_diagnostics(
            old_lp, new_lp, mask, adv, delta, optim.ratio_clip, flip_trials, monitor.generator
        )
    return UpdateResult.kept(
        step,
        n,
        kl_raw=kl_raw,
        kl=kl,
        delta=delta,
        backtracks=backtracks,
        scale=scale,
        l_seq=l_seq,
        monitor_s=monitor_s,
        diagnostics=diagnostics,
    )


def update_agent(
    policy: TrainablePolicy,
    optimizer: torch.optim.Optimizer,
    messages: Sequence[MessageRecord],
    advantages: torch.Tensor,
    *,
    beta: float,
    delta: float | None,
    optim: OptimConfig,
    region: TrustRegionConfig,
    temperature: float = 1.0,
    flip_trials: int = 0,
    weights: torch.Tensor | None = None,
    behaviour: Sequence[TokenLogprobs] | None = None,
    reference: Sequence[TokenLogprobs] | None = None,
    tis_cap: float | None = None,
) -> UpdateResult:
    """Updates ``policy`` on its ``messages`` and enforces ``KL_tok <= delta`` on them: the
    policy step (:func:`policy_step`), then the trust region (:func:`enforce_trust_region`);
    a non-finite loss or KL, or a step that no backtrack brings inside the region, restores
    the parameters and the optimizer state.

    Args:
        policy: the agent's trainable policy (its parameters are changed in place).
        optimizer: the agent's optimizer over ``policy.parameters()``.
        messages: the agent's messages in the rollout batch (context, sampled tokens), or this
            process's :class:`~trainers.optim.collective.Share` of them (a sharded agent: see
            the module docstring).
        advantages: ``[N]`` the advantage of each message's episode.
        beta: KL-penalty coefficient (Eq. 17).
        delta: trust-region radius; ``None`` = no trust region (ablation).
        optim, region: the config's ``optim`` and ``trust_region`` sections.
        temperature: the temperature the messages were sampled (and are scored) at.
        flip_trials: > 0: the update's diagnostics (zeta_ratio; KL-monitor flip rates at 25%
            and 50% with this many subsamples each); 0: none.
        weights: ``[N]`` optional importance weights (stale-rollout IS ablation).
        behaviour: the log-probs of the policy that sampled ``messages`` (``score`` of them
            then), if any: the loss's ratio and KL penalty use them. A role-sharing team gives
            them when an earlier update of the stage moved the one model since the sampling
            (:meth:`trainers.learners.stage.Stage.keep_sampler_logprobs`); without them the
            first epoch's own forward pass gives them (the parameters are the sampler's). The
            trust region is measured from the parameters the update started from either way:
            it bounds this update's step.
        reference: a frozen reference policy's log-probs of the messages (``score``, same
            micro-batching); with ``optim.ref_kl_coef > 0`` the loss adds that times
            :func:`reference_kl` (TRL's ``beta``), beside the trust region.
        tis_cap: the truncated importance correction of rollouts from another engine
            (``rollout.importance_correction: tis``; see :func:`policy_step`). The trust region's
            surrogate estimate ``l_seq`` is then computed with the same corrected weights, so the
            update is judged on the trainer's distribution rather than the engine's.
    """
    if optim.epochs < 1:
        raise ValueError(f"optim.epochs must be >= 1, got {optim.epochs}")
    n = len(messages)
    if n == 0:
        return UpdateResult.no_messages()
    # One copy of the parameters and the optimizer state, and only where a revert can happen.
    params = list(policy.parameters())
    snapshot = None if delta is None else Snapshot(params, optimizer, region.snapshot_device)
    try:
        step = policy_step(
            policy, optimizer, messages, advantages, beta=beta, optim=optim,
            temperature=temperature, weights=weights, behaviour=behaviour, reference=reference,
            tis_cap=tis_cap, snapshot=snapshot,
        )  # fmt: skip
        if step.tis is not None:
            weights = step.tis if weights is None else weights * step.tis
        result = _judged(
            policy, messages, advantages, step, snapshot, delta=delta, region=region, optim=optim,
            temperature=temperature, flip_trials=flip_trials, weights=weights,
        )  # fmt: skip
    finally:
        if snapshot is not None:
            snapshot.release()
    gap, engine_kl = engine_mismatch(messages, step.behaviour)
    tis_mean = math.nan if step.tis is None else float(step.tis.mean())
    return dataclasses.replace(result, logprob_gap=gap, engine_kl=engine_kl, tis_mean=tis_mean)


def _judged(
    policy: TrainablePolicy,
    messages: Sequence[MessageRecord],
    advantages: torch.Tensor,
    step: PolicyStep,
    snapshot: Snapshot | None,
    *,
    delta: float | None,
    region: TrustRegionConfig,
    **monitor: Any,
) -> UpdateResult:
    """The policy step's result: a failed step's (:func:`_failed`), a step without a region
    kept unmeasured (unless ``region.monitor_without_region``), else the trust region's verdict
    (:func:`enforce_trust_region`; a rejected step restored)."""
    n = len(messages)
    if step.failed is not None:
        return _failed(step, n, snapshot)
    if delta is None and not region.monitor_without_region:
        return UpdateResult.kept(step, n)  # no region: skip the pass that would only log
    result = enforce_trust_region(
        policy, messages, advantages, step, snapshot, delta=delta, region=region, **monitor
    )
    if not result.accepted and snapshot is not None:
        snapshot.restore()
    return result


def _failed(step: PolicyStep, n: int, snapshot: Snapshot | None) -> UpdateResult:
    """The result of a policy step that stopped at a non-finite loss or gradient: rejected and
    restored (with a snapshot, or before any optimizer step), or, without a trust region after
    ``step.epochs_done`` steps, kept as far as it got (``nonfinite_stopped``: every step taken
    was finite, and there is no snapshot to return to)."""
    if snapshot is not None:
        snapshot.restore()
    if snapshot is not None or step.epochs_done == 0:
        return UpdateResult.rejected(step.failed or "nonfinite_loss", step, n)
    return dataclasses.replace(UpdateResult.kept(step, n), reason="nonfinite_stopped")


def _update_diagnostics(
    cur_lp: torch.Tensor,
    new_lp: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    delta: float | None,
    ratio_clip: float,
    flip_trials: int,
    generator: torch.Generator,
) -> dict[str, float]:
    """The kept parameters' ``zeta_ratio`` and, inside a trust region, how often monitoring 25%
    and 50% of the tokens would flip its accept decision (no forward pass: the log-probs of the
    monitoring pass are reused)."""
    t0 = time.perf_counter()
    ratio = torch.exp(message_log_ratio(new_lp, cur_lp, mask).clamp(-20.0, 20.0))
    adv = advantages.detach().to(ratio.dtype)
    out = {"zeta_ratio": zeta_proxies(adv, adv, ratio, eps=ratio_clip).zeta_ratio}
    t1 = time.perf_counter()
    out["zeta_s"] = t1 - t0
    if delta is not None and delta > 0:
        for q in (0.25, 0.5):
            out[f"flip_rate_{round(q * 100)}"] = monitor_flip_rate(
                cur_lp,
                new_lp,
                mask,
                delta=delta,
                fraction=q,
                n_trials=flip_trials,
                generator=generator,
            )
        out["flip_s"] = time.perf_counter() - t1
    return out
