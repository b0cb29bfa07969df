"""``served``: ``teamtr serve ARGS`` in a process of its own, for the benchmarks and the tests
that play a served team over HTTP (``benchmarks/openenv_load.py``,
``tests/teamtr_env/test_openenv_server.py``), and ``free_port``."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    """A port of ``host`` that nothing listens on now (the system's pick)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def served(
    args: Sequence[str],
    *,
    timeout: float = 120.0,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """``teamtr serve ARGS`` in a process of its own on a free port of 127.0.0.1: yields its base
    URL once ``/health`` reports it healthy, and stops the process on exit.

    Raises:
        RuntimeError: the server exited, or was not healthy within ``timeout`` seconds.
    """
    import httpx

    port = free_port()
    argv = [str(Path(sys.executable).parent / "teamtr"), "serve", *args, "--port", str(port)]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"teamtr serve exited: {proc.communicate()}")
            with contextlib.suppress(httpx.HTTPError, ValueError):
                if httpx.get(f"{url}/health", timeout=1).json().get("status") == "healthy":
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"teamtr serve was not healthy within {timeout:g} s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
