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

import os
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tasks.math.notation import to_latex
from tasks.workers import ProcessWide, WorkerPool

Status = Literal["ok", "timeout", "error"]

WORKER_SCRIPT = Path(__file__).with_name("_verify_worker.py")
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
        self.workers = WorkerPool(
            [sys.executable, "-u", str(WORKER_SCRIPT), str(memory_mb)], "math-verify", max_workers
        )
        self.max_workers = max_workers
        self.memory_mb = memory_mb
        self.cache_size = cache_size
        self.pid = os.getpid()
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str], Verdict] = OrderedDict()

    @property
    def started(self) -> int:
        """Worker processes started so far (restarts included)."""
        return self.workers.started

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
        call = self.workers.call({"gold": gold, "pred": pred}, timeout_s)
        reply = call.reply
        if call.status != "ok" or reply is None:
            return Verdict(
                "timeout" if call.status == "timeout" else "error",
                False,
                error=call.error,
                seconds=call.seconds,
            )
        verdict = Verdict(
            "ok" if reply.get("status") == "ok" else "error",
            bool(reply.get("correct")),
            gold=reply.get("gold"),
            pred=reply.get("pred"),
            error=str(reply.get("error", "")),
            seconds=call.seconds,
        )
        if verdict.status == "ok":
            with self._lock:
                self._cache[key] = verdict
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return verdict

    def close(self) -> None:
        """Stops every idle worker (busy ones are stopped when their request ends)."""
        self.workers.close()


_DEFAULT: ProcessWide[VerifierPool] = ProcessWide(
    lambda: VerifierPool(max_workers=max(1, min(4, os.cpu_count() or 1)))
)


def default_pool() -> VerifierPool:
    """The process-wide pool (a fresh one in a forked child: a parent's workers are not ours)."""
    return _DEFAULT.get()


def verify_answer(gold: str, pred: str, timeout_s: float = 5.0) -> Verdict:
    """Verifies ``pred`` against ``gold`` (LaTeX answers, gold first) in the default pool."""
    return default_pool().verify(gold, pred, timeout_s)
