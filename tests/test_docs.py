"""The docs' examples run verbatim: every ```python block of a page, in order, in a fresh process
(forked from one that has imported torch and the project: tests/fresh.py) (the README's blocks,
which the Quickstart page includes, are tests/test_readme.py's)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from fresh import run_fresh

# The commands run from tests/fresh.py's fork server: one worker of a parallel run starts it.
pytestmark = pytest.mark.xdist_group("fresh")

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    "docs/adding-a-task.md",
    "docs/adding-a-trainer.md",
    "docs/trainers.md",
    "docs/getting-started.md",
    "docs/concepts.md",
    "docs/environment.md",
    "docs/runner-and-metrics.md",
    "docs/policies.md",
    "docs/evaluation.md",
    "docs/exact-games.md",
    "docs/callbacks.md",
    "docs/coming-from-trl.md",
    "docs/scaling.md",
    "docs/diagnostics.md",
    "docs/swap.md",
    "docs/compare.md",
    "docs/openenv.md",
    "docs/openenv-trl.md",
    "docs/rewards.md",
    *sorted(f"docs/tasks/{p.name}" for p in (ROOT / "docs" / "tasks").glob("*.md")),
]


# Pages whose examples train teams (seconds to tens of seconds each): `make test-all` runs them.
TRAINING_PAGES = {
    "docs/getting-started.md",
    "docs/adding-a-trainer.md",
    "docs/policies.md",
    "docs/callbacks.md",
    "docs/coming-from-trl.md",
    "docs/compare.md",
    "docs/diagnostics.md",
    "docs/swap.md",
    "docs/trainers.md",
    "docs/scaling.md",
    "docs/openenv-trl.md",
    "docs/rewards.md",
}


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.DOTALL)


@pytest.mark.parametrize(
    "page",
    [pytest.param(p, marks=pytest.mark.slow) if p in TRAINING_PAGES else p for p in PAGES],
)
def test_page_examples_run(page: str, tmp_path: Path) -> None:
    blocks = python_blocks(ROOT / page)
    assert blocks, f"{page} has no python example"
    script = tmp_path / "example.py"
    script.write_text("\n\n".join(blocks), encoding="utf-8")
    proc = run_fresh([sys.executable, str(script)], timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, f"{page} example failed:\n{proc.stdout}\n{proc.stderr}"


def test_adding_a_trainer_shows_the_plugin_file_verbatim() -> None:
    """The page's complete learner is the example distribution's file, so neither can drift."""
    plugin = ROOT / "tests/fixtures/example_plugin/teamtr_example_plugin/learners.py"
    assert python_blocks(ROOT / "docs/adding-a-trainer.md")[0] == plugin.read_text("utf-8")


@pytest.mark.slow
def test_adding_a_trainer_cli_lines_run(tmp_path: Path) -> None:
    """Every line of the page's ```bash block runs (in a scratch directory) and exits 0."""
    page = (ROOT / "docs/adding-a-trainer.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```bash\n(.*?)```", page, flags=re.DOTALL)
    bindir = Path(sys.executable).parent
    outputs = []
    for line in block.strip().splitlines():
        argv = line.split()
        if argv[0] == "teamtr":
            argv[0] = str(bindir / "teamtr")
        elif argv[0] == ".venv/bin/python":
            argv[:2] = [sys.executable, str(ROOT / argv[1])]
        env = {**os.environ, "COLUMNS": "200"}  # rich tables: ids unabridged
        proc = run_fresh(argv, timeout=300, cwd=tmp_path, env=env)
        assert proc.returncode == 0, f"{line}\n{proc.stdout}\n{proc.stderr}"
        outputs.append(proc.stdout)
    assert "example/IndependentGRPO-v0" in outputs[0] and "teamtr/TeamTR-v0" in outputs[0]
    summary = (tmp_path / "runs/independent/summary.json").read_text()
    assert '"learner": "example/IndependentGRPO-v0"' in summary
    assert (tmp_path / "runs/compare-quick/compare.json").exists()


@pytest.mark.slow
def test_adding_a_task_cli_lines_run(tmp_path: Path) -> None:
    """A task written from the page evaluates with the page's commands: its plugin module is built
    from the page's own code (section 1's task and section 6's ``register``), installed as
    ``pip install`` would (a ``.dist-info`` with the page's entry point, on the path), and every
    line of the page's ```bash block runs and exits 0."""
    path = ROOT / "docs/adding-a-task.md"
    page = path.read_text(encoding="utf-8")
    blocks = python_blocks(path)
    register = next(b for b in blocks if b.startswith("def register(registry):"))
    site = tmp_path / "site"
    site.mkdir()
    (site / "mylab_tasks.py").write_text(f"{blocks[0]}\n\n{register}", encoding="utf-8")
    (toml,) = re.findall(r"```toml\n(.*?)```", page, flags=re.DOTALL)
    name = re.search(r'^name = "(.*)"$', toml, flags=re.MULTILINE)
    version = re.search(r'^version = "(.*)"$', toml, flags=re.MULTILINE)
    group = re.search(r'^\[project\.entry-points\."(.*)"\]\n(\w+) = "(.*)"$', toml, re.MULTILINE)
    assert name and version and group, toml
    dist = site / f"{name[1].replace('-', '_')}-{version[1]}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name[1]}\nVersion: {version[1]}\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(f"[{group[1]}]\n{group[2]} = {group[3]}\n")

    (block,) = re.findall(r"```bash\n(.*?)```", page, flags=re.DOTALL)
    teamtr = str(Path(sys.executable).parent / "teamtr")
    pythonpath = os.pathsep.join(
        p for p in (str(site), str(ROOT), os.environ.get("PYTHONPATH")) if p
    )
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": pythonpath}
    work = tmp_path / "work"
    work.mkdir()
    outputs = []
    for line in block.strip().splitlines():
        argv = line.split()
        assert argv[0] == "teamtr", line
        proc = run_fresh([teamtr, *argv[1:]], timeout=300, cwd=work, env=env)
        assert proc.returncode == 0, f"{line}\n{proc.stdout}\n{proc.stderr}"
        outputs.append(" ".join(proc.stdout.split()))
    assert "mylab/SortLetters-v0" in outputs[0] and "mylab" in outputs[0]
    assert "mylab/SortLetters-v0: policy=scripted, K=4, 100 distinct problems" in outputs[1]
    report = json.loads((work / "runs/sort-letters.json").read_text())
    assert report["held_out"] is True and report["splits"] == {"validation": 50}
    assert abs(report["metrics"]["avg@4"]["mean"] - 0.8) < 0.1
    assert "[score]" in outputs[3]


def _section(page: str, heading: str) -> str:
    """The text of the ``## heading`` section of ``page`` (up to the next ``## ``)."""
    text = (ROOT / page).read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


TRAIN_YOUR_TASK = """
import teamtr_env
from adapters.scripted import ScriptedExpert
from adapters.tiny import build_char_tokenizer
from teamtr_env.runners import Runner
from trainers.run.config_file import load_train_config
from trainers.run.recipe import run_training

config = load_train_config("sort_relay.yaml")  # validated: every problem is an error
assert config.task == "mylab/SortRelay-v0" and config.sft is not None
env_fn = lambda: teamtr_env.make(config.task, **config.task_options)
runner = Runner(env_fn, ScriptedExpert(env_fn().task, seed=0), progress=False)
batch = runner.rollout(runner.sample_problems(50, seed=0), group_size=1, seed=0)
tokenizer = build_char_tokenizer(config.tiny_model.charset)
longest = max(len(tokenizer(m.text, add_special_tokens=False)["input_ids"]) for m in batch.messages)
assert longest + 1 <= config.sampling.max_new_tokens, (longest, config.sampling.max_new_tokens)
small = [
    "sft.problems=16", "sft.steps=2", "sft.batch_size=8", "schedule.stages=1",
    "schedule.problems_per_batch=2", "schedule.group_size=2", "eval.problems=4", "eval.k=2",
    "eval.train_distribution=false", "loggers=[]", "progress=false", "run_dir=run",
]
summary = run_training(load_train_config("sort_relay.yaml", small))
assert summary["stages"] == 1 and "eval/third/clipped_ratio" in summary["before"]
"""


@pytest.mark.slow
def test_train_your_own_task_config_loads_fits_the_task_and_runs(tmp_path: Path) -> None:
    """docs/trainers.md's config for the relay of docs/adding-a-task.md: it loads with the config
    loader, its ``sampling.max_new_tokens`` holds the relay expert's longest message plus the end
    token, and it trains (budgets shrunk by ``--set``-style overrides) with the page's task."""
    (config,) = re.findall(
        r"```yaml\n(.*?)```", _section("docs/trainers.md", "Train your own task"), re.DOTALL
    )
    (tmp_path / "sort_relay.yaml").write_text(config, encoding="utf-8")
    blocks = python_blocks(ROOT / "docs/adding-a-task.md")
    (relay,) = [b for b in blocks if '"visibility": "previous"' in b]
    script = tmp_path / "train.py"
    script.write_text("\n\n".join([blocks[0], relay, TRAIN_YOUR_TASK]), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"


def test_every_team_protocol_option_is_documented() -> None:
    """Every TeamProtocol field has a row in docs/environment.md's table and is named among
    docs/registry.md's ``make`` options, and both pages name every ``visibility`` value."""
    import dataclasses
    from typing import get_args

    from teamtr_env.protocol import TeamProtocol, Visibility

    fields = [f.name for f in dataclasses.fields(TeamProtocol)]
    table = _section("docs/environment.md", "The team protocol")
    rows = dict(re.findall(r"^\| `(\w+)` \|[^|]*\|(.*)\|$", table, flags=re.MULTILINE))
    assert set(fields) <= set(rows), set(fields) - set(rows)
    registry = (ROOT / "docs/registry.md").read_text(encoding="utf-8")
    make = registry[registry.index("Environment options accepted by `make`") :]
    assert all(f"`{name}`" in make[: make.index("\n\n")] for name in fields)
    for value in get_args(Visibility):
        assert f'`"{value}"`' in rows["visibility"] and f'`"{value}"`' in make, value


@pytest.mark.slow
def test_export_cli_lines_run(tmp_path: Path) -> None:
    """docs/trainers.md's ``teamtr export`` lines, verbatim, on a one-stage run of the demo's
    configuration in ``runs/teamtr-demo`` (its budgets shrunk): the export writes a folder per
    agent, and the exported team evaluates on the demo's task with the run's task options."""
    section = _section("docs/trainers.md", "Using the trained team")
    (block,) = [
        b for b in re.findall(r"```bash\n(.*?)```", section, re.DOTALL) if "teamtr export" in b
    ]
    teamtr = str(Path(sys.executable).parent / "teamtr")
    env = {**os.environ, "COLUMNS": "200"}
    shrink = ["sft.steps=2", "sft.problems=16", "schedule.stages=1", "eval.problems=8"]
    shrink += ["schedule.problems_per_batch=2", "loggers=[]", "plot=false", "progress=false"]
    train = [teamtr, "train", "--run-dir", "runs/teamtr-demo"]
    train += [arg for item in shrink for arg in ("--set", item)]
    outputs = []
    for argv in [train, *([teamtr, *line.split()[1:]] for line in block.strip().splitlines())]:
        proc = run_fresh(argv, timeout=300, cwd=tmp_path, env=env)
        assert proc.returncode == 0, f"{argv}\n{proc.stdout}\n{proc.stderr}"
        outputs.append(proc.stdout)
    export = tmp_path / "runs/demo-export"
    assert {p.name for p in export.iterdir()} >= {"step1", "step2", "step3", "team.yaml"}
    assert "the exported run's task options" in outputs[-1] and "avg@4" in outputs[-1]


@pytest.mark.slow
def test_reasoning_gym_cli_lines_run(tmp_path: Path) -> None:
    """docs/tasks/reasoning_gym.md's ``teamtr`` lines of "Ids and options", verbatim: the ids
    are listed as reasoning-gym's, the scripted team scores near 1 - error rate, and the split
    count finds no question in two splits."""
    pytest.importorskip("reasoning_gym")
    section = _section("docs/tasks/reasoning_gym.md", "Ids and options")
    (block,) = re.findall(r"```bash\n(.*?)```", section, re.DOTALL)
    teamtr = str(Path(sys.executable).parent / "teamtr")
    env = {**os.environ, "COLUMNS": "200"}
    outputs = []
    for line in block.strip().splitlines():
        argv = shlex.split(line.split("#")[0])
        assert argv[0] == "teamtr", line
        proc = subprocess.run(
            [teamtr, *argv[1:]], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env
        )
        assert proc.returncode == 0, f"{line}\n{proc.stdout}\n{proc.stderr}"
        outputs.append(proc.stdout)
    listing, scripted, _, splits = outputs
    assert listing.count("reasoning-gym") >= 106 and "reasoning_gym/zebra_puzzles-v0" in listing
    avg = re.search(r"avg@4\s*│\s*([0-9.]+)", scripted)
    assert avg and 0.7 < float(avg[1]) < 0.9, scripted
    rows = re.findall(r"│ (train|validation|test)\s*│ 2000\s*│ (\d+)\s*│ (\d+)", splits)
    assert len(rows) == 3 and all(shared == "0" for _, _, shared in rows), splits
