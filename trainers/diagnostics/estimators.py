"""Training diagnostics: staleness, zeta proxies, occupancy drift, scaling fits, IS weights.

Paper Sec. 5.3-5.6 and App. G.1 (Delta_stale, D_occ, power-law exponents), G.3 (zeta proxies) and
G.5 (importance-weighting ablation statistics).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Hashable, Sequence
from typing import NamedTuple

import numpy as np
import torch


def stale_gap(l_stale: float, l_seq: float) -> float:
    """``Gap_i = |L_hat_i^stale - L_hat_i^seq|``; ``Delta_stale = sum_i Gap_i`` (App. G.1)."""
    return abs(l_stale - l_seq)


class ZetaProxies(NamedTuple):
    """The App. G.3 proxy ``zeta_hat_i`` and its components (means over ``b, g``)."""

    zeta_clip: float
    zeta_ratio: float
    zeta_norm: float
    zeta_proxy: float


def _mean(x: torch.Tensor) -> float:
    return float(x.double().mean().item()) if x.numel() else 0.0


def zeta_proxies(
    unclipped_adv: torch.Tensor,
    clipped_adv: torch.Tensor,
    ratio: torch.Tensor,
    *,
    eps: float = 0.2,
    centred_adv: torch.Tensor | None = None,
    message_adv: torch.Tensor | None = None,
) -> ZetaProxies:
    """Per-update proxy for the estimation-error term ``zeta_i`` (App. G.3)::

        zeta_clip  = (1/|B|G) sum_{b,g} |a_bg - A_tilde_bg|
        zeta_ratio = (1/|B|G) sum_{b,g} |A_tilde_bg| |w_bg - clip(w_bg, 1-eps, 1+eps)|
        zeta_norm  = (1/|B|G) sum_{b,g} |a_bg - c_bg|,   c_bg = R_bg - mu_b
        zeta_proxy = zeta_clip + zeta_ratio + zeta_norm

    The paper names ``zeta_norm`` (standardisation by ``sigma_hat``, one of the effects App. E.2
    absorbs into ``zeta``) without a formula. Ours is the mean change standardisation makes to the
    centred return advantage ``c`` (whose mean is ``(1 - 1/G) A_ret``, Lemma E.1). By the triangle
    inequality ``|A_tilde - c| <= |a - A_tilde| + |a - c|``, so ``zeta_clip + zeta_norm`` bounds
    the mean gap between the advantage the surrogate uses and the return-scale one.

    Args:
        unclipped_adv: ``[B, G]`` standardised advantages ``a`` before clipping.
        clipped_adv: ``[B, G]`` advantages ``A_tilde`` after clipping.
        ratio: ratios ``w``, shaped like ``message_adv`` (default: like ``clipped_adv``).
        eps: ratio-clip half-width ``epsilon_w``.
        centred_adv: ``[B, G]`` centred rewards ``c = R - mu``; ``None`` gives ``zeta_norm = 0``
            (also its value when advantages are not standardised).
        message_adv: advantages aligned with ``ratio`` (e.g. ``[N]`` per message) when the
            ratios are per message rather than per rollout; defaults to ``clipped_adv``.

    Raises:
        ValueError: shape mismatches or ``eps <= 0``.
    """
    if not eps > 0:
        raise ValueError(f"eps must be > 0 (ratio-clip half-width); got {eps}.")
    adv_for_ratio = clipped_adv if message_adv is None else message_adv
    pairs = [
        ("clipped_adv", clipped_adv, "unclipped_adv", unclipped_adv),
        (
            "ratio",
            ratio,
            "message_adv" if message_adv is not None else "clipped_adv",
            adv_for_ratio,
        ),
    ]
    if centred_adv is not None:
        pairs.append(("centred_adv", centred_adv, "unclipped_adv", unclipped_adv))
    for name, t, ref_name, ref in pairs:
        if t.shape != ref.shape:
            raise ValueError(
                f"{name} must have the shape of {ref_name} {tuple(ref.shape)}; got "
                f"{tuple(t.shape)}. For per-message ratios pass message_adv aligned with them."
            )
    with torch.no_grad():
        z_clip = _mean((unclipped_adv - clipped_adv).abs())
        w = ratio.double()
        z_ratio = _mean(adv_for_ratio.double().abs() * (w - w.clamp(1.0 - eps, 1.0 + eps)).abs())
        z_norm = 0.0 if centred_adv is None else _mean((unclipped_adv - centred_adv).abs())
    return ZetaProxies(z_clip, z_ratio, z_norm, z_clip + z_ratio + z_norm)


def total_variation(p_states: Sequence[Hashable], q_states: Sequence[Hashable]) -> float:
    """``TV(p, q) = 1/2 sum_s |p(s) - q(s)|`` between the empirical distributions (App. G.1).

    Raises:
        ValueError: either sample is empty.
    """
    if not p_states or not q_states:
        raise ValueError(
            f"total_variation needs non-empty state samples; got {len(p_states)} and "
            f"{len(q_states)} states."
        )
    p, q = Counter(p_states), Counter(q_states)
    np_, nq = len(p_states), len(q_states)
    return 0.5 * sum(abs(p[s] / np_ - q[s] / nq) for s in p.keys() | q.keys())


def occupancy_drift(
    stage_start_states: Sequence[Hashable], intermediate_states: Sequence[Sequence[Hashable]]
) -> float:
    """``D_occ = sum_i TV(d_hat^{pi_hat^{i-1}}, d_hat^{pi_hat^0})`` (App. G.1).

    Args:
        stage_start_states: featurised states sampled under ``pi_hat^0``.
        intermediate_states: one sample per update ``i``, under ``pi_hat^{i-1}``. The ``i = 1``
            entry is drawn under ``pi_hat^0`` itself, so it may be omitted (its TV is ~0).

    Returns:
        The sum of TVs (0.0 for no intermediate samples).
    """
    return float(sum(total_variation(s, stage_start_states) for s in intermediate_states))


def loglog_fit(ns: Sequence[float], values: Sequence[float]) -> tuple[float, float]:
    """Least-squares fit ``log v = alpha log n + b`` (power law ``v ~ e^b n^alpha``, App. G.1).

    Returns:
        ``(alpha, b)``.

    Raises:
        ValueError: unequal lengths, fewer than 2 distinct ``n``, or a value ``<= 0``.
    """
    x, y = np.asarray(ns, dtype=np.float64), np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"ns and values must be 1-D of equal length; got {x.shape}, {y.shape}.")
    if not (np.all(x > 0) and np.all(y > 0)):
        raise ValueError(
            "loglog_fit needs positive ns and values (logs are taken); got "
            f"ns={x.tolist()}, values={y.tolist()}. Drop or floor the nonpositive points."
        )
    lx, ly = np.log(x), np.log(y)
    if len(x) < 2 or np.ptp(lx) == 0:
        raise ValueError(f"loglog_fit needs at least 2 distinct n; got ns={x.tolist()}.")
    dx = lx - lx.mean()
    alpha = float((dx * (ly - ly.mean())).sum() / (dx * dx).sum())
    return alpha, float(ly.mean() - alpha * lx.mean())


def _quantile(sorted_w: np.ndarray, q: float) -> float:
    """numpy's default (linear) quantile, but ``inf`` rather than ``NaN`` next to an ``inf``."""
    pos = q * (len(sorted_w) - 1)
    lo = math.floor(pos)
    frac = pos - lo
    a = float(sorted_w[lo])
    if frac == 0 or a == float(sorted_w[lo + 1]):
        return a
    return a + frac * (float(sorted_w[lo + 1]) - a)


def importance_weight_stats(log_weights: torch.Tensor) -> dict[str, float]:
    """Summary of trajectory importance weights ``w = exp(log_weights)`` (App. G.5 ablation).

    Args:
        log_weights: ``[B]`` log weights ``log w^{0 -> i-1}`` (one per rollout).

    Returns:
        ``ess_over_b`` = ESS/B = ``(sum w)^2 / (B sum w^2)`` (computed in log space),
        ``log_ess_over_b`` = its log, ``p95``, ``p99`` (linear-interpolated quantiles), ``max``,
        ``frac_gt_10`` = ``Pr[w > 10]``.

    Raises:
        ValueError: not 1-D, empty, NaN or +inf, or all -inf.
    """
    lw = log_weights.detach().double().cpu()
    if lw.dim() != 1 or lw.numel() == 0:
        raise ValueError(f"log_weights must be a non-empty 1-D [B] tensor; got {tuple(lw.shape)}.")
    if bool(torch.isnan(lw).any() or (lw == math.inf).any()):
        raise ValueError("log_weights contain NaN or +inf; check the log-prob sums they come from.")
    if bool((lw == -math.inf).all()):
        raise ValueError("every weight is 0 (log_weights all -inf); ESS is undefined.")
    log_ess = 2.0 * torch.logsumexp(lw, 0) - torch.logsumexp(2.0 * lw, 0)
    log_ess_frac = float(log_ess.item()) - math.log(lw.numel())
    w = np.sort(torch.exp(lw).numpy())
    return {
        "ess_over_b": math.exp(log_ess_frac),
        "log_ess_over_b": log_ess_frac,
        "p95": _quantile(w, 0.95),
        "p99": _quantile(w, 0.99),
        "max": float(w.max()),
        "frac_gt_10": float(np.mean(w > 10.0)),
    }


def hashed_state(context: str, buckets: int) -> int:
    """A stable bucket in ``[0, buckets)`` of a rendered context (blake2b of its UTF-8 bytes):
    the text featurisation of :func:`occupancy_drift`. Unlike ``hash()``, it is the same in
    every process (so Ray workers and resumed runs agree)."""
    if buckets < 1:
        raise ValueError(f"buckets must be >= 1; got {buckets}.")
    digest = hashlib.blake2b(context.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % buckets


def drift_noise_floor(
    stage_start_a: Sequence[Hashable], stage_start_b: Sequence[Hashable], updates: int
) -> float:
    """What :func:`occupancy_drift` shows by sampling noise alone: ``updates`` times the TV
    between two independent samples of the stage-start team (as large as the samples the drift
    compares)."""
    return float(updates * total_variation(stage_start_a, stage_start_b))


def episode_log_weights(episodes: Sequence[int], weights: torch.Tensor) -> torch.Tensor:
    """``[E]`` log trajectory weights, one per episode, from per-message weights (every message
    of an episode carries its episode's weight ``w^{0->i-1}``), in order of first appearance.

    Raises:
        ValueError: lengths differ, or an episode's messages carry different weights.
    """
    if len(episodes) != len(weights):
        raise ValueError(
            f"one weight per message: {len(episodes)} messages, {len(weights)} weights."
        )
    seen: dict[int, float] = {}
    for e, w in zip(episodes, weights.detach().double().tolist()):
        if e in seen and not math.isclose(seen[e], w, rel_tol=1e-6, abs_tol=1e-12):
            raise ValueError(f"episode {e}'s messages carry different weights ({seen[e]}, {w}).")
        seen.setdefault(e, w)
    return torch.log(torch.tensor(list(seen.values()), dtype=torch.float64))


def context_log_weights(
    episodes: Sequence[int], turns: Sequence[int], log_ratios: Sequence[float] | np.ndarray
) -> np.ndarray:
    """Per message of a batch, ``log w(s)`` of the context ``s`` it was written in: the sum of
    ``log_ratios`` (each message's ``log pi'(m|ctx) - log pi(m|ctx)``; 0 for an agent that did
    not change) over the earlier messages of its episode. ``w(s) = d'(s) / d(s)`` is the ratio of
    two teams' probabilities of reaching the context: the problem and the environment's
    transitions are the same under both, so only the messages' probabilities differ."""
    order = sorted(range(len(episodes)), key=lambda j: (episodes[j], turns[j]))
    out = np.zeros(len(episodes))
    running, episode = 0.0, None
    for j in order:
        if episodes[j] != episode:
            running, episode = 0.0, episodes[j]
        out[j] = running
        running += float(log_ratios[j])
    return out


def ratio_tv_terms(
    log_weights: Sequence[float] | np.ndarray, episodes: Sequence[int]
) -> np.ndarray:
    """Per episode (in order of episode index), the mean over its messages of ``(1 - w(s))_+``
    (``w = exp(log_weights)``): the terms whose mean over episodes sampled under ``d`` is
    ``TV(d', d)`` (:func:`ratio_total_variation`)."""
    terms = np.clip(1.0 - np.exp(np.asarray(log_weights, dtype=np.float64)), 0.0, None)
    _, episode = np.unique(np.asarray(episodes), return_inverse=True)
    return np.bincount(episode, weights=terms) / np.bincount(episode)


def mean_and_se(values: np.ndarray) -> tuple[float, float]:
    """The mean of ``values`` and its standard error (NaN for one value).

    Raises:
        ValueError: no values.
    """
    if values.size == 0:
        raise ValueError("mean_and_se needs at least one value")
    se = float(values.std(ddof=1) / math.sqrt(values.size)) if values.size > 1 else math.nan
    return float(values.mean()), se


def ratio_total_variation(
    log_weights: Sequence[float] | np.ndarray, episodes: Sequence[int]
) -> tuple[float, float]:
    """``TV(d', d)`` between two teams' occupancies over contexts, from contexts sampled under
    ``d`` and their likelihood ratios: ``TV = sum_s (d(s) - d'(s))_+ = E_{s ~ d}[(1 - w(s))_+]``
    with ``w = d' / d`` (exact, with no assumption on the supports). Each term is in [0, 1], so
    the estimate needs no context to repeat, unlike :func:`total_variation`'s plug-in counts.
    Returns the estimate (the mean of :func:`ratio_tv_terms` over episodes, each episode's
    messages weighing as its share of the occupancy) and its standard error over episodes
    (messages of one episode are not independent).

    Raises:
        ValueError: no messages.
    """
    if len(episodes) == 0:
        raise ValueError("ratio_total_variation needs at least one message")
    return mean_and_se(ratio_tv_terms(log_weights, episodes))
