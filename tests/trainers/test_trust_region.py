"""The trust region's state (:class:`TrustRegion`) and its one snapshot (:class:`Snapshot`): an
update without a region keeps no copy, one with a region keeps one copy of the parameters and one
of the optimizer state, backtracks in place, and reverts exactly; non-finite losses and gradients
are caught before the optimizer steps."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_update import _result, batch, settings

from trainers.config import OptimConfig, TrustRegionConfig
from trainers.optim import trust_region
from trainers.optim.trust_region import Snapshot, TrustRegion, adapt_beta, adapt_delta
from trainers.optim.update import update_agent


def test_the_trust_region_gives_the_radius_and_adapts_as_configured() -> None:
    region = TrustRegion(TrustRegionConfig(delta=0.01, beta=0.1, delta_mode="adaptive"))
    assert region.radius() == 0.01 and region.radius(enforce=False) is None
    small = _result(kl_tok=0.001, kl_raw=0.001)
    region.adapt(small, 0.01)
    assert region.beta == adapt_beta(0.1, small, 0.01, low=0.1 / 32) == 0.05
    assert region.delta == adapt_delta(0.01, small, low=0.002, high=0.05) == 0.015
    region.adapt(small, None)  # no region this update: beta stays, the radius still adapts
    assert region.beta == 0.05 and region.delta == pytest.approx(0.0225)
    again = TrustRegion(TrustRegionConfig())
    again.load_state_dict(region.state_dict())
    assert (again.beta, again.delta) == (region.beta, region.delta)
    assert TrustRegion(TrustRegionConfig(delta_mode="none")).radius() is None


def _adam(n: int = 3) -> tuple[list[torch.nn.Parameter], torch.optim.Optimizer]:
    params = [torch.nn.Parameter(torch.randn(4, 5, generator=torch.Generator().manual_seed(i))) for i in range(n)]  # fmt: skip
    opt = torch.optim.AdamW(params, lr=0.1)
    for p in params:
        p.grad = torch.ones_like(p)
    opt.step()  # the optimizer has state (moments) from now on
    return params, opt


@pytest.mark.parametrize("device", ["same", "cpu"])
def test_a_snapshot_is_one_copy_that_pulls_back_in_place_and_restores_exactly(device: str) -> None:
    params, opt = _adam()
    before = [p.detach().clone() for p in params]
    state = str(opt.state_dict())
    snap = Snapshot(params, opt, device)  # type: ignore[arg-type]
    snap.restore()  # before take(): nothing changed, nothing to do
    snap.take()
    assert snap.values is not None and snap.state is not None
    assert all(v.data_ptr() != p.data_ptr() for v, p in zip(snap.values, params))  # copies
    held = sum(v.numel() for v in snap.values)
    moments = sum(
        t.numel() for s in snap.state["state"].values() for t in s.values() if t.dim() > 0
    )
    assert held == sum(p.numel() for p in params) and moments == 2 * held  # one copy of each
    snap.take()  # a second call keeps the first copy
    opt.step()
    full = [p.detach().clone() for p in params]
    snap.pull_back()
    snap.pull_back()
    for p, s, f in zip(params, before, full):  # p = s + (f - s) / 4, within rounding
        torch.testing.assert_close(p.detach(), s + 0.25 * (f - s), rtol=1e-6, atol=1e-7)
    snap.restore()
    assert all(torch.equal(p.detach(), s) for p, s in zip(params, before))
    assert str(opt.state_dict()) == state
    snap.release()
    assert snap.values is None and snap.state is None


def test_an_update_without_a_trust_region_takes_no_snapshot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taken: list[int] = []
    real = Snapshot.take

    def counted(self: Snapshot) -> None:
        taken.append(1)
        real(self)

    monkeypatch.setattr(trust_region.Snapshot, "take", counted)
    policy, msgs, adv = batch()
    opt = torch.optim.AdamW(policy.parameters(), lr=0.05)
    result = update_agent(policy, opt, msgs, adv, beta=0.0, delta=None, **settings(epochs=3))
    assert result.accepted and not taken
    result = update_agent(policy, opt, msgs, adv, beta=0.0, delta=0.05, **settings(epochs=3))
    assert result.accepted and len(taken) == 3  # called before each step; copied once


def _poison(policy: object, on_call: int) -> None:
    """Makes the ``on_call``-th backward pass through the logits give a NaN gradient (the loss
    stays finite)."""
    calls = [0]

    def hook(grad: torch.Tensor) -> torch.Tensor:
        calls[0] += 1
        return grad * math.nan if calls[0] == on_call else grad

    policy.logits.register_hook(hook)  # type: ignore[attr-defined]


@pytest.mark.parametrize("delta", [None, 0.05])
def test_a_nonfinite_gradient_is_caught_before_the_step_and_nothing_changes(
    delta: float | None,
) -> None:
    policy, msgs, adv = batch()
    _poison(policy, on_call=1)
    before = policy.logits.detach().clone()
    opt = torch.optim.AdamW(policy.parameters(), lr=0.05)
    state = str(opt.state_dict())
    result = update_agent(policy, opt, msgs, adv, beta=0.0, delta=delta, **settings(epochs=2))
    assert not result.accepted and result.reason == "nonfinite_grad"
    assert torch.equal(policy.logits.detach(), before) and str(opt.state_dict()) == state


def test_without_a_region_a_later_nonfinite_epoch_keeps_the_finite_ones() -> None:
    """No snapshot to return to: the first epoch's step stays, and the record says why the
    update stopped; with a region the same update is reverted exactly."""
    policy, msgs, adv = batch()
    _poison(policy, on_call=2)
    before = policy.logits.detach().clone()
    opt = torch.optim.AdamW(policy.parameters(), lr=0.05)
    result = update_agent(policy, opt, msgs, adv, beta=0.0, delta=None, **settings(epochs=3))
    assert result.accepted and result.reason == "nonfinite_stopped" and result.changed_weights
    assert not torch.equal(policy.logits.detach(), before)
    policy, msgs, adv = batch()
    _poison(policy, on_call=2)
    before = policy.logits.detach().clone()
    opt = torch.optim.AdamW(policy.parameters(), lr=0.05)
    result = update_agent(policy, opt, msgs, adv, beta=0.0, delta=10.0, **settings(epochs=3))
    assert not result.accepted and result.reason == "nonfinite_grad"
    assert torch.equal(policy.logits.detach(), before)


def test_a_backtracked_update_keeps_the_scaled_step() -> None:
    """In-place halving gives ``s + scale * (f - s)``, ``f`` the full step (here the same update
    taken without a region), within rounding."""
    kwargs = settings(epochs=3, max_backtracks=12)
    policy, msgs, adv = batch()
    start = policy.logits.detach().clone()
    full_policy = policy.copy()
    opt = torch.optim.SGD(policy.parameters(), lr=50.0)
    result = update_agent(policy, opt, msgs, adv, beta=0.0, delta=0.01, **kwargs)
    assert result.accepted and result.backtracks >= 2
    opt = torch.optim.SGD(full_policy.parameters(), lr=50.0)
    update_agent(full_policy, opt, msgs, adv, beta=0.0, delta=None, **kwargs)
    full = full_policy.logits.detach()
    expected = start + result.step_scale * (full - start)
    torch.testing.assert_close(policy.logits.detach(), expected, rtol=1e-6, atol=1e-6)


def test_snapshot_device_is_a_checked_choice() -> None:
    assert TrustRegionConfig(snapshot_device="cpu").snapshot_device == "cpu"
    with pytest.raises(ValueError, match="snapshot_device"):
        TrustRegionConfig(snapshot_device="gpu")  # type: ignore[arg-type]
    assert OptimConfig().epochs >= 1


@pytest.mark.slow
def test_the_trust_region_adds_at_most_one_copy_and_none_without_a_region(tmp_path: Path) -> None:
    """Peak memory of one steady-state update (AdamW state made by a first update) of a 19M
    parameter model, each in a fresh process: without a region teamtr's update peaks no higher
    than a bare PyTorch step on the same batch (+10%); with a region, and backtracks forced, it
    adds at most one copy of the parameters and one of the optimizer state (+10%)."""
    script = Path(__file__).with_name("helpers_memory.py")
    model = tmp_path / "model"
    peaks = {}
    for arm in ("build", "bare", "off", "on"):
        done = subprocess.run(
            [sys.executable, str(script), arm, str(model)],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"},
        )
        if arm != "build":
            peaks[arm] = int(done.stdout.split()[-1])
    params = int((model / "param_bytes").read_text())
    slack = 24 * 2**20
    assert peaks["off"] <= 1.1 * peaks["bare"] + slack, (peaks, params)
    assert peaks["on"] - peaks["off"] <= 1.1 * 3 * params + slack, (peaks, params)
