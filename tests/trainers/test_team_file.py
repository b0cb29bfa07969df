"""``team: team.yaml`` in a training config: the team file that ``teamtr eval --team`` takes,
read relative to the training config's folder (its model paths relative to its own), and a run
with it trains."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import yaml
from helpers_trainers import SMALL
from rich.console import Console

from teamtr_core.errors import ConfigError
from trainers.run.config_file import load_train_config
from trainers.run.recipe import run_training


def _files(root: Path, tiny_model_dir: Path) -> Path:
    (root / "teams" / "models").mkdir(parents=True)
    shutil.copytree(tiny_model_dir, root / "teams" / "models" / "tiny")
    team = {"default": {"backend": "hf", "path": "models/tiny"}}
    (root / "teams" / "team.yaml").write_text(yaml.safe_dump(team))
    data = json.loads(json.dumps(SMALL))
    data.update(team="teams/team.yaml", sft=None, run_dir=str(root / "run"))
    data["schedule"]["stages"] = 1
    (root / "train.yaml").write_text(yaml.safe_dump(data))
    return root / "train.yaml"


def test_a_training_config_names_a_team_file_and_trains(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    path = _files(tmp_path, tiny_model_dir)
    config = load_train_config(path)
    assert config.team is not None and config.team.default is not None
    assert config.team.default.path == str((tmp_path / "teams" / "models" / "tiny").resolve())
    summary = run_training(config, console=Console(file=io.StringIO()))
    assert summary["stages"] == 1
    written = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert written["team"]["default"]["path"] == config.team.default.path  # resumable as is


def test_set_team_takes_a_file_too_and_a_missing_one_is_named(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _files(tmp_path, tiny_model_dir)
    monkeypatch.chdir(tmp_path)
    config = load_train_config(None, ["team=teams/team.yaml"])
    assert config.team is not None and config.team.default is not None
    assert Path(config.team.default.path).is_absolute()
    with pytest.raises(ConfigError, match=r"no team config file .*nowhere\.yaml"):
        load_train_config(path, ["team=nowhere.yaml"])
