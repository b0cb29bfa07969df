"""How ``teamtr train`` builds its configuration: one rule with or without ``--config`` (the
demo's task options unless the file gives its own, ``--set`` merged into them) and every problem
of the configuration listed at once, before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamtr_cli import main
from teamtr_core.errors import ConfigError
from trainers.config import (
    DEMO_TASK,
    DEMO_TASK_OPTIONS,
    TrainConfig,
    config_from_overrides,
    load_train_config,
)


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


def test_the_cli_builds_the_same_config_with_and_without_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trainers.recipe

    seen = []
    monkeypatch.setattr(trainers.recipe, "run_training", lambda config, **kw: seen.append(config))
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
    temperature, lr, stages), nor does a malformed override; the old key is renamed with a
    FutureWarning and its problem listed too."""
    run_dir = tmp_path / "run"
    argv = ["train", "--run-dir", str(run_dir)]
    if with_file:
        argv += ["--config", str(_file(tmp_path, "schedule: {group_size: 0}\n"))]
    for override in (temperature, "optim.lr=-1", "schedule.stages=0", "schedule.order=bogus"):
        argv += ["--set", override]
    argv += ["--set", "no-equals-sign"]
    if temperature == "temperature=-1":
        with pytest.warns(FutureWarning, match="temperature is now sampling.temperature"):
            code = main(argv)
    else:
        code = main(argv)
    assert code == 2
    err = " ".join(capsys.readouterr().err.split())
    for expected in (
        "temperature must be >= 0, got -1",
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


def test_learner_is_the_word_and_the_old_names_still_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``schedule.learner``, ``--learner`` and ``teamtr learners``; the old ``schedule.method``,
    ``--trainer`` and ``teamtr trainers`` give the same result with a FutureWarning or a note."""
    import trainers.recipe
    from teamtr_core.config import from_dict
    from trainers.config import TrainConfig

    with pytest.warns(FutureWarning, match="schedule.method is now schedule.learner"):
        old = from_dict(TrainConfig, {"schedule": {"method": "joint"}})
    assert old == from_dict(TrainConfig, {"schedule": {"learner": "joint"}})
    seen = []
    monkeypatch.setattr(trainers.recipe, "run_training", lambda config, **kw: seen.append(config))
    run = ["--run-dir", str(tmp_path / "run")]
    assert main(["train", "--learner", "joint", *run]) == 0
    assert main(["train", "--trainer", "joint", *run]) == 0
    assert seen[0] == seen[1] and seen[0].schedule.learner == "joint"
    assert "--trainer is now --learner" in capsys.readouterr().err
    assert main(["learners"]) == 0 and "Registered learners" in capsys.readouterr().out
    assert main(["trainers"]) == 0
    out = capsys.readouterr()
    assert "Registered learners" in out.out and "teamtr trainers is now teamtr learners" in out.err


def test_plugins_of_the_old_entry_point_group_load_with_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from importlib import metadata

    import trainers.registry as reg

    new = metadata.EntryPoint("new", "mod:register", reg.ENTRY_POINT_GROUP)
    old = metadata.EntryPoint("old", "mod:register", reg.LEGACY_GROUP)
    both = metadata.EntryPoint("new", "mod:register", reg.LEGACY_GROUP)  # renamed: counted once
    groups = {reg.ENTRY_POINT_GROUP: [new], reg.LEGACY_GROUP: [old, both]}
    monkeypatch.setattr(reg.metadata, "entry_points", lambda group: groups[group])
    with pytest.warns(
        FutureWarning, match=r"\['old'\] use the entry-point group 'teamtr.trainers'"
    ):
        found = reg.installed_entry_points()
    assert [ep.name for ep in found] == ["new", "old"]
