"""Token-decomposed reverse-KL monitor and penalty (paper Sec. 3.2, Eq. (18); App. B.2, G.4).

The trust region constrains ``KL(pi_cur || pi_new)`` on the current team's occupancy. By the
autoregressive chain rule (Lemma B.3) the message-level reverse KL is the expected sum of token
log-ratios under ``pi_cur``, so on rollouts sampled from ``pi_cur`` Eq. (18)::

    KL_tok_hat = (1/|M|) sum_{m in M} sum_u log(pi_cur(x_u | s, x_<u) / pi_new(x_u | s, x_<u))

is an unbiased estimate. Tensors are ``[N, T]`` (one row per message); ``mask`` True = counts.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from trainers.optim.surrogate import check_token_batch


class KLEstimate(NamedTuple):
    """Output of :func:`token_kl_monitor`.

    Attributes:
        value: Eq. (18), the mean over messages of the per-message token sums (0.0 for ``N = 0``).
        per_message: ``[N]`` per-message token sums (rescaled by ``1/subsample``).
        n_messages: ``N``, every row counts as a message (an empty one contributes 0).
        n_tokens: counted tokens actually used (after subsampling).
    """

    value: float
    per_message: torch.Tensor
    n_messages: int
    n_tokens: int


def _token_log_ratio(
    logp_cur: torch.Tensor, logp_new: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """``[N, T]`` ``log pi_cur - log pi_new`` at counted tokens, 0 elsewhere (no grad)."""
    check_token_batch(mask, logp_cur=logp_cur, logp_new=logp_new)
    r = logp_cur.detach().to(torch.float64) - logp_new.detach().to(torch.float64)
    return torch.where(mask, r, torch.zeros_like(r))


def _check_fraction(name: str, value: float) -> None:
    if not 0 < value <= 1:
        raise ValueError(
            f"{name} must be in (0, 1] (fraction of token positions kept); got {value}."
        )


def _subsampled_value(
    r: torch.Tensor, mask: torch.Tensor, q: float, generator: torch.Generator | None
) -> tuple[torch.Tensor, int]:
    """Bernoulli(q) keep per counted token, reweighted by ``1/q``: ``([N] sums, kept tokens)``."""
    if q < 1:
        keep = (torch.rand(mask.shape, generator=generator, device=mask.device) < q) & mask
        return torch.where(keep, r, torch.zeros_like(r)).sum(-1) / q, int(keep.sum().item())
    return r.sum(-1), int(mask.sum().item())


def token_kl_monitor(
    logp_cur: torch.Tensor,
    logp_new: torch.Tensor,
    mask: torch.Tensor,
    *,
    subsample: float = 1.0,
    generator: torch.Generator | None = None,
) -> KLEstimate:
    """The sampled token-sum reverse-KL monitor of Eq. (18) (no gradient).

    Args:
        logp_cur: ``[N, T]`` per-token log-probs of the sampled tokens under ``pi_cur`` (behaviour).
        logp_new: ``[N, T]`` per-token log-probs of the same tokens under ``pi_new``.
        mask: ``[N, T]`` bool, True = the token counts.
        subsample: keep each counted token with this probability and rescale by ``1/subsample``
            (unbiased; App. G.4). 1.0 = use every token.
        generator: RNG for the subsampling (on the mask's device).

    Returns:
        :class:`KLEstimate` (``per_message`` is float64).
    """
    _check_fraction("subsample", subsample)
    r = _token_log_ratio(logp_cur, logp_new, mask)
    per_message, n_tokens = _subsampled_value(r, mask, subsample, generator)
    n = per_message.numel()
    value = float(per_message.mean().item()) if n else 0.0
    return KLEstimate(value, per_message, n, n_tokens)


def kl_penalty(logp_cur: torch.Tensor, logp_new: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Differentiable, non-negative token-KL penalty for the loss (the ``beta KL_tok`` of Eq. (17)).

    Per counted token ``k3 = exp(r) - 1 - r`` with ``r = logp_new - logp_cur`` (Schulman's k3: an
    unbiased, always non-negative estimate of ``KL(pi_cur || pi_new)`` under ``pi_cur`` samples),
    summed per message and averaged over messages. ``r`` is clamped to ``[-20, 20]`` so ``exp``
    stays finite; the gradient vanishes beyond the clamp.

    Args:
        logp_cur: ``[N, T]`` behaviour log-probs (detached).
        logp_new: ``[N, T]`` log-probs under the policy being updated (grad flows here).
        mask: ``[N, T]`` bool, True = the token counts.

    Returns:
        Scalar tensor ``>= 0``; 0 (with a zero gradient) when ``N = 0``.
    """
    check_token_batch(mask, logp_cur=logp_cur, logp_new=logp_new)
    dtype = torch.promote_types(logp_new.dtype, torch.float32)
    return _k3_mean(logp_new.to(dtype) - logp_cur.detach().to(dtype), mask)


def reference_kl(
    logp_ref: torch.Tensor, logp_new: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Differentiable k3 estimate of ``KL(pi_new || pi_ref)`` on messages sampled from (about)
    ``pi_new``: per counted token ``exp(d) - 1 - d`` with ``d = log pi_ref - log pi_new`` (TRL's
    estimator), summed per message and averaged over messages. ``d`` is clamped to ``[-20, 20]``.
    """
    dtype = torch.promote_types(logp_new.dtype, torch.float32)
    return _k3_mean(logp_ref.detach().to(dtype) - logp_new.to(dtype), mask)


def _k3_mean(r: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Schulman's k3, ``exp(r) - 1 - r`` per counted token (``r`` clamped to ``[-20, 20]``),
    summed per message and averaged over messages; 0 with a zero gradient for no messages."""
    r = torch.where(mask, r, torch.zeros_like(r)).clamp(-20.0, 20.0)
    per_message = (torch.expm1(r) - r).sum(-1)
    return per_message.mean() if per_message.numel() else per_message.sum() * 0.0


def message_subset(n: int, fraction: float, generator: torch.Generator | None) -> torch.Tensor:
    """``round(fraction * n)`` (at least 1) message indices drawn uniformly without replacement,
    sorted: the mean of the per-message sums over them is an unbiased estimate of Eq. (18)."""
    _check_fraction("fraction", fraction)
    k = min(n, max(1, round(fraction * n)))
    return torch.randperm(n, generator=generator)[:k].sort().values


def monitor_flip_rate(
    logp_cur: torch.Tensor,
    logp_new: torch.Tensor,
    mask: torch.Tensor,
    *,
    delta: float,
    fraction: float,
    n_trials: int = 200,
    generator: torch.Generator | None = None,
    unit: str = "token",
) -> float:
    """How often subsampling flips the trust-region decision (App. G.4).

    Returns ``Pr_q[1{KL_hat <= delta} != 1{KL_hat^(q) <= delta}]`` estimated over ``n_trials``
    subsamples of one batch: ``unit="token"`` keeps each counted token with probability
    ``fraction`` (reweighted by ``1/fraction``; it saves no forward pass), ``unit="message"``
    averages a uniform ``fraction`` of the messages (:func:`message_subset`; the KL check then
    scores only those, so it costs that fraction of a forward pass). The paper reports it
    conditioned on ``KL_hat in [0.8 delta, 1.2 delta]``; the caller applies that filter across
    updates.

    Args:
        logp_cur, logp_new, mask: as in :func:`token_kl_monitor`.
        delta: trust-region radius ``delta_i > 0``.
        fraction: kept fraction ``q`` in ``(0, 1]`` (the paper uses 0.25 and 0.5).
        n_trials: number of subsamples (>= 1).
        generator: RNG for the subsampling.
        unit: ``"token"`` or ``"message"``.

    Returns:
        Flip rate in ``[0, 1]``; 0.0 when ``fraction == 1``.
    """
    if unit not in ("token", "message"):
        raise ValueError(f"unit must be 'token' or 'message'; got {unit!r}.")
    if not delta > 0:
        raise ValueError(f"delta must be > 0 (the trust-region radius); got {delta}.")
    _check_fraction("fraction", fraction)
    if n_trials < 1:
        raise ValueError(f"n_trials must be >= 1; got {n_trials}.")
    r = _token_log_ratio(logp_cur, logp_new, mask)
    if r.shape[0] == 0:
        return 0.0
    per_message = r.sum(-1)
    inside = bool(per_message.mean() <= delta)
    flips = 0
    for _ in range(n_trials):
        if unit == "message":
            sums = per_message[message_subset(len(per_message), fraction, generator)]
        else:
            sums, _ = _subsampled_value(r, mask, fraction, generator)
        flips += int(bool(sums.mean() <= delta) != inside)
    return flips / n_trials


def vocab_kl(logp_p: torch.Tensor, logp_q: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-message token-sum ``KL(p || q)`` over the full vocabulary (App. D.1's autoregressive
    form): ``sum_u sum_v p(v | s, x_<u) (log p(v | s, x_<u) - log q(v | s, x_<u))`` at the counted
    positions ``u`` of each message. The exact per-position expectation of the sampled
    log-ratio that Eq. (18) sums, so it has no sampling noise over the next token.

    Differentiable in both arguments (a distillation loss detaches the teacher's).

    Args:
        logp_p: ``[N, T, V]`` log-probabilities (a log-softmax) of ``p`` at each position.
        logp_q: ``[N, T, V]`` log-probabilities of ``q`` at the same positions.
        mask: ``[N, T]`` bool, True = the position counts.

    Returns:
        ``[N]`` per-message sums (float32 or wider).
    """
    if logp_p.shape != logp_q.shape or logp_p.shape[:2] != mask.shape:
        raise ValueError(
            f"vocab_kl: logp_p {tuple(logp_p.shape)} and logp_q {tuple(logp_q.shape)} must be "
            f"[N, T, V] with mask [N, T], got mask {tuple(mask.shape)}"
        )
    dtype = torch.promote_types(logp_p.dtype, torch.float32)
    p, q = logp_p.to(dtype), logp_q.to(dtype)
    terms = p.exp() * (p - q)  # a token p gives probability 0 contributes 0 (not 0 * inf)
    per_position = torch.where(torch.isneginf(p), torch.zeros_like(terms), terms).sum(-1)
    return torch.where(mask, per_position, torch.zeros_like(per_position)).sum(-1)
