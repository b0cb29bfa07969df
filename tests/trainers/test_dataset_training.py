"""A task from a dataset trains like any other: ``teamtr train`` (run_training's recipe) on a
DatasetTask registered from a JSONL fixture (one tiny stage of a tiny model)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

import teamtr_env
from tasks.dataset import DatasetTask
from teamtr_cli import main

CAPITALS = Path(__file__).resolve().parents[1] / "fixtures" / "dataset" / "capitals.jsonl"
TASK_ID = "test/CapitalsTraining-v0"
TINY = {
    "sampling": {"max_new_tokens": 6},
    "sft": None,
    "schedule": {"stages": 1, "problems_per_batch": 2, "group_size": 2},
    "eval": {"problems": 4, "k": 2},
    "progress": False,
    # No TensorBoard files or plot where a test does not read them (the plot alone took 2.7 s).
    "loggers": [],
    "plot": False,
}


def exact(prompts, completions, answer, **kw):
    return [float(c.strip() == a) for c, a in zip(completions, answer)]


@pytest.fixture
def registered() -> Iterator[str]:
    """The task in the default registry (``teamtr train`` reads it), removed afterwards."""
    teamtr_env.register(
        TASK_ID,
        DatasetTask,
        kwargs={
            "path": str(CAPITALS),
            "prompt_column": "question",
            "id_column": "id",
            "reward_funcs": [exact],
            "reward_weights": [1.0],
        },
        env_kwargs={"system_prompts": {"solver": "", "critic": "", "aggregator": ""}},
        override=True,
    )
    try:
        yield TASK_ID
    finally:
        teamtr_env.registry.unregister(TASK_ID)


def test_teamtr_train_config_names_reward_functions_by_import_string(
    registered: str, tmp_path: Path
) -> None:
    """``teamtr train`` on the dataset task, its reward named in YAML: it trains and evaluates
    on the file's own splits."""
    config = {
        **TINY,
        "task": registered,
        # A YAML config cannot hold a Python function: it names one ("module:function").
        "task_options": {"reward_funcs": ["tasks.dataset.rewards:exact_match"]},
        "eval": {"problems": 8, "k": 2},
    }
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["train", "--config", str(path), "--run-dir", str(tmp_path / "run")]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["stages"] == 1
    assert {"eval/avg@2", "eval/pass@2"} <= set(summary["before"]) & set(summary["after"])
    # The held-out evaluation draws the test rows of the file's split column: 4 capitals.
    assert summary["eval_split"] == "test" and summary["eval_problems_distinct"] == 4
    assert summary["train_eval_problems_distinct"] == 8  # of the 10 train rows
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert saved["task_options"]["reward_funcs"] == ["tasks.dataset.rewards:exact_match"]


def test_behaviour_cloning_needs_an_expert_and_says_so_before_writing(
    registered: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    argv = ["train", "--set", f"task={registered}", "--run-dir", str(run_dir)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "sft: nothing to behaviour-clone" in err and "has no scripted expert" in err
    assert "--set sft=null" in err
    assert not run_dir.exists()


def test_a_split_without_rows_is_refused_before_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "train_only.jsonl"
    data.write_text(
        "".join(
            json.dumps({"prompt": f"Say {i}", "answer": str(i), "split": "train"}) + "\n"
            for i in range(4)
        )
    )
    teamtr_env.register(
        "test/TrainOnly-v0",
        DatasetTask,
        kwargs={"path": str(data), "reward_funcs": "tasks.dataset.rewards:exact_match"},
        override=True,
    )
    run_dir = tmp_path / "run"
    try:
        argv = ["train", "--set", "task=test/TrainOnly-v0", "--set", "sft=null"]
        assert main([*argv, "--run-dir", str(run_dir)]) == 2
    finally:
        teamtr_env.registry.unregister("test/TrainOnly-v0")
    err = capsys.readouterr().err
    assert "split 'test'" in err and "has no rows" in err and "train 4" in err
    assert not run_dir.exists()
