"""benchmarks/update_moves.py: per-learner update sizes of a finished comparison, read from the
runs' metrics.jsonl."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "update_moves.py"


def _run(folder: Path, rows: list[dict]) -> None:
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (folder / "summary.json").write_text("{}")


def test_means_over_updates_and_seeds_skip_reverted_steps(tmp_path: Path) -> None:
    runs = tmp_path / "cmp" / "runs"
    for seed, kl in ((0, 0.1), (1, 0.3)):
        _run(
            runs / f"teamtr_TeamTR-v0-seed{seed}",
            [
                {"step": 1, "agent/a1/kl_tok": kl, "agent/a1/accepted": 1.0,
                 "agent/a1/backtracks": 2.0, "stage/reward_start": 0.1, "diag/d_occ": 1.0},
                {"step": 2, "agent/a1/kl_tok": 5.0, "agent/a1/accepted": 0.0,  # reverted
                 "agent/a1/backtracks": 0.0, "stage/reward_start": 0.3, "diag/d_occ": 3.0},
            ],
        )  # fmt: skip
    (runs / "teamtr_NaiveSequential-v0-seed0").mkdir()  # unfinished: left out
    out = tmp_path / "moves.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "cmp"), "--json", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "| teamtr/TeamTR-v0 | 2     | 0.200 ± 0.141 |" in done.stdout
    data = json.loads(out.read_text())["runs"]
    assert list(data) == ["teamtr/TeamTR-v0"]
    first = data["teamtr/TeamTR-v0"]["0"]
    assert first["kl_tok"] == pytest.approx(0.1) and first["accepted"] == pytest.approx(0.5)
    assert first["backtracks"] == pytest.approx(1.0) and first["d_occ"] == pytest.approx(2.0)
    assert first["reward_gain_per_stage"] == pytest.approx(0.2)


def test_a_folder_without_finished_runs_is_refused(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode != 0 and "holds no finished run" in done.stderr
