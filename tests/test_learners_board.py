"""benchmarks/learners_board.py: every built-in learner on three team envs at an equal budget,
with paired CIs against TeamTR."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType

import pytest
from helpers_bench import run_quick

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "learners_board.py"


@pytest.fixture
def board(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("learners_board")


def compare_data(after: dict[str, list[float]], paired: dict[str, list[float]]) -> dict:
    """A compare.json with the fields the board reads."""
    return {
        "metric": "eval/avg@4",
        "results": {learner: {"after": values} for learner, values in after.items()},
        "paired": [
            {"learner": learner, "mean": (ci[0] + ci[1]) / 2, "ci": ci}
            for learner, ci in paired.items()
        ],
    }


def test_a_row_separates_only_when_its_interval_over_seeds_excludes_zero(
    board: ModuleType,
) -> None:
    data = compare_data(
        {"ref": [0.5, 0.6], "better": [0.8, 0.9], "tie": [0.5, 0.62]},
        {"better": [0.2, 0.4], "tie": [-0.05, 0.07]},
    )
    rows = {r["learner"]: r for r in board.board_rows("pipeline", data)}
    assert rows["ref"]["diff"] is None and rows["ref"]["separates"] is None
    assert rows["better"]["separates"] is True and rows["better"]["diff"] == pytest.approx(0.3)
    assert rows["tie"]["separates"] is False
    assert rows["better"]["after_mean"] == pytest.approx(0.85)
    one_seed = compare_data({"ref": [0.5], "other": [0.7]}, {"other": [0.2, 0.2]})
    assert board.board_rows("relay", one_seed)[1]["separates"] is None  # no interval over seeds
    table = board.markdown(list(rows.values()), "ref")
    assert "better" in table and "+0.300" in table and "[+0.200, +0.400]" in table
    assert "generated msgs / stage" in table


def test_the_board_shows_what_each_learner_generated(board: ModuleType, tmp_path: Path) -> None:
    data = compare_data({"ref": [0.5], "tree": [0.7]}, {"tree": [0.1, 0.3]})
    made = {"messages": 128.0, "tokens": 640.0, "episodes": 32.0, "stages": 2.0}
    data["budget"] = {
        "generated": {"ref": {0: made}, "tree": {0: {**made, "messages": 80.0}}},
        "generated_ratio": {
            "ref": {"messages": 1.0, "tokens": 1.0},
            "tree": {"messages": 0.625, "tokens": 1.0},
        },
    }
    rows = {r["learner"]: r for r in board.board_rows("relay", data)}
    assert rows["tree"]["generated_messages_per_stage"] == pytest.approx(40.0)
    table = board.markdown(list(rows.values()), "ref")
    assert "0.62x, 1.00x" in table and "| 64 " in table


def test_the_ablation_names_its_variants(board: ModuleType) -> None:
    from trainers.tools.compare import learner_entry

    labels = [learner_entry(e)[0] for e in board.ABLATION]
    assert labels[:2] == ["teamtr/TeamTR-v0", "teamtr/ATGRPO-v0"]
    assert {"at_grpo+tr", "teamtr-no-radius", "teamtr/TeamTRTree-v0"} <= set(labels)
    entries = {
        label: (learner, sets) for label, learner, sets in map(learner_entry, board.ABLATION)
    }
    learner, sets = entries["at_grpo-pettingllms"]
    assert learner == "teamtr/ATGRPO-v0" and "optim.ratio_level=token" in sets
    assert entries["teamtr-pettingllms"] == ("teamtr/TeamTR-v0", sets)  # the same update


@pytest.mark.slow
def test_the_quick_board_runs_every_learner_on_every_env(tmp_path: Path) -> None:
    out = tmp_path / "board"
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    data, _ = run_quick("learners_board.py", ["--out", str(out)], out / "board.json", env=env)
    learners = data["learners"]
    assert learners[0] == data["reference"] == "teamtr/TeamTR-v0"
    assert "teamtr/ATGRPO-v0" in learners and "teamtr/TeamTRTree-v0" in learners
    assert len(learners) == 6
    assert set(data["envs"]) == {"relay", "pipeline", "convention"}
    assert len(data["rows"]) == 3 * 6
    for env in data["envs"].values():
        assert env["budget"]["equal"]  # the same messages per update for every learner
        assert Path(env["compare"]).exists()
        # generation is counted, and it is not equal: a tree generates differently
        assert env["budget"]["generation_equal"] is False and "NOT EQUAL" in env["generation"]
    assert all(r["generated_messages_per_stage"] > 0 for r in data["rows"])
    relay = [r for r in data["rows"] if r["env"] == "relay"]
    assert all(r["metric"] == "exact J" for r in relay)  # the tabular team's exact J
    assert (out / "board.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Learners board" in (out / "board.md").read_text()


@pytest.mark.slow  # a benchmark smoke run; the board's pairing logic in this file's other tests
def test_a_pair_of_any_two_learners_is_paired_like_the_reference(
    board: ModuleType, tmp_path: Path
) -> None:
    """``--pair A B`` reports A - B by seed (exact J on the tabular relay), as the comparison
    pairs each learner with TeamTR: here checked against compare.json's own exact J."""
    from trainers.tools.compare_stats import paired_exact

    args = ["--out", str(tmp_path), "--envs", "relay", "--quick", "--seeds", "0", "1"]
    args += [
        "--learners",
        "teamtr",
        "at_grpo",
        "teamtr_tree",
        "no-tr=teamtr:trust_region.delta_mode=none",
    ]
    args += ["--pair", "teamtr_tree", "at_grpo", "--pair", "no-tr", "teamtr"]
    assert board.main(args) == 0
    data = json.loads((tmp_path / "board.json").read_text())
    pair, variant = data["envs"]["relay"]["pairs"]
    assert (variant["a"], variant["b"]) == ("no-tr", "teamtr")  # a variant by its label
    results = json.loads((tmp_path / "relay/compare.json").read_text())["results"]
    exact = {k: dict(zip(v["seeds"], v["exact_after"])) for k, v in results.items()}
    expected = paired_exact(exact["teamtr/ATGRPO-v0"], exact["teamtr/TeamTRTree-v0"])
    assert (pair["a"], pair["b"], pair["metric"]) == ("teamtr_tree", "at_grpo", "exact J")
    assert pair["mean"] == pytest.approx(expected["mean"])


def test_env_seeds_must_name_an_env_of_the_board(board: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        board.main(["--out", str(tmp_path), "--envs", "relay", "--env-seeds", "pipeline=0,1"])
    assert not (tmp_path / "board.json").exists()
