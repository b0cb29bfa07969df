"""Faults of issue #57 on training and on a run's checkpoints, tried as a user would: S2 (a
damaged newest checkpoint under ``latest``), S5 (reward weights that break float32), E7
(``trainers.train`` given a mapping or a bare string), E8 (``schedule.tree_trust_region`` on a
learner without trees) and E9 (a stage too large to sample). Each gets a clear error (exit 2 or
``ConfigError``, the field named, the fix said) that leaves nothing written, or the documented
behaviour."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_reliability import EVAL, copy_run, files, refused

from teamtr_cli import main
from teamtr_core.errors import ConfigError
from trainers import train
from trainers.run import rundir

# -- S2: a damaged newest checkpoint is never evaluated or exported as "latest" -------------------


def _two_stages(run: Path, work: Path) -> Path:
    """A copy of ``run`` with a second stage file: stage 1's state saved again as stage 2 (the
    weights do not matter here, only which file is read)."""
    copy = copy_run(run, work)
    folder = copy / "checkpoints"
    state = rundir.read_checkpoint(folder / "stage_0001.pt")
    state["trainer"]["stage"] = 2
    rundir.save(folder, 2, state)
    return copy


def test_a_truncated_newest_checkpoint_is_refused_by_eval_and_export(
    run: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """S2: stage_0002.pt cut to half its size: ``eval --run-dir`` and ``export`` refuse
    ``latest`` with the reason and the stage to name, and write nothing; naming the intact
    stage evaluates it, and the report records the file and stage it used."""
    copy = _two_stages(run, work)
    newest = copy / "checkpoints" / "stage_0002.pt"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    before = files(copy)
    err = " ".join(
        refused(["eval", "teamtr/Pipeline-v0", "--run-dir", str(copy), *EVAL], capsys).split()
    )
    assert "stage_0002.pt" in err and "--checkpoint stage_1" in err
    assert "'latest' would silently be an older stage, so it is refused" in err
    err = " ".join(refused(["export", str(copy), "--out", "exported"], capsys).split())
    assert "stage_0002.pt" in err and "--checkpoint stage_1" in err
    assert not (work / "exported").exists() and files(copy) == before

    argv = ["eval", "teamtr/Pipeline-v0", "--run-dir", str(copy), "--checkpoint", "stage_1"]
    assert main([*argv, *EVAL, "--out", "r.json"]) == 0
    assert "(stage_1: stage_0001.pt)" in " ".join(capsys.readouterr().out.split())
    report = json.loads((work / "r.json").read_text(encoding="utf-8"))
    assert report["checkpoint"] == "stage_1"
    assert (report["checkpoint_file"], report["checkpoint_stage"]) == ("stage_0001.pt", 1)


def test_an_intact_latest_checkpoint_is_named_in_the_report(
    run: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """S2: with every file intact, ``latest`` is the newest stage, and the title and report say
    which file and stage that was."""
    copy = _two_stages(run, work)
    argv = ["eval", "teamtr/Pipeline-v0", "--run-dir", str(copy), *EVAL, "--out", "r.json"]
    assert main(argv) == 0
    assert "(latest: stage_0002.pt)" in " ".join(capsys.readouterr().out.split())
    report = json.loads((work / "r.json").read_text(encoding="utf-8"))
    assert (report["checkpoint"], report["checkpoint_stage"]) == ("latest", 2)


# -- S5: reward weights that float32 cannot carry ---------------------------------------------


@pytest.mark.parametrize("value", ["1e20", "1e39", "1e-300", "1000001"])
def test_reward_weights_outside_float32s_range_are_refused(
    work: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """S5: ``reward.team=1e20`` gave all-zero advantages and ``1e39`` NaN ones; a vanishing
    weight is as wrong. Refused with the range and the reason, both weights at once."""
    argv = ["train", "--run-dir", "r", "--set", f"reward.team={value}"]
    err = " ".join(refused([*argv, "--set", f"reward.local={value}"], capsys).split())
    for name in ("team", "local"):
        assert f"reward.{name} must be 0 or between 1e-06 and 1e+06" in err
    assert "float32" in err and not (work / "r").exists()


# -- E7: train() given a mapping, or a bare string of overrides -----------------------------------


def test_train_takes_a_mapping_as_a_config_file_and_refuses_a_string_of_overrides(
    work: Path,
) -> None:
    """E7: ``train(config={...})`` raised a raw TypeError; it now reads the mapping as a config
    file (its bad keys reported as a file's). ``train(overrides="k=v")`` split the string into
    17 characters; it is refused, the fix named; a config of another type too, both at once."""
    with pytest.raises(ConfigError) as info:
        train(config={"schedule": {"stages": 0, "bogus": 1}}, run_dir="r")
    text = str(info.value)
    assert "stages must be >= 1" in text and "bogus" in text
    with pytest.raises(ConfigError) as info:
        train(config=3, overrides="schedule.stages=2")
    assert info.value.errors == [
        "config: expected a TrainConfig, the path of a config file, a mapping of settings or "
        "None, got int",
        "overrides: expected a list of 'KEY=VALUE' strings, got the string 'schedule.stages=2': "
        "write overrides=['schedule.stages=2']",
    ]
    with pytest.raises(ConfigError, match="overrides: expected a list"):
        train(overrides=["schedule.stages=2", 3])
    assert files(work) == []


# -- E8 and E9: a learner's settings that it does not use, and a stage too large ----------------


def test_tree_trust_region_on_a_learner_without_trees_is_refused(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """E8: ``schedule.tree_trust_region`` was silently ignored outside at_grpo. A learner's
    settings are its own section now (``learner_options``): another learner's are refused as
    unknown keys, TeamTR's own listed, both in one report; the old keys name the new ones."""
    argv = ["train", "--run-dir", "r", "--set", "learner_options.trust_region=true"]
    err = " ".join(
        refused([*argv, "--set", "learner_options.importance_weighting=true"], capsys).split()
    )
    for key in ("trust_region", "importance_weighting"):
        assert f"learner_options (teamtr/TeamTR-v0): unknown key '{key}'" in err
    assert "allowed: resample_every" in err
    old = ["train", "--run-dir", "r", "--set", "schedule.tree_trust_region=true"]
    err = " ".join(refused(old, capsys).split())
    assert "schedule.tree_trust_region was renamed to learner_options.trust_region" in err
    assert not (work / "r").exists()


@pytest.mark.parametrize(
    ("learner", "how"),
    [
        ("at_grpo", "B=64 prompts x 3 turns x G=10000 candidates"),
        ("teamtr", "n=3 updates x B=64 prompts x G=10000 rollouts"),
    ],
)
def test_a_stage_past_the_episode_limit_is_refused_before_writing(
    work: Path, capsys: pytest.CaptureFixture[str], learner: str, how: str
) -> None:
    """E9: ``--learner at_grpo --set schedule.group_size=10000`` ran for minutes and left a lock
    and a half-written run when killed. The learner's estimate of a stage's episodes is checked
    against ``schedule.max_stage_episodes`` before the run directory is made."""
    argv = ["train", "--run-dir", "r", "--learner", learner, "--set", "schedule.group_size=10000"]
    err = " ".join(refused(argv, capsys).split())
    assert f"would sample about 1,920,000 episodes per stage ({how})" in err
    assert "over schedule.max_stage_episodes=100,000" in err
    assert not (work / "r").exists()
