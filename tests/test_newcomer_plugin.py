"""Issue #58, "A newcomer's second hour": writing a learner (rows N2 and N4).

- **N2.** docs/adding-a-trainer.md shows a complete plugin package (the fixture distribution in
  tests/fixtures/example_plugin, whose ``pyproject.toml`` and learner module the page holds
  verbatim; a slow test builds the page's package, installs it and runs its learner), and
  ``teamtr --import MODULE`` imports a user's module before a command, so that its
  ``register_learner(...)`` / ``register(...)`` calls reach ``teamtr learners``, ``compare``,
  ``train``, ``tasks`` and ``eval``; an import that fails is exit 2 naming the module and what it
  raised, with no traceback.
- **N4.** ``stage.update(..., index=i)``: ``i`` is the update's position in the order the learner
  runs the stage's updates; an index that is out of range, repeats or decreases is refused with a
  ``LearnerError`` (the page's message, verbatim).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from teamtr_cli import main
from teamtr_core.errors import LearnerError
from trainers.learners import Learner
from trainers.learners.stage import Stage
from trainers.learners.team_trainer import TeamTrainer
from trainers.learners.update_index import update_index_problem

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "adding-a-trainer.md"
FIXTURE = ROOT / "tests" / "fixtures" / "example_plugin"
MODULE_ID = "mylab/ReversedNaive-v0"  # what the page's mylab/learners.py registers


def _section(heading: str) -> str:
    """The text of the page's ``### heading`` section (up to the next heading of any level)."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"\n### {heading}\n")
    end = re.compile(r"\n#{2,3} ").search(text, start + 1)
    return text[start : end.start() if end else len(text)]


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.DOTALL)


def _tree_files(tree: str) -> list[str]:
    """The files of the page's package tree (``├── name  # comment`` lines), as paths."""
    files: list[str] = []
    folders: list[str] = []
    for line in tree.splitlines()[1:]:
        match = re.match(r"^([│ ]*)[├└]── (\S+)", line)
        assert match, line
        depth = len(match[1]) // 4
        folders = folders[:depth]
        if match[2].endswith("/"):
            folders.append(match[2].rstrip("/"))
        else:
            files.append("/".join([*folders, match[2]]))
    return files


def _mylab_module() -> str:
    """The page's ``mylab/learners.py``, the module that ``teamtr --import`` is shown with."""
    (module,) = _blocks(_section("Without a package: `teamtr --import`"), "python")
    assert module.startswith('"""mylab/learners.py:')
    return module


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A working folder holding the page's ``mylab/learners.py`` and a task module, as the
    current directory; whatever the test imports and registers is undone afterwards."""
    from teamtr_env.registration import registry as tasks
    from trainers.learners.registry import registry as learners

    (tmp_path / "mylab").mkdir()
    (tmp_path / "mylab" / "learners.py").write_text(_mylab_module(), encoding="utf-8")
    (tmp_path / "mylab" / "tasks.py").write_text(
        "from teamtr_env.registration import register\n\n"
        'register("mylab/Echo-v0", "teamtr_example_plugin:EchoTask", '
        'description="echo, registered by --import", env_kwargs={"agents": ["speaker"]})\n',
        encoding="utf-8",
    )
    (tmp_path / "broken.py").write_text('raise RuntimeError("no GPU in this lab")\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")  # rich tables: rows unwrapped
    monkeypatch.setattr(sys, "path", list(sys.path))  # --import puts the folder on it
    before = set(sys.modules)
    try:
        yield tmp_path
    finally:
        learners.unregister(MODULE_ID)
        tasks.unregister("mylab/Echo-v0")
        for name in set(sys.modules) - before:
            if name == "mylab" or name.startswith("mylab.") or name == "broken":
                del sys.modules[name]


# -- N2: a complete plugin package ----------------------------------------------------------------


def test_the_pages_plugin_package_is_the_fixture_distribution() -> None:
    """N2: the page shows the whole package: its tree names the fixture's files, its
    ``pyproject.toml`` (build system, project name, packages, both entry points) is the fixture's
    file and its learner module the fixture's ``learners.py``, so the page cannot drift from
    what the tests install."""
    section = _section("A complete plugin package")
    (tree,) = _blocks(section, "text")
    assert tree.splitlines()[0] == "example_plugin/"
    files = _tree_files(tree)
    assert files == [
        "pyproject.toml",
        "teamtr_example_plugin/__init__.py",
        "teamtr_example_plugin/learners.py",
    ]
    assert all((FIXTURE / f).is_file() for f in files)
    (toml,) = _blocks(section, "toml")
    assert toml == (FIXTURE / "pyproject.toml").read_text(encoding="utf-8")
    for needed in ("[build-system]", 'name = "', "packages = [", '"teamtr.learners"]'):
        assert needed in toml, needed
    learner_file = _blocks(PAGE.read_text(encoding="utf-8"), "python")[0]
    assert learner_file == (FIXTURE / "teamtr_example_plugin/learners.py").read_text("utf-8")
    (install,) = _blocks(section, "sh")
    assert install.startswith("pip install -e path/to/example_plugin")


def test_import_brings_a_users_module_to_every_command(
    user_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """N2: without ``--import`` the command does not know the id a user's module registers (the
    registration lived in another process); with ``teamtr --import mylab.learners`` (the page's
    module, from the current folder) ``learners`` lists it, from that module, and ``compare``
    accepts it (its checks reach the one error left, an unrelated setting); ``--import`` of a
    task module makes ``tasks`` list and ``eval`` run its task."""
    compare = ["compare", "teamtr/Pipeline-v0", "--learners", "teamtr", MODULE_ID]
    compare += ["--seeds", "0", "--out", "out", "--set", "optim.lr=fast"]
    assert main(compare) == 2
    err = capsys.readouterr().err
    assert f"No learner registered as '{MODULE_ID}'" in err

    assert main(["--import", "mylab.learners", "learners"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert re.search(rf"{re.escape(MODULE_ID)} │ +│ naive sequential, last agent first", out)
    assert "│ mylab.learners │" in out
    assert main(["--import", "mylab.learners", *compare]) == 2
    err = capsys.readouterr().err
    assert "optim.lr: expected number" in err and "No learner registered" not in err, err
    assert not (user_dir / "out").exists()

    assert main(["--import", "mylab.tasks", "tasks", "mylab"]) == 0
    assert "mylab/Echo-v0" in capsys.readouterr().out
    evaluate = ["eval", "mylab/Echo-v0", "--k", "1", "--problems", "2", "--no-progress"]
    assert main(["--import", "mylab.tasks", *evaluate]) == 0
    assert "avg@1" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["--import", "mylab.nowhere", "learners"],
            ["mylab.nowhere: the package 'mylab' has no module 'nowhere'"],
        ),
        (
            ["--import", "labmodules", "learners"],
            ["labmodules: no module 'labmodules' in the current folder", "PYTHONPATH"],
        ),
        (
            ["--import", "broken", "--import", "mylab/learners.py", "learners"],
            [
                "(2 problem(s))",
                "broken: importing it raised RuntimeError: no GPU in this lab",
                'python -c "import broken" shows the traceback',
                "'mylab/learners.py': expected a module name",
                "pass --import mylab.learners",
            ],
        ),
        (
            "--import mylab.learners compare teamtr/Pipeline-v0 --learners teamtr "
            f"{MODULE_ID} --ray --out out".split(),
            ["--import mylab.learners registers in this process only", "or leave out --ray"],
        ),
    ],
    ids=["no-submodule", "no-module", "raises-and-a-path", "compare-ray"],
)
def test_an_import_that_fails_is_exit_2_naming_the_module(
    user_dir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: list[str]
) -> None:
    """N2: a module that cannot be imported stops the command with exit 2 and one line per
    module (the module, the exception, what to do), no traceback; ``compare --ray`` refuses
    ``--import``, whose registrations its Ray workers would not have."""
    assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    for text in said:
        assert text in err, (text, err)
    assert "Traceback" not in err and not (user_dir / "out").exists()


def test_import_after_the_subcommand_says_where_it_goes(
    user_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """N2: ``--import`` is the ``teamtr`` command's own option; after a subcommand the usage
    error says to put it before the command."""
    with pytest.raises(SystemExit) as exit_:
        main(["learners", "--import", "mylab.learners"])
    assert exit_.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "(--import goes before the command: teamtr --import MODULE COMMAND ...)" in err


@pytest.mark.slow
def test_the_pages_plugin_package_installs_and_its_learner_runs(tmp_path: Path) -> None:
    """N2: the page's package, built from the page (its ``pyproject.toml`` and learner module;
    ``__init__.py`` is the fixture's task module, as the page says), is pip-installed into a
    folder of its own (``--no-deps --no-build-isolation --target``) that comes first on the
    path; then ``teamtr learners`` lists its learner from that installation, and a tiny
    ``teamtr compare`` trains it beside the page's ``--import`` module's learner."""
    page = PAGE.read_text(encoding="utf-8")
    package = tmp_path / "example_plugin"
    (package / "teamtr_example_plugin").mkdir(parents=True)
    (toml,) = _blocks(_section("A complete plugin package"), "toml")
    (package / "pyproject.toml").write_text(toml, encoding="utf-8")
    learner_file = _blocks(page, "python")[0]
    (package / "teamtr_example_plugin" / "learners.py").write_text(learner_file, "utf-8")
    init = FIXTURE / "teamtr_example_plugin" / "__init__.py"
    shutil.copy(init, package / "teamtr_example_plugin" / "__init__.py")
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    pip += ["--no-index", "--target", str(site), str(package)]
    proc = subprocess.run(pip, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    work = tmp_path / "work"
    (work / "mylab").mkdir(parents=True)
    (work / "mylab" / "learners.py").write_text(_mylab_module(), encoding="utf-8")
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(site)}

    def run(*argv: str) -> str:
        proc = subprocess.run(
            [*argv], capture_output=True, text=True, timeout=300, cwd=work, env=env
        )
        assert proc.returncode == 0, f"{argv}\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout

    where = run(
        sys.executable,
        "-c",
        "import importlib.metadata as m, teamtr_example_plugin.learners as l; "
        "print(m.distribution('teamtr-example-plugin').locate_file('')); print(l.__file__)",
    )
    assert all(line.startswith(str(site)) for line in where.split()), where
    teamtr = str(Path(sys.executable).parent / "teamtr")
    listing = " ".join(run(teamtr, "--import", "mylab.learners", "learners").split())
    assert "example/IndependentGRPO-v0 │ │ independent per-agent GRPO" in listing
    assert "(example plugin) │ example │" in listing and f"{MODULE_ID} │" in listing
    tiny = ["sft.steps=2", "sft.problems=16", "schedule.stages=1", "schedule.problems_per_batch=2"]
    tiny += ["eval.problems=4", "eval.k=1", "eval.train_distribution=false", "loggers=[]"]
    compare = [teamtr, "--import", "mylab.learners", "compare", "teamtr/Pipeline-v0"]
    compare += ["--learners", "example/IndependentGRPO-v0", MODULE_ID, "--seeds", "0"]
    compare += ["--out", "cmp", *(arg for item in tiny for arg in ("--set", item))]
    out = run(*compare)
    assert f"| {MODULE_ID} |" in out and "messages per update: equal" in out
    assert (work / "cmp" / "compare.json").is_file()


# -- N4: the update index ---------------------------------------------------------------------------


def _relay_trainer(learner: Learner, diagnostics: str = "off") -> TeamTrainer:
    """A TeamTrainer of three tabular agents on the exact relay, driven by ``learner``."""
    from trainers.exact.games import RelayGame, random_logits
    from trainers.exact.run import relay_env_fn, relay_policies, sampled_config

    game = RelayGame(n=3, symbols=4, rounds=1)
    logits = random_logits(game, np.random.default_rng(0), scale=1.0, code=3.0)
    config = sampled_config("teamtr", diagnostics=diagnostics)
    return TeamTrainer(config, relay_env_fn(game), relay_policies(game, logits), learner)


def _learner(indices: str) -> Learner:
    """A naive sequential learner run last agent first that passes ``indices`` as ``index``:
    ``run`` (its own count, right), ``place`` (the agent's place in ``stage.order``), ``twice``
    (0 for every update) or ``past`` (one past the stage's last position)."""

    class Reversed(Learner):
        def run_stage(self, stage: Stage) -> None:
            batch = stage.sample(0, stage.schedule.batch_prompts(stage.n))
            for i, agent in enumerate(reversed(stage.order)):
                index = {
                    "run": i,
                    "place": stage.order.index(agent),
                    "twice": 0,
                    "past": stage.n,
                }[indices]
                stage.update(agent, stage.part(batch, i, stage.n)[0], index=index)

    return Reversed()


def test_the_update_index_is_the_position_in_the_run_order() -> None:
    """N4: a learner that runs its own order passes its own count as ``index``: its updates are
    logged 0, 1, 2 in the order they ran and the stale gap is measured for updates 1 and 2 only.
    Passing the agent's place in ``stage.order`` instead (the page's example, with its message
    verbatim), one index twice, or one out of range is refused with a ``LearnerError`` before
    the update that has it runs."""
    report = _relay_trainer(_learner("run"), diagnostics="full").run_stage()
    assert [(u.agent, u.index) for u in report.updates] == [("a3", 0), ("a2", 1), ("a1", 2)]
    gaps = [u.stale_gap for u in report.updates]
    assert math.isnan(gaps[0]) and all(math.isfinite(g) for g in gaps[1:]), gaps

    (shown,) = _blocks(_section("The update index"), "text")
    trainer = _relay_trainer(_learner("place"))
    with pytest.raises(LearnerError) as err:
        trainer.run_stage()
    assert str(err.value) == shown.strip()
    with pytest.raises(LearnerError, match=r"index=0\): .*got the same index again"):
        _relay_trainer(_learner("twice")).run_stage()
    with pytest.raises(LearnerError, match=r"an integer in 0\.\.2 \(the stage updates 3"):
        _relay_trainer(_learner("past")).run_stage()
    indices: list[Any] = [np.int64(1), 2]  # NumPy integers are indices; floats and bools not
    assert all(update_index_problem(i, 3, 0) is None for i in indices)
    wrong: list[Any] = [1.0, True, -1, "0"]
    assert all(update_index_problem(i, 3, -1) for i in wrong)
