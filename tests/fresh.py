"""``run_fresh``: a command of the suite (a script, ``python -c``, ``python -m``, ``teamtr ...``)
in a fresh process whose interpreter has already imported torch, transformers and the project.

Each such command pays 3-6 s of imports in a plain subprocess; the docs pages and the README's
lines alone run about 25 of them. Here one forkserver process per test worker imports the heavy
modules once, and every command runs in a child forked from it: a new process with its own
globals, working directory, environment, arguments, standard streams and exit code, as
``subprocess.run`` gives, without the imports' seconds. The server has only imported modules (no
test ran in it), so a child starts as clean as a new interpreter does, but for ``sys.modules``.

Use a plain ``subprocess.run`` where that difference matters: a test of what a command imports,
of the hash seed, or of a console script's installation.
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# What a command of the suite imports, once, in the server (each a few hundred ms to seconds).
PRELOAD = [
    "numpy",
    "torch",
    "transformers",
    "rich.console",
    "teamtr_env",
    "trainers.run.recipe",
    "teamtr_cli",
]

_server: subprocess.Popen[bytes] | None = None


def _started() -> subprocess.Popen[bytes]:
    """This test process's fork server (started on first use, stopped at exit)."""
    global _server
    if _server is None or _server.poll() is not None:
        clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        # run from an empty folder: the server's sys.path[0] must hide no package (tests/ has a
        # tasks/ folder that would shadow the project's)
        serve = f"import runpy; runpy.run_path({__file__!r}, run_name='__fresh_server__')"
        empty = tempfile.mkdtemp(prefix="fresh-server-")
        _server = subprocess.Popen(
            [sys.executable, "-c", serve],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,  # its answers are read line by line with a deadline (_answer)
            env=clean,
            cwd=empty,
        )
        atexit.register(shutil.rmtree, empty, ignore_errors=True)
        atexit.register(_server.kill)
    return _server


def _serve() -> None:
    """The server: imports ``PRELOAD``, then for each request line forks a child that runs it,
    and answers the child's pid and, once it ends, its exit code."""
    base_path = sys.path[1:]  # a new interpreter's, without the first entry
    for name in PRELOAD:
        __import__(name)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                _child(**request, base_path=base_path)
            finally:
                os._exit(1)  # _child ends with the command's code; this only if it raised
        print(pid, flush=True)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)


def _target(argv: Sequence[str]) -> tuple[str, str, list[str]]:
    """How to run ``argv`` in-process: ("path", script), ("code", text), ("module", name) or
    ("console", name), and the ``sys.argv`` it sees; ValueError for anything else."""
    exe, *rest = argv
    if Path(exe).name.startswith("python") and rest:
        if rest[0] == "-c":
            return "code", rest[1], ["-c", *rest[2:]]
        if rest[0] == "-m":
            return "module", rest[1], [rest[1], *rest[2:]]
        if rest[0] == "-u":
            return _target([exe, *rest[1:]])
        if not rest[0].startswith("-"):
            return "path", rest[0], list(rest)
    if Path(exe).name == "teamtr":
        return "console", "teamtr", list(argv)
    raise ValueError(f"run_fresh: cannot run {list(argv)[:3]} in a forked interpreter")


def _child(
    argv: Sequence[str],
    cwd: str,
    env: Mapping[str, str],
    streams: tuple[str, str, str],
    base_path: list[str],
) -> None:
    """The forked child: the command's streams, directory, environment and ``sys.path``, then the
    command itself; its exit code is the process's."""
    kind, what, args = _target(argv)
    for fd, (path, mode) in enumerate(zip(streams, ("rb", "wb", "wb"), strict=True)):
        with open(path, mode) as stream:
            os.dup2(stream.fileno(), fd)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 (the process's own)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    # sys.path[0] as Python sets it: the script's folder (a console script's is its bin/), or
    # the working directory for -c and -m
    folder = {"path": Path(what).resolve().parent, "console": Path(argv[0]).parent}.get(kind)
    sys.path[:] = [str(folder) if folder is not None else os.getcwd(), *extra, *base_path]
    sys.argv = args
    code: Any = 0
    try:
        if kind == "path":
            runpy.run_path(what, run_name="__main__")
        elif kind == "code":
            exec(compile(what, "<string>", "exec"), {"__name__": "__main__"})
        elif kind == "module":
            runpy.run_module(what, run_name="__main__", alter_sys=True)
        else:
            from teamtr_cli import main

            code = main()
    except SystemExit as exit_:
        code = exit_.code
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        atexit._run_exitfuncs()  # as an interpreter's exit does (os._exit skips them)
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _answer(server: subprocess.Popen[bytes], timeout: float) -> str:
    """The server's next line, read byte by byte from the unbuffered pipe (nothing is left in a
    buffer that ``select`` cannot see); ``subprocess.TimeoutExpired`` after ``timeout`` seconds,
    ``RuntimeError`` if the server has gone."""
    assert server.stdout is not None
    fd, line, deadline = server.stdout.fileno(), b"", time.monotonic() + timeout
    while not line.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise subprocess.TimeoutExpired("run_fresh", timeout)
        byte = os.read(fd, 1)
        if not byte:
            raise RuntimeError("run_fresh: the fork server exited")
        line += byte
    return line.decode()


def run_fresh(
    argv: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, capture_output=True, text=True, ...)`` in a forked, preloaded
    interpreter (see the module's docstring); raises ``subprocess.TimeoutExpired`` after
    ``timeout`` seconds, the child killed."""
    args = [str(a) for a in argv]
    _target(args)  # refuse what it cannot run before sending it
    server = _started()
    assert server.stdin is not None and server.stdout is not None
    scratch = Path(tempfile.mkdtemp(prefix="fresh-"))
    try:
        streams = [str(scratch / n) for n in ("stdin", "stdout", "stderr")]
        Path(streams[0]).write_text(input or "", encoding="utf-8")
        request = {
            "argv": args,
            "cwd": str(Path(cwd if cwd is not None else os.getcwd()).resolve()),
            "env": dict(os.environ if env is None else env),
            "streams": streams,
        }
        server.stdin.write((json.dumps(request) + "\n").encode())
        pid = int(_answer(server, 120.0))  # the first waits for the server's imports
        try:
            code = int(_answer(server, timeout))
        except subprocess.TimeoutExpired:
            os.kill(pid, signal.SIGKILL)
            _answer(server, 60.0)  # the killed child's code
            raise subprocess.TimeoutExpired(args, timeout) from None
        out, err = (Path(s).read_text(encoding="utf-8", errors="replace") for s in streams[1:])
        return subprocess.CompletedProcess(args, code, out, err)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__fresh_server__":
    _serve()
