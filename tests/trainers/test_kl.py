"""Token-KL monitor (Eq. 18), k3 penalty and the G.4 flip rate: hand values, Monte Carlo, safety."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trainers.optim.kl import kl_penalty, message_subset, monitor_flip_rate, token_kl_monitor

F64 = torch.float64
# Token log-ratios log(pi_cur / pi_new) at counted tokens: message 0 -> 0.5, -0.2; message 1 -> 0.4.
CUR = torch.tensor([[-1.0, -2.0, 5.0], [-3.0, 9.0, 9.0]], dtype=F64)
NEW = torch.tensor([[-1.5, -1.8, -9.0], [-3.4, 0.0, 0.0]], dtype=F64)
MASK = torch.tensor([[True, True, False], [True, False, False]])


def test_monitor_hand_values() -> None:
    est = token_kl_monitor(CUR, NEW, MASK)
    assert est.value == pytest.approx(0.35, abs=1e-12)  # (0.3 + 0.4) / 2
    torch.testing.assert_close(
        est.per_message, torch.tensor([0.3, 0.4], dtype=F64), rtol=0, atol=1e-12
    )
    assert (est.n_messages, est.n_tokens) == (2, 3)


def test_monitor_ignores_padding_and_has_no_grad() -> None:
    new = NEW.clone()
    new[~MASK] = 1e6
    new.requires_grad_()
    est = token_kl_monitor(CUR, new, MASK)
    assert est.value == pytest.approx(0.35, abs=1e-12)
    assert not est.per_message.requires_grad


def test_monitor_empty_batch() -> None:
    est = token_kl_monitor(
        torch.zeros(0, 4), torch.zeros(0, 4), torch.zeros(0, 4, dtype=torch.bool)
    )
    assert (est.value, est.n_messages, est.n_tokens) == (0.0, 0, 0)


def test_subsampled_monitor_is_unbiased() -> None:
    gen = torch.Generator().manual_seed(1)
    cur = torch.randn(8, 12, dtype=F64, generator=gen)
    new = cur + 0.3 * torch.randn(8, 12, dtype=F64, generator=gen)
    mask = torch.rand(8, 12, generator=gen) < 0.8
    full = token_kl_monitor(cur, new, mask)
    draws = [token_kl_monitor(cur, new, mask, subsample=0.25, generator=gen) for _ in range(2000)]
    values = torch.tensor([d.value for d in draws], dtype=F64)
    stderr = values.std().item() / math.sqrt(len(values))
    assert abs(values.mean().item() - full.value) < 4 * stderr
    kept = sum(d.n_tokens for d in draws) / len(draws)
    assert kept == pytest.approx(0.25 * full.n_tokens, rel=0.03)


def test_monitor_estimates_exact_message_kl_by_chain_rule() -> None:
    """Two-token autoregressive messages (Lemma B.3): E_cur[sum_u log ratio] = KL(P || Q)."""
    p1, q1 = torch.tensor([0.5, 0.3, 0.2], dtype=F64), torch.tensor([0.2, 0.5, 0.3], dtype=F64)
    p2 = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [1 / 3, 1 / 3, 1 / 3]], dtype=F64)
    q2 = torch.tensor([[0.5, 0.25, 0.25], [0.2, 0.3, 0.5], [0.6, 0.2, 0.2]], dtype=F64)

    # Exact message-level KL by enumerating the 9 messages (not via the chain rule).
    pm, qm = p1[:, None] * p2, q1[:, None] * q2
    exact = (pm * (pm / qm).log()).sum().item()
    gen = torch.Generator().manual_seed(2)
    n = 20000
    x1 = torch.multinomial(p1, n, replacement=True, generator=gen)
    x2 = torch.multinomial(p2[x1], 1, generator=gen).squeeze(1)
    cur = torch.stack([p1[x1].log(), p2[x1, x2].log(), torch.full((n,), -7.0, dtype=F64)], 1)
    new = torch.stack([q1[x1].log(), q2[x1, x2].log(), torch.full((n,), 3.0, dtype=F64)], 1)
    mask = torch.tensor([True, True, False]).expand(n, 3)
    est = token_kl_monitor(cur, new, mask)
    stderr = est.per_message.std().item() / math.sqrt(n)
    assert abs(est.value - exact) < 4 * stderr
    assert exact == pytest.approx(0.3614134407287357, abs=1e-12)


def test_kl_penalty_hand_value() -> None:
    # k3(r) = e^r - 1 - r for r = logp_new - logp_cur = -0.5, 0.2 | -0.4
    # msg0 = 0.1065306597 + 0.0214027582, msg1 = 0.0703200460 -> mean 0.0991267320
    new = NEW.clone().requires_grad_()
    pen = kl_penalty(CUR, new, MASK)
    assert pen.item() == pytest.approx(0.09912673195422131, abs=1e-12)
    pen.backward()
    assert new.grad is not None
    expected = torch.zeros(2, 3, dtype=F64)
    expected[0, :2] = torch.tensor([math.exp(-0.5) - 1, math.exp(0.2) - 1], dtype=F64) / 2
    expected[1, 0] = (math.exp(-0.4) - 1) / 2
    torch.testing.assert_close(new.grad, expected, rtol=0, atol=1e-12)


def test_kl_penalty_zero_at_equal_policies_with_zero_gradient() -> None:
    cur = torch.randn(3, 4, dtype=F64)
    new = cur.clone().requires_grad_()
    pen = kl_penalty(cur, new, torch.ones(3, 4, dtype=torch.bool))
    assert pen.item() == 0.0
    pen.backward()
    assert new.grad is not None and torch.equal(new.grad, torch.zeros(3, 4, dtype=F64))


def test_kl_penalty_grad_only_through_new_and_safe_for_huge_values() -> None:
    cur = torch.tensor([[0.0, 0.0, 1e30]], requires_grad=True)
    new = torch.tensor([[800.0, -800.0, -1e30]], requires_grad=True)
    pen = kl_penalty(cur, new, torch.tensor([[True, True, False]]))
    assert torch.isfinite(pen)
    pen.backward()
    assert cur.grad is None
    assert new.grad is not None and torch.isfinite(new.grad).all()


def test_kl_penalty_empty_batch() -> None:
    new = torch.zeros(0, 3, requires_grad=True)
    pen = kl_penalty(torch.zeros(0, 3), new, torch.zeros(0, 3, dtype=torch.bool))
    pen.backward()
    assert pen.item() == 0.0 and new.grad is not None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(-30, 30), st.floats(-30, 30), st.booleans()), min_size=1, max_size=12
    )
)
def test_kl_penalty_nonnegative(tokens: list[tuple[float, float, bool]]) -> None:
    cur = torch.tensor([[c for c, _, _ in tokens]], dtype=F64)
    new = torch.tensor([[n for _, n, _ in tokens]], dtype=F64)
    mask = torch.tensor([[m for _, _, m in tokens]])
    pen = kl_penalty(cur, new, mask).item()
    assert math.isfinite(pen) and pen >= 0.0


def test_flip_rate_hand_values() -> None:
    # One token with log ratio 0.5, delta 0.6: the full estimate is inside. Keeping the token
    # (prob q) gives 0.5 / q > 0.6 (a flip); dropping it gives 0 (inside).
    cur, new, mask = torch.tensor([[0.5]]), torch.tensor([[0.0]]), torch.tensor([[True]])
    gen = torch.Generator().manual_seed(3)
    kw: dict[str, Any] = {"delta": 0.6, "n_trials": 2000, "generator": gen}
    assert monitor_flip_rate(cur, new, mask, fraction=0.5, **kw) == pytest.approx(0.5, abs=0.04)
    assert monitor_flip_rate(cur, new, mask, fraction=0.25, **kw) == pytest.approx(0.25, abs=0.04)
    assert monitor_flip_rate(cur, new, mask, fraction=1.0, **kw) == 0.0
    empty = torch.zeros(0, 1)
    assert monitor_flip_rate(empty, empty, empty.bool(), fraction=0.5, delta=0.1) == 0.0


def test_flip_rate_zero_far_from_threshold() -> None:
    gen = torch.Generator().manual_seed(4)
    cur = torch.zeros(16, 10)
    new = -0.001 * torch.rand(16, 10, generator=gen)  # KL ~ 0.005 per message << delta
    rate = monitor_flip_rate(
        cur,
        new,
        torch.ones(16, 10, dtype=torch.bool),
        delta=1.0,
        fraction=0.25,
        n_trials=50,
        generator=gen,
    )
    assert rate == 0.0


G = torch.zeros(1, 2)
M = torch.ones(1, 2, dtype=torch.bool)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: token_kl_monitor(G, G, M, subsample=0.0),
            r"subsample must be in \(0, 1\].*got 0.0",
        ),
        (
            lambda: token_kl_monitor(G, G, M, subsample=1.5),
            r"subsample must be in \(0, 1\].*got 1.5",
        ),
        (lambda: token_kl_monitor(G, torch.zeros(1, 3), M), r"logp_new must have the mask's shape"),
        (lambda: kl_penalty(G, G, M.float()), r"mask must be a bool tensor"),
        (
            lambda: monitor_flip_rate(G, G, M, delta=0.0, fraction=0.5),
            r"delta must be > 0.*got 0.0",
        ),
        (
            lambda: monitor_flip_rate(G, G, M, delta=0.1, fraction=0.0),
            r"fraction must be in \(0, 1\]",
        ),
        (
            lambda: monitor_flip_rate(G, G, M, delta=0.1, fraction=0.5, n_trials=0),
            r"n_trials must be >= 1; got 0",
        ),
    ],
)
def test_errors(call: Callable[[], object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def test_message_subsets_are_unbiased_and_their_flip_rate_has_hand_values() -> None:
    gen = torch.Generator().manual_seed(5)
    cur = torch.randn(8, 12, dtype=F64, generator=gen)
    new = cur + 0.3 * torch.randn(8, 12, dtype=F64, generator=gen)
    mask = torch.rand(8, 12, generator=gen) < 0.8
    full = token_kl_monitor(cur, new, mask)
    per_message = full.per_message
    idx = message_subset(8, 0.25, gen)
    assert idx.tolist() == sorted(set(idx.tolist())) and len(idx) == 2
    draws = torch.stack([per_message[message_subset(8, 0.25, gen)].mean() for _ in range(4000)])
    stderr = draws.std().item() / math.sqrt(len(draws))
    assert abs(draws.mean().item() - full.value) < 4 * stderr
    assert len(message_subset(3, 0.01, gen)) == 1 and len(message_subset(3, 1.0, gen)) == 3
    # Two messages with sums 0 and 1, delta 0.6: the full mean 0.5 is inside; a half-subset
    # keeps one message, and the one with sum 1 (probability 1/2) flips the decision.
    two_cur = torch.tensor([[0.0], [1.0]], dtype=F64)
    two_new = torch.zeros(2, 1, dtype=F64)
    kw: dict[str, Any] = {"delta": 0.6, "n_trials": 2000, "generator": gen, "unit": "message"}
    ones = torch.ones(2, 1, dtype=torch.bool)
    assert monitor_flip_rate(two_cur, two_new, ones, fraction=0.5, **kw) == pytest.approx(
        0.5, abs=0.04
    )
    assert monitor_flip_rate(two_cur, two_new, ones, fraction=1.0, **kw) == 0.0
    with pytest.raises(ValueError, match="unit must be"):
        monitor_flip_rate(two_cur, two_new, ones, fraction=0.5, delta=0.6, unit="row")
