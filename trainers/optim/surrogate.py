"""Message-level ratios and the clipped surrogate (paper Sec. 4, Eq. (17); App. F.6).

A message ``m`` is one row of a ``[N, T]`` token batch; ``mask`` (True = the token counts) marks its
tokens. The ratio is message-level (a product over the message's tokens, App. F.6)::

    log w(m; s) = sum_u [log pi_new(x_u | s, x_<u) - log pi_cur(x_u | s, x_<u)]

computed in log space. ``log w`` is clamped to ``[-max_log_ratio, max_log_ratio]`` before ``exp``
so that a far-off message cannot produce ``inf``/``NaN``; beyond the clamp the gradient through
``w`` is zero (such a message is far outside any trust region the trainer accepts).
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class SurrogateOut(NamedTuple):
    """Output of :func:`clipped_surrogate`.

    Attributes:
        loss: scalar to minimise, ``-objective``.
        objective: scalar ``mean_m min(w A, clip(w, 1-eps, 1+eps) A)`` (weighted mean if weights).
        ratio: ``[N]`` message-level ratios ``w`` (detached).
        clip_frac: fraction of messages whose clipped term is strictly the smaller one, i.e. where
            ratio clipping cut the gradient (this implies ``w`` outside ``[1-eps, 1+eps]``).
    """

    loss: torch.Tensor
    objective: torch.Tensor
    ratio: torch.Tensor
    clip_frac: float


def check_token_batch(mask: torch.Tensor, **logps: torch.Tensor) -> None:
    """Validate ``[N, T]`` per-token log-prob tensors against their bool ``mask``.

    Raises:
        ValueError: a tensor is not 2-D, shapes differ, or ``mask`` is not bool.
    """
    if mask.dtype != torch.bool:
        raise ValueError(
            f"mask must be a bool tensor (True = the token counts); got dtype {mask.dtype}. "
            "Convert it with mask.bool()."
        )
    if mask.dim() != 2:
        raise ValueError(f"mask must be 2-D [N, T]; got shape {tuple(mask.shape)}.")
    for name, t in logps.items():
        if t.shape != mask.shape:
            raise ValueError(
                f"{name} must have the mask's shape {tuple(mask.shape)} [N, T]; got "
                f"{tuple(t.shape)}. Pass per-token log-probs of the same padded batch."
            )


def message_log_ratio(
    logp_new: torch.Tensor, logp_old: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Per-message log ratio ``log w = sum_u (logp_new - logp_old)`` over counted tokens.

    Args:
        logp_new: ``[N, T]`` per-token log-probs under the policy being updated (grad flows).
        logp_old: ``[N, T]`` per-token log-probs under the behaviour policy ``pi_cur``.
        mask: ``[N, T]`` bool, True = the token counts. Padded values are never read.

    Returns:
        ``[N]`` log ratios (unclamped), in at least float32 (half-precision inputs are upcast).
    """
    check_token_batch(mask, logp_new=logp_new, logp_old=logp_old)
    dtype = torch.promote_types(logp_new.dtype, torch.float32)  # bf16 sums lose the ratio
    diff = logp_new.to(dtype) - logp_old.to(dtype)
    return torch.where(mask, diff, torch.zeros_like(diff)).sum(dim=-1)


def _weighted_mean(values: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    if values.numel() == 0:
        return values.sum() * 0.0
    if weights is None:
        return values.mean()
    return (weights * values).sum() / weights.sum()


def _check_advantages(advantages: torch.Tensor, n: int) -> None:
    """Raises ValueError unless ``advantages`` is ``[N]``, one per message."""
    if advantages.shape != (n,):
        raise ValueError(
            f"advantages must be [N] = ({n},), one per message (row of mask); got "
            f"{tuple(advantages.shape)}. Broadcast each rollout's advantage to its messages."
        )


def _prepare(
    logp_new: torch.Tensor,
    logp_old: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor | None,
    max_log_ratio: float,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Validate inputs; return the clamped ``[N]`` ratio ``w`` and detached weights."""
    check_token_batch(mask, logp_new=logp_new, logp_old=logp_old)
    n = mask.shape[0]
    _check_advantages(advantages, n)
    if weights is not None:
        weights = weights.detach()
        if weights.shape != (n,):
            raise ValueError(f"weights must be [N] = ({n},); got {tuple(weights.shape)}.")
        if n and (bool((weights < 0).any()) or not float(weights.sum()) > 0):
            raise ValueError(
                "weights must be >= 0 with a positive sum (self-normalised importance "
                f"weights); got min {float(weights.min())}, sum {float(weights.sum())}."
            )
    if not max_log_ratio > 0:
        raise ValueError(f"max_log_ratio must be > 0; got {max_log_ratio}.")
    log_w = message_log_ratio(logp_new, logp_old.detach(), mask)
    return torch.exp(log_w.clamp(-max_log_ratio, max_log_ratio)), weights


def clipped_surrogate(
    logp_new: torch.Tensor,
    logp_old: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    eps: float = 0.2,
    weights: torch.Tensor | None = None,
    max_log_ratio: float = 20.0,
) -> SurrogateOut:
    """PPO-style clipped surrogate with message-level ratios, Eq. (17) without the KL term.

    ``objective = sum_m v_m min(w_m A_m, clip(w_m, 1-eps, 1+eps) A_m) / sum_m v_m`` with
    ``v_m = 1`` unless ``weights`` are given (stale-rollout importance weighting ablation).

    Args:
        logp_new: ``[N, T]`` per-token log-probs under the updated policy (grad flows here).
        logp_old: ``[N, T]`` per-token log-probs under the behaviour policy (detached).
        mask: ``[N, T]`` bool, True = the token counts.
        advantages: ``[N]`` per-message advantages ``A_tilde`` (treated as constants).
        eps: ratio-clip half-width ``epsilon_w``.
        weights: optional ``[N]`` non-negative per-message weights (self-normalised mean).
        max_log_ratio: clamp on ``|log w|`` before ``exp`` (numerical safety).

    Returns:
        :class:`SurrogateOut`. With ``N = 0`` the objective is 0 with a zero gradient.
    """
    if not eps > 0:
        raise ValueError(f"eps must be > 0 (ratio-clip half-width); got {eps}. Try 0.2.")
    w, weights = _prepare(logp_new, logp_old, mask, advantages, weights, max_log_ratio)
    adv = advantages.detach().to(w.dtype)
    unclipped = w * adv
    clipped = w.clamp(1.0 - eps, 1.0 + eps) * adv
    objective = _weighted_mean(torch.minimum(unclipped, clipped), weights)
    n = w.numel()
    clip_frac = float((clipped < unclipped).sum().item()) / n if n else 0.0
    return SurrogateOut(-objective, objective, w.detach(), clip_frac)


def surrogate_value(
    logp_new: torch.Tensor,
    logp_old: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    weights: torch.Tensor | None = None,
    max_log_ratio: float = 20.0,
) -> float:
    """Unclipped surrogate estimate ``L_hat = mean_m w_m A_m`` (Sec. 3.3, App. G.1).

    The same estimator gives ``L_hat^seq`` (on fresh intermediate rollouts) and ``L_hat^stale``
    (on stage-start rollouts). It omits the paper's ``1/(1-gamma)`` factor. Arguments as in
    :func:`clipped_surrogate`; no gradient. Returns 0.0 for ``N = 0``.
    """
    with torch.no_grad():
        w, weights = _prepare(logp_new, logp_old, mask, advantages, weights, max_log_ratio)
        return float(_weighted_mean(w * advantages.to(w.dtype), weights).item())


class TokenSurrogateOut(NamedTuple):
    """Output of :func:`token_clipped_surrogate`.

    Attributes:
        loss_sum: scalar, ``-sum`` over counted tokens of the clipped per-token objective (divide
            by the batch's token count for verl's ``token-mean``).
        tokens: counted tokens.
        clipped_tokens: tokens whose clipped term (or the dual clip) cut the gradient.
    """

    loss_sum: torch.Tensor
    tokens: int
    clipped_tokens: int


def token_clipped_surrogate(
    logp_new: torch.Tensor,
    logp_old: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    eps: float = 0.2,
    dual_clip: float | None = None,
    weights: torch.Tensor | None = None,
    max_log_ratio: float = 20.0,
) -> TokenSurrogateOut:
    """PPO's clipped surrogate with a ratio per token, as verl computes it for GRPO (PettingLLMs'
    AT-GRPO): per counted token ``r = exp(logp_new - logp_old)`` (the log ratio clamped to
    ``[-max_log_ratio, max_log_ratio]``) and ``loss = max(-A r, -A clip(r, 1-eps, 1+eps))``; with
    ``dual_clip = c`` (verl's ``clip_ratio_c``, dual-clip PPO) a token of negative advantage has its
    loss capped at ``-A c``. Returns the SUM over counted tokens (each token's loss times its
    message's weight, if ``weights``): the caller divides by the batch's token count, so that
    micro-batches add up to verl's ``token-mean``.

    Args:
        logp_new, logp_old, mask, advantages, weights, max_log_ratio: as in
            :func:`clipped_surrogate` (``advantages`` per message, broadcast to its tokens).
        eps: the ratio clip's half-width.
        dual_clip: ``c > 1``, or ``None`` for no dual clip.
    """
    if not eps > 0:
        raise ValueError(f"eps must be > 0 (ratio-clip half-width); got {eps}. Try 0.2.")
    if dual_clip is not None and not dual_clip > 1:
        raise ValueError(f"dual_clip must be > 1 (verl's clip_ratio_c, e.g. 3); got {dual_clip}")
    check_token_batch(mask, logp_new=logp_new, logp_old=logp_old)
    _check_advantages(advantages, mask.shape[0])
    dtype = torch.promote_types(logp_new.dtype, torch.float32)
    log_r = (logp_new.to(dtype) - logp_old.detach().to(dtype)).clamp(-max_log_ratio, max_log_ratio)
    ratio = torch.exp(log_r)
    adv = advantages.detach().to(dtype).unsqueeze(-1).expand_as(ratio)
    loss1 = -adv * ratio
    loss2 = -adv * ratio.clamp(1.0 - eps, 1.0 + eps)
    loss = torch.maximum(loss1, loss2)
    cut = loss2 > loss1
    if dual_clip is not None:
        capped = torch.minimum(loss, -adv * dual_clip)
        cut = cut | ((adv < 0) & (capped < loss))
        loss = torch.where(adv < 0, capped, loss)
    if weights is not None:
        loss = loss * weights.detach().to(dtype).unsqueeze(-1)
    loss_sum = torch.where(mask, loss, torch.zeros_like(loss)).sum()
    return TokenSurrogateOut(loss_sum, int(mask.sum()), int((cut & mask).sum()))
