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
"""

from __future__ import annotations

import contextlib
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
from trainers.optim.collective import SOLO, Group
from trainers.optim.kl import (
    kl_penalty,
    message_subset,
    monitor_flip_rate,
    reference_kl,
    token_kl_monitor,
)
from trainers.optim.result import PolicyStep, UpdateResult
from trainers.optim.surrogate import clipped_surrogate, message_log_ratio, surrogate_value
from trainers.optim.trust_region import Snapshot


def score(
    policy: TrainablePolicy,
    messages: Sequence[MessageRecord],
    micro_batch_size: int,
    temperature: float = 1.0,
    grad: bool = False,
    autocast: str = "none",
) -> list[TokenLogprobs]:
    """Log-probs of ``messages`` (their exact sampled tokens) under ``policy``, per micro-batch;
    ``autocast="bf16"`` runs the forward pass under bfloat16 autocast (log-probs stay float32)."""
    out = []
    with torch.set_grad_enabled(grad), _autocast(policy, autocast):
        for start in range(0, len(messages), micro_batch_size):
            chunk = messages[start : start + micro_batch_size]
            prompts = [m.context for m in chunk]
            completions: list[Any] = [list(m.token_ids) if m.token_ids else m.text for m in chunk]
            if temperature == 1.0:
                out.append(policy.logprobs(prompts, completions))
            else:
                out.append(policy.logprobs(prompts, completions, temperature=temperature))  # type: ignore[call-arg]
    return out


def _autocast(policy: Any, mode: str) -> Any:
    """bfloat16 autocast on the policy's device for ``mode == "bf16"``, else nothing."""
    if mode != "bf16":
        return contextlib.nullcontext()
    device = getattr(policy, "device", torch.device("cpu"))
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)


def _to_width(logprobs: torch.Tensor, width: int) -> torch.Tensor:
    """``[N, T]`` log-probs padded with zeros or cut to ``width`` tokens (the same messages
    scored in batches of different longest completions)."""
    if logprobs.shape[1] >= width:
        return logprobs[:, :width]
    return torch.nn.functional.pad(logprobs, (0, width - logprobs.shape[1]))


def concat_logprobs(parts: Sequence[TokenLogprobs]) -> tuple[torch.Tensor, torch.Tensor]:
    """Joins per-micro-batch results into ``[N, T]`` log-probs (detached) and mask."""
    width = max(p.logprobs.shape[1] for p in parts)
    lp = torch.cat(
        [
            torch.nn.functional.pad(p.logprobs.detach(), (0, width - p.logprobs.shape[1]))
            for p in parts
        ]
    )
    mask = torch.cat([torch.nn.functional.pad(p.mask, (0, width - p.mask.shape[1])) for p in parts])
    return lp, mask


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
    group: Group = SOLO,
) -> PolicyStep:
    """``optim.epochs`` full-batch gradient steps on the clipped message-level surrogate minus
    ``beta`` times the KL penalty (plus ``optim.ref_kl_coef`` times the KL to ``reference``),
    gradients accumulated over micro-batches and clipped to ``optim.max_grad_norm``. Stops before
    the optimizer step at a non-finite loss or gradient norm (``failed``, after
    ``epochs_done`` steps). ``snapshot`` (with a trust region) is taken just before the first
    optimizer step, once the first epoch's activations are freed.

    On a gang (``group``) each rank backpropagates its contiguous share of the messages (every
    rank runs as many micro-batches, an empty one as a zero-weighted pass, so that the sharded
    model's collectives line up); the gradients sum over the ranks to the full batch's, and the
    behaviour log-probs are gathered, so ``step`` is the same on every rank.

    ``tis_cap``: the truncated importance correction for rollouts sampled by another engine: each
    message's weight is multiplied by ``min(pi_trainer(m) / pi_engine(m), tis_cap)``, the
    trainer's behaviour probability of the message over the engine's (from
    ``MessageRecord.logprobs``; 1 for a message without them), kept in ``step.tis``."""
    n, mb = len(messages), optim.micro_batch_size
    t0 = time.perf_counter()
    mine = group.share(n)
    chunks = _aligned_chunks(mine, mb, math.ceil(n / group.size))
    # Without precomputed behaviour log-probs they come from the first epoch's own forward pass,
    # detached: the parameters do not change within an epoch (one optimizer step per epoch), so
    # they are exactly the behaviour log-probs, and a separate scoring pass is saved.
    given = _joined(behaviour) if behaviour is not None else None
    ref_rows = _joined(reference) if reference is not None else None
    old: list[TokenLogprobs] = []
    step = PolicyStep(old, 0)
    params = list(policy.parameters())
    use_ref = ref_rows is not None and optim.ref_kl_coef > 0
    tis_parts: list[torch.Tensor] = []
    for epoch in range(optim.epochs):
        optimizer.zero_grad(set_to_none=True)
        clipped = ref_sum = 0.0
        for i, rows in enumerate(chunks):
            # an empty share still runs a pass (of one message, weighted 0): collectives line up
            chunk = [messages[r] for r in rows] or [messages[mine.start if mine else 0]]
            new = score(policy, chunk, mb, temperature, grad=True, autocast=optim.autocast)[0]
            if epoch == 0:
                old.append(_behaviour(new, given, rows))
                step.n_tokens += int(old[i].mask.sum()) if rows else 0
            cur = old[i] if rows else TokenLogprobs(new.logprobs.detach(), new.mask, new.token_ids)
            index = torch.tensor(list(rows) or [0], dtype=torch.long)
            adv = advantages[index]
            w = weights[index] if weights is not None else None
            if tis_cap is not None:
                if epoch == 0:
                    tis_parts.append(truncated_is_weights(chunk, cur, tis_cap)[: len(rows)])
                tis = tis_parts[i] if rows else torch.ones(1)
                w = tis if w is None else w * tis
            sur = clipped_surrogate(
                new.logprobs, cur.logprobs, cur.mask, adv, eps=optim.ratio_clip, weights=w
            )
            loss = sur.loss + beta * kl_penalty(cur.logprobs, new.logprobs, cur.mask)
            if use_ref:
                assert ref_rows is not None
                ref_lp = _to_width(ref_rows.logprobs[index], new.logprobs.shape[1])
                ref_term = reference_kl(ref_lp, new.logprobs, cur.mask)
                loss = loss + optim.ref_kl_coef * ref_term
                ref_sum += float(ref_term.detach()) * len(rows) / n
            # Accumulate the full-batch mean: micro-batching-invariant. On a gang the sharded
            # model averages the ranks' gradients, so each rank's share is scaled by their count.
            loss = loss * (len(rows) / n * group.size)
            if group.any(not bool(torch.isfinite(loss))):
                step.failed, step.seconds = "nonfinite_loss", time.perf_counter() - t0
                return step
            loss.backward()
            clipped += sur.clip_frac * len(rows) / n
        norm = _full(torch.nn.utils.clip_grad_norm_(params, optim.max_grad_norm))
        if not math.isfinite(float(norm)):  # checked before the step: nothing to undo
            step.failed, step.seconds = "nonfinite_grad", time.perf_counter() - t0
            return step
        if snapshot is not None:
            snapshot.take()
        optimizer.step()
        step.epochs_done = epoch + 1
        if epoch == 0:
            step.behaviour = _gathered(old, group)
            step.n_tokens = int(group.all_sum([float(step.n_tokens)])[0])
            if tis_parts:
                step.tis = group.gather_rows(torch.cat(tis_parts))
        clipped, ref_sum = group.all_sum([clipped, ref_sum])
        step.clip_frac = clipped
        if use_ref:
            step.ref_kl = ref_sum
    step.seconds = time.perf_counter() - t0
    return step


def _aligned_chunks(mine: range, mb: int, most: int) -> list[range]:
    """This rank's micro-batches of its share ``mine``, padded with empty ones to as many as the
    rank with the largest share (``most`` items) runs."""
    count = max(math.ceil(most / mb), 1)
    return [
        range(r, min(r + mb, mine.stop)) if r < mine.stop else range(0)
        for r in range(mine.start, mine.start + count * mb, mb)
    ]


def _behaviour(new: TokenLogprobs, given: TokenLogprobs | None, rows: range) -> TokenLogprobs:
    """A micro-batch's behaviour log-probs: the given ones' rows (at this pass's width), else the
    pass's own, detached."""
    if given is None:
        return TokenLogprobs(new.logprobs.detach(), new.mask, new.token_ids)
    index = torch.tensor(list(rows), dtype=torch.long)
    width = new.logprobs.shape[1]
    mask = _to_width(given.mask[index].float(), width).bool()
    return TokenLogprobs(_to_width(given.logprobs[index], width), mask, new.token_ids)


def _joined(parts: Sequence[TokenLogprobs]) -> TokenLogprobs:
    """Log-probs given per micro-batch (over every message) as one ``[N, T]`` block."""
    lp, mask = concat_logprobs(parts)
    return TokenLogprobs(lp, mask, _joined_ids(parts, lp.shape[1]))


def _joined_ids(parts: Sequence[TokenLogprobs], width: int) -> torch.Tensor:
    return torch.cat([_to_width(p.token_ids, width) for p in parts])


def _gathered(parts: list[TokenLogprobs], group: Group) -> list[TokenLogprobs]:
    """This rank's micro-batches of behaviour log-probs as every rank's, in message order (one
    ``[N, T]`` block on a gang; the micro-batches themselves on one process)."""
    if group.size == 1:
        return parts
    kept = [p for p in parts if p.logprobs.shape[0]]
    if kept:
        lp, mask = concat_logprobs(kept)
        ids = _joined_ids(kept, lp.shape[1])
    else:  # a rank with no message
        lp, mask = torch.zeros(0, 1), torch.zeros(0, 1, dtype=torch.bool)
        ids = torch.zeros(0, 1, dtype=torch.long)
    lp, mask, ids = group.gather_rows(lp), group.gather_rows(mask), group.gather_rows(ids)
    return [TokenLogprobs(lp, mask, ids)]


def _full(norm: torch.Tensor) -> torch.Tensor:
    """A gradient norm as a plain tensor (a sharded model's is a replicated DTensor)."""
    full = getattr(norm, "full_tensor", None)
    return full() if callable(full) else norm


def scored_rows(
    policy: TrainablePolicy,
    messages: Sequence[MessageRecord],
    micro_batch_size: int,
    temperature: float = 1.0,
    group: Group = SOLO,
    autocast: str = "none",
) -> torch.Tensor:
    """``[N, T]`` log-probs of ``messages`` (no gradient): on a gang each rank scores its share
    (in as many passes as every rank, so that the sharded model's collectives line up) and the
    rows are gathered, so every rank holds all of them."""
    mine = group.share(len(messages))
    if group.size == 1:
        return concat_logprobs(
            score(policy, messages, micro_batch_size, temperature, autocast=autocast)
        )[0]
    parts = []
    most = math.ceil(len(messages) / group.size)
    for rows in _aligned_chunks(mine, micro_batch_size, most):
        chunk = [messages[r] for r in rows] or [messages[0]]
        lp = score(policy, chunk, micro_batch_size, temperature, autocast=autocast)[0]
        if rows:
            parts.append(lp)
    local = concat_logprobs(parts)[0] if parts else torch.zeros(0, 1)
    return group.gather_rows(local)


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
        group: Group = SOLO,
    ) -> None:
        self.policy, self.region, self.optim, self.temperature = policy, region, optim, temperature
        self.group = group
        self.old_lp, self.mask = concat_logprobs(step.behaviour)
        self.generator = torch.Generator().manual_seed(MONITOR_SEED)
        n = len(messages)
        frac = region.monitor_messages
        self.subset = None if frac >= 1 else message_subset(n, frac, self.generator)
        self.checked = messages if self.subset is None else [messages[int(i)] for i in self.subset]
        if self.subset is not None:
            self.old_lp, self.mask = self.old_lp[self.subset], self.mask[self.subset]

    def __call__(self) -> tuple[float, torch.Tensor]:
        """The monitored KL and the checked messages' new log-probs."""
        o = self.optim
        new_lp = scored_rows(
            self.policy, self.checked, o.micro_batch_size, self.temperature, self.group, o.autocast
        )
        new_lp = _to_width(new_lp, self.old_lp.shape[1])
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
    group: Group = SOLO,
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
    monitor = _Monitor(policy, messages, step, region, optim, temperature, group)
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


def joined_logprobs(new: Any, old: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two scorings of the same messages (lists of ``TokenLogprobs``) as ``[N, T]`` tensors:
    the new log-probs, the old ones and the mask."""
    new_lp, mask = concat_logprobs(new)
    old_lp, _ = concat_logprobs(old)
    return new_lp, old_lp, mask


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
    group: Group = SOLO,
) -> UpdateResult:
    """Updates ``policy`` on its ``messages`` and enforces ``KL_tok <= delta`` on them: the
    policy step (:func:`policy_step`), then the trust region (:func:`enforce_trust_region`);
    a non-finite loss or KL, or a step that no backtrack brings inside the region, restores
    the parameters and the optimizer state.

    Args:
        policy: the agent's trainable policy (its parameters are changed in place).
        optimizer: the agent's optimizer over ``policy.parameters()``.
        messages: the agent's messages in the rollout batch (context, sampled tokens).
        advantages: ``[N]`` the advantage of each message's episode.
        beta: KL-penalty coefficient (Eq. 17).
        delta: trust-region radius; ``None`` = no trust region (ablation).
        optim: the config's ``optim`` section (epochs, micro-batching, clipping, autocast,
            ``ref_kl_coef``).
        region: the config's ``trust_region`` section (backtracking, monitoring).
        temperature: the temperature the messages were sampled (and are scored) at.
        flip_trials: > 0: the update's diagnostics (zeta_ratio; KL-monitor flip rates at 25%
            and 50% with this many subsamples each); 0: none.
        weights: ``[N]`` optional importance weights (stale-rollout IS ablation).
        behaviour: precomputed behaviour log-probs (``score`` of the same messages), if any.
        reference: a frozen reference policy's log-probs of the messages (``score``, same
            micro-batching); with ``optim.ref_kl_coef > 0`` the loss adds that times
            :func:`reference_kl` (TRL's ``beta``), beside the trust region.
        tis_cap: the truncated importance correction of rollouts from another engine
            (``rollout.importance_correction: tis``; see :func:`policy_step`). The trust region's
            surrogate estimate ``l_seq`` is then computed with the same corrected weights, so the
            update is judged on the trainer's distribution rather than the engine's.
        group: the ranks of a sharded agent (:mod:`trainers.optim.collective`; default one
            process). Every rank calls this with the same arguments; each backpropagates and
            scores its share of the messages, the log-probs the trust region reads are gathered,
            and the snapshot, backtracks and revert act on each rank's own shards, so every rank
            returns the same result.
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
            tis_cap=tis_cap, snapshot=snapshot, group=group,
        )  # fmt: skip
        gap, engine_kl = engine_mismatch(messages, step.behaviour)
        tis_mean = math.nan
        if step.tis is not None:
            tis_mean = float(step.tis.mean())
            weights = step.tis if weights is None else weights * step.tis
        if step.failed is not None:
            result = _failed(step, n, snapshot)
        elif delta is None and not region.monitor_without_region:
            # No region to enforce: the post-update scoring pass would only be logged; skip it.
            result = UpdateResult.kept(step, n)
        else:
            result = enforce_trust_region(
                policy, messages, advantages, step, snapshot, delta=delta, region=region,
                optim=optim, temperature=temperature, flip_trials=flip_trials, weights=weights,
                group=group,
            )  # fmt: skip
            if not result.accepted and snapshot is not None:
                snapshot.restore()
    finally:
        if snapshot is not None:
            snapshot.release()
    return dataclasses.replace(result, logprob_gap=gap, engine_kl=engine_kl, tis_mean=tis_mean)


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


def engine_mismatch(
    messages: Sequence[MessageRecord], behaviour: Sequence[TokenLogprobs]
) -> tuple[float, float]:
    """How far the sampler's log-probs of the messages' tokens (``MessageRecord.logprobs``, a
    rollout engine's) are from the trainer's own before the update (``behaviour``, the first
    epoch's detached log-probs, in micro-batches over ``messages`` in order).

    Returns ``(logprob_gap, engine_kl)``: ``logprob_gap`` is the mean over tokens of ``|log pi_engine - log pi_trainer|``, and
    ``engine_kl``, the k3 estimate of KL(pi_engine || pi_trainer) on the engine's samples
    (``mean(exp(r) - 1 - r)``, ``r = log pi_trainer - log pi_engine``); both NaN when no
    message carries engine log-probs."""
    nan = (math.nan, math.nan)
    if not messages or not any(m.logprobs for m in messages):
        return nan
    trainer_rows = [row for b in behaviour for row in _rows(b)]
    gaps = [r for m, row in zip(messages, trainer_rows) if (r := _log_ratio(m, row)) is not None]
    if not gaps:
        return nan
    r = torch.cat(gaps)
    return float(r.abs().mean()), float((torch.exp(r.clamp(max=20.0)) - 1 - r).mean())


def truncated_is_weights(
    messages: Sequence[MessageRecord], behaviour: TokenLogprobs, cap: float
) -> torch.Tensor:
    """Per message, ``min(exp(sum_t log pi_trainer - log pi_engine), cap)``: the truncated
    importance weight that corrects a sampler's distribution to the trainer's (veRL's and TRL's
    TIS, at the message level of this surrogate); 1 for a message without engine log-probs."""
    out = torch.ones(len(messages), dtype=torch.float32)
    for b, (message, row) in enumerate(zip(messages, _rows(behaviour))):
        r = _log_ratio(message, row)
        if r is not None:
            out[b] = min(math.exp(min(float(r.sum()), 50.0)), cap)
    return out


def _log_ratio(message: MessageRecord, trainer_lp: torch.Tensor) -> torch.Tensor | None:
    """Per token, ``log pi_trainer - log pi_engine`` of one message (float64), over the tokens
    both have; ``None`` when the message carries no engine log-probs."""
    k = min(len(message.logprobs), int(trainer_lp.numel()))
    if not k:
        return None
    engine = torch.tensor(message.logprobs[:k], dtype=torch.float64)
    return trainer_lp[:k].double() - engine


def _rows(lp: TokenLogprobs) -> list[torch.Tensor]:
    """Each completion's log-probs of its real tokens (the mask's ``True`` entries)."""
    return [lp.logprobs[b][lp.mask[b]].detach() for b in range(lp.logprobs.shape[0])]


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
