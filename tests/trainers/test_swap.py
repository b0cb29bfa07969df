"""Plug-and-play replacement end to end on tiny models: the tokenizer and protocol checks, the new
run directory rules, the other agents' exact weights, and Stage-0 alignment's stopping rule."""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from rich.console import Console
from swap_helpers import snapshot, trained_run

import teamtr_env
from adapters.hf import HFPolicy
from adapters.tiny import DEFAULT_CHARSET, TinyModelSpec, build_tiny_model
from teamtr_core.errors import ConfigError
from trainers.optim.kl import vocab_kl
from trainers.run import rundir
from trainers.run.recipe import run_training
from trainers.tools.align import AlignConfig, align_policy, split_probes
from trainers.tools.swap import PROTOCOL_FILE, SwapConfig, protocol_errors, swap_agent

quiet = Console(file=io.StringIO())

# One worker of a parallel run trains the module's run (a module fixture is built once per
# worker that runs one of its tests).
pytestmark = pytest.mark.xdist_group("swap")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return trained_run(tmp_path_factory.mktemp("swap") / "run")


@pytest.fixture(scope="module")
def new_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Same tokenizer, other weights (another seed and width)."""
    spec = TinyModelSpec(hidden_size=96, num_heads=4, intermediate_size=256, seed=5)
    return build_tiny_model(tmp_path_factory.mktemp("new") / "model", spec)


def test_vocab_kl_matches_a_hand_computed_value_and_ignores_masked_positions() -> None:
    p = torch.tensor([[[0.5, 0.5], [0.9, 0.1]]]).log()
    q = torch.tensor([[[0.25, 0.75], [0.1, 0.9]]]).log()
    first = 0.5 * math.log(2) + 0.5 * math.log(0.5 / 0.75)
    both = first + 0.9 * math.log(9) + 0.1 * math.log(1 / 9)
    assert vocab_kl(p, q, torch.tensor([[True, False]])).item() == pytest.approx(first, abs=1e-6)
    assert vocab_kl(p, q, torch.tensor([[True, True]])).item() == pytest.approx(both, abs=1e-6)
    assert vocab_kl(p, p, torch.tensor([[True, True]])).item() == pytest.approx(0.0, abs=1e-7)


def test_a_different_tokenizer_is_refused_before_anything_is_written(
    run: Path, tmp_path: Path
) -> None:
    other = build_tiny_model(tmp_path / "other", TinyModelSpec(charset=DEFAULT_CHARSET[:-10]))
    out = tmp_path / "out"
    with pytest.raises(ConfigError) as err:
        swap_agent(SwapConfig(str(run), "critic", str(other), out=str(out)), console=quiet)
    text = str(err.value)
    assert "tokenizer: the vocabularies differ (101 vs 91 tokens" in text
    assert "10 only in the old" in text
    assert not out.exists()


def test_a_protocol_mismatch_lists_every_problem(
    run: Path, new_model: Path, tmp_path: Path
) -> None:
    model = tmp_path / "model"
    shutil.copytree(new_model, model)
    (model / PROTOCOL_FILE).write_text(
        json.dumps({"system_prompt": "You are a helpful assistant.", "reasoning": "strip"})
    )
    out = tmp_path / "out"
    with pytest.raises(ConfigError) as err:
        swap_agent(
            SwapConfig(
                str(run),
                "critic",
                str(model),
                out=str(out),
                protocol={"tool_calls": "canonical", "headr": "Task"},
            ),
            console=quiet,
        )
    errors = err.value.errors
    assert len(errors) == 4, errors
    assert "system_prompt='You are a helpful assistant.' but the team's is ''" in errors[0]
    assert "reasoning='strip' but the team's is 'keep'" in errors[1]
    assert "tool_calls='canonical' but the team's is 'keep'" in errors[2]
    assert "unknown key 'headr' (did you mean 'header'?)" in errors[3]
    assert not out.exists()


def test_the_teams_own_protocol_settings_pass(run: Path, new_model: Path) -> None:
    env = teamtr_env.make("teamtr/Arith-v0", system_prompts={"critic": ""})
    old = new = HFPolicy.from_pretrained(new_model)
    same = {"system_prompt": "", "reasoning": "keep", "tool_calls": "keep", "header": "Problem"}
    assert protocol_errors(env.protocol, "critic", old, new, [("options", same)]) == []


def test_the_new_run_directory_is_never_the_run_or_a_non_empty_one(
    run: Path, new_model: Path, tmp_path: Path
) -> None:
    before = snapshot(run)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    for out, expected in (
        (run, "is the run directory"),
        (run / "swapped", "is inside the run directory"),
        (busy, "already exists and is not empty"),
    ):
        with pytest.raises(ConfigError, match=expected):
            swap_agent(SwapConfig(str(run), "critic", str(new_model), out=str(out)), console=quiet)
    with pytest.raises(ConfigError, match="did you mean 'critic'"):
        swap_agent(
            SwapConfig(str(run), "critc", str(new_model), out=str(tmp_path / "n")), console=quiet
        )
    assert snapshot(run) == before
    assert (busy / "notes.txt").read_text() == "mine"


def test_a_direct_swap_resumes_with_the_other_agents_exact_checkpoint(
    run: Path, new_model: Path, tmp_path: Path
) -> None:
    before = snapshot(run)
    out = tmp_path / "swapped"
    record = swap_agent(
        SwapConfig(str(run), "critic", str(new_model), out=str(out), stages=1), console=quiet
    )
    assert snapshot(run) == before  # the run it started from is only read
    old = rundir.load(run / "checkpoints")
    assert old is not None and old.state["trainer"]["stage"] == 1
    start = rundir.torch_load_plain(out / "checkpoints" / "stage_0001.pt")["trainer"]["slots"]
    for agent in ("solver", "aggregator"):
        mine, theirs = start[agent], old.state["trainer"]["slots"][agent]
        assert mine["policy"].keys() == theirs["policy"].keys()
        assert all(torch.equal(mine["policy"][k], theirs["policy"][k]) for k in mine["policy"])
        assert mine["optimizer"]["state"].keys() == theirs["optimizer"]["state"].keys()
        for i, values in mine["optimizer"]["state"].items():
            assert all(torch.equal(values[k], theirs["optimizer"]["state"][i][k]) for k in values)
        assert (mine["beta"], mine["delta"], mine["version"]) == (
            theirs["beta"],
            theirs["delta"],
            theirs["version"],
        )
    fresh = HFPolicy.from_pretrained(new_model).state_dict()
    assert all(torch.equal(start["critic"]["policy"][k], v) for k, v in fresh.items())
    assert start["critic"]["optimizer"]["state"] == {} and start["critic"]["version"] == 0
    # the resumed run went on for one stage and wrote what a run writes
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stages"] == 2
    assert summary["before"] == {
        k: v for k, v in record["after_swap"].items() if not k.startswith(("ci/", "problems/"))
    }
    saved = json.loads((out / "swap.json").read_text())
    assert saved["aligned"] is False and saved["alignment"] is None
    assert [s["stage"] for s in saved["per_stage"]] == [2]
    assert saved["final"] == summary["after"]
    assert "config.yaml" in snapshot(out) and (out / "metrics.jsonl").exists()


def _probe_setup(run: Path, new_model: Path) -> tuple[HFPolicy, list[str], list[str]]:
    old = HFPolicy.from_pretrained(run / "models" / "tiny")
    state = rundir.load(run / "checkpoints")
    assert state is not None
    old.load_state_dict(state.state["trainer"]["slots"]["critic"]["policy"])
    contexts = [f"Problem: {a} + {b}\ncritic:" for a in range(4) for b in range(4)]
    train, held = split_probes(contexts, 0.25, seed=0)
    return old, train, held


def test_alignment_lowers_the_held_out_kl_and_stops_at_delta_align(
    run: Path, new_model: Path
) -> None:
    from teamtr_core.policy import SamplingParams

    old, train, held = _probe_setup(run, new_model)
    sampling = SamplingParams(max_new_tokens=6)
    settings = dict(max_steps=12, eval_every=3, batch_size=8, lr=3e-3, probes=16, heldout=0.25)
    free = align_policy(
        HFPolicy.from_pretrained(new_model),
        old,
        train,
        held,
        sampling,
        AlignConfig(delta_align=1e-6, **settings),  # type: ignore[arg-type]
    )
    kls = [row["kl"] for row in free.curve]
    assert [int(r["step"]) for r in free.curve] == [0, 3, 6, 9, 12]
    assert not free.reached and free.steps == 12
    assert kls[-1] < 0.5 * kls[0], kls
    # A target the free run crosses at step 6 stops the same run there, and not before.
    target = kls[2] * 1.001
    assert all(k > target for k in kls[:2])
    stopped = align_policy(
        HFPolicy.from_pretrained(new_model),
        old,
        train,
        held,
        sampling,
        AlignConfig(delta_align=target, **settings),  # type: ignore[arg-type]
    )
    assert stopped.reached and stopped.steps == 6
    assert stopped.final_kl <= target < stopped.curve[-2]["kl"]


@pytest.mark.slow  # alignment steps; the swap itself in this file's other tests
def test_an_aligned_swap_records_its_curve(run: Path, new_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "aligned"
    align = AlignConfig(probes=8, heldout=0.25, max_steps=4, eval_every=2, batch_size=4, lr=3e-3)
    record = swap_agent(
        SwapConfig(str(run), "critic", str(new_model), out=str(out), stages=1, align=align),
        console=quiet,
    )
    saved = json.loads((out / "swap.json").read_text())
    assert saved["aligned"] and saved["alignment"]["heldout_probes"] == 2
    assert [r["step"] for r in saved["alignment"]["curve"]] == [0, 2, 4]
    assert record["alignment"]["final_kl"] < record["alignment"]["initial_kl"]
    # the aligned weights, not the model directory's, start the new run
    start = rundir.torch_load_plain(out / "checkpoints" / "stage_0001.pt")["trainer"]["slots"]
    fresh = HFPolicy.from_pretrained(new_model).state_dict()
    assert not all(torch.equal(start["critic"]["policy"][k], v) for k, v in fresh.items())


def test_a_swap_in_a_shared_base_lora_team_carries_adapters_only(
    tiny_model_dir: Path, new_model: Path, tmp_path: Path
) -> None:
    """Three LoRA agents on one base; the critic's seat gets another base (its LoRA settings
    kept). Every slot of the new run's checkpoint is an adapter, the others' exactly as they
    were, and the resumed run trains on."""
    from helpers_trainers import small

    from adapters.shared_lora import LoraAgentPolicy
    from adapters.team import build_team

    lora = {"backend": "hf", "path": str(tiny_model_dir), "lora": {"r": 4}}
    team = {"shared_base": True, "default": lora}
    run = tmp_path / "run"
    quick = {"sft": None, "eval__train_distribution": False}  # the swap is what is checked
    run_training(small(run, team=team, schedule__stages=1, **quick), console=quiet)
    out = tmp_path / "swapped"
    swap_agent(
        SwapConfig(str(run), "critic", str(new_model), out=str(out), stages=1), console=quiet
    )
    old = rundir.load(run / "checkpoints")
    assert old is not None
    start = rundir.torch_load_plain(out / "checkpoints" / "stage_0001.pt")["trainer"]["slots"]
    for agent, slot in start.items():
        assert slot["policy"] and all("lora_" in key for key in slot["policy"]), agent
    for agent in ("solver", "aggregator"):
        theirs = old.state["trainer"]["slots"][agent]["policy"]
        assert all(torch.equal(start[agent]["policy"][k], v) for k, v in theirs.items())
    assert json.loads((out / "summary.json").read_text())["stages"] == 2
    # The new run's team: the two old agents still share their base; the critic has its own.
    from trainers.run.config_file import load_train_config

    new_team = load_train_config(out / "config.yaml").team
    assert new_team is not None and new_team.shared_base
    policies, _ = build_team(new_team, ["solver", "critic", "aggregator"])
    assert all(isinstance(p, LoraAgentPolicy) for p in policies.values())
    assert policies["solver"].base is policies["aggregator"].base  # type: ignore[attr-defined]
    assert policies["critic"].base is not policies["solver"].base  # type: ignore[attr-defined]
