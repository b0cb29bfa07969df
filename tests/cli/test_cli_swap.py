"""``teamtr swap`` end to end: train a tiny run, swap an agent with alignment, and the error exit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from adapters.tiny import DEFAULT_CHARSET, TinyModelSpec, build_tiny_model
from teamtr_cli import main

SMALL = {
    "task": "teamtr/Arith-v0",
    "task_options": {"digits": 1, "system_prompts": {"solver": "", "critic": "", "aggregator": ""}},
    "sampling": {"max_new_tokens": 6},
    "sft": {"problems": 8, "steps": 2, "batch_size": 8},
    "schedule": {"stages": 1, "problems_per_batch": 2, "group_size": 2},
    "eval": {"problems": 4, "k": 2},
    "progress": False,
    # No TensorBoard files or plot where a test does not read them (the plot alone took 2.7 s).
    "loggers": [],
    "plot": False,
}


@pytest.mark.slow
def test_swap_runs_end_to_end_and_refuses_another_tokenizer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "small.yaml"
    config.write_text(yaml.safe_dump(SMALL))
    run = tmp_path / "run"
    assert main(["train", "--config", str(config), "--run-dir", str(run)]) == 0
    new = build_tiny_model(tmp_path / "new", TinyModelSpec(seed=3))
    out = tmp_path / "swapped"
    argv = ["swap", str(run), "--agent", "critic", "--model", str(new), "--out", str(out)]
    align = ["--align", "--probes", "8", "--align-steps", "2", "--delta-align", "1e-6"]
    capsys.readouterr()
    assert main([*argv, "--stages", "1", *align]) == 0
    printed = capsys.readouterr().out
    assert "before the swap: held-out avg@2" in printed
    assert "stage-0 alignment of critic: 6 probe contexts, 2 held out" in printed
    assert "alignment did NOT reach delta_align=1e-06 after 2 steps" in printed
    record = json.loads((out / "swap.json").read_text())
    assert record["aligned"] and record["agent"] == "critic" and record["stage"] == 1
    assert json.loads((out / "summary.json").read_text())["stages"] == 2

    other = build_tiny_model(tmp_path / "other", TinyModelSpec(charset=DEFAULT_CHARSET[:50]))
    bad = ["swap", str(run), "--agent", "critic", "--model", str(other), "--out", str(out)]
    assert main([*bad, "--protocol", "reasoning=strip"]) == 2
    err = capsys.readouterr().err
    assert "already exists and is not empty" in err
    assert main([*bad[:-1], str(tmp_path / "fresh"), "--protocol", "reasoning=strip"]) == 2
    err = capsys.readouterr().err
    assert "(2 problem(s))" in err and "the vocabularies differ" in err
    assert "reasoning='strip' but the team's is 'keep'" in err
    assert not (tmp_path / "fresh").exists()
