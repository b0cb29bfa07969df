"""Faults injected as a new user would meet them (issue #36's table): each gets a clear error
(exit 2, every problem at once) or the documented recovery, and leaves no file behind. The
checkpoint faults (bytes changed on disk, NaN/inf saved, truncation) and the run-directory lock
are in tests/trainers/test_rundir.py; the kill-and-resume runs are here, behind ``slow``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from teamtr_cli import main

BASE = """\
task: teamtr/Arith-v0
task_options: {digits: 1, system_prompts: {solver: "", critic: "", aggregator: ""}}
sampling: {max_new_tokens: 6}
sft: null
schedule: {stages: 1, problems_per_batch: 2, group_size: 2}
eval: {problems: 4, k: 2, train_distribution: false}
progress: false
loggers: []
plot: false
"""


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch folder with ``base.yaml`` (one stage, no behaviour cloning: the tests need a run,
    not a trained team), as the working directory."""
    (tmp_path / "base.yaml").write_text(BASE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Runs ``teamtr ARGV``, expects exit 2 and returns what it said on stderr."""
    assert main(argv) == 2
    return capsys.readouterr().err


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_missing_optional_backend_is_named_before_anything_is_written(
    work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row 1: a team with a ``vllm`` agent (and a run with vLLM rollouts) where vLLM is not
    installed, in ``teamtr train`` and ``teamtr eval``."""
    import adapters.availability
    import adapters.team

    def missing(name: str) -> bool:
        return name == "vllm"

    monkeypatch.setattr(adapters.availability, "missing_package", missing)
    monkeypatch.setattr(adapters.team, "missing_package", missing)
    (work / "team.yaml").write_text(f"default: {{backend: vllm, path: {work}}}\n")
    before = _files(work)
    err = _refused(["train", "--config", "base.yaml", "--set", "team={default: {backend: vllm, "
                    f"path: {work}}}}}", "--run-dir", "run"], capsys)  # fmt: skip
    assert "backend 'vllm' needs vLLM, not installed here: pip install -e '.[models,vllm]'" in err
    err = _refused(["eval", "teamtr/Arith-v0", "--team", "team.yaml", "--problems", "2"], capsys)
    assert err.count("needs vLLM, not installed here") == 3  # every agent
    err = _refused(
        ["train", "--config", "base.yaml", "--set", "rollout.engine=vllm", "--run-dir", "run"],
        capsys,
    )
    assert "rollout.engine: vllm needs vLLM" in err
    assert _files(work) == before


def test_negative_seeds_are_refused_everywhere(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Row 2: ``seed`` and ``sft.seed`` (reported together), and ``compare --seeds``."""
    err = _refused(
        ["train", "--config", "base.yaml", "--set", "seed=-1", "--set", "sft.seed=-2",
         "--run-dir", "run"],
        capsys,
    )  # fmt: skip
    assert "(2 problem(s))" in err
    assert "seed: must be a non-negative integer (0, 1, 2, ...), got -1" in err
    assert "sft.seed: must be a non-negative integer (0, 1, 2, ...), got -2" in err
    with pytest.raises(SystemExit):  # argparse's own error, exit 2
        main(["compare", "teamtr/Arith-v0", "--learners", "teamtr", "naive_sequential",
              "--seeds", "-1", "--out", "c"])  # fmt: skip
    assert "--seeds: expected a non-negative integer, got '-1'" in capsys.readouterr().err
    assert _files(work) == ["base.yaml"]


def test_a_comparison_with_a_typo_writes_nothing_and_the_corrected_one_runs(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Row 4: a misspelt task (and, separately, a bad task option) is refused before ``--out``
    is made, so the corrected command is not refused as 'other settings'; it writes and prints
    the paired differences."""
    argv = ["compare", "teamtr/Arith-v0", "--learners", "teamtr", "naive_sequential"]
    argv += ["--config", "base.yaml", "--seeds", "0", "--out", "c9"]
    typo = [a if a != "teamtr/Arith-v0" else "teamtr/Arth-v0" for a in argv]
    assert "Did you mean 'teamtr/Arith-v0'" in _refused(typo, capsys)
    bad_option = [*argv, "--set", "task_options.digits=abc"]
    assert "digits must be an integer in 1..9, got 'abc'" in _refused(bad_option, capsys)
    assert _files(work) == ["base.yaml"]
    capsys.readouterr()
    assert main(argv) == 0
    data = json.loads((work / "c9" / "compare.json").read_text())
    assert data["learners"] == ["teamtr/TeamTR-v0", "teamtr/NaiveSequential-v0"]
    assert [p["learner"] for p in data["paired"]] == ["teamtr/NaiveSequential-v0"]
    printed = capsys.readouterr().out
    assert "every learner gets the same budget per update" in printed
    assert "| teamtr/NaiveSequential-v0 |" in printed and "messages per update: equal" in printed


@pytest.mark.xdist_group("ray")
def test_agent_actors_the_cluster_cannot_place_are_refused_first(
    work: Path, capsys: pytest.CaptureFixture[str], local_ray: object
) -> None:
    """Row 6: ``runner.agent_cpus`` beyond the cluster, refused before the run directory."""
    err = _refused(
        ["train", "--config", "base.yaml", "--set", "runner.agents=ray",
         "--set", "runner.agent_cpus=64", "--run-dir", "run"],
        capsys,
    )  # fmt: skip
    assert "3 agent actors x 64 CPUs = 192 CPUs, but the Ray cluster has" in err
    assert _files(work) == ["base.yaml"]


def test_overwrite_leaves_nothing_of_the_old_run(work: Path) -> None:
    """Row 7: ``--overwrite`` deletes the old run's ``eval_per_problem.json`` too (the new run,
    stopped after its first stage, has not written its own yet)."""
    import io

    from helpers_crash import CrashAfter, SimulatedCrash
    from rich.console import Console

    from trainers.run.config_file import load_train_config
    from trainers.run.recipe import run_training

    assert main(["train", "--config", "base.yaml", "--run-dir", "run"]) == 0
    assert (work / "run" / "eval_per_problem.json").is_file()
    config = load_train_config(work / "base.yaml", ["run_dir=run", "seed=1"])
    quiet = Console(file=io.StringIO())
    with pytest.raises(SimulatedCrash):
        run_training(config, overwrite=True, callbacks=[CrashAfter(1)], console=quiet)
    assert not (work / "run" / "eval_per_problem.json").exists()
    assert not (work / "run" / "summary.json").exists()


def test_an_unwritable_report_path_is_refused_before_the_evaluation(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Row 8: ``--out`` in a folder that cannot be made, found by trying to make it; a folder
    that can be made is made only for the probe."""
    err = _refused(["eval", "teamtr/Arith-v0", "--out", "/proc/nope/r.json"], capsys)
    assert "--out /proc/nope/r.json: cannot create a file in /proc/nope" in err
    (work / "file").write_text("x")
    err = _refused(["eval", "teamtr/Arith-v0", "--transcripts", "file/sub/t.jsonl"], capsys)
    assert "file is not a directory" in err
    err = _refused(["eval", "teamtr/Arith-v0", "--out", "a/b/r.json", "--k", "0"], capsys)
    assert not (work / "a").exists()  # the probe's folders were removed


def test_every_problem_is_reported_at_once(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Row 9: a bad option value beside an unknown option; a misspelt task beside a misspelt
    learner."""
    err = _refused(["eval", "teamtr/Arith-v0", "-o", "digits=abc", "-o", "nosuch=1"], capsys)
    assert "(2 problem(s))" in err and "'nosuch' is not accepted" in err
    assert "digits must be an integer in 1..9, got 'abc'" in err
    err = _refused(
        ["train", "--config", "base.yaml", "--set", "task=teamtr/Nope-v0", "--learner",
         "teamtrr", "--run-dir", "run"],
        capsys,
    )  # fmt: skip
    assert "(2 problem(s))" in err and "No task registered as 'teamtr/Nope-v0'" in err
    assert "No learner registered as 'teamtrr'" in err
    assert _files(work) == ["base.yaml"]


def test_problem_files_get_plain_errors(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Rows 10 and 11: the header counts every bad line (not the 50 listed), and a folder or a
    missing file is said plainly."""
    (work / "bad.jsonl").write_text("{bad json\n" * 120)
    err = _refused(["eval", "teamtr/Math-v0", "--data-path", "bad.jsonl"], capsys)
    assert "(120 problem(s))" in err and "... and 70 more (the first 50 shown)" in err
    (work / "data").mkdir()
    err = _refused(["eval", "teamtr/Math-v0", "--data-path", "data"], capsys)
    assert "data_path: data is a directory; give the problem file in it" in err
    err = _refused(["eval", "teamtr/Math-v0", "--data-path", "nope.jsonl"], capsys)
    assert "data_path: nope.jsonl does not exist" in err and "Errno" not in err


# -- kill and resume ----------------------------------------------------------------------------


def _teamtr(*argv: str) -> list[str]:
    return [str(Path(sys.executable).parent / "teamtr"), *argv]


def _kill_when(proc: subprocess.Popen[bytes], ready: Path | None, seconds: float) -> None:
    """SIGKILLs PROC once READY exists (polled every 10 ms), or after SECONDS when READY is None;
    a process that already ended is left alone."""
    deadline = time.perf_counter() + seconds
    while proc.poll() is None:
        if (ready is not None and ready.exists()) or (
            ready is None and time.perf_counter() >= deadline
        ):
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.01)
    proc.wait()


@pytest.mark.slow
def test_a_run_killed_at_any_moment_resumes_to_the_uninterrupted_result(work: Path) -> None:
    """SIGKILL at five moments of a 3-stage run: four spread over its wall time (before the first
    checkpoint, between stages, maybe inside a checkpoint's write) and one the moment the first
    stage's checkpoint is on disk, so that one kill falls after a checkpoint however loaded the
    machine is. Each resumed run (``--resume``, which takes the dead process's lock over) ends with
    the uninterrupted run's held-out numbers, and the run killed after its checkpoint says it
    resumed from it."""
    three = ["--config", "base.yaml", "--set", "schedule.stages=3"]
    t0 = time.perf_counter()
    subprocess.run(_teamtr("train", *three, "--run-dir", "whole"), check=True, capture_output=True)
    wall = time.perf_counter() - t0
    expected = json.loads((work / "whole" / "summary.json").read_text())["after"]
    first = Path("checkpoints") / "stage_0001.pt"  # renamed in after its digest
    for i, moment in enumerate((0.35, first, 0.5, 0.7, 0.88)):
        run = f"killed{i}"
        proc = subprocess.Popen(
            _teamtr("train", *three, "--run-dir", run),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if isinstance(moment, Path):
            _kill_when(proc, work / run / moment, 0.0)
        else:
            _kill_when(proc, None, wall * moment)
        done = subprocess.run(
            _teamtr("train", *three, "--run-dir", run, "--resume"), capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        if isinstance(moment, Path):
            assert "resumed" in done.stdout and "after stage 1" in done.stdout, done.stdout[-2000:]
        after = json.loads((work / run / "summary.json").read_text())["after"]
        assert after.keys() == expected.keys()
        for key, value in expected.items():
            assert after[key] == pytest.approx(value, abs=1e-6), (run, moment, key)
        assert not (work / run / ".teamtr.lock").exists()


def test_a_gold_answer_no_answer_can_match_is_warned_about(work: Path) -> None:
    """Row 12: a 10 MB gold answer (over ``max_answer_chars``) is loaded with a warning that
    names its row; the other rows load as usual."""
    import teamtr_env

    rows = [{"problem": "What?", "answer": "1" * 10_000_000}, {"problem": "Two?", "answer": "2"}]
    (work / "big.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    task = teamtr_env.make("teamtr/Math-v0").task
    with pytest.warns(UserWarning, match=r"1 gold answer\(s\) longer than max_answer_chars \(1000\)"
                      r", which no answer can match: big:line1 \(10,000,000 characters\)"):  # fmt: skip
        problems = task.load(work / "big.jsonl")
    assert len(problems) == 2


def test_gold_answers_the_grader_cannot_be_trusted_on_are_warned_about(work: Path) -> None:
    """Item 5: at load, a gold the grader does not match against itself is named; a SymPy-
    notation gold is not (it is graded as the expression it is); and a grader that accepts a
    copy with one digit changed is caught (a stand-in that says yes to everything)."""
    from types import SimpleNamespace

    import teamtr_env
    from tasks.math.grading import gold_problems, perturbed_gold

    rows = [{"problem": "A?", "answer": "}{"}, {"problem": "B?", "answer": "x**2 + 3*x"}]
    (work / "golds.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    task = teamtr_env.make("teamtr/Math-v0").task
    with pytest.warns(UserWarning) as caught:
        task.load(work / "golds.jsonl")
    (message,) = [str(w.message) for w in caught]
    assert "1 gold answer(s) the grader cannot be trusted on" in message
    assert "golds:line1: the grader does not match the gold '}{' against itself" in message
    assert perturbed_gold("x**2 + 3*x") == "x**2 + 4*x" and perturbed_gold("a") == "-(a)"
    yes = SimpleNamespace(verify=lambda gold, pred, timeout_s: SimpleNamespace(correct=True))
    assert gold_problems([("p", "12")], pool=yes) == [
        "p: the grader accepts '13' for the gold '12' (one digit changed)"
    ]


def test_a_tiny_model_build_cut_short_leaves_no_model_to_resume_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run killed while writing its tiny model (here: the build stops after config.json) leaves
    no ``models/tiny`` for ``--resume`` to load half-written; the next build puts it in place
    whole and loadable."""
    import adapters.tiny
    from adapters.hf import HFPolicy
    from trainers.config import TrainConfig
    from trainers.run.team_eval import tiny_model_dir

    def cut_short(path: Path, spec: object = None) -> Path:
        Path(path).mkdir(parents=True)
        (Path(path) / "config.json").write_text("{}")
        raise KeyboardInterrupt  # the kill, after the first file

    real = adapters.tiny.build_tiny_model
    monkeypatch.setattr(adapters.tiny, "build_tiny_model", cut_short)
    with pytest.raises(KeyboardInterrupt):
        tiny_model_dir(TrainConfig(), tmp_path)
    assert not (tmp_path / "models" / "tiny").exists()
    monkeypatch.setattr(adapters.tiny, "build_tiny_model", real)
    path = tiny_model_dir(TrainConfig(), tmp_path)
    assert path == tmp_path / "models" / "tiny" and HFPolicy.from_pretrained(path) is not None
