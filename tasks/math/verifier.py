"""math-verify behind a hard per-answer deadline that works in any thread or process.

math-verify 0.9.0 enforces its timeouts with ``signal.alarm``, which only works in the main thread
of the main interpreter, and cannot interrupt a computation stuck in C code (``9^{9^{9^{9}}}``).
So every ``parse`` + ``verify`` runs in a small pool of persistent worker processes
(:mod:`tasks.math._verify_worker`, started with :mod:`subprocess`, which unlike
:mod:`multiprocessing` also works inside daemonic worker processes) with math-verify's own timeouts
off. The caller waits at most ``timeout_s`` for the reply; a worker that overruns is killed, a
replacement starts at once (in the background: it is waited for only by the next request that
needs it), and the answer is scored ``"timeout"``.

The deadline counts from the moment a ready worker receives the request: time spent waiting for a
free worker (all busy) or for a fresh worker to import math-verify (about a second) is not counted.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tasks.math.notation import to_latex

Status = Literal["ok", "timeout", "error"]

WORKER_SCRIPT = Path(__file__).with_name("_verify_worker.py")
STARTUP_TIMEOUT_S = 120.0  # importing sympy on a loaded machine can take a while
WORKER_MEMORY_MB = 4096  # address-space cap of a worker (RLIMIT_AS) against runaway expressions


@dataclass(frozen=True)
class Verdict:
    """The outcome of verifying one predicted answer against the gold.

    Attributes:
        status: ``"ok"`` (math-verify answered), ``"timeout"`` (the deadline passed; the worker was
            killed) or ``"error"`` (the worker failed or crashed).
        correct: math-verify's ``verify(gold, pred)``; ``False`` unless ``status == "ok"``.
        gold: the parsed gold as text (``None`` if math-verify found nothing).
        pred: the parsed prediction as text (``None`` if math-verify found nothing).
        error: a short message when ``status == "error"``.
        seconds: wall time from sending the request to the verdict.
    """

    status: Status
    correct: bool
    gold: str | None = None
    pred: str | None = None
    error: str = ""
    seconds: float = 0.0


class _Worker:
    """One worker process, its stdout read by a daemon thread into a queue."""

    def __init__(self, memory_mb: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-u", str(WORKER_SCRIPT), str(memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.ready = False
        self.next_id = 0
        threading.Thread(target=self._read, name="math-verify-reader", daemon=True).start()

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

    def request(self, gold: str, pred: str, timeout: float) -> dict[str, Any] | None:
        """Sends one request; the reply, or ``None`` if the worker overran or died."""
        self.next_id += 1
        message = {"id": self.next_id, "gold": gold, "pred": pred, "limit": timeout}
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


class VerifierPool:
    """Persistent math-verify workers, started on demand, at most ``max_workers`` at once.

    Thread-safe: each call checks out one idle worker (or starts one), so up to ``max_workers``
    threads verify in parallel and further callers wait for a free worker.

    Args:
        max_workers: the most worker processes alive at once.
        memory_mb: address-space cap of each worker (0: none).
        cache_size: remembered ``(gold, pred) -> Verdict`` pairs (timeouts and errors are never
            cached: they may be due to load).
    """

    def __init__(
        self, max_workers: int = 2, memory_mb: int = WORKER_MEMORY_MB, cache_size: int = 8192
    ) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self.max_workers = max_workers
        self.memory_mb = memory_mb
        self.cache_size = cache_size
        self.pid = os.getpid()
        self._slots = threading.BoundedSemaphore(max_workers)
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str], Verdict] = OrderedDict()
        self.started = 0  # worker processes started so far (restarts included)

    def verify(self, gold: str, pred: str, timeout_s: float) -> Verdict:
        """``math_verify.verify(parse(gold), parse(pred))``, gold first, within ``timeout_s``.

        Both strings are LaTeX answers (the inside of a box); each is parsed as
        ``\\boxed{<answer>}`` with ``LatexExtractionConfig`` and ``ExprExtractionConfig``. An
        answer in Python/SymPy notation (``x**2 + 3*x``) is rewritten as LaTeX first
        (:mod:`tasks.math.notation`). Never raises.
        """
        gold, pred = to_latex(gold), to_latex(pred)
        key = (gold, pred)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
        with self._slots:
            worker = self._checkout()
            if worker is None:
                return Verdict("error", False, error="math-verify worker failed to start")
            start = time.monotonic()
            try:
                reply = worker.request(gold, pred, timeout_s)
            except BaseException:  # e.g. KeyboardInterrupt: do not leak a busy worker
                worker.kill()
                raise
            seconds = time.monotonic() - start
            if reply is None:
                worker.kill()
                self._start_replacement()
                if seconds >= timeout_s:
                    return Verdict("timeout", False, seconds=seconds)
                return Verdict("error", False, error="math-verify worker died", seconds=seconds)
            with self._lock:
                self._idle.append(worker)
        verdict = Verdict(
            "ok" if reply.get("status") == "ok" else "error",
            bool(reply.get("correct")),
            gold=reply.get("gold"),
            pred=reply.get("pred"),
            error=str(reply.get("error", "")),
            seconds=seconds,
        )
        if verdict.status == "ok":
            with self._lock:
                self._cache[key] = verdict
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return verdict

    def _start_replacement(self) -> None:
        """Starts a worker at once for the one just killed, so that its start-up (importing
        math-verify, about a second) overlaps with the caller's work instead of the next grade."""
        try:
            worker = _Worker(self.memory_mb)
        except OSError:
            return
        with self._lock:
            self.started += 1
            self._idle.insert(0, worker)  # used last: ready workers go first

    def _checkout(self) -> _Worker | None:
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is not None and worker.proc.poll() is not None:  # died while idle
            worker.kill()
            worker = None
        if worker is None:
            try:
                worker = _Worker(self.memory_mb)
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


_POOL: VerifierPool | None = None
_POOL_LOCK = threading.Lock()


def default_pool() -> VerifierPool:
    """The process-wide pool (a fresh one in a forked child: a parent's workers are not ours)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL.pid != os.getpid():
            _POOL = VerifierPool(max_workers=max(1, min(4, os.cpu_count() or 1)))
        return _POOL


@atexit.register
def _close_default_pool() -> None:
    pool = _POOL
    if pool is not None and pool.pid == os.getpid():
        pool.close()


def verify_answer(gold: str, pred: str, timeout_s: float = 5.0) -> Verdict:
    """Verifies ``pred`` against ``gold`` (LaTeX answers, gold first) in the default pool."""
    return default_pool().verify(gold, pred, timeout_s)
