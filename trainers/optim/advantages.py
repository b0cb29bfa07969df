"""Group-standardised, hard-clipped message-level advantages (paper Sec. 4, App. E.1).

For each prompt ``b`` the ``G`` rollouts sampled for it form a group. Eq. (E.1)::

    mu_b    = (1/G) sum_g R_bg
    sigma_b = sqrt((1/G) sum_g (R_bg - mu_b)^2 + eps_std)      # population variance, eps inside
    A_bg    = clip((R_bg - mu_b) / sigma_b, -A_clip, A_clip)

Hard clipping makes ``|A| <= A_clip`` hold surely, the boundedness the certificates need (App. E.3,
F.6); the clipped fraction is logged as a bias indicator (App. F.7).

The baseline is an option every learner shares (``optim.advantage``):

- ``group`` (the paper's, GRPO's, CoMLRL's MAGRPO): the group mean ``mu_b``, as above;
- ``leave_one_out`` (RLOO, CoMLRL's MARLOO): the mean of the *other* ``G - 1`` rollouts,
  ``R_bg - (G mu_b - R_bg) / (G - 1) = G / (G - 1) * (R_bg - mu_b)``, an unbiased baseline;
  ``normalize`` then divides by the same ``sigma_b``;
- ``none`` (REINFORCE, CoMLRL's MAREINFORCE): no baseline, ``A_bg = R_bg`` (``normalize`` does
  not apply: there is nothing centred to scale), clipped to ``A_clip``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from trainers.config.sections import AdvantageEstimator, AdvantageStd


class GroupAdvantages(NamedTuple):
    """Output of :func:`group_advantages`.

    Attributes:
        advantages: ``[B, G]`` final advantages ``A_tilde`` (standardised, then clipped).
        standardized: ``[B, G]`` the values before clipping: ``(R - mu) / sigma`` when
            ``normalize=True``, the centred ``R - mu`` otherwise (``a`` in App. G.3).
        clip_frac: fraction of entries with ``|standardized| >= a_clip`` (0.0 without clipping).
    """

    advantages: torch.Tensor
    standardized: torch.Tensor
    clip_frac: float


def group_advantages(
    rewards: torch.Tensor,
    *,
    eps_std: float = 1e-6,
    a_clip: float | None = 5.0,
    normalize: bool = True,
    estimator: AdvantageEstimator = "group",
    std: AdvantageStd = "population",
) -> GroupAdvantages:
    """Group-standardised, hard-clipped advantages, Eq. (E.1).

    Args:
        rewards: ``[B, G]`` team rewards, one row per prompt, one column per rollout of it.
            Integer tensors are cast to float32.
        eps_std: ``epsilon_std > 0`` added to the population variance inside the square root, so a
            group of equal rewards gives ``A = 0`` rather than ``0/0``.
        a_clip: ``A_clip``; ``None`` disables hard clipping (ablation "no hard clipping").
        normalize: ``False`` skips the division by ``sigma`` (ablation "no group normalisation"):
            ``A = clip(R - mu, -A_clip, A_clip)``.
        estimator: the baseline: ``group`` (the group mean), ``leave_one_out`` (the mean of
            the other rollouts of the prompt) or ``none`` (no baseline); see the module text.
        std: the group's spread that ``normalize`` divides by: ``population``,
            ``sqrt(var + eps_std)`` with the population variance (Eq. E.1), or ``unbiased``,
            ``std + eps_std`` with the unbiased (``G - 1``) standard deviation, as verl's GRPO
            computes it (PettingLLMs' AT-GRPO): ``sqrt(G / (G - 1))`` times smaller advantages
            up to the epsilons (a group of one gets 0 either way).

    Returns:
        :class:`GroupAdvantages`. A group of size ``G = 1`` gets zeros with a baseline (its own),
        its rewards with ``estimator="none"``.

    Raises:
        ValueError: ``rewards`` is not 2-D, or ``eps_std <= 0``, or ``a_clip <= 0``, or an
            unknown ``estimator``.
    """
    if estimator not in ("group", "leave_one_out", "none"):
        raise ValueError(f"estimator must be 'group', 'leave_one_out' or 'none'; got {estimator!r}")
    if std not in ("population", "unbiased"):
        raise ValueError(f"std must be 'population' or 'unbiased'; got {std!r}")
    if rewards.dim() != 2:
        raise ValueError(
            f"rewards must be 2-D [B, G] (prompts x rollouts per prompt); got shape "
            f"{tuple(rewards.shape)}. Reshape it to [B, G], e.g. rewards.view(B, G)."
        )
    if not eps_std > 0:
        raise ValueError(
            f"eps_std must be > 0 (App. F.6: it keeps sigma away from 0); got {eps_std}. "
            "Use a small positive value such as 1e-6."
        )
    if a_clip is not None and not a_clip > 0:
        raise ValueError(
            f"a_clip must be > 0 or None (no clipping); got {a_clip}. The paper's default is 5."
        )
    rewards = rewards.detach()
    if not rewards.is_floating_point():
        rewards = rewards.to(torch.float32)
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    group = rewards.shape[1]
    if estimator == "none":
        standardized = rewards.clone()
    elif normalize:
        if std == "unbiased" and group > 1:
            sigma = centred.pow(2).sum(dim=1, keepdim=True).div(group - 1).sqrt() + eps_std
        else:
            sigma = torch.sqrt(centred.pow(2).mean(dim=1, keepdim=True) + eps_std)
        standardized = centred / sigma
    else:
        standardized = centred
    if estimator == "leave_one_out":
        # R - mean of the others = G/(G-1) (R - mu); a single rollout has no others: 0
        standardized = standardized * (group / (group - 1)) if group > 1 else standardized * 0
    if a_clip is None:
        return GroupAdvantages(standardized.clone(), standardized, 0.0)
    advantages = standardized.clamp(-a_clip, a_clip)
    n = standardized.numel()
    clip_frac = float((standardized.abs() >= a_clip).sum().item()) / n if n else 0.0
    return GroupAdvantages(advantages, standardized, clip_frac)
