"""Faults on the newest commands (issue #46's table, D1-D12): ``teamtr export``, ``teamtr eval
--run-dir``, reasoning-gym options, task schedules, tabular teams and ``teamtr compare``, tried
as a new user who makes mistakes would. Each gets a clear error (exit 2, the option named, the
fix said) or the documented behaviour, and leaves nothing on disk that was not there before.

One small finished run (``teamtr train``, one stage of the demo task; ``conftest.run``) is made
per test process; tests that change a run work on a copy of it."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
from helpers_reliability import EVAL, RUN_CONFIG
from helpers_reliability import copy_run as _copy
from helpers_reliability import files as _files
from helpers_reliability import refused as _refused
from helpers_reliability import usage_error as _usage_error

from teamtr_cli import main

# -- D1: time limits, and an evaluation the grader failed -----------------------------------------


@pytest.mark.parametrize("value", ["1e308", "Infinity", "NaN", "0", "-1", "3601"])
def test_a_time_limit_must_be_finite_and_within_an_hour(
    work: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """D1: ``1e308``, ``Infinity`` and ``NaN`` scored every answer 0 (an ``OverflowError`` in
    the worker's wait); now they are refused, for reasoning-gym and Math-v0 alike."""
    err = _refused(
        ["eval", "reasoning_gym/basic_arithmetic", "-o", f"timeout_s={value}", *EVAL], capsys
    )
    assert "timeout_s must be a number of seconds in (0, 3600]" in err
    err = _refused(["eval", "teamtr/Math-v0", "-o", f"timeout_s={value}", *EVAL], capsys)
    assert "timeout_s must be a number of seconds in (0, 600]" in err
    assert _files(work) == []


def test_an_evaluation_the_grader_failed_on_says_so_loudly(
    work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """D1: a deadline the scorer cannot meet makes every answer a ``scorer_timeout`` (made
    certain here: ``timeout_s=1e-9`` alone can be met when the reply is in before the wait
    starts). The scores are 0, but the console and the report say the grader failed, not the
    team."""
    from tasks.reasoning_gym import scoring

    def overrun(self: object, request: object, timeout_s: float) -> scoring.Scored:
        return scoring.Scored("timeout", error=f"no reply within {timeout_s} s")

    argv = ["eval", "reasoning_gym/basic_arithmetic", "-o", "timeout_s=0.001", "--out", "r.json"]
    with monkeypatch.context() as patch:
        patch.setattr(scoring.GymPool, "score", overrun)
        assert main([*argv, *EVAL]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "WARNING: the grader failed on 2 of 2 answers (100%: scorer_timeout 2)" in out
    assert "these metrics measure the grader, not the team" in out and "timeout_s" in out
    report = json.loads((work / "r.json").read_text())
    failures = report["grader_failures"]
    assert failures["episodes"] == 2 and failures["share"] == 1.0
    assert failures["reasons"] == {"scorer_timeout": 2} and len(failures["examples"]) == 2
    # The default deadline grades the same answers: no warning, none failed.
    assert main(["eval", "reasoning_gym/basic_arithmetic", "--out", "r.json", *EVAL]) == 0
    assert "grader failed" not in capsys.readouterr().out
    assert json.loads((work / "r.json").read_text())["grader_failures"]["episodes"] == 0


def test_grader_failures_are_counted_apart_and_warned_about_in_training() -> None:
    """D1: the summary of an evaluation's grader failures (a share, the reasons, a few examples;
    alarming above 10%), and the line training prints after an evaluation with any."""
    from types import SimpleNamespace

    from tasks.base import grader_failure
    from teamtr_env.evaluation import grader_failures
    from trainers.run.team_eval import grader_key, grader_warnings

    def episode(i: int, details: dict) -> SimpleNamespace:
        return SimpleNamespace(problem_id=f"p{i}", details=details)

    failed = grader_failure("verifier_error", error="boom")
    episodes = [episode(0, failed), *(episode(i, {"reason": "wrong_answer"}) for i in range(1, 20))]
    summary = grader_failures(episodes)
    assert (summary.episodes, summary.total, summary.share) == (1, 20, 0.05)
    assert not summary.alarming and summary.reasons == {"verifier_error": 1}
    assert summary.examples == [{"problem_id": "p0", "reason": "verifier_error", "error": "boom"}]
    assert "the grader failed on 1 of 20 answers (5%: verifier_error 1)" in str(summary.message())
    alarming = grader_failures([episode(0, failed), episode(1, failed), *episodes[1:4]])
    assert alarming.alarming and "measure the grader, not the team" in str(alarming.message())
    assert grader_failures(episodes[1:]).message() is None
    (line,) = grader_warnings({grader_key("eval"): 0.5, grader_key("val"): 0.0})
    assert "the grader failed on 50% of the answers in the eval/ evaluation" in line
    assert "measure the grader" in line


def test_every_grader_marks_its_own_failures() -> None:
    """D1: math-verify's timeouts and errors are grader failures (reasoning-gym's scorer
    timeouts: above); a wrong answer is not."""
    from tasks.math.grading import grade_answer
    from tasks.math.verifier import Verdict

    class Pool:  # a verifier pool that answers with a fixed verdict
        def __init__(self, verdict: Verdict) -> None:
            self.verdict = verdict

        def verify(self, gold: str, pred: str, timeout_s: float) -> Verdict:
            return self.verdict

    for status, reason in (("timeout", "timeout"), ("error", "verifier_error")):
        score = grade_answer("2", "\\boxed{2}", pool=Pool(Verdict(status, False)))  # type: ignore[arg-type]
        assert score.grader_failed and score.details["reason"] == reason
    wrong = grade_answer("2", "\\boxed{3}", pool=Pool(Verdict("ok", False, "2", "3")))  # type: ignore[arg-type]
    assert wrong.details["reason"] == "wrong_answer" and not wrong.grader_failed

    # A dataset's reward function that raises: tests/tasks/test_dataset.py
    # (test_a_broken_reward_function_is_a_scored_reward_error).


# -- D2: a refused training run leaves the folder as it was ---------------------------------------


@pytest.mark.parametrize(
    ("team", "said"),
    [
        ("{default: {backend: tabular}}", "backend 'tabular' needs states and messages"),
        ("{default: {backend: scripted}}", "no agent has a trainable policy"),
    ],
)
def test_a_team_that_cannot_train_is_refused_before_the_first_write(
    work: Path, capsys: pytest.CaptureFixture[str], team: str, said: str
) -> None:
    """D2: the team is checked with its task before ``config.yaml`` is written: no folder is
    left behind, and an existing empty one stays empty, so the corrected run can use it."""
    (work / "tab.yaml").write_text(f"task: teamtr/Arith-v0\nteam: {team}\n", encoding="utf-8")
    err = _refused(["train", "--config", "tab.yaml", "--run-dir", "runs/c3"], capsys)
    assert said in err
    (work / "empty").mkdir()
    err = _refused(["train", "--config", "tab.yaml", "--run-dir", "empty"], capsys)
    assert said in err
    assert _files(work) == ["empty", "tab.yaml"]


def test_a_run_refused_after_its_first_write_takes_back_what_it_wrote(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """D2: should a check still fail once the run has started writing (here the trainer's), the
    run directory is left as it was: a new one removed, an empty one emptied."""
    import trainers.run.recipe as recipe
    from teamtr_core.errors import ConfigError
    from trainers.run.config_file import load_train_config

    def refuse(*args: object, **kwargs: object) -> None:
        raise ConfigError("trainer", ["refused late"])

    monkeypatch.setattr(recipe, "TeamTrainer", refuse)
    (work / "run.yaml").write_text(RUN_CONFIG, encoding="utf-8")
    for run_dir, existed in (("new", False), ("empty", True)):
        if existed:
            (work / run_dir).mkdir()
        config = load_train_config(work / "run.yaml", [f"run_dir={run_dir}"])
        with pytest.raises(ConfigError, match="refused late"):
            recipe.run_training(config)
        assert (work / run_dir).exists() == existed
        assert not existed or not any((work / run_dir).iterdir())


# -- D3, D10: where a comparison writes -----------------------------------------------------------

COMPARE = ["compare", "teamtr/Relay-v0", "--learners", "teamtr", "naive_sequential", "--seeds", "0"]


def test_a_comparison_refuses_a_run_directory_a_foreign_folder_and_a_file(
    run: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """D3, D10: ``compare --out`` into a ``teamtr train`` run or an unrelated non-empty folder is
    refused (with or without ``--overwrite``, which replaces comparisons only) and into a file
    too, naming the option; nothing is written anywhere."""
    before = _files(run)
    err = _refused([*COMPARE, "--quick", "--out", str(run)], capsys)
    assert "holds a teamtr train run (checkpoints, config.yaml" in err
    assert "not a comparison: give a new or empty folder" in err
    assert _files(run) == before
    (work / "notes").mkdir()
    (work / "notes" / "n.txt").write_text("mine")
    for extra in ([], ["--overwrite"]):
        err = _refused([*COMPARE, "--quick", "--out", "notes", *extra], capsys)
        assert "notes holds other files (n.txt), not a comparison" in err
    (work / "x.txt").write_text("")
    err = _refused([*COMPARE, "--quick", "--out", "x.txt"], capsys)
    assert "--out" in err and "x.txt: is a file: give a folder" in err
    err = _refused([*COMPARE, "--quick", "--out", "x.txt/sub"], capsys)
    assert "x.txt is not a directory (a file): nothing can be made in it" in err
    assert _files(work) == ["notes", "notes/n.txt", "x.txt"]


def test_a_comparison_continues_its_own_folder_and_overwrite_replaces_it(tmp_path: Path) -> None:
    """D3: the rules of ``--out``: an earlier comparison of the same settings is continued,
    one of other settings refused unless ``--overwrite``, which deletes its files only."""
    from teamtr_core.errors import ConfigError
    from trainers.tools.compare_out import SPEC_FILE, check_out

    out = tmp_path / "cmp"
    assert check_out(out, {"a": 1}, overwrite=False) == [] and not out.exists()
    out.mkdir()
    (out / SPEC_FILE).write_text(json.dumps({"a": 1}))
    (out / "runs").mkdir()
    (out / "README.txt").write_text("the user's")
    assert check_out(out, {"a": 1}, overwrite=False) == []  # the same comparison: continued
    with pytest.raises(ConfigError, match=r"differ in \['a'\].*--overwrite to replace it"):
        check_out(out, {"a": 2}, overwrite=False)
    assert check_out(out, {"a": 2}, overwrite=True) == [SPEC_FILE, "runs"]
    (out / SPEC_FILE).write_text("{broken")
    with pytest.raises(ConfigError, match="cannot be read"):
        check_out(out, {"a": 1}, overwrite=False)


# -- D4: reasoning-gym sizes whose splits would be empty ------------------------------------------


def test_a_reasoning_gym_size_too_small_for_its_splits_is_refused_everywhere(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """D4: ``size=10`` left the test split empty and ended in a traceback; every command now
    refuses it with the smallest size that works."""
    said = "size must be an integer >= 1000, got 10"
    err = _refused(["eval", "reasoning_gym/basic_arithmetic", "-o", "size=10", *EVAL], capsys)
    assert said in err
    err = _refused(["tasks", "reasoning_gym/basic_arithmetic", "--splits", "-o", "size=10"], capsys)
    assert said in err
    (work / "rg.yaml").write_text(
        "task: reasoning_gym/basic_arithmetic\ntask_options: {size: 10}\n", encoding="utf-8"
    )
    assert said in _refused(["train", "--config", "rg.yaml", "--run-dir", "r"], capsys)
    assert _files(work) == ["rg.yaml"]


def test_a_split_a_generator_cannot_draw_from_is_a_config_error() -> None:
    """D4: a generator whose problem space has no problem of a split raises ``DrawError``, a
    ``ConfigError`` (exit 2 on the command line) that is still a ``RuntimeError``."""
    import numpy as np

    from tasks.base import DrawError, Problem, Score, SingleAnswerTask, split_of
    from teamtr_core.errors import ConfigError

    class Tiny(SingleAnswerTask):
        name = "tiny"

        def sample(self, rng: np.random.Generator) -> Problem:
            return self.draw_in_split(rng, lambda r: Problem("only", {}, 1), "test")

        def prompt(self, problem: Problem) -> str:
            return ""

        def grade(self, problem: Problem, text: str) -> Score:
            return Score(0.0, False)

    assert split_of("only") != "test"
    with pytest.raises(DrawError) as err:
        Tiny().sample(np.random.default_rng(0))
    assert isinstance(err.value, ConfigError) and isinstance(err.value, RuntimeError)
    assert "no problem of split 'test'" in str(err.value) and "--splits" in str(err.value)


# -- D5, D6, D12 and a run with no checkpoint: evaluating and exporting a run writes nothing in it


def test_evaluating_a_run_without_its_tiny_model_writes_nothing_in_it(
    run: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """D5: a deleted ``models/tiny`` is rebuilt in a temporary folder (said), not in the run; an
    edited ``tiny_model`` that no longer fits the checkpoint is refused, naming the change."""
    copy = _copy(run, work)
    shutil.rmtree(copy / "models")
    before = _files(copy)
    assert main(["eval", "teamtr/Pipeline-v0", "--run-dir", str(copy), *EVAL]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "models/tiny is missing: the tiny model was rebuilt from config.yaml's tiny_model in a temporary folder"
        in out
    )
    assert _files(copy) == before
    config = copy / "config.yaml"
    config.write_text(config.read_text().replace("hidden_size: 128", "hidden_size: 64"))
    err = _refused(["eval", "teamtr/Pipeline-v0", "--run-dir", str(copy), *EVAL], capsys)
    assert "weights of 'step1' do not fit the model" in err and "size mismatch" in err
    assert "tiny_model.hidden_size: 128 -> 64" in err
    assert _files(copy) == before


def test_evaluating_a_run_whose_config_was_edited_says_what_changed(
    run: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """D6: ``config.yaml`` is compared with the configuration the checkpoint trained with; the
    changes are said on the console and kept in the report."""
    copy = _copy(run, work)
    config = copy / "config.yaml"
    config.write_text(config.read_text().replace("max_value: 9", "max_value: 20"))
    argv = ["eval", "teamtr/Pipeline-v0", "--run-dir", str(copy), "--out", "r.json", *EVAL]
    assert main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "config.yaml has changed since stage_0001.pt was saved" in out
    assert "(task_options.max_value: 9 -> 20)" in out
    changes = json.loads((work / "r.json").read_text())["run_config_changes"]
    assert changes == ["task_options.max_value: 9 -> 20"]
    assert (
        main(["eval", "teamtr/Pipeline-v0", "--run-dir", str(run), "--out", "r.json", *EVAL]) == 0
    )
    assert json.loads((work / "r.json").read_text())["run_config_changes"] == []


def test_a_run_stopped_before_its_first_checkpoint_is_said_to_have_none_yet(
    run: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Also: a run killed in its first stage has a ``config.yaml`` and no checkpoint."""
    started = work / "started"
    started.mkdir()
    shutil.copy(run / "config.yaml", started)
    err = _refused(["eval", "teamtr/Pipeline-v0", "--run-dir", "started"], capsys)
    assert "started has no checkpoint yet: the run stopped (or is still running)" in err
    assert "teamtr train --resume --run-dir started" in err


def test_the_export_command_line_is_shell_quoted(
    run: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """D12: a run and an export whose names have spaces: the printed and recorded command runs
    as pasted. D10: an ``--out`` that cannot be made is named, with no ``Errno``; an export
    into its own run is refused."""
    copy = _copy(run, work)
    before = _files(copy)
    assert main(["export", str(copy), "--out", "my export"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    command = json.loads((work / "my export" / "manifest.json").read_text())["eval_command"]
    assert shlex.split(command)[:5] == [
        "teamtr", "eval", "teamtr/Pipeline-v0", "--team", "my export/team.yaml"
    ]  # fmt: skip
    assert f"evaluate it with: {command}" in printed
    (work / "x.txt").write_text("")
    for out, said in (
        ("x.txt/sub", "x.txt is not a directory (a file): nothing can be made in it"),
        ("/proc/x", "/proc/x: cannot create a folder in /proc/x"),
        (str(copy / "exported"), "is inside the run"),
    ):
        err = _refused(["export", str(copy), "--out", out], capsys)
        assert said in err and "Errno" not in err
    assert _files(copy) == before


# -- D7, D8, D9: flags that would be ignored, suggestions, the scripted expert --------------------


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--run-dir", "RUN", "--policy", "scripted"], "(given: --policy)"),
        (["--run-dir", "RUN", "--error-rate", "0.5"], "(given: --error-rate)"),
        (
            ["--team", "t.yaml", "--policy", "scripted"],
            "--team brings its own team: give no --policy",
        ),
        (["--policy", "random", "--error-rate", "0.5"], "it does nothing with --policy random"),
        (["--set", "sampling.temperature=1"], "--set overrides a team config: pass --team"),
    ],
)
def test_team_flags_that_would_be_ignored_are_refused(
    work: Path, capsys: pytest.CaptureFixture[str], flags: list[str], said: str
) -> None:
    """D7: an explicit ``--policy scripted`` or ``--error-rate`` beside ``--run-dir`` was
    silently ignored; every flag that would be is refused, before anything is loaded."""
    err = _refused(["eval", "teamtr/Pipeline-v0", *flags, *EVAL], capsys)
    assert said in err


def test_a_misspelt_environment_option_is_suggested_on_a_reasoning_gym_task(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """D8: the suggestion and the listed options cover the environment's options too."""
    err = _refused(["eval", "reasoning_gym/basic_arithmetic", "-o", "max_turn=3", *EVAL], capsys)
    assert "'max_turn' is not accepted" in err and "Did you mean 'max_turns'?" in err
    assert "environment options: [" in err


def test_a_dataset_without_a_reference_answer_says_why_there_is_no_expert(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """D9: the user's reason (no reference answer), and what to use instead."""
    err = _refused(["eval", "reasoning_gym/graph_color", *EVAL], capsys)
    assert "reasoning-gym's graph_color has no reference answer" in err
    assert "--team CONFIG" in err and "--policy random" in err
    assert "expert_reply(" not in err


# -- D10, D11 and the rest: values and flags -------------------------------------------------------


def test_a_number_too_long_to_read_names_its_key(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """D10: a 129,001-digit value in ``--set``, ``-o`` or a config file names its key (or line),
    not Python's advice to raise the limit; a long value (200,000 characters: 100 times the
    2,000 a problem line shows; the YAML reader took 5 s over a 10 MB one) is not echoed whole."""
    digits = "9" * 129_001
    err = _refused(["train", "--set", f"task_options.max_value={digits}", "--run-dir", "r"], capsys)
    assert "override task_options.max_value: the value is a number of 129,001 digits" in err
    assert "set_int_max_str_digits" not in err
    err = _usage_error(["eval", "teamtr/Arith-v0", "-o", f"digits={digits}"], capsys)
    assert "digits: the value is a number of 129,001 digits" in err and len(err) < 2000
    (work / "big.yaml").write_text(f"task: teamtr/Arith-v0\nseed: {digits}\n", encoding="utf-8")
    err = _refused(["train", "--config", "big.yaml", "--run-dir", "r"], capsys)
    assert "big.yaml, line 2: the value is a number of 129,001 digits" in err
    huge = "x" * 200_000
    (work / "huge.yaml").write_text(
        f'task: teamtr/Arith-v0\ntask_options: {{digits: "{huge}"}}\n', encoding="utf-8"
    )
    err = _refused(["train", "--config", "huge.yaml", "--run-dir", "r"], capsys)
    assert "digits" in err and "more characters not shown" in err and len(err) < 5000
    assert _files(work) == ["big.yaml", "huge.yaml"]


def test_task_schedule_entries_that_would_never_apply_or_name_no_stage_are_refused(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """D11: ``from_stage: 99`` under ``stages: 1``, and an entry that misspells ``from_stage``
    (it no longer defaults to 1, which then clashed with another entry)."""
    (work / "ts.yaml").write_text(
        "task: teamtr/Arith-v0\nschedule: {stages: 1}\ntask_schedule:\n"
        "  - {from_stage: 99, options: {digits: 2}}\n"
        "  - {stage: 2, options: {digits: 2}}\n"
        "  - {options: {digits: 2}}\n",
        encoding="utf-8",
    )
    err = _refused(["train", "--config", "ts.yaml", "--run-dir", "r"], capsys)
    assert "from_stage 99 is after the run's last stage (schedule.stages = 1)" in err
    assert "unknown key 'stage' in task_schedule[1] (did you mean 'from_stage'?)" in err
    assert "task_schedule[2].from_stage: required key is missing" in err
    assert "given more than once" not in err
    assert _files(work) == ["ts.yaml"]


def test_split_counts_are_capped_and_renamed_flags_are_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Also: ``--draws`` has a cap; ``--trainer`` and ``--trainers`` say their new names."""
    err = _usage_error(["tasks", "teamtr/Arith-v0", "--splits", "--draws", "100000000"], capsys)
    assert "argument --draws: expected an integer in 1..100000" in err
    err = _usage_error(["train", "--trainer", "joint"], capsys)
    assert "--trainer was renamed --learner" in err
    err = _usage_error([*COMPARE, "--trainers", "joint", "--out", "x"], capsys)
    assert "--trainers was renamed --learners" in err
