"""The teamtr CLI: tasks, play, eval (table, JSON, transcripts) and error exits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fresh import run_fresh

from teamtr_cli import main


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


@pytest.mark.xdist_group("fresh")  # tests/fresh.py's fork server: one worker starts it
def test_play_human_reads_stdin() -> None:
    proc = run_fresh(
        [
            sys.executable,
            "-m",
            "teamtr_cli",
            "play",
            "teamtr/Arith-v0",
            "--policy",
            "human",
            "-o",
            'agents=["me"]',
        ],
        input="Answer: 123456\n",
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
    import teamtr_cli.listing

    def broken(console, args):
        raise ValueError("an internal bug")

    monkeypatch.setattr(teamtr_cli.listing, "cmd_tasks", broken)
    with pytest.raises(ValueError, match="an internal bug"):
        main(["tasks"])


def test_a_malformed_row_is_a_config_error_naming_the_file(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "rows.jsonl"
    bad.write_text('{"id": "a", "data": {"expression": "1 + 1"}, "answer": 2}\nnot json\n')
    code = main(["eval", "teamtr/Arith-v0", "--data-path", str(bad), "--policy", "scripted"])
    err = capsys.readouterr().err
    assert code == 2 and f"data file {bad}" in err and f"{bad}:2:" in err, err


def test_eval_lists_every_bad_line_of_a_math_data_file(tmp_path: Path, capsys) -> None:
    """`teamtr eval teamtr/Math-v0 --data-path BAD.jsonl`: exit 2 and one message naming every
    bad line (not JSON, an empty question, a duplicate id, no gold), not only the first."""
    data = tmp_path / "bad.jsonl"
    rows = [
        '{"id": 1, "problem": "What is 1 + 1?", "answer": "2"}',
        "{not json",
        '{"id": 2, "problem": " ", "answer": "3"}',
        '{"id": 1, "problem": "Again?", "answer": "4"}',
        '{"id": 4, "problem": "No gold?"}',
    ]
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    argv = ["eval", "teamtr/Math-v0", "--data-path", str(data), "--policy", "scripted"]
    assert main([*argv, "--no-progress"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"Invalid data file {data} (4 problem(s))" in err, err
    assert f"{data}:2: not valid JSON" in err
    assert f"{data}:3: expected a non-empty string in 'problem'" in err
    assert f"{data}:4: duplicate id 'bad:1' (first on line 1)" in err
    assert f"{data}:5: no gold answer" in err
    assert "Traceback" not in err


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


# ---------------------------------------------------------------- limits, outputs, interrupts


def _no_rollouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails the test if the CLI starts drawing problems or playing episodes."""
    from teamtr_env.runners import Runner

    def refuse(*args, **kwargs):
        raise AssertionError("work started before the arguments were checked")

    monkeypatch.setattr(Runner, "sample_distinct", refuse)
    monkeypatch.setattr(Runner, "rollout", refuse)


@pytest.mark.parametrize(
    ("argv", "flags"),
    [
        (["--k", "100000000000", "--problems", "1"], ["--max-episodes", "--max-messages"]),
        (["--problems", "100000000000", "--k", "1"], ["--max-episodes"]),
        (
            ["--protocol", "self_consistency", "--protocol-option", "n=17"],
            ["--protocol-option", "MAX_PROTOCOL_MESSAGES"],
        ),
        (["--protocol", "self_consistency", "--budget", "samples:17"], ["--budget"]),
        (["--protocol", "debate", "--protocol-option", "rounds=9"], ["--protocol-option"]),
        (["-o", "max_turns=1000000000"], ["--max-messages"]),
    ],
)
def test_work_past_the_limits_is_refused_before_it_starts(
    argv: list[str], flags: list[str], capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--k 100000000000 --problems 1` grew to 24 GB; `--protocol-option n=100000000` and
    `--budget samples:100000000` ended in a MemoryError. They are refused up front with the flag
    to change (protocol sizes against a small MAX_PROTOCOL_MESSAGES here, so that a regression
    allocates nothing)."""
    import teamtr_env.baselines as baselines

    monkeypatch.setattr(baselines, "MAX_PROTOCOL_MESSAGES", 16)
    _no_rollouts(monkeypatch)
    assert main(["eval", "teamtr/Arith-v0", "--no-progress", *argv]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "over the limit" in err and all(flag in err for flag in flags), err


def test_the_limits_count_every_protocol_and_can_be_raised(tmp_path, capsys) -> None:
    argv = ["eval", "teamtr/Arith-v0", "--problems", "5", "--k", "4", "--no-progress"]
    assert main([*argv, "--max-episodes", "19"]) == 2
    assert "20 episodes" in " ".join(capsys.readouterr().err.split())
    assert main([*argv, "--max-episodes", "20"]) == 0
    two = [*argv, "--protocol", "single,self_consistency", "--protocol-option", "n=3"]
    assert main([*two, "--max-messages", "79"]) == 2  # 5 x 4 x (1 + 3) messages
    assert "80 messages" in " ".join(capsys.readouterr().err.split())
    assert main([*two, "--max-messages", "80"]) == 0


@pytest.mark.parametrize("flag", ["--out", "--transcripts"])
def test_an_output_that_cannot_be_written_fails_before_any_rollout(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch, flag: str
) -> None:
    _no_rollouts(monkeypatch)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for target, why in (
        (blocker / "r.json", "is not a directory"),
        (tmp_path, "is a directory"),
    ):
        assert main(["eval", "teamtr/Arith-v0", flag, str(target), "--no-progress"]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"{flag} {target}: " in err and why in err, err
    assert not (tmp_path / "new").exists()


def test_outputs_in_new_folders_are_written_at_the_end(tmp_path: Path) -> None:
    out, transcripts = tmp_path / "a" / "b" / "r.json", tmp_path / "c" / "t.jsonl"
    argv = ["eval", "teamtr/Arith-v0", "--problems", "3", "--k", "1", "--no-progress"]
    assert main([*argv, "--out", str(out), "--transcripts", str(transcripts)]) == 0
    assert json.loads(out.read_text())["k"] == 1 and len(transcripts.read_text().splitlines()) == 3
    assert sorted(p.name for p in out.parent.iterdir()) == ["r.json"]  # no temporary file left
    plain = tmp_path / "plain"
    plain.write_text("")
    assert out.stat().st_mode == plain.stat().st_mode  # the umask's permissions, not 0600


def test_ctrl_c_exits_130_with_one_line_and_writes_no_report(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    import teamtr_cli.eval

    calls = []

    def interrupted_second_time(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return evaluate(*args, **kwargs)

    from teamtr_env.evaluation import evaluate

    monkeypatch.setattr(teamtr_cli.eval, "evaluate", interrupted_second_time)
    out, transcripts = tmp_path / "r.json", tmp_path / "t.jsonl"
    argv = ["eval", "teamtr/Arith-v0", "--problems", "3", "--k", "1", "--no-progress"]
    argv += ["--protocol", "single,role_play", "--out", str(out), "--transcripts", str(transcripts)]
    assert main(argv) == 130
    captured = capsys.readouterr()
    assert "protocol=single" in " ".join(captured.out.split())  # the finished part was shown
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert captured.err.startswith("interrupted: the evaluation did not finish; nothing was")
    assert not out.exists() and not transcripts.exists() and list(tmp_path.iterdir()) == []


def test_ctrl_c_in_another_command_is_one_line_too(capsys, monkeypatch) -> None:
    import teamtr_cli.play

    def interrupted(args, console):
        raise KeyboardInterrupt

    monkeypatch.setattr(teamtr_cli.play, "cmd_play", interrupted)
    assert main(["play", "teamtr/Arith-v0"]) == 130
    assert capsys.readouterr().err == "interrupted: teamtr play stopped\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["play", "teamtr/Arith-v0", "--seed", "-5"],
        ["eval", "teamtr/Arith-v0", "--seed", "-5"],
        ["models", "build-tiny", "x", "--seed", "-5"],
    ],
)
def test_a_negative_seed_names_the_flag(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "argument --seed: expected a non-negative integer, got '-5'" in capsys.readouterr().err


def test_truncated_contexts_are_counted_and_marked(tmp_path: Path, capsys) -> None:
    """A prompt cut to max_context_chars was silent: the report counts the episodes, the console
    warns and the transcripts mark each one."""
    out, transcripts = tmp_path / "r.json", tmp_path / "t.jsonl"
    base = ["eval", "teamtr/Arith-v0", "--problems", "4", "--k", "2", "--no-progress"]
    long_prompt = json.dumps({"solver": "x" * 300})
    argv = [*base, "-o", "max_context_chars=256", "-o", f"system_prompts={long_prompt}"]
    assert main([*argv, "--out", str(out), "--transcripts", str(transcripts)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "in 8 of 8 episodes an agent's context was cut to max_context_chars=256" in printed
    report = json.loads(out.read_text())
    assert report["context_truncated"] == 8
    import jsonschema

    from teamtr_env.evaluation import report_schema

    jsonschema.validate(report, report_schema())
    lines = transcripts.read_text().splitlines()
    assert len(lines) == 8 and all(json.loads(line)["context_truncated"] for line in lines)
    assert main([*base, "--out", str(out)]) == 0
    assert json.loads(out.read_text())["context_truncated"] == 0
    assert "context was cut" not in capsys.readouterr().out


def test_play_marks_a_truncated_context(capsys) -> None:
    long_prompt = json.dumps({"solver": "x" * 300})
    argv = ["play", "teamtr/Arith-v0", "-o", "max_context_chars=256"]
    assert main([*argv, "-o", f"system_prompts={long_prompt}"]) == 0
    assert "[note] an agent's context was cut to max_context_chars" in capsys.readouterr().out


# ---------------------------------------------------------------- splits


def test_a_task_without_splits_is_evaluated_with_a_note(tmp_path: Path, capsys) -> None:
    """Relay has no split option: its problems are evaluated as they are (not refused as
    'train'), the console says they are not held out and so does the report."""
    out = tmp_path / "r.json"
    argv = ["eval", "teamtr/Relay-v0", "--problems", "5", "--k", "1", "--no-progress"]
    assert main([*argv, "--out", str(out)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "teamtr/Relay-v0 has no split option" in printed and "not held out" in printed
    assert json.loads(out.read_text())["held_out"] is False
    assert main([*argv, "--split", "test"]) == 2  # --split was ignored: now it is refused
    assert "--split: teamtr/Relay-v0 has no split option" in capsys.readouterr().err


def test_split_flag_conflicts_are_refused(tmp_path: Path, capsys) -> None:
    from tasks import Problem, save_problems

    data = tmp_path / "p.jsonl"
    save_problems(data, [Problem("a", {"expression": "1 + 1"}, 2, "test")])
    for argv, expected in (
        (["--data-path", str(data), "--split", "test"], "problems of --data-path keep the split"),
        (["-o", "split=test", "--split", "test"], "both choose the split"),
    ):
        assert main(["eval", "teamtr/Arith-v0", "--no-progress", *argv]) == 2
        assert expected in " ".join(capsys.readouterr().err.split())


def test_a_task_with_splits_is_held_out_by_default(tmp_path: Path, capsys) -> None:
    out = tmp_path / "r.json"
    argv = ["eval", "teamtr/Arith-v0", "--problems", "5", "--k", "1", "--no-progress"]
    assert main([*argv, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["held_out"] is True and report["splits"] == {"test": 5}
    assert main([*argv, "--split", "validation", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["splits"] == {"validation": 5}
    assert main([*argv, "--split", "train", "--allow-train", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["held_out"] is False
