"""Run directories never silently mix or overwrite results: resume fingerprints, refusing a used
directory, validating before writing, atomic and weights-only checkpoints with a fallback."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers_trainers import SMALL, CrashAfter, SimulatedCrash, small
from rich.console import Console

from teamtr_cli import main
from teamtr_core.errors import ConfigError
from trainers.run import rundir
from trainers.run.recipe import load_checkpoint, run_training

QUIET = Console(file=io.StringIO())


def _crashed(run_dir: Path, stages: int = 1, **extra):  # type: ignore[no-untyped-def]
    cfg = small(run_dir, **extra)
    with pytest.raises(SimulatedCrash):
        run_training(cfg, console=QUIET, callbacks=[CrashAfter(stages)])
    return cfg


CRASHED = {"loggers": ["tensorboard"], "sft": None, "eval__train_distribution": False}
""":func:`crashed_once`'s settings beside :data:`SMALL`'s."""


@pytest.fixture(scope="module")
def crashed_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A :data:`SMALL` run killed after stage 1, with TensorBoard on (no behaviour cloning or
    train-split evaluation: the tests read its files and config); built once."""
    run = tmp_path_factory.mktemp("crashed") / "run"
    _crashed(run, **CRASHED)
    return run


@pytest.fixture
def crashed(crashed_once: Path, tmp_path: Path) -> Path:
    """A copy of :func:`crashed_once` in ``tmp_path / "run"`` for a test to change (a run
    directory may move: ``run_dir`` is one of the keys a resume may change)."""
    return Path(shutil.copytree(crashed_once, tmp_path / "run"))


# One worker of a parallel run crashes the module's run once.
pytestmark = pytest.mark.xdist_group("rundir")


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_resume_that_changes_the_results_is_refused_with_every_difference(
    crashed: Path, tmp_path: Path
) -> None:
    before = _snapshot(tmp_path / "run")
    changed = small(
        tmp_path / "run",
        schedule__learner="naive_sequential",
        optim__lr=1e-3,
        tiny_model__hidden_size=64,
    )
    with pytest.raises(ConfigError) as excinfo:
        run_training(changed, resume=True, console=QUIET)
    text = "\n".join(excinfo.value.errors)
    assert "schedule.learner:" in text and '-> "naive_sequential"' in text
    assert "optim.lr:" in text and "tiny_model.hidden_size: 128 -> 64" in text
    assert "config.yaml" in text and "stage_0001.pt" in text  # both records are checked
    assert _snapshot(tmp_path / "run") == before  # nothing written, config.yaml kept
    # Safe keys may change: the resume goes through.
    safe = small(tmp_path / "run", progress=True, **CRASHED)
    assert run_training(safe, resume=True, console=QUIET)["stages"] == SMALL["schedule"]["stages"]


def test_a_used_run_directory_is_refused_and_overwrite_replaces_it(
    crashed: Path, tmp_path: Path
) -> None:
    # The old seed-0 run was killed after stage 1; a new seed-1 run must not pick it up.
    run = crashed
    before = _snapshot(run)
    seed1 = small(run, seed=1, **CRASHED)
    with pytest.raises(ConfigError, match="already holds a run .*--resume.*--overwrite"):
        run_training(seed1, console=QUIET)
    assert _snapshot(run) == before
    with pytest.raises(ConfigError, match="differs"):  # nor may it resume the seed-0 run
        run_training(seed1, resume=True, console=QUIET)
    (run / "mine.txt").write_text("not teamtr's")
    out = io.StringIO()
    with pytest.raises(SimulatedCrash):
        run_training(
            seed1,
            overwrite=True,
            console=Console(file=out, width=400),
            callbacks=[CrashAfter(1)],
        )
    said = out.getvalue()
    assert "--overwrite: deleted checkpoints, config.yaml, metrics.jsonl, models, tb" in said
    assert "left alone: mine.txt" in said
    assert load_checkpoint(run)["config"]["seed"] == 1  # the old run's files are gone
    assert (run / "mine.txt").exists()
    with pytest.raises(ConfigError, match="pick one"):
        run_training(seed1, resume=True, overwrite=True, console=QUIET)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    with pytest.raises(ConfigError, match="already holds other files"):
        run_training(small(tmp_path / "other"), console=QUIET)


def test_a_rejected_config_writes_nothing(crashed: Path, tmp_path: Path) -> None:
    team = {"agents": {"solver": {"backend": "random"}}}  # critic and aggregator have no policy
    cfg = small(tmp_path / "new", team=team)
    with pytest.raises(ConfigError, match="agent 'critic' has no policy"):
        run_training(cfg, console=QUIET)
    assert not (tmp_path / "new").exists()
    # A rejected resume leaves the run as it was.
    before = _snapshot(tmp_path / "run")
    with pytest.raises(ConfigError):
        run_training(small(tmp_path / "run", team=team), resume=True, console=QUIET)
    assert _snapshot(tmp_path / "run") == before


def test_checkpoint_folder_faults_are_named(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    assert rundir.load(folder) is None  # no checkpoints: nothing to resume
    good = {"trainer": {"stage": 1}, "extra": {}}
    rundir.save(folder, 1, good)
    rundir.save(folder, 2, {"trainer": {"stage": 2}, "extra": {}})
    (folder / "latest").write_text("")
    found = rundir.load(folder)
    assert found is not None and found.path.name == "stage_0002.pt"
    assert found.skipped == (
        f"{folder / 'latest'} is empty (it should name the newest stage_XXXX.pt)",
    )
    (folder / "latest").unlink()
    (folder / "latest").mkdir()
    found = rundir.load(folder)
    assert found is not None and "is a directory" in found.skipped[0]
    (folder / "latest").rmdir()
    (folder / "latest").write_text("stage_0009.pt")
    found = rundir.load(folder)
    assert found is not None and found.skipped == (
        "latest names stage_0009.pt, which does not exist",
    )
    for path in folder.glob("stage_*.pt"):
        path.write_bytes(b"\x00garbage")
    with pytest.raises(ConfigError, match="no intact checkpoint is left"):
        rundir.load(folder)


class _Payload:
    """Unpickling this runs code: it touches a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path.touch, (self.marker,))


def test_a_crafted_checkpoint_cannot_run_code(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    marker = tmp_path / "pwned"
    torch.save({"trainer": _Payload(marker), "extra": {}}, folder / "stage_0001.pt")
    (folder / "latest").write_text("stage_0001.pt")
    with pytest.raises(ConfigError, match="stage_0001.pt cannot be read"):
        rundir.load(folder)
    assert not marker.exists()
    torch.load(folder / "stage_0001.pt", weights_only=False)  # what a full unpickle would do
    assert marker.exists()


def test_checkpoints_keep_the_last_stages_of_this_run_only(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints"
    for stage in (5, 6):  # stale files of an older, longer run
        rundir.save(folder, stage, {"trainer": {"stage": stage}})
    rundir.save(folder, 1, {"trainer": {"stage": 1}})
    rundir.save(folder, 2, {"trainer": {"stage": 2}})
    names = sorted(p.name for p in folder.iterdir())
    assert names == [
        "latest", "stage_0001.pt", "stage_0001.pt.sha256", "stage_0002.pt", "stage_0002.pt.sha256"
    ]  # fmt: skip
    assert (folder / "latest").read_text() == "stage_0002.pt"
    assert not list(folder.glob("*.tmp"))


def test_a_corrupted_checkpoint_is_refused_and_the_resume_falls_back(tmp_path: Path) -> None:
    """Bytes changed inside a tensor (the file still unpickles) break its SHA-256; a file whose
    digest matches but whose optimiser state holds inf is refused too; each time the newest
    intact checkpoint is used, and the reason is kept."""
    folder = tmp_path / "checkpoints"
    weights = {"w": torch.ones(4096)}
    for stage in (1, 2):
        rundir.save(folder, stage, {"trainer": {"stage": stage, "slots": weights}}, keep=3)
    newest = folder / "stage_0002.pt"
    data = bytearray(newest.read_bytes())
    start = data.find(torch.ones(4096).numpy().tobytes()[:64])
    assert start > 0
    data[start + 100 : start + 100 + 4096] = b"\xff" * 4096
    newest.write_bytes(bytes(data))
    assert (
        rundir.torch_load_plain(newest)["trainer"]["stage"] == 2
    )  # it still loads: only the hash tells
    found = rundir.load(folder)
    assert found is not None and found.path.name == "stage_0001.pt"
    assert found.skipped == (
        "stage_0002.pt does not match the SHA-256 recorded when it was written "
        "(stage_0002.pt.sha256): the file was changed or corrupted since",
    )
    optimiser = {"state": {3: {"exp_avg_sq": torch.tensor([1.0, float("inf")])}}}
    bad = {"trainer": {"stage": 3, "slots": {"a1": {"optimizer": optimiser}}}}
    rundir.save(folder, 3, bad, keep=3)
    found = rundir.load(folder)
    assert found is not None and found.path.name == "stage_0001.pt"
    assert found.skipped[0] == (
        "stage_0003.pt holds NaN or inf values (in trainer.slots.a1.optimizer.state.3.exp_avg_sq)"
    )


def test_a_checkpoint_written_before_digests_still_loads(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints"
    rundir.save(folder, 1, {"trainer": {"stage": 1}})
    rundir.digest_path(folder / "stage_0001.pt").unlink()
    found = rundir.load(folder)
    assert found is not None and found.state["trainer"]["stage"] == 1 and not found.skipped


def test_plain_turns_numpy_into_data_a_weights_only_load_accepts(tmp_path: Path) -> None:
    import numpy as np

    state = {"a": np.float64(0.5), "b": [np.int64(3), (np.arange(2),)], "t": torch.ones(2)}
    path = tmp_path / "x.pt"
    torch.save(rundir.plain(state), path)
    loaded = rundir.torch_load_plain(path)
    assert loaded["a"] == 0.5 and loaded["b"] == [3, ([0, 1],)]
    assert torch.equal(loaded["t"], torch.ones(2))


def test_cli_resume_reads_the_runs_own_config_and_refuses_changes(crashed: Path, capsys) -> None:
    run = crashed  # SMALL: not the CLI's default config
    assert main(["train", "--run-dir", str(run)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert main(["train", "--resume", "--run-dir", str(run), "--set", "optim.lr=0.5"]) == 2
    assert "optim.lr:" in capsys.readouterr().err
    assert main(["train", "--resume", "--overwrite", "--run-dir", str(run)]) == 2
    assert "pick one" in capsys.readouterr().err
    assert main(["train", "--resume", "--run-dir", str(run)]) == 0  # its config.yaml
    summary = json.loads((run / "summary.json").read_text())
    assert summary["stages"] == 2


HOLD_LOCK = """
import sys, time
from pathlib import Path
from trainers.run.rundir import DirectoryLock
DirectoryLock(Path(sys.argv[1])).acquire("run directory")
print("locked", flush=True)
time.sleep(60)
"""


def _holder(folder: Path) -> subprocess.Popen:
    """Another process that holds ``folder``'s lock (as a running ``teamtr train`` does)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(folder)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_a_run_directory_in_use_is_refused_with_the_writers_pid(tmp_path: Path) -> None:
    """A second writer is refused, naming the first one's PID, and changes nothing; once the
    first process dies (killed: nothing released it by hand) the directory is free again."""
    run = tmp_path / "run"
    holder = _holder(run)
    try:
        before = _snapshot(run)
        with pytest.raises(ConfigError, match=rf"{run} is in use: process {holder.pid} is writing"):
            run_training(small(run), console=QUIET)
        with pytest.raises(ConfigError, match="is in use"):
            run_training(small(run), resume=True, console=QUIET)
        assert _snapshot(run) == before
    finally:
        holder.kill()
        holder.wait()
    # the dead writer's lock is gone
    summary = run_training(small(run, schedule__stages=1, sft=None), console=QUIET)
    assert summary["stages"] == 1
    assert not (run / rundir.LOCK_FILE).exists()  # released at the end of the run


def test_a_refused_directory_keeps_no_lock_file(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="already holds other files"):
        run_training(small(run), console=QUIET)
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt"]


def test_a_comparison_in_use_is_refused(tmp_path: Path) -> None:
    from trainers.tools.compare import CompareSpec, compare

    out = tmp_path / "cmp"
    holder = _holder(out)
    try:
        spec = CompareSpec(
            task="teamtr/Arith-v0",
            learners=("teamtr", "naive_sequential"),
            seeds=(0,),
            out=str(out),
        )
        with pytest.raises(ConfigError, match=f"process {holder.pid} is writing it"):
            compare(spec, console=QUIET)
        assert sorted(p.name for p in out.iterdir()) == [rundir.LOCK_FILE]
    finally:
        holder.kill()
        holder.wait()


TRY_LOCK = """
import sys
from pathlib import Path
from teamtr_core.errors import ConfigError
from trainers.run.rundir import DirectoryLock
try:
    DirectoryLock(Path(sys.argv[1])).acquire("run directory")
    print("locked")
except ConfigError as exc:
    print(exc)
"""


def _other_process_tries(folder: Path) -> str:
    # a plain interpreter: the lock's module imports nothing heavy (0.3 s)
    done = subprocess.run(
        [sys.executable, "-c", TRY_LOCK, str(folder)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_lock_is_shared_within_a_process_and_held_until_its_last_holder_lets_go(
    tmp_path: Path,
) -> None:
    """``teamtr swap`` holds its new run while ``run_training`` resumes it in the same process:
    the second acquire succeeds, and another process stays refused until both have released."""
    first = rundir.DirectoryLock(tmp_path).acquire("swap --out")
    second = rundir.DirectoryLock(tmp_path).acquire("run directory")
    first.release()
    assert (tmp_path / rundir.LOCK_FILE).exists()
    assert f"process {os.getpid()} is writing it" in _other_process_tries(tmp_path)
    second.release()
    assert not (tmp_path / rundir.LOCK_FILE).exists()
    assert _other_process_tries(tmp_path).strip() == "locked"
