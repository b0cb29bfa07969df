"""A trained team outside its run (trainers/tools/export.py, ``teamtr eval --run-dir``): the run's
policies with a checkpoint's weights reproduce the run's own final evaluation."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import torch
from helpers_trainers import TrainedRun

import teamtr_env
from adapters.team import build_team, check_team, load_team_config
from teamtr_cli import main
from teamtr_core.errors import ConfigError
from teamtr_core.seeds import EVAL_STREAM, derive_seed
from trainers.run.recipe import env_factory
from trainers.run.team_eval import build_policies, evaluate_team
from trainers.tools.export import (
    EXPORT_FORMAT,
    checkpoint_weights,
    export_manifest,
    export_run,
    load_run_team,
)


def test_the_latest_checkpoint_reproduces_the_runs_final_evaluation(trained: TrainedRun) -> None:
    team = load_run_team(trained.run_dir)
    assert team.checkpoint.stage == trained.config.schedule.stages
    config = team.config
    metrics = evaluate_team(config, env_factory(config, config.eval.split), team.policies)
    key = f"eval/avg@{config.eval.k}"
    assert metrics[key] == pytest.approx(trained.summary["after"][key], abs=1e-9)


def test_a_named_stage_loads_its_own_weights(trained: TrainedRun) -> None:
    """``stage_1`` (or ``1``) puts that file's weights into every agent, over the freshly built
    model's (which behaviour cloning and training moved away from)."""
    first = checkpoint_weights(trained.run_dir, "stage_1")
    assert first.stage == 1 and checkpoint_weights(trained.run_dir, "1").path == first.path
    team = load_run_team(trained.run_dir, "stage_1")
    fresh = build_policies(team.config, teamtr_env.make(team.config.task), trained.run_dir)
    for agent, weights in first.weights.items():
        loaded, built = team.policies[agent].state_dict(), fresh[agent].state_dict()
        tensors = [k for k, v in weights.items() if torch.is_tensor(v)]
        assert tensors and all(torch.equal(loaded[k], weights[k]) for k in tensors)
        assert any(not torch.equal(built[k], weights[k]) for k in tensors)


def test_eval_run_dir_reproduces_the_runs_final_evaluation(trained: TrainedRun, tmp_path) -> None:
    """The CLI on the run's own task gets the run's task options; with the run's evaluation seed,
    problems and K it plays the same episodes as the run's final evaluation."""
    config = trained.config
    out = tmp_path / "report.json"
    seed = derive_seed(config.seed, EVAL_STREAM)
    argv = ["eval", config.task, "--run-dir", str(trained.run_dir), "--no-progress"]
    argv += ["--seed", str(seed), "--problems", str(config.eval.problems)]
    assert main([*argv, "--k", str(config.eval.k), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["run_dir"] == str(trained.run_dir) and report["checkpoint"] == "latest"
    key = f"avg@{config.eval.k}"
    assert report["metrics"][key]["mean"] == pytest.approx(
        trained.summary["after"][f"eval/{key}"], abs=1e-9
    )


def test_bad_checkpoints_get_clear_errors(trained: TrainedRun, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"stage_0099\.pt is not in .*keeps: stage_0001\.pt"):
        checkpoint_weights(trained.run_dir, "stage_99")
    with pytest.raises(ConfigError, match="expected latest, best or stage_N"):
        checkpoint_weights(trained.run_dir, "newest")
    with pytest.raises(ConfigError, match="no best.pt"):
        checkpoint_weights(trained.run_dir, "best")
    with pytest.raises(ConfigError, match="no checkpoints/ folder"):
        checkpoint_weights(tmp_path)
    with pytest.raises(ConfigError, match="no config.yaml"):
        load_run_team(tmp_path)
    copy = tmp_path / "copy"
    shutil.copytree(trained.run_dir / "checkpoints", copy / "checkpoints")
    (copy / "checkpoints" / "stage_0001.pt").write_bytes(b"not a torch file")
    with pytest.raises(ConfigError, match=r"stage_0001\.pt does not match the SHA-256"):
        checkpoint_weights(copy, "stage_1")
    (copy / "checkpoints" / "stage_0001.pt.sha256").unlink()  # a file without a digest
    with pytest.raises(ConfigError, match=r"stage_0001\.pt cannot be read"):
        checkpoint_weights(copy, "stage_1")


def test_eval_run_dir_refuses_a_second_team(trained: TrainedRun, capsys) -> None:
    argv = ["eval", trained.config.task, "--run-dir", str(trained.run_dir), "--policy", "random"]
    assert main(argv) != 0
    assert "give no --team, --policy, --error-rate or --set (given: --policy)" in (
        capsys.readouterr().err
    )
    assert main(["eval", trained.config.task, "--checkpoint", "best"]) != 0
    assert "--checkpoint needs --run-dir" in capsys.readouterr().err


# -- teamtr export -------------------------------------------------------------------------------

PROMPTS = ["3 + 4 =", "12 - 5", "a1", ""]
COMPLETIONS = ["7", "7 ok", "b2 c3", "0"]


def _logprobs(policies: dict, agent: str) -> torch.Tensor:
    with torch.no_grad():
        scored = policies[agent].logprobs(PROMPTS, COMPLETIONS)
    return (scored.logprobs * scored.mask).sum(-1)


def _exported_team(out: Path, task: str) -> dict:
    env = teamtr_env.make(task)
    policies, _ = build_team(load_team_config(out / "team.yaml"), env.possible_agents, env.task)
    return policies


def _lora_run(tmp_path: Path, model: Path, shared: bool) -> Path:
    """A one-stage run of a LoRA team (three agents on ``model``) whose updates move every
    adapter (no behaviour cloning, a larger step)."""
    from helpers_trainers import small
    from rich.console import Console

    from trainers.run.recipe import run_training

    team = {
        "shared_base": shared,
        "default": {"backend": "hf", "path": str(model), "lora": {"r": 4}},
    }
    run = tmp_path / ("shared" if shared else "separate")
    settings = {"team": team, "sft": None, "trust_region__beta": 0.05, "optim__lr": 0.05}
    settings["eval__train_distribution"] = False  # the export is what is checked
    run_training(small(run, schedule__stages=1, **settings), console=Console(file=io.StringIO()))
    return run


def _same_logprobs_as_the_checkpoint(run: Path, out: Path, fresh: dict) -> None:
    """The exported team scores every message as the checkpoint's team does, and not as the
    team before training does (so the trained weights, not the base's, were written)."""
    trained = load_run_team(run).policies
    exported = _exported_team(out, load_run_team(run).config.task)
    moved = 0.0
    for agent in trained:
        ours = _logprobs(exported, agent)
        torch.testing.assert_close(ours, _logprobs(trained, agent), rtol=1e-5, atol=1e-5)
        moved = max(moved, float((ours - _logprobs(fresh, agent)).abs().max()))
    assert moved > 1e-3, "training moved no agent: the test cannot tell trained from fresh"


def test_export_writes_model_folders_that_transformers_loads(trained: TrainedRun, tmp_path) -> None:
    """A full-weight team: one transformers model folder (and tokenizer) per agent, a
    team.yaml with each agent's sampling, and a manifest; the exported team scores messages as
    the checkpoint's team does."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "export"
    manifest = export_run(trained.run_dir, out)
    assert manifest["format"] == EXPORT_FORMAT and manifest["stage"] == 2
    assert manifest["checkpoint_file"] == "stage_0002.pt" and len(manifest["config_sha256"]) == 64
    team = load_run_team(trained.run_dir)
    for agent, policy in team.policies.items():
        entry = manifest["agents"][agent]
        assert entry["kind"] == "model" and entry["folder"] == agent
        assert entry["parameters"] == sum(p.numel() for p in policy.parameters())
        model = AutoModelForCausalLM.from_pretrained(out / agent, local_files_only=True)
        AutoTokenizer.from_pretrained(out / agent, local_files_only=True)
        for key, value in model.state_dict().items():
            torch.testing.assert_close(value, policy.state_dict()[key], rtol=0, atol=0)
    config = load_team_config(out / "team.yaml")
    assert {a: config.agents[a].sampling for a in team.sampling} == team.sampling
    served = load_team_config(out / "team-vllm.yaml")  # an engine per model folder
    assert not served.shared_base and served.agents["solver"].backend == "vllm"
    assert served.agents["solver"].path == str(out / "solver")
    fresh = build_policies(team.config, teamtr_env.make(team.config.task), tmp_path / "fresh")
    _same_logprobs_as_the_checkpoint(trained.run_dir, out, fresh)
    assert not list(tmp_path.glob(".export*")), "the staging folder was left behind"


# a shared-base team's export (slow): the same writer, and its adapters-only checkpoints are
# tested in tests/trainers/test_swap.py and tests/adapters/test_shared_lora.py
@pytest.mark.parametrize(
    "shared", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["separate", "shared-base"]
)
def test_export_writes_lora_adapters_or_merged_models(
    tiny_model_dir: Path, tmp_path: Path, shared: bool
) -> None:
    """A LoRA team (separate copies, or one shared base): a peft adapter folder per agent over
    the base, and with --merge a full model folder; both score as the checkpoint does."""
    from peft import PeftConfig

    run = _lora_run(tmp_path, tiny_model_dir, shared)
    fresh = _exported_fresh_team(run, tmp_path)
    adapters = export_run(run, tmp_path / "adapters")
    for agent, entry in adapters["agents"].items():
        assert entry["kind"] == "adapter" and entry["base"] == str(tiny_model_dir.resolve())
        assert PeftConfig.from_pretrained(str(tmp_path / "adapters" / agent)).r == 4
    team = load_team_config(tmp_path / "adapters" / "team.yaml")
    assert team.shared_base is shared
    served = load_team_config(tmp_path / "adapters" / "team-vllm.yaml")  # one multi-LoRA engine
    assert served.shared_base and {a.backend for a in served.agents.values()} == {"vllm"}
    assert served.agents["solver"].adapter_path == str(tmp_path / "adapters" / "solver")
    check_team(served, list(served.agents))
    _same_logprobs_as_the_checkpoint(run, tmp_path / "adapters", fresh)
    if shared:
        from adapters.shared_lora import LoraAgentPolicy

        exported = _exported_team(tmp_path / "adapters", load_run_team(run).config.task)
        assert all(isinstance(p, LoraAgentPolicy) for p in exported.values())
        assert len({id(p.base) for p in exported.values()}) == 1  # type: ignore[attr-defined]
    merged = export_run(run, tmp_path / "merged", merge=True)
    assert {e["kind"] for e in merged["agents"].values()} == {"merged"}
    assert not load_team_config(tmp_path / "merged" / "team.yaml").shared_base
    assert all(
        not (tmp_path / "merged" / a / "adapter_config.json").exists() for a in merged["agents"]
    )
    _same_logprobs_as_the_checkpoint(run, tmp_path / "merged", fresh)


def _exported_fresh_team(run: Path, tmp_path: Path) -> dict:
    """The run's team as built before training (fresh adapters from the run's seed)."""
    config = load_run_team(run).config
    return build_policies(config, teamtr_env.make(config.task), tmp_path / "fresh")


def test_export_refuses_to_overwrite_and_replaces_only_exports(
    trained: TrainedRun, tmp_path: Path
) -> None:
    out = tmp_path / "export"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="is not empty"):
        export_run(trained.run_dir, out)
    with pytest.raises(ConfigError, match="not a teamtr export"):
        export_run(trained.run_dir, out, overwrite=True)
    assert (out / "notes.txt").read_text() == "mine"
    with pytest.raises(ConfigError, match="holds the run"):
        export_run(trained.run_dir, trained.run_dir.parent)
    with pytest.raises(ConfigError, match="stage_0099.pt is not in"):
        export_run(trained.run_dir, tmp_path / "new", "stage_99")
    assert not (tmp_path / "new").exists()
    again = tmp_path / "again"
    first = export_run(trained.run_dir, again, "stage_1")
    with pytest.raises(ConfigError, match="is not empty"):
        export_run(trained.run_dir, again)
    second = export_run(trained.run_dir, again, overwrite=True)
    assert (first["stage"], second["stage"]) == (1, 2)
    assert export_manifest(again) == second


def test_export_then_eval_team_equals_eval_run_dir(trained: TrainedRun, tmp_path: Path) -> None:
    """``teamtr export`` and ``teamtr eval --team OUT/team.yaml`` (which takes the run's task
    options on its own task) play the episodes ``teamtr eval --run-dir`` plays."""
    config = trained.config
    out = tmp_path / "export"
    assert main(["export", str(trained.run_dir), "--out", str(out)]) == 0
    manifest = export_manifest(out)
    assert manifest is not None
    assert manifest["eval_command"].startswith(f"teamtr eval {config.task} --team {out}/team.yaml")
    common = ["--no-progress", "--seed", "3", "--problems", "4", "--k", "2"]
    reports = {}
    for name, team in (
        ("run", ["--run-dir", str(trained.run_dir)]),
        ("export", ["--team", str(out / "team.yaml")]),
    ):
        path = tmp_path / f"{name}.json"
        assert main(["eval", config.task, *team, *common, "--out", str(path)]) == 0
        reports[name] = json.loads(path.read_text())["metrics"]
    assert reports["export"] == reports["run"]


def test_export_cli_errors(trained: TrainedRun, tmp_path: Path, capsys) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert main(["export", str(trained.run_dir), "--out", str(tmp_path / "full")]) == 2
    assert "is not empty" in capsys.readouterr().err
    assert main(["export", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "no config.yaml" in capsys.readouterr().err
