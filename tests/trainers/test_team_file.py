"""``team: team.yaml`` in a training config: the team file that ``teamtr eval --team`` takes,
read relative to the training config's folder (its model paths relative to its own), and a run
with it trains."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from helpers_trainers import SMALL

from teamtr_core.errors import ConfigError
from trainers.run.config_file import load_train_config


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


def test_a_training_config_names_a_team_file(tmp_path: Path, tiny_model_dir: Path) -> None:
    """Its model path is read relative to the team file. A run from a training config that names
    a team file (its config.yaml keeping the resolved path, so that it resumes as is) is
    test_role_sharing.py's test_a_shared_policy_run_trains_exports_one_folder_and_evaluates."""
    path = _files(tmp_path, tiny_model_dir)
    config = load_train_config(path)
    assert config.team is not None and config.team.default is not None
    assert config.team.default.path == str((tmp_path / "teams" / "models" / "tiny").resolve())


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
