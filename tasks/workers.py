"""Verifiers behind a hard deadline: persistent worker processes that speak JSON lines.

A verifier from another library (math-verify, reasoning-gym's ``score_answer``) may hang, loop in
C code or exhaust memory on a model's output. So it runs in a small pool of persistent worker
processes started with :mod:`subprocess` (which, unlike :mod:`multiprocessing`, also works inside
daemonic worker processes). The caller waits at most ``timeout_s`` for a reply; a worker that
overruns is killed, a replacement starts at once (in the background: it is waited for only by the
next request that needs it), and the caller is told it timed out.

The protocol, one JSON object per line: a worker first writes ``{"ready": true}``; then for each
request (the caller's fields plus ``"id"`` and ``"limit"``, the deadline in seconds) on its stdin
it writes one reply object with the same ``"id"`` on its stdout. It exits on end of input.

The deadline counts from the moment a ready worker receives the request: time spent waiting for a
free worker (all busy) or for a fresh worker to start (importing its library) is not counted.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

STARTUP_TIMEOUT_S = 120.0  # importing sympy on a loaded machine can take a while

MAX_DEADLINE_S = 3600.0
"""The longest per-answer deadline a task option may set (an hour): far beyond any grader's
need, and well within what the platform's clock and ``queue.get`` can wait for (``1e308``,
``inf`` and ``NaN`` are refused, not turned into an error on every answer)."""


def deadline_errors(name: str, value: object, high: float = MAX_DEADLINE_S) -> list[str]:
    """The problem with a per-answer deadline option ``name`` (a task's ``timeout_s``), one
    line, or none: it must be a finite number of seconds in ``(0, high]``."""
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 < value <= high
    )
    if ok:
        return []
    return [f"{name} must be a number of seconds in (0, {high:g}], got {value!r:.80}"]


CallStatus = Literal["ok", "timeout", "error"]


@dataclass(frozen=True)
class Call:
    """The outcome of one request to a worker pool.

    Attributes:
        status: ``"ok"`` (the worker replied), ``"timeout"`` (the deadline passed; the worker was
            killed) or ``"error"`` (no worker could start, or it died).
        reply: the worker's reply object (``None`` unless ``status == "ok"``).
        error: a short message when ``status == "error"``.
        seconds: wall time from sending the request to the reply.
    """

    status: CallStatus
    reply: Mapping[str, Any] | None = None
    error: str = ""
    seconds: float = 0.0


class JsonWorker:
    """One worker process, its stdout read by a daemon thread into a queue.

    Args:
        command: the process's argument list (e.g. ``[sys.executable, "-u", script]``).
        env: extra environment variables for it.
    """

    def __init__(self, command: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
            bufsize=1,
            env={**os.environ, **env} if env else None,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.ready = False
        self.next_id = 0
        threading.Thread(target=self._read, name="verifier-reader", daemon=True).start()

    def _read(self) -> None:
        stdout = self.proc.stdout
        if stdout is None:  # not reached: Popen was given stdout=PIPE
            self.lines.put(None)
            return
        try:
            with stdout:
                for line in stdout:
                    self.lines.put(line)
        except (OSError, ValueError):
            pass
        self.lines.put(None)

    def _reply(self, timeout: float) -> dict[str, Any] | None:
        """The next JSON line, or ``None`` on deadline or end of output."""
        try:
            line = self.lines.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return None
        if line is None:
            return None
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            return None
        return reply if isinstance(reply, dict) else None

    def wait_ready(self, timeout: float) -> bool:
        """Waits for the worker's ready line."""
        if not self.ready:
            reply = self._reply(timeout)
            self.ready = bool(reply and reply.get("ready"))
        return self.ready

    def request(self, payload: Mapping[str, Any], timeout: float) -> dict[str, Any] | None:
        """Sends one request; the reply, or ``None`` if the worker overran or died."""
        self.next_id += 1
        message = {**payload, "id": self.next_id, "limit": timeout}
        stdin = self.proc.stdin
        if stdin is None:  # not reached: Popen was given stdin=PIPE
            return None
        try:
            stdin.write(json.dumps(message) + "\n")
            stdin.flush()
        except (OSError, ValueError):
            return None
        deadline = time.monotonic() + timeout
        while True:
            reply = self._reply(deadline - time.monotonic())
            if reply is None or reply.get("id") == self.next_id:
                return reply

    def kill(self) -> None:
        """Stops the process at once and reaps it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._close_stdin()

    def close(self, grace_s: float = 1.0) -> None:
        """Ends the worker politely (end of input), killing it if it does not exit in time."""
        self._close_stdin()
        with contextlib.suppress(OSError, ValueError, subprocess.TimeoutExpired):
            self.proc.wait(timeout=grace_s)
        self.kill()

    def _close_stdin(self) -> None:
        # stdout belongs to the reader thread, which closes it at end of output.
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except (OSError, ValueError):
            pass


class WorkerPool:
    """Persistent workers running ``command``, started on demand, at most ``max_workers`` at once.

    Thread-safe: each call checks out one idle worker (or starts one), so up to ``max_workers``
    threads call in parallel and further callers wait for a free worker.

    Args:
        command: each worker's argument list.
        name: what the workers verify, for messages (``"math-verify"``).
        max_workers: the most worker processes alive at once.
        env: extra environment variables for the workers.
    """

    def __init__(
        self,
        command: Sequence[str],
        name: str,
        max_workers: int = 2,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self.command = list(command)
        self.name = name
        self.max_workers = max_workers
        self.env = dict(env or {})
        self.pid = os.getpid()
        self._slots = threading.BoundedSemaphore(max_workers)
        self._idle: list[JsonWorker] = []
        self._lock = threading.Lock()
        self.started = 0  # worker processes started so far (restarts included)

    def call(self, payload: Mapping[str, Any], timeout_s: float) -> Call:
        """Sends ``payload`` to a ready worker and waits at most ``timeout_s`` for its reply.
        Never raises on the worker's account (only on the caller's: a deadline that is not a
        finite positive number, KeyboardInterrupt)."""
        if deadline_errors("timeout_s", timeout_s, threading.TIMEOUT_MAX):
            raise ValueError(deadline_errors("timeout_s", timeout_s, threading.TIMEOUT_MAX)[0])
        with self._slots:
            worker = self._checkout()
            if worker is None:
                return Call("error", error=f"{self.name} worker failed to start")
            start = time.monotonic()
            try:
                reply = worker.request(payload, timeout_s)
            except BaseException:  # e.g. KeyboardInterrupt: do not leak a busy worker
                worker.kill()
                raise
            seconds = time.monotonic() - start
            if reply is None:
                worker.kill()
                self._start_replacement()
                if seconds >= timeout_s:
                    return Call("timeout", seconds=seconds)
                return Call("error", error=f"{self.name} worker died", seconds=seconds)
            with self._lock:
                self._idle.append(worker)
        return Call("ok", reply, seconds=seconds)

    def _new_worker(self) -> JsonWorker:
        return JsonWorker(self.command, self.env)

    def _start_replacement(self) -> None:
        """Starts a worker at once for the one just killed, so that its start-up (importing its
        library, about a second) overlaps with the caller's work instead of the next call."""
        try:
            worker = self._new_worker()
        except OSError:
            return
        with self._lock:
            self.started += 1
            self._idle.insert(0, worker)  # used last: ready workers go first

    def _checkout(self) -> JsonWorker | None:
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is not None and worker.proc.poll() is not None:  # died while idle
            worker.kill()
            worker = None
        if worker is None:
            try:
                worker = self._new_worker()
            except OSError:
                return None
            with self._lock:
                self.started += 1
        if worker.wait_ready(STARTUP_TIMEOUT_S):
            return worker
        worker.kill()
        return None

    def close(self) -> None:
        """Stops every idle worker (busy ones are stopped when their request ends)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.close()


class _Pool(Protocol):
    pid: int

    def close(self) -> None: ...


P = TypeVar("P", bound=_Pool)


class ProcessWide(Generic[P]):
    """One pool per process, made on first use by ``make()``: a forked child makes its own (a
    parent's worker processes are not its own), and the process's pool is closed at exit."""

    def __init__(self, make: Callable[[], P]) -> None:
        self._make = make
        self._pool: P | None = None
        self._lock = threading.Lock()
        atexit.register(self.close)

    def get(self) -> P:
        """This process's pool."""
        with self._lock:
            if self._pool is None or self._pool.pid != os.getpid():
                self._pool = self._make()
            return self._pool

    def close(self) -> None:
        """Closes this process's pool, if it made one."""
        pool = self._pool
        if pool is not None and pool.pid == os.getpid():
            pool.close()


def limit_memory(megabytes: int) -> None:
    """Caps this process's address space (``RLIMIT_AS``) at ``megabytes`` (0 or no POSIX
    ``resource``: no cap), so a verifier on runaway input fails with MemoryError."""
    if megabytes <= 0:
        return
    try:
        import resource

        limit = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):  # not POSIX, or a lower hard limit: keep it
        pass
