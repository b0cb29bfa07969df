"""How ``teamtr train`` builds its configuration: one rule with or without ``--config`` (the
demo's task options unless the file gives its own, ``--set`` merged into them) and every problem
of the configuration listed at once, before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamtr_cli import main
from teamtr_core.errors import ConfigError
from trainers.config import DEMO_TASK, DEMO_TASK_OPTIONS, TrainConfig
from trainers.run.config_file import config_from_overrides, load_train_config


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_file_without_task_options_gets_the_demos_and_set_merges_into_them(
    tmp_path: Path,
) -> None:
    """``--config F --set task_options.max_value=20`` dropped the demo's system_prompts, which
    the same --set without a file keeps."""
    path = _file(tmp_path, "seed: 3\nsft: {steps: 7}\n")
    overrides = ["task_options.max_value=20"]
    config = load_train_config(path, overrides)
    assert config.task == DEMO_TASK and config.seed == 3 and config.sft.steps == 7
    assert config.task_options == {**DEMO_TASK_OPTIONS, "max_value": 20}
    assert config.task_options["system_prompts"] == DEMO_TASK_OPTIONS["system_prompts"]
    assert config_from_overrides(overrides).task_options == config.task_options
    assert load_train_config(_file(tmp_path, ""), []) == TrainConfig() == config_from_overrides([])


def test_another_task_starts_from_no_options_with_or_without_a_file(tmp_path: Path) -> None:
    path = _file(tmp_path, "task: teamtr/Arith-v0\n")
    assert load_train_config(path, ["task_options.digits=1"]).task_options == {"digits": 1}
    assert load_train_config(None, ["task=teamtr/Arith-v0"]).task_options == {}
    demo_file = _file(tmp_path, "seed: 1\n")
    assert load_train_config(demo_file, ["task=teamtr/Arith-v0"]).task_options == {}


def test_a_files_own_task_options_are_kept_and_set_merges_into_them(tmp_path: Path) -> None:
    path = _file(tmp_path, "task_options: {max_value: 30}\n")
    assert load_train_config(path, []).task_options == {"max_value": 30}
    merged = load_train_config(path, ["task_options.steps=2"]).task_options
    assert merged == {"max_value": 30, "steps": 2}
    whole = load_train_config(path, ["task_options={steps: 2}"]).task_options
    assert whole == {"steps": 2}


def _record_runs(monkeypatch: pytest.MonkeyPatch) -> list:
    """``teamtr train`` records the config it would run (``trainers.train``'s recipe) instead of
    training; returns the list the configs go to."""
    import trainers.run.entry

    seen: list = []

    class Recorded:
        def __init__(self, config, **kwargs) -> None:
            seen.append(config)
            self.policies: dict = {}

        def run(self, **kwargs) -> dict:
            return {}

        def close(self) -> None:
            pass

    monkeypatch.setattr(trainers.run.entry, "TrainingRecipe", Recorded)
    return seen


def test_the_cli_builds_the_same_config_with_and_without_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _record_runs(monkeypatch)
    overrides = ["--set", "task_options.max_value=20", "--run-dir", str(tmp_path / "run")]
    assert main(["train", *overrides]) == 0
    assert main(["train", "--config", str(_file(tmp_path, "{}\n")), *overrides]) == 0
    assert seen[0] == seen[1] and "system_prompts" in seen[1].task_options


@pytest.mark.parametrize("with_file", [False, True])
@pytest.mark.parametrize("temperature", ["sampling.temperature=-1", "temperature=-1"])
def test_train_lists_every_problem_at_once_before_writing_anything(
    tmp_path: Path, capsys, with_file: bool, temperature: str
) -> None:
    """A schema problem (an unknown order) no longer hides the sections' own checks (the
    temperature, lr, stages), nor does a malformed override; a renamed key (``temperature``, now
    ``sampling.temperature``) is listed with them, naming its new key."""
    run_dir = tmp_path / "run"
    argv = ["train", "--run-dir", str(run_dir)]
    if with_file:
        argv += ["--config", str(_file(tmp_path, "schedule: {group_size: 0}\n"))]
    for override in (temperature, "optim.lr=-1", "schedule.stages=0", "schedule.order=bogus"):
        argv += ["--set", override]
    argv += ["--set", "no-equals-sign"]
    assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    for expected in (
        "temperature must be >= 0, got -1"
        if temperature.startswith("sampling.")
        else "temperature was renamed to sampling.temperature",
        "need lr > 0",
        "stages must be >= 1, got 0",
        "schedule.order: 'bogus' is not one of",
        "override 'no-equals-sign': expected KEY=VALUE",
    ):
        assert expected in err, err
    if with_file:
        assert "group_size must be >= 1, got 0" in err and str(tmp_path / "run.yaml") in err
    assert not run_dir.exists()


def test_a_file_that_is_not_a_config_names_itself(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_bytes(bytes(range(128, 256)))
    with pytest.raises(ConfigError, match=str(path)):
        load_train_config(path, [])


def test_learner_is_the_word_and_the_old_names_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``schedule.learner``, ``--learner`` and ``teamtr learners``; the old ``schedule.method``
    is a config problem naming ``schedule.learner``, and argparse refuses ``--trainer`` and
    ``teamtr trainers`` (CHANGELOG.md lists the renames)."""
    from teamtr_core.config import from_dict
    from trainers.config import TrainConfig

    with pytest.raises(ConfigError, match=r"schedule\.method was renamed to schedule\.learner"):
        from_dict(TrainConfig, {"schedule": {"method": "joint"}})
    assert from_dict(TrainConfig, {"schedule": {"learner": "joint"}}).schedule.learner == "joint"
    seen = _record_runs(monkeypatch)
    run = ["--run-dir", str(tmp_path / "run")]
    assert main(["train", "--learner", "joint", *run]) == 0
    assert seen[0].schedule.learner == "joint"
    assert main(["train", "--set", "schedule.method=joint", *run]) == 2
    assert "schedule.method was renamed to schedule.learner" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["train", "--trainer", "joint", *run])
    assert exited.value.code == 2
    assert "unrecognized arguments: --trainer joint" in capsys.readouterr().err
    monkeypatch.setenv("COLUMNS", "200")  # a line per learner: its settings unbroken
    assert main(["learners"]) == 0
    listed = capsys.readouterr().out
    assert "Registered learners" in listed
    for setting in ("resample_every=1", "importance_weighting=False", "trust_region=False"):
        assert setting in listed  # each learner's own (learner_options)
    with pytest.raises(SystemExit) as exited:
        main(["trainers"])
    assert exited.value.code == 2 and "invalid choice: 'trainers'" in capsys.readouterr().err
    assert len(seen) == 1
