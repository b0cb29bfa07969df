"""How far a rollout engine's sampling is from the trainer's policy: the log-prob gap and KL of
the sampled tokens (:func:`engine_mismatch`), and the truncated importance weights that correct
for it (:func:`truncated_is_weights`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from teamtr_core.policy import TokenLogprobs
from teamtr_env.rollout import MessageRecord

__all__ = ["engine_mismatch", "truncated_is_weights"]


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
