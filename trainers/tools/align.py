"""Stage-0 alignment of a replacement agent (paper Sec. 3.5, App. D.1, G.7).

Before a new model takes over agent ``j``'s seat, it is distilled toward the agent it replaces
on probe contexts ``s ~ nu`` drawn from the current team's occupancy at ``j``'s turns, until the
monitored token-sum KL on held-out probes is at most ``delta_align``. The per-step loss is the
full-vocabulary token-level KL at every position of a message sampled on the probe context::

    L(theta) = E_{s ~ nu, m ~ pi_sample(.|s)} [ sum_u KL(p(. | s, x_<u) || q(. | s, x_<u)) ]

with ``direction="new_old"`` (the default, reverse KL in the distillation sense):
``p = pi_theta`` (the new model, which also samples ``m``), ``q = pi_old``. The gradient flows
through the per-position KL only; the messages are resampled every step and held fixed within
it (on-policy distillation, as in GKD). ``direction="old_new"`` is App. D.1 read literally: the
trust-region direction ``KL(pi_old || pi_theta)`` on the OLD agent's messages (supervised
distillation on the replaced agent's outputs, G.7).

The stopping statistic (``kl``) is Eq. (18)'s token-sum monitor on messages sampled on the
held-out probes with each position's sampled log-ratio ``log p(x_u|.) - log q(x_u|.)`` replaced by
its expectation over the next token, ``KL(p(.|s, x_<u) || q(.|s, x_<u))``
(:func:`trainers.optim.kl.vocab_kl`): the same estimand, never negative, without the next-token noise
that makes the purely sampled monitor (logged beside it as ``kl_tok``,
:func:`trainers.optim.kl.token_kl_monitor`) dip below zero on a few dozen short probe messages.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
import torch.nn.functional as F

from adapters.hf import pad_token_ids
from teamtr_core.choices import choice_errors
from teamtr_core.policy import SamplingParams
from teamtr_core.seeds import ALIGN_BATCH_OFFSET, ALIGN_CHECK_OFFSET, SEED_STRIDE
from trainers.optim.kl import token_kl_monitor, vocab_kl

Direction = Literal["new_old", "old_new"]


@dataclass(frozen=True)
class AlignConfig:
    """Settings of Stage-0 alignment.

    Attributes:
        probes: P, probe contexts drawn from the current team's occupancy at the agent's turns
            (the paper uses 500).
        heldout: fraction of the probes kept out of training; the stopping rule reads them.
        delta_align: stop once the held-out monitored KL is at most this.
        max_steps: optimizer steps at most.
        lr: AdamW learning rate of the new model.
        batch_size: probe contexts per step (one sampled message each).
        eval_every: held-out monitor every this many steps (and before the first).
        direction: ``"new_old"`` = KL(new || old) on the new model's messages; ``"old_new"`` =
            KL(old || new) on the old agent's messages (App. D.1).
        max_grad_norm: gradient clipping.
        seed: seeds the probe rollouts, the split, the minibatches and the sampled messages.
    """

    probes: int = 500
    heldout: float = 0.2
    delta_align: float = 0.01
    max_steps: int = 200
    lr: float = 1e-3
    batch_size: int = 32
    eval_every: int = 5
    direction: Direction = "new_old"
    max_grad_norm: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        errors = [
            f"{name} must be >= 1, got {getattr(self, name)}"
            for name in ("probes", "max_steps", "batch_size", "eval_every")
            if getattr(self, name) < 1
        ]
        if not 0 < self.heldout < 1:
            errors.append(f"heldout must be in (0, 1), got {self.heldout}")
        if not (self.delta_align > 0 and self.lr > 0 and self.max_grad_norm > 0):
            errors.append("delta_align, lr and max_grad_norm must be > 0")
        errors += choice_errors("direction", self.direction, Direction)
        if self.probes >= 1 and 0 < self.heldout < 1:
            n_held = round(self.probes * self.heldout)
            if n_held < 1 or n_held >= self.probes:
                errors.append(
                    f"probes={self.probes} with heldout={self.heldout} leaves an empty training "
                    "or held-out set; use more probes"
                )
        if errors:
            raise ValueError("Invalid AlignConfig: " + "; ".join(errors))


@dataclass
class AlignResult:
    """What alignment did: the curve (one row per held-out check), whether it reached
    ``delta_align``, and the probe counts."""

    curve: list[dict[str, float]] = field(default_factory=list)
    steps: int = 0
    reached: bool = False
    initial_kl: float = math.nan
    final_kl: float = math.nan
    train_probes: int = 0
    heldout_probes: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def split_probes(contexts: Sequence[str], heldout: float, seed: int) -> tuple[list[str], list[str]]:
    """A seeded shuffle of ``contexts`` cut into (train, held-out) with ``round(n*heldout)``
    held out."""
    order = list(contexts)
    random.Random(seed).shuffle(order)
    n_held = max(1, round(len(order) * heldout))
    return order[n_held:], order[:n_held]


def align_policy(
    new: Any,
    old: Any,
    train: Sequence[str],
    heldout: Sequence[str],
    sampling: SamplingParams,
    config: AlignConfig,
    on_check: Callable[[dict[str, float]], None] | None = None,
) -> AlignResult:
    """Distils ``new`` toward ``old`` on the probe contexts until the held-out monitored KL is
    at most ``config.delta_align`` (or ``max_steps``); ``new`` is trained in place, ``old`` is
    never changed.

    Both are :class:`adapters.hf.HFPolicy` objects with the same tokenizer (checked by
    :func:`trainers.tools.swap.check_swap`). Messages are sampled at temperature 1 with no top-p/top-k
    (the monitor then estimates the KL of the policies themselves) and ``sampling``'s
    ``max_new_tokens`` and ``stop``.

    Args:
        on_check: called with each curve row (progress output).
    """
    t0 = time.perf_counter()
    result = AlignResult(train_probes=len(train), heldout_probes=len(heldout))
    plain = SamplingParams(
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        max_new_tokens=sampling.max_new_tokens,
        stop=sampling.stop,
    )
    sampler_of_p, p_is_new = (new, True) if config.direction == "new_old" else (old, False)
    optimizer = torch.optim.AdamW(new.parameters(), lr=config.lr, weight_decay=0.0)
    rng = random.Random(config.seed + ALIGN_BATCH_OFFSET)
    step, losses = 0, list[float]()
    while True:
        if step % config.eval_every == 0 or step == config.max_steps:
            row = {"step": float(step), **_heldout_kl(new, old, heldout, plain, config)}
            # the mean training loss of the steps since the last check (none before the first)
            row["train_loss"] = sum(losses) / len(losses) if losses else math.nan
            losses = []
            result.curve.append(row)
            if on_check is not None:
                on_check(row)
            if step == 0:
                result.initial_kl = row["kl"]
            result.final_kl = row["kl"]
            if row["kl"] <= config.delta_align:
                result.reached = True
                break
            if step == config.max_steps:
                break
        batch = [train[rng.randrange(len(train))] for _ in range(config.batch_size)]
        seed = config.seed * SEED_STRIDE + step
        messages = sampler_of_p.generate(batch, plain.updated(seed=seed))
        ids = [list(m.token_ids) for m in messages]
        with torch.no_grad():
            fixed, mask = full_logprobs(old, batch, ids)
        moving, _ = full_logprobs(new, batch, ids)
        p, q = (moving, fixed) if p_is_new else (fixed, moving)
        loss = vocab_kl(p, q, mask).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(new.parameters()), config.max_grad_norm)
        optimizer.step()
        losses.append(float(loss.item()))
        step += 1
    result.steps = step
    result.seconds = time.perf_counter() - t0
    return result


def _heldout_kl(
    new: Any,
    old: Any,
    heldout: Sequence[str],
    sampling: SamplingParams,
    config: AlignConfig,
) -> dict[str, float]:
    """The stopping statistic (``kl``: per-position full-vocabulary KL, token-summed) and Eq.
    (18)'s sampled monitor (``kl_tok``) of the aligned direction on messages sampled on every
    held-out probe."""
    p_policy, q_policy = (new, old) if config.direction == "new_old" else (old, new)
    # The same seed at every check: the curve moves with the model, not with the draw.
    messages = p_policy.generate(
        list(heldout), sampling.updated(seed=config.seed + ALIGN_CHECK_OFFSET)
    )
    ids = [list(m.token_ids) for m in messages]
    with torch.no_grad():
        p, mask = full_logprobs(p_policy, heldout, ids)
        q, _ = full_logprobs(q_policy, heldout, ids)
        sampled = pad_token_ids(ids, 0, width=mask.shape[1])[0].to(mask.device).unsqueeze(-1)
        token_p = p.gather(-1, sampled).squeeze(-1)
        token_q = q.gather(-1, sampled).squeeze(-1)
        monitor = token_kl_monitor(token_p, token_q, mask)
        exact = vocab_kl(p, q, mask)
    return {"kl": float(exact.mean().item()), "kl_tok": monitor.value}


def full_logprobs(
    policy: Any, prompts: Sequence[str], completions: Sequence[Sequence[int]]
) -> tuple[torch.Tensor, torch.Tensor]:
    """``([N, T, V] log-softmax at each completion position, [N, T] mask)`` of ``policy`` (an
    ``HFPolicy``): position ``u`` of message ``n`` is the next-token distribution after its
    prompt (rendered by the policy's own codec) and its first ``u`` completion tokens."""
    prompt_ids = [policy.prompt_ids(p) for p in prompts]
    seqs = [p + list(c) for p, c in zip(prompt_ids, completions)]
    input_ids, attention = pad_token_ids(seqs, int(policy.pad_id))
    width = input_ids.shape[1]
    longest = max((len(c) for c in completions), default=0)
    device = policy.device
    logits = policy.model(
        input_ids=input_ids.to(device), attention_mask=attention.to(device), use_cache=False
    ).logits.float()
    steps = torch.arange(max(longest, 1))
    lens = torch.tensor([len(p) for p in prompt_ids])
    positions = (lens.unsqueeze(1) - 1 + steps.unsqueeze(0)).clamp(max=width - 1)  # [N, T]
    mask = steps.unsqueeze(0) < torch.tensor([len(c) for c in completions]).unsqueeze(1)
    index = positions.to(device).unsqueeze(-1).expand(-1, -1, logits.shape[-1])
    picked = logits.gather(1, index)  # [N, T, V]
    return F.log_softmax(picked, dim=-1), mask.to(device)
