"""VLLMPolicy and VLLMLoraTeam against a real vLLM engine (``make test-vllm``): the engine's
distribution and log-probs match HFPolicy's, weight syncs take effect in both engine modes (the
default multiprocess engine and the in-process one), and one engine serves every agent's
adapter."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import torch

from adapters import vllm_policy
from adapters.hf import HFPolicy
from adapters.shared_lora import SharedLoraBase
from adapters.vllm_policy import VLLMLoraTeam, VLLMPolicy
from teamtr_core.policy import LoraSettings, SamplingParams

PROMPTS = ["Compute: 12 + 30\n### solver\n", "abc", "x" * 40]
GREEDY = SamplingParams(temperature=0.0, max_new_tokens=10, seed=0)


def start_engine(path: Path, trainer: HFPolicy, in_process: bool, **kwargs) -> VLLMPolicy:
    """A float32 engine on ``path`` in the chosen mode (the variable is read at start-up)."""
    old = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0" if in_process else "1"
    if in_process:
        kwargs.setdefault("distributed_executor_backend", "uni")
    try:
        return VLLMPolicy(
            path,
            max_prompt_tokens=trainer.max_prompt_tokens,
            dtype="float32",
            max_model_len=512,
            **kwargs,
        )
    finally:
        if old is None:
            os.environ.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
        else:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = old


@pytest.fixture(scope="module", params=["multiprocess", "in_process"])
def engine(request, tiny_model_dir: Path) -> Iterator[tuple[VLLMPolicy, Path]]:
    """One engine per mode for the whole module."""
    trainer = HFPolicy.from_pretrained(tiny_model_dir)
    policy = start_engine(tiny_model_dir, trainer, request.param == "in_process")
    yield policy, tiny_model_dir
    policy.close()


def greedy_ids(policy) -> list[tuple[int, ...]]:
    return [g.token_ids for g in policy.generate(PROMPTS, GREEDY)]


def test_the_engine_matches_hf_log_probs_and_finishes_messages_alike(engine) -> None:
    policy, path = engine
    trainer = HFPolicy.from_pretrained(path)
    policy.sync_weights(trainer)  # the module's engine may have served other weights before
    sampling = SamplingParams(temperature=0.8, max_new_tokens=12, seed=3)
    gens = policy.generate(PROMPTS * 8, sampling)
    scored = trainer.logprobs(PROMPTS * 8, [g.token_ids for g in gens], temperature=0.8)
    for b, g in enumerate(gens):
        assert len(g.logprobs) == len(g.token_ids) > 0
        # the engine's log-probs (after the temperature) are the trainer's, token by token
        torch.testing.assert_close(
            torch.tensor(g.logprobs), scored.logprobs[b, : len(g.token_ids)], atol=2e-4, rtol=0
        )
        assert g.clipped == (trainer.eos_id not in g.token_ids)
    assert greedy_ids(policy) == greedy_ids(trainer)


def test_a_full_weight_sync_takes_effect(engine) -> None:
    policy, path = engine
    trainer = HFPolicy.from_pretrained(path)
    before = greedy_ids(trainer)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(0.5 * torch.randn_like(p))
    assert greedy_ids(trainer) != before
    count = policy.syncs.count
    files: list[str] = []
    real = vllm_policy.tempfile.mkdtemp

    def recorded(*args, **kwargs):  # type: ignore[no-untyped-def]
        files.append(real(*args, **kwargs))
        return files[-1]

    vllm_policy.tempfile.mkdtemp = recorded  # type: ignore[assignment]
    try:
        sent = policy.sync_weights(trainer)
    finally:
        vllm_policy.tempfile.mkdtemp = real  # type: ignore[assignment]
    assert sent == len(trainer.model.state_dict())
    assert policy.syncs.count == count + 1 and policy.syncs.bytes > 0
    assert greedy_ids(policy) == greedy_ids(trainer)
    # an in-process engine is handed the tensors; a multiprocess one reads a file
    assert bool(files) == (not policy.in_process)


def test_a_lora_policy_is_served_merged(engine) -> None:
    policy, path = engine
    lora = HFPolicy.from_pretrained(path, lora=LoraSettings(r=4))
    with torch.no_grad():
        for name, p in lora.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(1))
    policy.sync_weights(lora)
    assert greedy_ids(policy) == greedy_ids(lora)
    assert lora.is_lora  # the trainer's model was not merged in place


def test_one_engine_serves_every_agents_adapter(tiny_model_dir: Path, tmp_path: Path) -> None:
    base = SharedLoraBase.from_pretrained(tiny_model_dir)
    trainers = {a: base.add_agent(a, lora=LoraSettings(r=2)) for a in ("solver", "critic")}
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1"
    me = psutil.Process()
    others = {p.pid for p in me.children(recursive=True)}  # another test's engine, if any
    team = VLLMLoraTeam(
        tiny_model_dir,
        adapter_dir=tmp_path,
        max_lora_rank=8,
        dtype="float32",
        max_model_len=512,
        max_prompt_tokens=trainers["solver"].max_prompt_tokens,
    )
    served = {a: team.agent(a) for a in trainers}
    for shift, (agent, policy) in enumerate(trainers.items()):
        with torch.no_grad():
            for p in policy.parameters():
                p.add_(0.2 * (shift + 1))
        served[agent].sync_weights(policy)
    for agent, policy in trainers.items():
        assert greedy_ids(served[agent]) == greedy_ids(policy), agent
    assert greedy_ids(served["solver"]) != greedy_ids(served["critic"])
    # a newer version of one adapter replaces it; the other agent's is untouched
    critic_before = greedy_ids(served["critic"])
    with torch.no_grad():
        for p in trainers["solver"].parameters():
            p.add_(0.3)
    served["solver"].sync_weights(trainers["solver"])
    assert greedy_ids(served["solver"]) == greedy_ids(trainers["solver"])
    assert greedy_ids(served["critic"]) == critic_before
    assert served["solver"].syncs.count == 2 and served["critic"].syncs.count == 1
    # closing stops the shared engine's processes, for every agent
    workers = [p for p in me.children(recursive=True) if p.pid not in others]
    assert workers  # the multiprocess engine's core runs in child processes
    served["solver"].close()
    assert team.engine.closed
    _, alive = psutil.wait_procs(workers, timeout=30)
    assert not alive, alive
    with pytest.raises(RuntimeError, match="closed"):
        served["critic"].generate(PROMPTS, GREEDY)
    served["critic"].close()  # twice is fine
