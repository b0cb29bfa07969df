"""``optim.ratio_level: token`` with the rest of PettingLLMs' AT-GRPO update (verl's GRPO advantage
with the unbiased std, per-token clipped ratio with the dual clip, token-mean loss, no KL, one
epoch) against the same loss and gradient written out by hand on a small batch."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch

from teamtr_core.policy import TokenLogprobs
from teamtr_env.rollout import MessageRecord
from trainers.config import OptimConfig, TrustRegionConfig
from trainers.optim.advantages import group_advantages
from trainers.optim.update import update_agent

VOCAB = 5
# messages of different lengths (a token-mean weighs a long message more than a short one)
TOKENS = [(0, 1), (2, 3, 4), (1,), (4, 4, 0, 2), (3, 1), (0,)]
REWARDS = torch.tensor([[1.0, 0.0, 0.5], [0.2, 0.9, 0.9]])  # B = 2 prompts x G = 3


class Unigram(torch.nn.Module):
    """A policy whose token log-probs are ``log_softmax(theta)[token]``, whatever the context:
    small enough to write the loss out by hand."""

    def __init__(self, theta: torch.Tensor) -> None:
        super().__init__()
        self.theta = torch.nn.Parameter(theta.clone())

    def logprobs(
        self, prompts: Sequence[str], completions: Sequence[Sequence[int] | str]
    ) -> TokenLogprobs:
        completions = [[int(t) for t in c] for c in completions]  # token ids only here
        width = max(len(c) for c in completions)
        ids = torch.zeros(len(completions), width, dtype=torch.long)
        mask = torch.zeros(len(completions), width, dtype=torch.bool)
        for i, c in enumerate(completions):
            ids[i, : len(c)] = torch.tensor(c)
            mask[i, : len(c)] = True
        lp = torch.log_softmax(self.theta, -1)[ids] * mask
        return TokenLogprobs(lp, mask, ids)


def verl_advantages(rewards: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """verl's ``compute_grpo_outcome_advantage``: (r - mean) / (unbiased std + eps) per group."""
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, keepdim=True)  # torch's default: unbiased
    return (rewards - mean) / (std + eps)


def verl_loss(theta: torch.Tensor, old: torch.Tensor, adv: torch.Tensor) -> torch.Tensor:
    """verl's vanilla policy loss with ``loss_agg_mode: token-mean``, clip 0.2 and dual clip 3,
    written out token by token."""
    total, terms = 0, []
    lp = torch.log_softmax(theta, -1)
    for m, tokens in enumerate(TOKENS):
        for u, tok in enumerate(tokens):
            ratio = torch.exp(lp[tok] - old[m, u])
            a = adv[m]
            loss = torch.maximum(-a * ratio, -a * ratio.clamp(0.8, 1.2))
            if a < 0:
                loss = torch.minimum(loss, -a * 3.0)
            terms.append(loss)
            total += 1
    return torch.stack(terms).sum() / total


PETTINGLLMS = {
    "ratio_level": "token",
    "dual_clip": 3.0,
    "advantage_std": "unbiased",
    "a_clip": None,
    "epochs": 1,
}


def test_unbiased_group_std_is_verls_grpo_advantage() -> None:
    ours = group_advantages(REWARDS, a_clip=None, std="unbiased").advantages
    assert torch.allclose(ours, verl_advantages(REWARDS), atol=1e-6)
    population = group_advantages(REWARDS, a_clip=None).advantages
    # G = 3: the population std is sqrt(2/3) of the unbiased one (up to the epsilons)
    assert torch.allclose(population, ours * (3 / 2) ** 0.5, atol=1e-4)


@pytest.mark.parametrize("micro_batch_size", [64, 2])
def test_the_pettingllms_update_is_verls_token_mean_loss_and_gradient(
    micro_batch_size: int,
) -> None:
    torch.manual_seed(0)
    sampler = torch.randn(VOCAB)  # the policy that sampled the batch
    start = sampler + torch.randn(
        VOCAB
    )  # the model now: ratios away from 1, clipped and dual-clipped
    messages = [
        MessageRecord(i, i // 3, 0, "a", "ctx", "", tokens) for i, tokens in enumerate(TOKENS)
    ]
    adv = verl_advantages(REWARDS).flatten()
    sampler_policy = Unigram(sampler)
    behaviour = [sampler_policy.logprobs(["ctx"] * len(TOKENS), TOKENS)]
    old = behaviour[0].logprobs.detach()

    lp = torch.log_softmax(start, -1)
    ratios = [(float(adv[m]), float(torch.exp(lp[k] - old[m, u]))) for m, toks in
              enumerate(TOKENS) for u, k in enumerate(toks)]  # fmt: skip
    assert any(a < 0 and r > 3 for a, r in ratios), "the dual clip is exercised"
    assert any(0.8 < r < 1.2 for _, r in ratios), "and the unclipped branch"
    theta = start.clone().requires_grad_(True)
    expected = verl_loss(theta, old, adv)
    expected.backward()
    assert theta.grad is not None

    policy = Unigram(start)
    optimizer = torch.optim.SGD(policy.parameters(), lr=1.0)
    optim = OptimConfig(
        **PETTINGLLMS,  # type: ignore[arg-type]
        micro_batch_size=micro_batch_size,
        max_grad_norm=1e9,
    )
    result = update_agent(
        policy,
        optimizer,
        messages,
        adv,
        beta=0.0,
        delta=None,
        optim=optim,
        region=TrustRegionConfig(monitor_without_region=True),
        behaviour=behaviour,
    )
    assert result.accepted
    # SGD at lr 1: the step is minus the gradient
    step = policy.theta.detach() - start
    assert torch.allclose(step, -theta.grad, atol=1e-6), (step, -theta.grad)
    # the clipped fraction is of tokens
    assert 0.0 < result.ratio_clip_frac < 1.0


def test_the_message_level_loss_differs_on_the_same_batch() -> None:
    """The default (a ratio per message, mean over messages) is another objective: on this
    batch its gradient is not verl's."""
    torch.manual_seed(0)
    sampler = torch.randn(VOCAB)
    start = sampler + torch.randn(VOCAB)
    messages = [
        MessageRecord(i, i // 3, 0, "a", "ctx", "", tokens) for i, tokens in enumerate(TOKENS)
    ]
    adv = verl_advantages(REWARDS).flatten()
    behaviour = [Unigram(sampler).logprobs(["ctx"] * len(TOKENS), TOKENS)]
    theta = start.clone().requires_grad_(True)
    verl_loss(theta, behaviour[0].logprobs.detach(), adv).backward()
    policy = Unigram(start)
    update_agent(
        policy,
        torch.optim.SGD(policy.parameters(), lr=1.0),
        messages,
        adv,
        beta=0.0,
        delta=None,
        optim=OptimConfig(epochs=1, max_grad_norm=1e9, a_clip=None),
        region=TrustRegionConfig(),
        behaviour=behaviour,
    )
    assert theta.grad is not None
    assert not torch.allclose(policy.theta.detach() - start, -theta.grad, atol=1e-3)
