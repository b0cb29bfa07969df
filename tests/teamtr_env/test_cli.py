"""The teamtr CLI: tasks, play, eval (table, JSON, transcripts) and error exits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from teamtr_env.cli import main


def test_tasks_lists_builtin_and_plugin(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    assert "teamtr/Arith-v0" in out and "example/Echo-v0" in out and "built-in" in out


def test_play_prints_transcript(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["play", "teamtr/Arith-v0", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "[problem] Compute:" in out
    for agent in ("solver", "critic", "aggregator"):
        assert f"[{agent}] Answer:" in out
    assert "[score] reward=1.0 correct=True" in out


def test_play_human_reads_stdin() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "teamtr_env.cli",
            "play",
            "teamtr/Arith-v0",
            "--policy",
            "human",
            "-o",
            'agents=["me"]',
        ],
        input="Answer: 123456\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "### me" in proc.stdout and "[me] Answer: 123456" in proc.stdout


def test_eval_table_json_and_transcripts(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    out, transcripts = tmp_path / "r.json", tmp_path / "t.jsonl"
    code = main(
        [
            "eval",
            "teamtr/Arith-v0",
            "--error-rate",
            "0.3",
            "--k",
            "4",
            "--problems",
            "300",
            "--out",
            str(out),
            "--transcripts",
            str(transcripts),
            "--no-progress",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    for name in ("pass@1", "pass@4", "avg@4", "maj@4", "95% CI"):
        assert name in printed
    report = json.loads(out.read_text())
    assert report["task"] == "teamtr/Arith-v0" and report["k"] == 4 and report["n_problems"] == 300
    metrics = report["metrics"]
    assert abs(metrics["avg@4"]["mean"] - 0.7) < 0.05  # noisy expert near its set accuracy
    assert metrics["pass@4"]["mean"] > metrics["pass@1"]["mean"]
    assert metrics["pass@1"]["ci_low"] < metrics["pass@1"]["mean"] < metrics["pass@1"]["ci_high"]
    assert report["stats"]["total_policy_calls"] == report["stats"]["steps"] == 3
    lines = transcripts.read_text().splitlines()
    assert len(lines) == 1200 and "transcript" in json.loads(lines[0])


def test_eval_random_policy_scores_near_zero(tmp_path) -> None:
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "eval",
                "teamtr/Arith-v0",
                "--policy",
                "random",
                "--k",
                "2",
                "--problems",
                "50",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    assert json.loads(out.read_text())["metrics"]["avg@2"]["mean"] < 0.05


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["eval", "teamtr/Arth-v0"], "Did you mean 'teamtr/Arith-v0'"),
        (["eval", "teamtr/Arith-v0", "-o", "digts=3"], "Did you mean 'digits'"),
        (["eval", "teamtr/Arith-v0", "--k", "0"], "--k and --problems must be >= 1"),
        (["play", "teamtr/Arith-v0", "--error-rate", "2"], "error_rate must be in [0, 1]"),
    ],
)
def test_errors_exit_2_with_a_clear_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err.replace("\n", " ")


def test_console_script_is_installed() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import shutil; print(shutil.which('teamtr') or '')"],
        capture_output=True,
        text=True,
    )
    teamtr = proc.stdout.strip() or str(
        __import__("pathlib").Path(sys.executable).with_name("teamtr")
    )
    result = subprocess.run([teamtr, "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "eval" in result.stdout


def test_eval_on_a_data_file_uses_every_problem_once(tmp_path) -> None:
    from tasks import Problem, save_problems

    data = tmp_path / "problems.jsonl"
    problems = [
        Problem(id=f"q{i}", data={"expression": f"{i} + {i}"}, answer=2 * i, split="test")
        for i in range(7)
    ]
    save_problems(data, problems)
    out = tmp_path / "r.json"
    argv = ["eval", "teamtr/Arith-v0", "--data-path", str(data), "--k", "2", "--no-progress"]
    assert main([*argv, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [p["problem_id"] for p in report["per_problem"]] == [f"q{i}" for i in range(7)]
    assert report["metrics"]["avg@2"]["mean"] == 1.0
    assert main([*argv, "--problems", "3", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["n_problems"] == 3


def test_eval_on_a_malformed_data_file_fails_clearly(tmp_path, capsys) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text('{"id": "ok"}\nnot json\n')
    assert main(["eval", "teamtr/Arith-v0", "--data-path", str(data), "--no-progress"]) == 2
    assert "bad.jsonl:2" in capsys.readouterr().err.replace("\n", "")


def test_an_internal_bug_is_a_traceback_not_a_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the project's own errors (and OS errors) are reported as "error: ..." with exit 2;
    a ValueError from a bug propagates, so it is seen as a bug."""
    import teamtr_env.cli as cli

    def broken(console):
        raise ValueError("an internal bug")

    monkeypatch.setattr(cli, "cmd_tasks", broken)
    with pytest.raises(ValueError, match="an internal bug"):
        cli.main(["tasks"])


def test_a_malformed_row_is_a_config_error_naming_the_file(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "rows.jsonl"
    bad.write_text('{"id": "a", "data": {"expression": "1 + 1"}, "answer": 2}\nnot json\n')
    code = main(["eval", "teamtr/Arith-v0", "--data-path", str(bad), "--policy", "scripted"])
    err = capsys.readouterr().err
    assert code == 2 and f"data file {bad}" in err and f"{bad}:2:" in err, err


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (bytes(range(128, 256)) * 4, ":1: not UTF-8 text"),
        (b'{"id": "a", "answer": 2}\n', ":1: problem 'a': data.expression: expected"),
        (b'{"id": "a", "data": {"expression": "1 + 1"}}\n', ":1: problem 'a': answer: expected"),
        (b"\n \n", ": no problems in it"),
    ],
)
def test_a_data_file_the_task_cannot_use_names_the_file_and_line(
    tmp_path: Path, capsys, content: bytes, expected: str
) -> None:
    """Binary data, a row without what the task needs, an empty file: exit 2 and the file's name
    (with the line), never a traceback or a silent score of 0."""
    data = tmp_path / "rows.jsonl"
    data.write_bytes(content)
    for command in ("eval", "play"):
        assert main([command, "teamtr/Arith-v0", "--data-path", str(data)]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"data file {data}" in err and f"{data}{expected}" in err, err
