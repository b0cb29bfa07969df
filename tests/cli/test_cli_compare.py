"""``teamtr compare`` from the command line: a small comparison, the issue's quick command, the
seeds in parallel on a local Ray, and the error exit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teamtr_cli import main

TINY = [
    "schedule.stages=1",
    "schedule.problems_per_batch=4",
    "schedule.group_size=2",
    "sft.steps=20",
    "sft.problems=40",
    "eval.problems=12",
    "eval.k=2",
    "eval.train_distribution=false",
    "loggers=[]",
    "plot=false",
]


# The smallest comparison: what the command writes and prints, not what the learners learn.
SMALLEST = [
    *TINY,
    "schedule.problems_per_batch=2",
    "sft.steps=2",
    "sft.problems=8",
    "eval.problems=4",
]


def _sets(values: list[str]) -> list[str]:
    return [arg for v in values for arg in ("--set", v)]


@pytest.mark.slow  # the command's JSON and printed table: test_faults.py's test_a_comparison_with_a_typo_writes_nothing_and_the_corrected_one_runs
def test_compare_writes_the_paired_differences(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp"
    argv = ["compare", "teamtr/Relay-v0", "--learners", "teamtr", "joint", "--seeds", "3"]
    assert main([*argv, *_sets(SMALLEST), "--out", str(out)]) == 0
    data = json.loads((out / "compare.json").read_text())
    assert data["learners"] == ["teamtr/TeamTR-v0", "teamtr/Joint-v0"]
    assert [p["learner"] for p in data["paired"]] == ["teamtr/Joint-v0"]
    printed = capsys.readouterr().out
    assert "every learner gets the same budget per update" in printed
    assert "| teamtr/Joint-v0 |" in printed and "messages per update: equal" in printed


def test_compare_exits_2_listing_every_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", "teamtr/Relay-v0", "--learners", "teamtr", "nope", "--seeds", "0", "0"]
    assert main([*argv, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "nope" in err and "seeds must be distinct" in err


def test_the_old_flag_trainers_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--trainers`` was renamed ``--learners`` (CHANGELOG.md): argparse refuses it."""
    argv = ["compare", "teamtr/Relay-v0", "--learners", "teamtr", "--trainers", "joint"]
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "unrecognized arguments: --trainers joint" in err


@pytest.mark.slow
def test_the_quick_comparison_of_the_issue(tmp_path: Path) -> None:
    """``teamtr compare teamtr/Relay-v0 --learners teamtr naive_sequential --seeds 0 1 --quick``
    (75 s on 2 cores; the issue asks for under 180 s: benchmarks time it, tests do not)."""
    out = tmp_path / "cmp"
    argv = ["compare", "teamtr/Relay-v0", "--learners", "teamtr", "naive_sequential"]
    assert main([*argv, "--seeds", "0", "1", "--quick", "--out", str(out)]) == 0
    (entry,) = json.loads((out / "compare.json").read_text())["paired"]
    assert entry["learner"] == "teamtr/NaiveSequential-v0" and len(entry["per_seed"]) == 2
    assert entry["ci"][0] <= entry["mean"] <= entry["ci"][1]


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
def test_compare_runs_the_seeds_on_ray_with_the_same_results(
    tmp_path: Path, local_ray: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the session's local Ray (tests/conftest.py: started with the test helpers' paths,
    which the other Ray tests' workers import). The workers' stage lines reach the driver."""
    argv = ["compare", "teamtr/Relay-v0", "--learners", "teamtr", "joint", "--seeds", "0", "1"]
    assert main([*argv, *_sets(TINY), "--out", str(tmp_path / "local")]) == 0
    capsys.readouterr()
    assert main([*argv, *_sets(TINY), "--ray", "--out", str(tmp_path / "ray")]) == 0
    printed = capsys.readouterr().out
    for learner in ("teamtr/TeamTR-v0", "teamtr/Joint-v0"):
        for seed in (0, 1):
            assert f"{learner} seed {seed}: stage 1/1, reward of the stage-start team" in printed
    local = json.loads((tmp_path / "local" / "compare.json").read_text())
    remote = json.loads((tmp_path / "ray" / "compare.json").read_text())
    for learner, row in local["results"].items():
        assert remote["results"][learner]["after"] == pytest.approx(row["after"], abs=1e-9)
