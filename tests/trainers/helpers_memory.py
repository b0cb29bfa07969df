"""One arm of test_trust_region's memory test, run in a fresh process:
``python helpers_memory.py ARM MODEL_DIR`` prints the peak resident bytes of one steady-state
update (a first update made the optimizer's state) over the loaded model (``build`` saves the
model and its parameter bytes instead).

Arms: ``bare``, a plain PyTorch step (log-probs, loss, backward, clip, AdamW step) on the
batch; ``off``, teamtr's update without a trust region; ``on``, with one, its step forced to
backtrack twice and then revert (the most the trust region ever holds)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from _bench import peak_rss_bytes, reset_peak_rss

from adapters.hf import HFPolicy
from adapters.tiny import TinyModelSpec, build_tiny_model
from teamtr_env.rollout import MessageRecord
from trainers.config import OptimConfig, TrustRegionConfig
from trainers.optim.update import update_agent

SPEC = TinyModelSpec(hidden_size=512, num_layers=6, num_heads=8, intermediate_size=2048)
N = 4  # messages: the parameters dominate


def batch(policy: HFPolicy) -> tuple[list[MessageRecord], torch.Tensor]:
    texts = ["12+7=19", "3+4=7", "8+8=16", "5+9=14"][:N]
    messages = [MessageRecord(i, i, 0, "a", "q: ", t, ()) for i, t in enumerate(texts)]
    return messages, torch.tensor([1.0, -1.0, 0.5, -0.5][:N])


def bare_step(policy: HFPolicy, optimizer: torch.optim.Optimizer) -> None:
    messages, adv = batch(policy)
    lp = policy.logprobs([m.context for m in messages], [m.text for m in messages])
    loss = -((lp.logprobs * lp.mask).sum(-1) * adv).mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(policy.parameters()), 1.0)
    optimizer.step()


def teamtr_step(policy: HFPolicy, optimizer: torch.optim.Optimizer, region: bool) -> None:
    messages, adv = batch(policy)
    update_agent(
        policy,
        optimizer,
        messages,
        adv,
        beta=0.0,
        delta=1e-12 if region else None,  # every step leaves the region: backtracks, revert
        optim=OptimConfig(epochs=1, lr=1e-3),
        region=TrustRegionConfig(max_backtracks=2),
    )


def planned(model_dir: Path, hidden: int, layers: int) -> None:
    """Builds a model of ``hidden`` x ``layers``, takes two updates (trust region on, accepted)
    and prints the second's peak over the memory before the model was loaded, and the plan's
    prediction of it (``trainers.run.memory_model``)."""
    from trainers.run.memory_model import ModelShape, update_peak

    spec = TinyModelSpec(
        hidden_size=hidden, num_layers=layers, num_heads=hidden // 64, intermediate_size=4 * hidden
    )
    build_tiny_model(model_dir, spec)
    messages, adv = batch(None)  # type: ignore[arg-type]
    base = reset_peak_rss()
    policy = HFPolicy.from_pretrained(model_dir, shared_prefix=False)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-4)
    kwargs = {
        "beta": 0.0,
        "delta": 10.0,
        "optim": OptimConfig(epochs=1, lr=1e-4),
        "region": TrustRegionConfig(),
    }
    update_agent(policy, optimizer, messages, adv, **kwargs)
    reset_peak_rss()
    update_agent(policy, optimizer, messages, adv, **kwargs)
    measured = peak_rss_bytes() - base
    shape = ModelShape.from_folder(model_dir)
    tokens = sum(
        len(policy.prompt_ids(m.context)) + len(policy.codec.completion_ids(m.text))
        for m in messages
    )
    predicted = update_peak(shape, dtype="float32", trainable=shape.parameters, tokens=tokens).peak(
        1
    )
    print(measured, predicted)


def main() -> None:
    arm, model_dir = sys.argv[1], Path(sys.argv[2])
    torch.set_num_threads(1)
    if arm == "plan":
        planned(model_dir, int(sys.argv[3]), int(sys.argv[4]))
        return
    if arm == "build":
        build_tiny_model(model_dir, SPEC)
        policy = HFPolicy.from_pretrained(model_dir)
        size = sum(p.numel() * p.element_size() for p in policy.parameters())
        (model_dir / "param_bytes").write_text(str(size))
        return
    policy = HFPolicy.from_pretrained(model_dir)
    for p in policy.model.parameters():  # the mapped file's pages resident: the loaded model
        float(p.detach().sum())
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3)
    base = reset_peak_rss()
    bare_step(policy, optimizer)  # the optimizer's state exists from here on, in every arm
    optimizer.zero_grad(set_to_none=True)  # every arm starts its step without gradients
    reset_peak_rss()
    if arm == "bare":
        bare_step(policy, optimizer)
    else:
        teamtr_step(policy, optimizer, region=arm == "on")
    print(peak_rss_bytes() - base)


if __name__ == "__main__":
    main()
