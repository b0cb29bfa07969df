"""Message-level ratios and the clipped surrogate: hand values, gradients, properties, safety."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trainers.optim.surrogate import clipped_surrogate, message_log_ratio, surrogate_value

F64 = torch.float64
# Four one-token messages with ratios w = [1.5, 0.5, 1.1, 1.5] and A = [1, 1, -2, -1], eps = 0.2:
#   min(wA, clip(w)A) = [1.2 (clipped), 0.5, -2.2, -1.5]  -> objective = -2.0 / 4 = -0.5
#   unclipped wA      = [1.5, 0.5, -2.2, -1.5]             -> L_hat     = -1.7 / 4 = -0.425
W = [1.5, 0.5, 1.1, 1.5]
ADV = torch.tensor([1.0, 1.0, -2.0, -1.0], dtype=F64)


def batch(pad_value: float = 0.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Messages in column 0; columns 1-2 are padding holding ``pad_value``."""
    new = torch.full((4, 3), pad_value, dtype=F64)
    old = torch.full((4, 3), -pad_value, dtype=F64)
    new[:, 0] = torch.log(torch.tensor(W, dtype=F64)) - 1.0
    old[:, 0] = -1.0
    mask = torch.zeros(4, 3, dtype=torch.bool)
    mask[:, 0] = True
    return new.requires_grad_(), old, mask


def test_message_log_ratio_sums_counted_tokens_only() -> None:
    new = torch.tensor([[-1.0, -2.0, 99.0], [-0.5, 7.0, 7.0]])
    old = torch.tensor([[-1.5, -1.0, -50.0], [-0.5, 0.0, 0.0]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    torch.testing.assert_close(message_log_ratio(new, old, mask), torch.tensor([-0.5, 0.0]))


def test_clipped_surrogate_hand_values_and_gradient() -> None:
    new, old, mask = batch()
    out = clipped_surrogate(new, old, mask, ADV, eps=0.2)
    assert out.objective.item() == pytest.approx(-0.5, abs=1e-12)
    assert out.loss.item() == pytest.approx(0.5, abs=1e-12)
    torch.testing.assert_close(out.ratio, torch.tensor(W, dtype=F64), rtol=0, atol=1e-12)
    assert not out.ratio.requires_grad
    assert out.clip_frac == pytest.approx(0.25)
    out.objective.backward()
    # d/dlogp of w*A / N = w*A/4 where the unclipped term is active; 0 where clipping cut it.
    expected = torch.zeros(4, 3, dtype=F64)
    expected[:, 0] = torch.tensor([0.0, 0.125, -0.55, -0.375], dtype=F64)
    assert new.grad is not None
    torch.testing.assert_close(new.grad, expected, rtol=0, atol=1e-12)


def test_weights_give_self_normalised_mean() -> None:
    new, old, mask = batch()
    w = torch.tensor([2.0, 1.0, 1.0, 0.0], dtype=F64)
    # (2 * 1.2 + 0.5 - 2.2) / 4 = 0.175 ; unclipped (3.0 + 0.5 - 2.2) / 4 = 0.325
    assert clipped_surrogate(new, old, mask, ADV, weights=w).objective.item() == pytest.approx(
        0.175
    )
    assert surrogate_value(new, old, mask, ADV, weights=w) == pytest.approx(0.325)


def test_surrogate_value_hand_value() -> None:
    new, old, mask = batch()
    assert surrogate_value(new, old, mask, ADV) == pytest.approx(-0.425, abs=1e-12)


def test_padding_is_ignored() -> None:
    clean = clipped_surrogate(*batch(0.0), ADV)
    dirty = clipped_surrogate(*batch(1e6), ADV)
    assert dirty.objective.item() == clean.objective.item()
    assert surrogate_value(*batch(1e6), ADV) == surrogate_value(*batch(0.0), ADV)


def test_gradient_is_zero_on_padding_even_with_huge_values() -> None:
    new, old, mask = batch(1e30)
    clipped_surrogate(new, old, mask, ADV).objective.backward()
    assert new.grad is not None
    assert torch.isfinite(new.grad).all()
    assert bool((new.grad[:, 1:] == 0).all())


def test_huge_log_ratios_stay_finite() -> None:
    new = torch.tensor([[500.0, 500.0], [-900.0, 0.0]], requires_grad=True)
    old = torch.zeros(2, 2)
    mask = torch.ones(2, 2, dtype=torch.bool)
    adv = torch.tensor([-1.0, 1.0])
    out = clipped_surrogate(new, old, mask, adv, max_log_ratio=20.0)
    assert torch.isfinite(out.objective)
    torch.testing.assert_close(out.ratio, torch.tensor([math.exp(20.0), math.exp(-20.0)]))
    out.loss.backward()
    assert new.grad is not None and torch.isfinite(new.grad).all()
    assert math.isfinite(surrogate_value(new, old, mask, adv))


def test_empty_batch_is_zero_with_zero_grad() -> None:
    new = torch.zeros(0, 5, requires_grad=True)
    out = clipped_surrogate(
        new, torch.zeros(0, 5), torch.zeros(0, 5, dtype=torch.bool), torch.zeros(0)
    )
    assert out.objective.item() == 0.0 and out.clip_frac == 0.0 and out.ratio.shape == (0,)
    out.loss.backward()
    assert new.grad is not None and torch.equal(new.grad, torch.zeros(0, 5))
    assert (
        surrogate_value(new, torch.zeros(0, 5), torch.zeros(0, 5, dtype=torch.bool), torch.zeros(0))
        == 0.0
    )


def test_gradient_at_old_policy_is_policy_gradient() -> None:
    """At pi_new == pi_cur, grad of the surrogate = mean_m A_m * grad sum_u log pi(x_u)."""
    gen = torch.Generator().manual_seed(0)
    # logits for 6 messages x 5 token slots x vocabulary 4
    theta = torch.randn(6, 5, 4, dtype=F64, generator=gen, requires_grad=True)
    tokens = torch.randint(0, 4, (6, 5), generator=gen)
    mask = torch.rand(6, 5, generator=gen) < 0.7
    mask[:, 0] = True
    adv = torch.randn(6, dtype=F64, generator=gen)

    def logp(t: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(t, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)

    out = clipped_surrogate(logp(theta), logp(theta).detach(), mask, adv)
    (g_sur,) = torch.autograd.grad(out.objective, theta)
    pg = (adv * torch.where(mask, logp(theta), torch.zeros(6, 5, dtype=F64)).sum(-1)).mean()
    (g_pg,) = torch.autograd.grad(pg, theta)
    torch.testing.assert_close(g_sur, g_pg, rtol=1e-12, atol=1e-12)


floats = st.floats(-3.0, 3.0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(floats, floats, floats), min_size=1, max_size=8))
def test_clipping_properties(msgs: list[tuple[float, float, float]]) -> None:
    new = torch.tensor([[a, b] for a, b, _ in msgs], dtype=F64)
    old = torch.zeros_like(new)
    mask = torch.ones_like(new, dtype=torch.bool)
    adv = torch.tensor([c for _, _, c in msgs], dtype=F64)
    unclipped = surrogate_value(new, old, mask, adv)
    # Pessimistic: the clipped objective never exceeds the unclipped estimate ...
    assert clipped_surrogate(new, old, mask, adv, eps=0.2).objective.item() <= unclipped + 1e-12
    # ... and equals the plain importance-weighted objective mean(w A) when eps is huge.
    wide = clipped_surrogate(new, old, mask, adv, eps=1e9)
    assert wide.objective.item() == pytest.approx(unclipped, rel=1e-12, abs=1e-12)
    assert wide.clip_frac == 0.0


def _args(**over: object) -> dict[str, Any]:
    args: dict[str, Any] = {
        "logp_new": torch.zeros(2, 3),
        "logp_old": torch.zeros(2, 3),
        "mask": torch.ones(2, 3, dtype=torch.bool),
        "advantages": torch.zeros(2),
    }
    return args | over


@pytest.mark.parametrize(
    ("over", "match"),
    [
        ({"mask": torch.ones(2, 3)}, r"mask must be a bool tensor.*mask.bool\(\)"),
        ({"mask": torch.ones(6, dtype=torch.bool)}, r"mask must be 2-D \[N, T\]; got shape \(6,\)"),
        (
            {"logp_old": torch.zeros(2, 4)},
            r"logp_old must have the mask's shape \(2, 3\).*got \(2, 4\)",
        ),
        ({"advantages": torch.zeros(2, 1)}, r"advantages must be \[N\] = \(2,\).*got \(2, 1\)"),
        ({"weights": torch.ones(3)}, r"weights must be \[N\] = \(2,\); got \(3,\)"),
        ({"weights": torch.tensor([1.0, -1.0])}, r"weights must be >= 0 with a positive sum"),
        ({"weights": torch.zeros(2)}, r"weights must be >= 0 with a positive sum.*sum 0.0"),
        ({"max_log_ratio": 0.0}, r"max_log_ratio must be > 0; got 0.0"),
        ({"eps": 0.0}, r"eps must be > 0 \(ratio-clip half-width\); got 0.0"),
    ],
)
def test_errors(over: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        clipped_surrogate(**_args(**over))
    if "eps" not in over:
        with pytest.raises(ValueError, match=match):
            surrogate_value(**_args(**over))
    if set(over) <= {"mask", "logp_old"}:
        a = _args(**over)
        with pytest.raises(ValueError, match=match):
            message_log_ratio(a["logp_new"], a["logp_old"], a["mask"])


def test_half_precision_inputs_are_summed_in_float32() -> None:
    # 256 tokens each contributing 2^-9 (exact in bf16); the message sum 0.5 comes back in float32.
    new = torch.full((1, 256), -0.5 + 2**-9, dtype=torch.bfloat16, requires_grad=True)
    old = torch.full((1, 256), -0.5, dtype=torch.bfloat16)
    mask = torch.ones(1, 256, dtype=torch.bool)
    log_w = message_log_ratio(new, old, mask)
    assert log_w.dtype == torch.float32 and log_w.item() == 0.5
    out = clipped_surrogate(new, old, mask, torch.ones(1))
    out.loss.backward()
    assert new.grad is not None and new.grad.dtype == torch.bfloat16
