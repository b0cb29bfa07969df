"""Shared fixtures: a tiny local model built once per test session (no network)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# The benchmarks' shared helpers (``_bench``, ``_served``) import by name, as in the scripts.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


MAKE_TEST_BUDGET_S = 200.0
"""What ``make test`` (every test not marked slow) may take on 2 cores; the run prints its own
wall time against it (docs/testing.md)."""

_STARTED = pytest.StashKey[float]()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised 0.55M-parameter char-level Llama saved with save_pretrained."""
    from adapters.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def pytest_configure(config: pytest.Config) -> None:
    """One torch thread: the tiny models gain little from two, and on a 2-core machine two torch
    threads stall badly whenever another process holds a core (timings vary 10x). The controller
    of a parallel run (``-n 2``) runs no test: it starts its workers without importing torch
    (2 s before the first worker starts)."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return
    try:
        import torch
    except ImportError:  # model-free parts of the suite still run
        return
    torch.set_num_threads(1)


@pytest.fixture
def local_ray():  # type: ignore[no-untyped-def]
    """A local Ray with two CPUs for the Ray tests: started by the first of them, and kept
    while they follow one another (``--dist loadgroup`` runs the ``ray`` group in one go)."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        # Workers import test helpers (and the benchmarks' helpers) by name, as the test process
        # does. The project's root comes first: tests/ holds folders named like its packages
        # (teamtr_env/, trainers/, ...), which would otherwise be imported as empty namespace
        # packages in a worker (which one wins depends on the directory Ray was started from).
        tests = Path(__file__).resolve().parent
        paths = [str(tests.parent), *(str(tests / d) for d in ("", "trainers", "teamtr_env"))]
        paths.append(str(tests.parent / "benchmarks"))
        paths += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        # The local cluster's processes inherit this process's environment: through it rather
        # than a runtime_env, the workers Ray starts ahead are the ones the tests use (a
        # runtime_env makes Ray start others, 1-2 s each, on the two cores the tests share).
        with pytest.MonkeyPatch.context() as env:
            env.setenv("PYTHONPATH", os.pathsep.join(paths))
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Ray stops after the last of a run of Ray tests, once its fixtures are torn down: its
    daemons take about a tenth of a core while idle, which the rest of the suite would otherwise
    pay (a later Ray test starts it again)."""
    yield
    if "local_ray" not in item.fixturenames:
        return
    if nextitem is not None and "local_ray" in nextitem.fixturenames:
        return
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_STARTED] = time.monotonic()


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    """``make test``'s wall time against :data:`MAKE_TEST_BUDGET_S`, after a whole run of the
    fast tests (the project's test paths, ``-m "not slow ..."``)."""
    whole = config.args_source == pytest.Config.ArgsSource.TESTPATHS
    fast = "not slow" in config.option.markexpr and not config.option.keyword
    if hasattr(config, "workerinput") or not whole or not fast:
        return
    wall = time.monotonic() - config.stash[_STARTED]
    cores = os.cpu_count()
    terminalreporter.write_sep(
        "=",
        f"make test: {wall:.0f} s on {cores} cores; its budget is {MAKE_TEST_BUDGET_S:.0f} s on 2",
        green=wall <= MAKE_TEST_BUDGET_S,
        yellow=wall > MAKE_TEST_BUDGET_S,
    )
