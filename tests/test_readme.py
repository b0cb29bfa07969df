"""The README as a newcomer meets it: short, the first command near the top, and every block runs
as written. The Quickstart's scripted evaluation runs here in seconds; its install line and the
demo run in a fresh venv, and the Python training example against ``teamtr train``, in the slow
set. The site's Quickstart page includes these same blocks (pymdownx.snippets), so it is tested
too."""

from __future__ import annotations

import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fresh import run_fresh

from trainers.learners.teamtr import TeamTR
from trainers.run.config_file import load_train_config

# The commands run from tests/fresh.py's fork server: one worker of a parallel run starts it.
pytestmark = pytest.mark.xdist_group("fresh")

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent


def block(name: str) -> str:
    """The fenced block inside the README's ``--8<-- [start:name]`` section, without its fence."""
    match = re.search(
        rf"<!-- --8<-- \[start:{name}\] -->\n```\w+\n(.*?)```\n<!-- --8<-- \[end:{name}\] -->",
        README,
        flags=re.DOTALL,
    )
    assert match, f"README.md has no {name!r} section"
    return match[1]


def run_teamtr(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``teamtr ARGS`` (the venv's command) in ``cwd``, with wide tables."""
    assert argv[0] == "teamtr", argv
    return run_fresh(
        [str(BIN / "teamtr"), *argv[1:]],
        timeout=120,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
    )


def quickstart() -> list[str]:
    """The Quickstart's three commands, comments removed."""
    lines = [line.split("  #")[0].strip() for line in block("quickstart").splitlines()]
    assert len(lines) == 3, lines
    return lines


def test_the_readme_is_short_and_its_first_command_is_near_the_top() -> None:
    lines = README.splitlines()
    assert len(lines) <= 120, len(lines)
    first = next(i for i, line in enumerate(lines) if line.startswith("```"))
    assert first < 30 and lines[first] == "```bash", (first, lines[first])
    assert lines[first + 1].startswith("pip install"), lines[first + 1]
    for target in re.findall(r"\]\(((?!https?://)[^)#]+)", README):  # local links resolve
        assert (ROOT / target).exists(), target
    assert "make demo" in README and "make test" in README


def test_the_quickstart_evaluation_runs_as_written(tmp_path: Path) -> None:
    """The model-free command: seconds, a report of every metric."""
    argv = shlex.split(quickstart()[1])
    assert argv[:2] == ["teamtr", "eval"]
    proc = run_teamtr(argv, tmp_path)
    assert proc.returncode == 0, proc.stderr
    for metric in ("pass@4", "avg@4", "maj@4"):
        assert metric in proc.stdout
    assert list(tmp_path.iterdir()) == []  # an evaluation writes nothing unless asked


def test_the_learner_shown_is_teamtr_s_source() -> None:
    """The README's run_stage is TeamTR's, line for line (its docstring aside)."""
    source = inspect.getsource(TeamTR)
    source = re.sub(r'\n    """.*?"""\n\n?', "\n", source, count=1, flags=re.DOTALL)
    assert block("learner") == source
    assert len(inspect.getsource(TeamTR.run_stage).splitlines()) == 8


def test_the_gpu_config_loads_and_its_plan_line_runs_as_written() -> None:
    """The real-checkpoint YAML is the example file it names (``examples/gpu.yaml``, in the
    checkout), a valid training config, and its ``teamtr plan`` line runs as written in a
    fresh checkout: the checkpoint is not on this machine, so the plan reads teamtr's bundled
    config.json of Qwen3-8B, and fits the one 80 GiB GPU the line names."""
    text = block("gpu")
    file = re.match(r"# (\S+\.yaml):", text)
    assert file, text
    assert (ROOT / file[1]).read_text(encoding="utf-8") == text
    ignored = subprocess.run(["git", "check-ignore", "-q", file[1]], cwd=ROOT, check=False)
    assert ignored.returncode == 1, f"{file[1]} is git-ignored: a fresh checkout lacks it"
    loaded = load_train_config(ROOT / file[1])
    assert loaded.team is not None and loaded.team.shared_base and loaded.sft is None
    path = loaded.team.default.path if loaded.team.default else None
    assert path and not Path(path).exists()  # a checkpoint on the GPU machine, not here
    plan = re.search(r"# (teamtr plan .*?)\s{2,}\(", text)
    assert plan, text
    proc = run_teamtr(shlex.split(plan[1]), ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = " ".join(proc.stdout.split())
    assert "planned from teamtr's bundled config.json of Qwen3-8B" in out
    assert "every device holds its plan" in out


def test_the_real_model_lines_fetch_a_known_model_into_the_folder_the_config_names() -> None:
    """The README's real-model section: `teamtr models get NAME` with a name it knows, then
    `teamtr train --config FILE` with the shipped config, whose agents load the folder `get`
    writes by default (tests/test_real_model.py trains it, slow)."""
    from adapters.fetch import default_out, known_model

    get, train = (line.split("  #")[0].strip() for line in block("real").splitlines())
    words = shlex.split(get)
    assert words[:3] == ["teamtr", "models", "get"] and len(words) == 4
    known_model(words[3])
    args = shlex.split(train)
    assert args[:2] == ["teamtr", "train"]
    config = args[args.index("--config") + 1]
    ignored = subprocess.run(["git", "check-ignore", "-q", config], cwd=ROOT, check=False)
    assert ignored.returncode == 1, f"{config} is git-ignored: a fresh checkout lacks it"
    loaded = load_train_config(ROOT / config)
    assert loaded.team is not None and loaded.team.default is not None
    assert loaded.team.default.path == str(default_out(words[3]))


@pytest.mark.slow
@pytest.mark.timeout(900)  # two trainings: 224 s on a slow 2-core machine, sharing it
def test_the_python_example_gives_the_summary_teamtr_train_gives(tmp_path: Path) -> None:
    """The README's training example, run as written, and ``teamtr train`` with the same settings
    on the command line: the same held-out numbers before and after."""
    script = tmp_path / "example.py"
    script.write_text(block("python"), encoding="utf-8")
    proc = run_fresh([sys.executable, str(script)], timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    before, after = (float(x) for x in re.findall(r"^([\d.]+) -> ([\d.]+)", proc.stdout, re.M)[0])
    assert after > before  # the example's claim: the team learns
    cli = [
        "train",
        "--run-dir",
        "cli",
        "--set",
        "sft.steps=300",
        "--set",
        "schedule.learner=teamtr",
        "--set",
        "schedule.stages=4",
        "--set",
        "eval.problems=200",
        "--set",
        "eval.k=4",
        "--set",
        "eval.train_distribution=false",
    ]
    proc = run_fresh([str(BIN / "teamtr"), *cli], timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    python = json.loads((tmp_path / "runs/quickstart/summary.json").read_text())
    command = json.loads((tmp_path / "cli/summary.json").read_text())
    for when in ("before", "after"):
        assert python[when].keys() == command[when].keys()
        for key, value in command[when].items():
            assert python[when][key] == pytest.approx(value, abs=1e-9), (when, key)
    counts = {k: v for k, v in command["totals"].items() if not k.endswith("_s")}  # not timings
    assert counts and counts == {k: python["totals"][k] for k in counts}


@pytest.mark.slow
@pytest.mark.timeout(1920)  # its own steps' limits (900 + 120 + 900 s), not the suite's 300 s
def test_the_quickstart_runs_on_a_fresh_install(tmp_path: Path) -> None:
    """The three Quickstart commands as written, in a fresh venv over a copy of the checkout:
    the install line, the scripted evaluation, and the demo (its summary where the README says)."""
    repo = tmp_path / "teamtr"
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in files:
        if (ROOT / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {
        **os.environ,
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "VIRTUAL_ENV": str(venv),
        "COLUMNS": "200",
    }
    env.pop("PYTHONPATH", None)
    install, evaluate, demo = quickstart()
    for line, timeout in ((install, 900), (evaluate, 120), (demo, 900)):
        proc = subprocess.run(
            ["bash", "-c", line], capture_output=True, text=True, timeout=timeout, cwd=repo, env=env
        )
        assert proc.returncode == 0, textwrap.shorten(f"{line}: {proc.stdout} {proc.stderr}", 4000)
    teamtr = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import trainers; print(trainers.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert str(repo) in teamtr.stdout  # the fresh venv's teamtr is the copy's
    summary = json.loads((repo / "runs/teamtr-demo/summary.json").read_text())
    assert summary["stages"] == 8 and summary["after"]["eval/avg@4"] > 0.9
    assert summary["before"]["eval/avg@4"] < 0.3
