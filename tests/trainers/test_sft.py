"""Behaviour cloning: expert data from the runner, NLL with the EOS, determinism, NaN guard, early
stop, and policies without a tokenizer (tabular)."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any

import pytest
import torch

import teamtr_env
from adapters.hf import HFPolicy
from adapters.tabular import TabularPolicy
from teamtr_core.config_schema import json_schema
from teamtr_core.policy import SamplingParams, TokenLogprobs
from trainers.optim.sft import SFTConfig, behaviour_clone, collect_expert_data

# 24 steps of 8 (2.4 s): the NLL falls to 0.19 of its start, the EOS log-prob to -1.06 (the tests
# ask for 0.5 and log 0.2 = -1.61), and greedy decoding writes "Answer: ...".
SMALL = SFTConfig(problems=32, steps=24, batch_size=8, lr=5e-3)


def _solo_env() -> teamtr_env.TeamEnv:
    return teamtr_env.make("teamtr/Arith-v0", agents=("solver",))


def _solo_data(n: int = 32, seed: int = 0) -> dict[str, list[tuple[str, str]]]:
    return collect_expert_data(
        _solo_env, _solo_env().task, ["solver"], n, error_rate=0.0, seed=seed
    )


def _eos_logprob(policy: HFPolicy, context: str, text: str) -> float:
    assert policy.eos_id is not None
    ids = [*policy.codec.completion_ids(text), policy.eos_id]
    with torch.no_grad():
        return float(policy.logprobs([context], [ids]).logprobs[0, len(ids) - 1])


def test_collect_expert_data_gives_each_agent_its_rollout_contexts() -> None:
    env_fn = lambda: teamtr_env.make("teamtr/Arith-v0")  # noqa: E731
    env = env_fn()
    data = collect_expert_data(env_fn, env.task, env.possible_agents, 8, error_rate=0.0, seed=3)
    assert list(data) == ["solver", "critic", "aggregator"]
    for agent, pairs in data.items():
        assert len(pairs) == 8
        for context, text in pairs:
            assert context.endswith(f"### {agent}\n")
            a, b = map(int, re.search(r"Compute: (\d+) \+ (\d+)", context).groups())  # type: ignore[union-attr]
            assert text == f"Answer: {a + b}"
    # the critic sees the solver's message; the same seed gives the same data
    assert data["critic"][0][0].endswith(f"### solver\n{data['solver'][0][1]}\n### critic\n")
    again = collect_expert_data(env_fn, env.task, env.possible_agents, 8, error_rate=0.0, seed=3)
    assert again == data
    wrong = collect_expert_data(env_fn, env.task, ["solver"], 8, error_rate=1.0, seed=3)
    assert all(
        w[1] != d[1] and w[1].startswith("Answer: ")
        for w, d in zip(wrong["solver"], data["solver"])
    )
    with pytest.raises(ValueError, match="nobody"):
        collect_expert_data(env_fn, env.task, ["nobody"], 2, error_rate=0.0, seed=0)


# The module's tests share one behaviour-cloning run (``cloned``): on one test worker, it is
# built once.
pytestmark = pytest.mark.xdist_group("sft")


@pytest.fixture(scope="module")
def cloned(tiny_model_dir: Path) -> dict[str, Any]:
    """One short behaviour-cloning run of a 1-agent team, with EOS log-probs before and after."""
    data = _solo_data()
    policy = HFPolicy.from_pretrained(tiny_model_dir)
    context, text = data["solver"][0]
    before = _eos_logprob(policy, context, text)
    steps: list[tuple[int, dict[str, float]]] = []
    curves = behaviour_clone(
        {"solver": policy}, data, SMALL, on_step=lambda s, m: steps.append((s, m))
    )
    return {
        "data": data,
        "policy": policy,
        "curves": curves,
        "steps": steps,
        "eos_before": before,
        "eos_after": _eos_logprob(policy, context, text),
    }


def test_behaviour_clone_lowers_the_nll_and_learns_the_format(cloned: dict[str, Any]) -> None:
    loss = cloned["curves"]["solver"]
    assert len(loss) == SMALL.steps
    assert loss[-1] < 0.5 * loss[0], loss
    assert [s for s, _ in cloned["steps"]] == list(range(SMALL.steps))
    last = cloned["steps"][-1][1]
    assert last == {"sft/lr": pytest.approx(last["sft/lr"]), "agent/solver/sft_nll": loss[-1]}
    assert 0 < last["sft/lr"] < 0.01 * SMALL.lr  # the default cosine schedule, near its end
    context = cloned["data"]["solver"][0][0]
    greedy = SamplingParams(temperature=0.0, max_new_tokens=12)
    text = cloned["policy"].generate([context], greedy)[0].text
    assert text.startswith("Answer:"), text


def test_behaviour_clone_learns_to_stop(cloned: dict[str, Any]) -> None:
    assert cloned["eos_after"] > cloned["eos_before"] + 2.0, (
        cloned["eos_before"],
        cloned["eos_after"],
    )
    # EOS after the expert text: probability > 0.2 (uniform over the ~100-token vocabulary: 0.01).
    assert cloned["eos_after"] > math.log(0.2)


def test_same_seed_gives_identical_curves(tiny_model_dir: Path) -> None:
    data = _solo_data(16)
    config = SFTConfig(steps=3, batch_size=8, lr=1e-2)
    runs = [
        behaviour_clone({"solver": HFPolicy.from_pretrained(tiny_model_dir)}, data, config)
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    other = dataclasses.replace(config, seed=1)
    assert (
        behaviour_clone({"solver": HFPolicy.from_pretrained(tiny_model_dir)}, data, other)
        != runs[0]
    )


def test_non_finite_loss_is_an_error_naming_agent_and_step(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = HFPolicy.from_pretrained(tiny_model_dir)
    real = policy.logprobs
    calls = {"n": 0}

    def poisoned(prompts: Any, completions: Any) -> TokenLogprobs:
        out = real(prompts, completions)
        calls["n"] += 1
        if calls["n"] < 3:
            return out
        return dataclasses.replace(out, logprobs=out.logprobs * float("nan"))

    monkeypatch.setattr(policy, "logprobs", poisoned)
    config = SFTConfig(steps=5, batch_size=4)
    with pytest.raises(RuntimeError, match=r"non-finite.*'solver' at step 2"):
        behaviour_clone({"solver": policy}, _solo_data(8), config)


def test_cosine_schedule_decays_the_lr_to_zero_and_changes_the_clone(tiny_model_dir: Path) -> None:
    data = _solo_data(16)
    config = SFTConfig(steps=4, batch_size=8, lr=1e-2, lr_schedule="cosine")
    lrs: list[float] = []
    cosine = behaviour_clone(
        {"solver": HFPolicy.from_pretrained(tiny_model_dir)},
        data,
        config,
        on_step=lambda _, m: lrs.append(m["sft/lr"]),
    )
    expected = [1e-2 * 0.5 * (1 + math.cos(math.pi * s / 4)) for s in range(4)]
    assert lrs == pytest.approx(expected) and lrs[0] == 1e-2 and lrs[-1] < 0.15 * 1e-2
    constant = dataclasses.replace(config, lr_schedule="constant")
    flat = behaviour_clone({"solver": HFPolicy.from_pretrained(tiny_model_dir)}, data, constant)
    # Same data and first step, smaller later steps: the curves part after the first step.
    assert cosine["solver"][:2] == flat["solver"][:2] and cosine != flat


def test_bad_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="no policy for \\['critic'\\]"):
        behaviour_clone({}, {"critic": [("c", "t")]}, SMALL)
    with pytest.raises(ValueError, match="steps must be >= 1"):
        SFTConfig(steps=0)
    with pytest.raises(ValueError, match="target_accuracy"):
        SFTConfig(target_accuracy=1.5)
    with pytest.raises(ValueError, match="lr_schedule"):
        SFTConfig(lr_schedule="linear")  # type: ignore[arg-type]


def test_config_schema_describes_every_field() -> None:
    props = json_schema(SFTConfig)["properties"]
    assert set(props) == {f.name for f in dataclasses.fields(SFTConfig)}
    assert all(p.get("description") for p in props.values())


def _tabular(data: dict[str, list[tuple[str, str]]]) -> TabularPolicy:
    pairs = data["solver"]
    return TabularPolicy(
        sorted({c for c, _ in pairs}), sorted({t for _, t in pairs} | {"Answer: 0"})
    )


def test_tabular_policy_without_codec_clones_and_stops_early() -> None:
    data = _solo_data(8)
    data = {"solver": data["solver"] * 10}  # held-out copies of seen states
    policy = _tabular(data)
    metrics: list[dict[str, float]] = []
    config = SFTConfig(steps=500, batch_size=16, lr=0.5, target_accuracy=0.9)
    curves = behaviour_clone(
        {"solver": policy}, data, config, progress=True, on_step=lambda s, m: metrics.append(m)
    )
    assert len(curves["solver"]) < config.steps and len(curves["solver"]) % 10 == 0
    assert metrics[-1]["sft/heldout_team_match"] >= 0.9
    assert metrics[-1]["agent/solver/sft_heldout_match"] == metrics[-1]["sft/heldout_team_match"]
    context, text = data["solver"][0]
    assert policy.generate([context], SamplingParams(temperature=0.0))[0].text == text
