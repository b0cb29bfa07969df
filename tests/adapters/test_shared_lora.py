"""Shared-base LoRA teams: one frozen base, an adapter per agent, the numbers of separate copies."""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import torch
from rich.console import Console

import teamtr_env
from adapters.hf import HFPolicy
from adapters.shared_lora import LoraAgentPolicy, SharedLoraBase
from adapters.team import build_team, team_config_from_dict
from tasks.dataset import DatasetTask
from teamtr_core.config import from_dict
from teamtr_core.errors import ConfigError
from teamtr_core.policy import LoraSettings, SamplingParams
from trainers.config import TrainConfig
from trainers.learners.callbacks import Callback
from trainers.run.recipe import load_checkpoint, run_training

AGENTS = ("solver", "critic", "aggregator")
LORA = LoraSettings(r=4)
PROMPTS = ["1 + 2 =", "3 + 4 =", "1 + 2 ="]
REPLIES = ["Answer: 3", "7", "x"]
SAMPLING = SamplingParams(temperature=1.0, max_new_tokens=5, top_k=0, seed=3)


def _separate(path: Path) -> dict[str, HFPolicy]:
    torch.manual_seed(0)
    return {a: HFPolicy.from_pretrained(path, lora=LORA) for a in AGENTS}


def _shared(path: Path) -> tuple[SharedLoraBase, dict[str, LoraAgentPolicy]]:
    torch.manual_seed(0)
    base = SharedLoraBase.from_pretrained(path)
    return base, {a: base.add_agent(a, lora=LORA) for a in AGENTS}


def _perturb(*teams: dict[str, Any]) -> None:
    """The same random change to every team's adapters (a fresh lora_B is 0: no effect yet)."""
    generator = torch.Generator().manual_seed(1)
    for agent in AGENTS:
        for params in zip(*(list(team[agent].parameters()) for team in teams)):
            noise = 0.2 * torch.randn(params[0].shape, generator=generator)
            with torch.no_grad():
                for p in params:
                    p.add_(noise)


def test_a_shared_base_gives_the_samples_and_logprobs_of_separate_copies(
    tiny_model_dir: Path,
) -> None:
    separate = _separate(tiny_model_dir)
    _, shared = _shared(tiny_model_dir)
    for agent in AGENTS:  # the same seed gives the same fresh adapters
        pairs = zip(separate[agent].parameters(), shared[agent].parameters(), strict=True)
        assert all(torch.equal(a, b) for a, b in pairs)
    _perturb(separate, shared)
    for agent in AGENTS:
        ours, theirs = shared[agent], separate[agent]
        assert [g.text for g in ours.generate(PROMPTS, SAMPLING)] == [
            g.text for g in theirs.generate(PROMPTS, SAMPLING)
        ]
        torch.testing.assert_close(
            ours.logprobs(PROMPTS, REPLIES).logprobs,
            theirs.logprobs(PROMPTS, REPLIES).logprobs,
            atol=1e-5,
            rtol=1e-5,
        )
    # The agents differ from each other (each runs its own adapter).
    solver = shared["solver"].logprobs(PROMPTS, REPLIES).logprobs
    critic = shared["critic"].logprobs(PROMPTS, REPLIES).logprobs
    assert not torch.allclose(solver, critic)


def test_the_base_is_held_once_and_each_agent_trains_only_its_adapter(
    tiny_model_dir: Path,
) -> None:
    base, shared = _shared(tiny_model_dir)
    one = sum(
        p.numel() * p.element_size() for p in _separate(tiny_model_dir)["solver"].model.parameters()
    )
    sizes = base.param_bytes()
    assert sizes["total"] <= 1.2 * one
    assert sizes["adapters"] == sum(
        p.numel() * p.element_size() for a in AGENTS for p in shared[a].parameters()
    )
    frozen = [n for n, p in base.model.named_parameters() if p.requires_grad and "lora_" not in n]
    assert frozen == []
    # A loss of the solver, then the critic runs: only the solver's adapter gets gradients.
    loss = shared["solver"].logprobs(PROMPTS, REPLIES).logprobs.sum()
    shared["critic"].generate(PROMPTS, SAMPLING)
    loss.backward()
    assert all(p.grad is not None for p in shared["solver"].parameters())
    assert all(p.grad is None for a in ("critic", "aggregator") for p in shared[a].parameters())
    assert all(p.requires_grad for a in AGENTS for p in shared[a].parameters())


def test_state_save_and_reference_carry_the_adapter_only(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    base, shared = _shared(tiny_model_dir)
    _perturb(shared)
    state = shared["solver"].state_dict()
    assert state and all("lora_" in key for key in state)
    assert sum(v.numel() for v in state.values()) == sum(
        p.numel() for p in shared["solver"].parameters()
    )
    shared["aggregator"].load_state_dict(state)
    torch.testing.assert_close(
        shared["aggregator"].logprobs(PROMPTS, REPLIES).logprobs,
        shared["solver"].logprobs(PROMPTS, REPLIES).logprobs,
    )
    with pytest.raises(KeyError, match="adapter-only"):
        shared["critic"].load_state_dict(HFPolicy.from_pretrained(tiny_model_dir).state_dict())
    # A saved adapter loads on a separate copy and on another shared base, with the same scores.
    shared["critic"].save_pretrained(tmp_path / "critic")
    expected = shared["critic"].logprobs(PROMPTS, REPLIES).logprobs
    alone = HFPolicy.from_pretrained(tiny_model_dir, adapter_path=tmp_path / "critic")
    again = SharedLoraBase.from_pretrained(tiny_model_dir).add_agent(
        "critic", adapter_path=tmp_path / "critic"
    )
    for policy in (alone, again):
        torch.testing.assert_close(policy.logprobs(PROMPTS, REPLIES).logprobs, expected)
    # The reference policy is a frozen adapter on the same base, not a copy of the model.
    reference = shared["critic"].frozen_copy()
    assert reference.base is base and not any(p.requires_grad for p in reference.parameters())
    torch.testing.assert_close(reference.logprobs(PROMPTS, REPLIES).logprobs, expected)
    with pytest.raises(ValueError, match="shares its base"):
        shared["critic"].merge_lora()
    with pytest.raises(ValueError, match="already has an adapter"):
        base.add_agent("critic", lora=LORA)
    with pytest.raises(ValueError, match="exactly one of lora and adapter_path"):
        base.add_agent("judge")


def test_a_team_config_shares_bases_where_it_can(tiny_model_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    HFPolicy.from_pretrained(tiny_model_dir).save_pretrained(other)
    config = team_config_from_dict(
        {
            "shared_base": True,
            "default": {"backend": "hf", "path": str(tiny_model_dir), "lora": {"r": 2}},
            "agents": {
                "critic": {"backend": "hf", "path": str(tiny_model_dir)},  # full fine-tuning
                "aggregator": {"backend": "hf", "path": str(other), "lora": {"r": 2}},
            },
        }
    )
    policies, _ = build_team(config, AGENTS)
    solver = policies["solver"]
    assert isinstance(solver, LoraAgentPolicy) and isinstance(
        policies["aggregator"], LoraAgentPolicy
    )
    assert not isinstance(policies["critic"], LoraAgentPolicy)
    assert policies["aggregator"].base is not solver.base  # another model directory
    both = team_config_from_dict(
        {
            "shared_base": True,
            "default": {
                "backend": "hf",
                "path": str(tiny_model_dir),
                "lora": {"r": 2},
                "adapter_path": str(tmp_path),
            },
        }
    )
    with pytest.raises(ConfigError, match="not both"):
        build_team(both, AGENTS)


CAPITALS = Path(__file__).resolve().parents[1] / "fixtures" / "dataset" / "capitals.jsonl"
TASK_ID = "test/SharedLora-v0"


def variety(prompts: Any, completions: Any, answer: Any, **kw: Any) -> list[float]:
    """A reward that an untrained model already earns in part (distinct characters), so that
    every group has advantages and every update moves its adapter."""
    return [len(set(c)) / 8 for c in completions]


@pytest.fixture
def task() -> Iterator[str]:
    teamtr_env.register(
        TASK_ID,
        DatasetTask,
        kwargs={"path": str(CAPITALS), "prompt_column": "question", "reward_funcs": [variety]},
        env_kwargs={"system_prompts": {a: "" for a in AGENTS}},
        override=True,
    )
    try:
        yield TASK_ID
    finally:
        teamtr_env.registry.unregister(TASK_ID)


def _config(run_dir: Path, task: str, model: Path, shared: bool) -> TrainConfig:
    lora = {"r": 4, "alpha": 32}
    data = {
        "task": task,
        "task_options": {},
        "team": {
            "shared_base": shared,
            "default": {"backend": "hf", "path": str(model), "lora": lora},
        },
        "sampling": {"max_new_tokens": 6},
        "sft": None,
        "schedule": {"stages": 2, "problems_per_batch": 2, "group_size": 2},
        # a KL penalty to each agent's reference: a shared team's references are frozen adapters
        "trust_region": {"beta": 0.05},
        "optim": {"lr": 0.01},
        "eval": {"problems": 4, "k": 2, "train_distribution": False},  # held-out numbers only
        "progress": False,
        "loggers": [],
        "plot": False,
        "run_dir": str(run_dir),
    }
    return from_dict(TrainConfig, data)


def test_training_a_shared_base_team_gives_the_numbers_of_separate_copies(
    task: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    quiet = Console(file=io.StringIO())
    runs = {}
    for shared in (False, True):
        torch.manual_seed(int(shared))  # the run seeds the adapters' init, not the caller
        config = _config(tmp_path / str(shared), task, tiny_model_dir, shared)
        runs[shared] = run_training(config, console=quiet)
    separate, shared_run = runs[False], runs[True]
    for when in ("before", "after"):
        keys = [k for k in separate[when] if k.startswith("eval/")]
        assert keys
        for key in keys:
            assert shared_run[when][key] == pytest.approx(separate[when][key], abs=1e-6), key
    assert [r for r in shared_run["updates"] if r["kl_tok"] > 1e-6], "no update moved"
    for ours, theirs in zip(shared_run["updates"], separate["updates"], strict=True):
        assert (ours["agent"], ours["accepted"]) == (theirs["agent"], theirs["accepted"])
        for key in ("kl_tok", "l_seq", "ref_kl", "step_scale"):
            assert ours[key] == pytest.approx(theirs[key], rel=1e-4, abs=1e-6, nan_ok=True), key


@pytest.mark.slow  # a resumed whole training; resume equality in tests/trainers/test_run.py, shared-base numbers in this file
def test_a_shared_base_run_checkpoints_adapters_and_resumes(
    task: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    quiet = Console(file=io.StringIO())
    whole = run_training(_config(tmp_path / "whole", task, tiny_model_dir, True), console=quiet)
    cut = _config(tmp_path / "cut", task, tiny_model_dir, True)
    run_training(cut, console=quiet, callbacks=[StopAfter(1)])
    found = load_checkpoint(tmp_path / "cut")
    assert found is not None and found["trainer"]["stage"] == 1
    for agent in AGENTS:
        policy_state = found["trainer"]["slots"][agent]["policy"]
        assert policy_state and all("lora_" in key for key in policy_state)
    resumed = run_training(cut, resume=True, console=quiet)
    for key, value in whole["after"].items():
        if key.startswith("eval/"):
            assert resumed["after"][key] == pytest.approx(value, abs=1e-6), key


class StopAfter(Callback):
    """Stops a run after stage ``stage``."""

    def __init__(self, stage: int) -> None:
        self.stage = stage

    def on_stage_end(self, stage: int, metrics: Mapping[str, float]) -> bool | None:
        return stage == self.stage
