"""Training from Python in one call (``trainers.train``): its docstring example runs, it is the
path ``teamtr train`` takes (the same summary from the same config), keyword settings become
``--set`` overrides, and ``import trainers`` stays light."""

from __future__ import annotations

import doctest
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from teamtr_cli import main
from teamtr_core.config import keyword_overrides
from teamtr_core.errors import ConfigError
from trainers.run import entry

# No task: the default run's (teamtr/Pipeline-v0), which this run checks too.
TINY = """\
sft: {steps: 2, problems: 8, batch_size: 8}
schedule: {stages: 1, problems_per_batch: 2, group_size: 2}
eval: {problems: 4, k: 2, train_distribution: false}
loggers: []
plot: false
progress: false
"""


@pytest.mark.slow  # a whole training; train()'s path in test_train_is_the_path_teamtr_train_takes
def test_the_docstring_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = doctest.testmod(entry, verbose=False)
    assert result.attempted >= 4 and result.failed == 0
    assert (tmp_path / "runs" / "python-quickstart" / "summary.json").is_file()


def test_train_is_the_path_teamtr_train_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same config from Python and from the command line: the same summary."""
    from rich.console import Console

    from trainers import RunResult, train

    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.yaml").write_text(TINY, encoding="utf-8")
    result = train("tiny.yaml", run_dir="py", console=Console(quiet=True))
    assert isinstance(result, RunResult) and result.run_dir == Path("py")
    assert main(["train", "--config", "tiny.yaml", "--run-dir", "cli"]) == 0
    cli = json.loads((tmp_path / "cli" / "summary.json").read_text())
    for when in ("before", "after"):
        for key, value in cli[when].items():
            assert result.summary[when][key] == pytest.approx(value, abs=1e-9), key
    assert result.after == result.summary["after"] and set(result.team) == {
        "step1",
        "step2",
        "step3",
    }
    texts = result.team["step1"].generate(["Start: 1\n"], result.config.sampling)
    assert len(texts) == 1  # the trained team samples
    # the fields users read, typed (issue #58 N6)
    assert result.stages == 1 and result.wall_s == pytest.approx(cli["wall_s"], rel=10)
    assert [u.agent for u in result.updates] == ["step1", "step2", "step3"]
    low, high = result.after_ci["eval/avg@2"]  # bootstrap CI over the distinct problems
    assert low <= result.after["eval/avg@2"] <= high
    assert set(result.before_ci) == set(result.after_ci)
    # The default run: the pipeline relay, its distinct held-out problems, cheap diagnostics (no
    # batches outside the training budget, so no stale gaps).
    assert result.config.task == "teamtr/Pipeline-v0"
    assert result.summary["eval_problems_distinct"] == 4
    assert not any(k.startswith("ci/") for k in result.after)
    assert result.summary["totals"].get("diagnostic_rollouts", 0) == 0
    assert all(math.isnan(u["stale_gap"]) for u in result.summary["updates"])
    # rerunning names the Python keywords that resume or replace the run (N5)
    with pytest.raises(ConfigError) as err:
        train("tiny.yaml", run_dir="py", console=Console(quiet=True))
    assert "train(..., resume=True), train(..., overwrite=True) or another run_dir=" in str(
        err.value
    )


def test_keyword_settings_are_overrides_and_bad_ones_are_all_named(tmp_path: Path) -> None:
    from trainers import train
    from trainers.config import TrainConfig

    assert keyword_overrides({"schedule": {"stages": 2}, "run_dir": "runs/x"}) == [
        (["schedule", "stages"], 2),
        (["run_dir"], "runs/x"),
    ]
    assert keyword_overrides({"task_options": {"max_value": 9}}) == [
        (["task_options"], {"max_value": 9})
    ]
    # the values reach the config as they are (no JSON text parsed again): a path, a float
    from trainers.run.config_file import load_train_config

    settings = {"run_dir": tmp_path / "p", "optim": {"lr": 3e-5}, "seed": 3}
    built = load_train_config(None, keyword_overrides(settings))
    assert (built.run_dir, built.optim.lr, built.seed) == (str(tmp_path / "p"), 3e-5, 3)
    with pytest.raises(ConfigError) as err:
        train(TrainConfig(), run_dir=str(tmp_path / "r"), schedule={"stages": 0, "learner": "tmr"})
    text = str(err.value)
    assert "stages must be >= 1" in text and "tmr" in text
    assert not (tmp_path / "r").exists()


def test_import_trainers_does_not_import_torch() -> None:
    code = "import sys, trainers; assert 'torch' not in sys.modules; print(trainers.__all__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "train" in done.stdout
