"""Evaluation reports: coordination metrics, breakdowns, the published JSON schema and the
split discipline of ``teamtr eval``."""

from __future__ import annotations

import json

import jsonschema
import pytest

import teamtr_env
from adapters.scripted import ScriptedExpert
from tasks import Problem, save_problems, split_of
from tasks.arith import ArithTask
from teamtr_cli import main
from teamtr_env.coordination import coordination_metrics
from teamtr_env.evaluation import evaluate, report_schema
from teamtr_env.rollout import EpisodeRecord
from teamtr_env.runners import Runner


def _episode(pid: str, texts: list[tuple[str, str]], correct: bool, answer: str) -> EpisodeRecord:
    return EpisodeRecord(
        episode=0,
        group=0,
        problem_id=pid,
        prompt="",
        reward=float(correct),
        correct=correct,
        answer=answer,
        details={},
        transcript=tuple({"role": "agent", "speaker": s, "text": t} for s, t in texts),
        turns=len(texts),
        truncated=False,
        split="test",
        meta={},
    )


def test_coordination_metrics_hand_example() -> None:
    task = ArithTask()
    problems = {"p": Problem(id="p", answer=5)}
    episodes = [
        # right, right, right: consensus on correct, no transitions lost
        _episode("p", [("a", "Answer: 5"), ("b", "Answer: 5"), ("c", "Answer: 5")], True, "5"),
        # right -> wrong (regression), wrong -> wrong: final wrong, correct-then-lost
        _episode("p", [("a", "Answer: 5"), ("b", "Answer: 6"), ("c", "Answer: 6")], False, "6"),
        # wrong -> right (fix), right -> right; no answer from nobody: agreement fails (a != b)
        _episode("p", [("a", "Answer: 4"), ("b", "Answer: 5"), ("c", "Answer: 5")], True, "5"),
        # an answerless message is skipped in transitions but breaks consensus
        _episode("p", [("a", "Answer: 5"), ("b", "hmm"), ("c", "Answer: 5")], True, "5"),
    ]
    c = coordination_metrics(episodes, problems, task.grade)
    assert c.episodes == 4
    assert c.consensus_on_correct == pytest.approx(1 / 4)
    assert c.agreement == pytest.approx(1 / 4)
    # transitions: ep1 (c->c, c->c), ep2 (c->w, w->w), ep3 (w->c, c->c), ep4 (c->c)
    assert (c.transitions_from_correct, c.regressions) == (5, 1)
    assert (c.transitions_from_wrong, c.fixes) == (2, 1)
    assert c.regression_rate == pytest.approx(1 / 5)
    assert c.fix_rate == pytest.approx(1 / 2)
    assert c.correct_then_lost == pytest.approx(1 / 4)
    assert c.wrong_then_fixed == pytest.approx(1 / 4)
    assert c.answered_messages == 11


def test_split_partition_is_stable_and_disjoint() -> None:
    assert split_of("arith:1+2") == split_of("arith:1+2")
    counts = {"train": 0, "validation": 0, "test": 0}
    for i in range(20000):
        counts[split_of(f"id-{i}")] += 1
    assert counts["train"] / 20000 == pytest.approx(0.8, abs=0.01)
    assert counts["test"] / 20000 == pytest.approx(0.1, abs=0.01)
    import numpy as np

    ids = {}
    for split in ("train", "validation", "test"):
        task, rng = ArithTask(digits=1, split=split), np.random.default_rng(0)
        ids[split] = {task.sample(rng).id for _ in range(500)}
        assert all(split_of(i) == split for i in ids[split])
    assert not ids["train"] & ids["test"] and not ids["train"] & ids["validation"]


def test_report_breakdowns_tokens_and_schema() -> None:
    env_fn = lambda: teamtr_env.make("teamtr/Arith-v0", operators="+-", split="test")  # noqa: E731
    runner = Runner(env_fn, ScriptedExpert(env_fn().task, 0.3, seed=0), progress=False)
    problems = runner.sample_problems(40, seed=0)
    report = evaluate(runner, problems, 3, seed=0)
    assert set(report.breakdowns) == {"operators"}
    groups = report.breakdowns["operators"]
    assert sum(g["n_problems"] for g in groups.values()) == 40
    assert report.splits == {"test": 40}
    assert report.coordination is not None and report.coordination["episodes"] == 120
    doc = {"task": "teamtr/Arith-v0", **report.to_dict()}
    jsonschema.validate(json.loads(json.dumps(doc)), report_schema())
    doc["metrics"]["pass@1"]["mean"] = 1.5
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, report_schema())


def test_cli_protocol_comparison_validates_against_the_schema(tmp_path, capsys) -> None:
    out = tmp_path / "cmp.json"
    argv = [
        "eval",
        "teamtr/Arith-v0",
        "--error-rate",
        "0.3",
        "--k",
        "2",
        "--problems",
        "12",
        "--no-progress",
        "--protocol",
        "single,self_consistency,debate_judge",
        "--budget",
        "samples:5",
        "--out",
        str(out),
        "--transcripts",
        str(tmp_path / "t.jsonl"),
    ]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "protocols compared" in text and "coordination:" in text
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, report_schema())
    names = [r["protocol"]["name"] for r in doc["comparison"]]
    assert names == ["single", "self_consistency", "debate_judge"]
    msgs = [r["tokens"]["messages_per_episode"] for r in doc["comparison"]]
    assert msgs == [1, 5, 5]
    lines = (tmp_path / "t.jsonl").read_text().splitlines()
    assert len(lines) == 3 * 12 * 2 and json.loads(lines[-1])["protocol"] == "debate_judge"


def test_cli_refuses_train_data_without_flag(tmp_path, capsys) -> None:
    data = tmp_path / "train.jsonl"
    save_problems(data, [Problem(id="t1", data={"expression": "1 + 2"}, answer=3, split="train")])
    argv = ["eval", "teamtr/Arith-v0", "--data-path", str(data), "--k", "1", "--no-progress"]
    assert main(argv) == 2
    assert "labelled 'train'" in capsys.readouterr().err
    assert main([*argv, "--allow-train"]) == 0
    # generated problems: the train split is refused too, the default test split is fine
    assert main(["eval", "teamtr/Arith-v0", "--split", "train", "--k", "1", "--no-progress"]) == 2
    assert main(["eval", "teamtr/Arith-v0", "--k", "1", "--problems", "5", "--no-progress"]) == 0


def test_cli_schema_flag_prints_the_schema(capsys) -> None:
    assert main(["eval", "teamtr/Arith-v0", "--schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "teamtr evaluation report"


def test_cli_budget_and_protocol_errors(capsys) -> None:
    assert main(["eval", "teamtr/Arith-v0", "--budget", "coins:3", "--protocol", "single"]) == 2
    assert "samples:N or tokens:N" in capsys.readouterr().err
    assert main(["eval", "teamtr/Arith-v0", "--protocol", "chorus"]) == 2
    assert "unknown ['chorus']" in capsys.readouterr().err
    assert main(["eval", "teamtr/Arith-v0", "--budget", "samples:3"]) == 2
    assert "need --protocol" in capsys.readouterr().err


def test_task_aggregates_reach_the_report() -> None:
    env_fn = lambda: teamtr_env.make("teamtr/ZebraLogic-v0", houses=2, attributes=2)  # noqa: E731
    runner = Runner(env_fn, ScriptedExpert(env_fn().task, 0.5, seed=0), progress=False)
    report = evaluate(runner, runner.sample_problems(6, seed=0), 2, seed=0)
    tm = report.task_metrics
    assert tm["all/puzzle_acc"] == pytest.approx(report.metrics["avg@2"].mean)
    assert 0 < tm["all/cell_acc"] <= 1 and tm["all/no_answer_rate"] == 0
