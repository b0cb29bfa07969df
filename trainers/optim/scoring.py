"""Log-probs of an agent's messages under its policy: per micro-batch (:func:`score`, what an
update's gradient pass runs), joined into ``[N, T]`` blocks, and over a
:class:`~trainers.optim.collective.Share` of a batch (:func:`scored`: this process's passes,
gathered into the whole batch's)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch

from teamtr_core.policy import TokenLogprobs, TrainablePolicy
from teamtr_env.rollout import MessageRecord
from trainers.optim.collective import Share, as_share

__all__ = [
    "concat_logprobs",
    "gathered",
    "joined",
    "joined_logprobs",
    "score",
    "scored",
    "scored_rows",
    "to_width",
]


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


def to_width(logprobs: torch.Tensor, width: int) -> torch.Tensor:
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


def joined(parts: Sequence[TokenLogprobs]) -> TokenLogprobs:
    """Log-probs given per micro-batch (over every message) as one ``[N, T]`` block."""
    lp, mask = concat_logprobs(parts)
    return TokenLogprobs(lp, mask, _joined_ids(parts, lp.shape[1]))


def _joined_ids(parts: Sequence[TokenLogprobs], width: int) -> torch.Tensor:
    return torch.cat([to_width(p.token_ids, width) for p in parts])


def gathered(share: Share, parts: Sequence[TokenLogprobs]) -> list[TokenLogprobs]:
    """This process's log-probs (one per pass of ``share`` that holds messages, their rows only)
    as the whole batch's, in message order: the parts themselves on one process, one ``[N, T]``
    block gathered from every rank on a gang."""
    if share.alone:
        return list(parts)
    if parts:
        block = joined(parts)
    else:  # a rank with no message
        block = TokenLogprobs(
            torch.zeros(0, 1),
            torch.zeros(0, 1, dtype=torch.bool),
            torch.zeros(0, 1, dtype=torch.long),
        )
    return [TokenLogprobs(*(share.rows(t) for t in (block.logprobs, block.mask, block.token_ids)))]


def scored(
    policy: TrainablePolicy,
    messages: Sequence[MessageRecord],
    micro_batch_size: int,
    temperature: float = 1.0,
    autocast: str = "none",
) -> list[TokenLogprobs]:
    """The log-probs of ``messages`` (no gradient), as :func:`score` gives them; over a
    :class:`~trainers.optim.collective.Share` of a batch split over ranks, this process's passes
    (as many as every rank runs) gathered into one ``[N, T]`` block that every rank holds."""
    share, parts = as_share(messages), []
    for batch in share.micro_batches(micro_batch_size):
        lp = score(policy, batch.messages, micro_batch_size, temperature, autocast=autocast)[0]
        if batch:
            parts.append(lp)
    return gathered(share, parts)


def scored_rows(
    policy: TrainablePolicy,
    messages: Sequence[MessageRecord],
    micro_batch_size: int,
    temperature: float = 1.0,
    autocast: str = "none",
) -> torch.Tensor:
    """:func:`scored`'s log-probs as one ``[N, T]`` tensor."""
    parts = scored(policy, messages, micro_batch_size, temperature, autocast)
    return concat_logprobs(parts)[0]


def joined_logprobs(new: Any, old: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two scorings of the same messages (lists of ``TokenLogprobs``) as ``[N, T]`` tensors:
    the new log-probs, the old ones and the mask."""
    new_lp, mask = concat_logprobs(new)
    old_lp, _ = concat_logprobs(old)
    return new_lp, old_lp, mask
