"""A trained team outside its run (trainers/export.py, ``teamtr eval --run-dir``): the run's
policies with a checkpoint's weights reproduce the run's own final evaluation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from helpers_trainers import TrainedRun

import teamtr_env
from teamtr_cli import main
from teamtr_core.errors import ConfigError
from teamtr_core.seeds import EVAL_STREAM, derive_seed
from trainers.export import checkpoint_weights, load_run_team
from trainers.recipe import env_factory
from trainers.team_eval import build_policies, evaluate_team


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
    with pytest.raises(ConfigError, match=r"stage_0001\.pt cannot be read"):
        checkpoint_weights(copy, "stage_1")


def test_eval_run_dir_refuses_a_second_team(trained: TrainedRun, capsys) -> None:
    argv = ["eval", trained.config.task, "--run-dir", str(trained.run_dir), "--policy", "random"]
    assert main(argv) != 0
    assert "give no --team, --policy or --set" in capsys.readouterr().err
    assert main(["eval", trained.config.task, "--checkpoint", "best"]) != 0
    assert "--checkpoint needs --run-dir" in capsys.readouterr().err
