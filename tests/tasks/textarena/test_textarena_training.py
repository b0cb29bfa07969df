"""A tiny team trains on a TextArena game end to end (slow): the ``teamtr train`` line of
docs/tasks/textarena.md, a one-round public goods game of two players, behaviour-cloned from the
scripted players, then two TeamTR stages."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_teamtr_train_trains_a_tiny_team_on_a_textarena_game(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "tasks" / "textarena.md").read_text(encoding="utf-8")
    (line,) = [
        line
        for block in re.findall(r"```bash\n(.*?)```", page, flags=re.DOTALL)
        for line in block.splitlines()
        if line.startswith("teamtr train")
    ]
    argv = shlex.split(line)
    argv[0] = str(Path(sys.executable).parent / "teamtr")
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = tmp_path / "runs" / "public-goods"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["task"] == "textarena/PublicGoods-v0" and summary["stages"] == 2
    assert len(summary["updates"]) == 4  # two stages, each seat updated once
    assert {u["agent"] for u in summary["updates"]} == {"player0", "player1"}
    # behaviour cloning taught the seats the game's moves: episodes end with contributions
    assert summary["before"]["eval/avg@2"] > 0.2 and summary["after"]["eval/avg@2"] > 0.2
    assert json.loads((run / "eval_per_problem.json").read_text())
