"""Group-standardised, clipped advantages (Eq. E.1): hand values and properties."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trainers.optim.advantages import GroupAdvantages, group_advantages

F64 = torch.float64


def test_two_right_two_wrong_hand_values() -> None:
    # mu = 0.5, population var = 0.25, sigma = sqrt(0.25 + 1e-6)
    out = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0]], dtype=F64), eps_std=1e-6)
    a = 0.5 / math.sqrt(0.250001)  # 0.999998000006
    expected = torch.tensor([[a, -a, -a, a]], dtype=F64)
    torch.testing.assert_close(out.advantages, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(out.standardized, expected, rtol=0, atol=1e-12)
    assert out.clip_frac == 0.0
    assert isinstance(out, GroupAdvantages)


def test_one_right_of_four_is_clipped() -> None:
    # mu = 0.25, var = (0.75^2 + 3 * 0.25^2) / 4 = 0.1875; a = 0.75 / sqrt(0.1875 + 1e-6) ~ sqrt(3)
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [2.0, 2.0, 2.0, 2.0]], dtype=F64)
    out = group_advantages(rewards, eps_std=1e-6, a_clip=1.5)
    sigma = math.sqrt(0.1875 + 1e-6)
    std_row = [0.75 / sigma, -0.25 / sigma, -0.25 / sigma, -0.25 / sigma]
    torch.testing.assert_close(
        out.standardized[0], torch.tensor(std_row, dtype=F64), rtol=0, atol=1e-12
    )
    assert out.standardized[0, 0].item() == pytest.approx(1.732046188785199, abs=1e-12)
    torch.testing.assert_close(
        out.advantages[0], torch.tensor([1.5, *std_row[1:]], dtype=F64), rtol=0, atol=1e-12
    )
    # A constant group gives exact zeros, not 0/0.
    assert torch.equal(out.advantages[1], torch.zeros(4, dtype=F64))
    assert out.clip_frac == pytest.approx(1 / 8)


def test_no_clipping_returns_standardised() -> None:
    rewards = torch.tensor([[0.0, 0.0, 0.0, 100.0]], dtype=F64)
    out = group_advantages(rewards, a_clip=None)
    torch.testing.assert_close(out.advantages, out.standardized)
    assert out.advantages[0, 3].item() == pytest.approx(math.sqrt(3), abs=1e-6)
    assert out.clip_frac == 0.0


def test_no_normalisation_centres_then_clips() -> None:
    out = group_advantages(
        torch.tensor([[3.0, 1.0], [0.2, 0.0]], dtype=F64), normalize=False, a_clip=0.5
    )
    torch.testing.assert_close(
        out.standardized, torch.tensor([[1.0, -1.0], [0.1, -0.1]], dtype=F64)
    )
    torch.testing.assert_close(out.advantages, torch.tensor([[0.5, -0.5], [0.1, -0.1]], dtype=F64))
    assert out.clip_frac == pytest.approx(0.5)


def test_group_of_one_is_zero_and_int_rewards_are_cast() -> None:
    out = group_advantages(torch.tensor([[1], [0], [5]]))
    assert out.advantages.dtype == torch.float32
    assert torch.equal(out.advantages, torch.zeros(3, 1))


def test_empty_batch() -> None:
    out = group_advantages(torch.zeros(0, 4))
    assert out.advantages.shape == (0, 4)
    assert out.clip_frac == 0.0


rows = st.lists(
    st.lists(st.floats(-50, 50, allow_nan=False), min_size=4, max_size=4), min_size=1, max_size=5
)


@settings(max_examples=60, deadline=None)
@given(rows, st.floats(0.1, 3.0))
def test_properties(data: list[list[float]], a_clip: float) -> None:
    rewards = torch.tensor(data, dtype=F64)
    out = group_advantages(rewards, a_clip=a_clip)
    # Centred before clipping; population variance of a is var / (var + eps) <= 1.
    torch.testing.assert_close(
        out.standardized.sum(1), torch.zeros(len(data), dtype=F64), atol=1e-9, rtol=0
    )
    assert bool((out.standardized.pow(2).mean(1) <= 1 + 1e-12).all())
    assert bool((out.advantages.abs() <= a_clip).all())
    # Shift invariance (the group mean is the baseline).
    shifted = group_advantages(rewards + 7.0, a_clip=a_clip)
    torch.testing.assert_close(shifted.standardized, out.standardized, atol=1e-6, rtol=0)
    assert 0.0 <= out.clip_frac <= 1.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rewards": torch.zeros(4)}, r"rewards must be 2-D \[B, G\].*got shape \(4,\).*view"),
        ({"eps_std": 0.0}, r"eps_std must be > 0.*got 0.0"),
        ({"a_clip": -1.0}, r"a_clip must be > 0 or None.*got -1.0"),
    ],
)
def test_errors(kwargs: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {"rewards": torch.zeros(2, 4)} | kwargs
    with pytest.raises(ValueError, match=match):
        group_advantages(**args)


def test_the_leave_one_out_baseline_is_the_mean_of_the_other_rollouts() -> None:
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [3.0, 1.0, 2.0, 2.0]])
    out = group_advantages(rewards, a_clip=None, normalize=False, estimator="leave_one_out")
    others = (rewards.sum(dim=1, keepdim=True) - rewards) / 3
    assert torch.allclose(out.advantages, rewards - others)
    normalized = group_advantages(rewards, a_clip=None, estimator="leave_one_out")
    plain = group_advantages(rewards, a_clip=None)
    assert torch.allclose(normalized.advantages, plain.advantages * 4 / 3)
    single = group_advantages(torch.tensor([[1.0], [0.0]]), estimator="leave_one_out")
    assert torch.equal(single.advantages, torch.zeros(2, 1))


def test_no_baseline_gives_the_rewards_clipped() -> None:
    rewards = torch.tensor([[1.0, 0.0], [9.0, 2.0]])
    out = group_advantages(rewards, a_clip=5.0, estimator="none")
    assert torch.equal(out.advantages, torch.tensor([[1.0, 0.0], [5.0, 2.0]]))
    assert out.clip_frac == 0.25
    with pytest.raises(ValueError, match="estimator must be"):
        group_advantages(rewards, estimator="mean")  # type: ignore[arg-type]
