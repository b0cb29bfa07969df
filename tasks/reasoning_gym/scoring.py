"""reasoning-gym in persistent worker processes: its items, and its ``score_answer`` behind a hard
deadline.

A dataset's ``score_answer`` runs the dataset's own code on a model's answer (some parse it, some
simulate a game with it); it may raise or hang. It runs in a :class:`tasks.workers.WorkerPool` of
:mod:`tasks.reasoning_gym._score_worker` processes: an answer that overruns ``timeout_s`` or
raises scores 0, with the reason, and the run goes on.

The items are generated there too. Some generators iterate Python sets, whose order follows the
per-process hash seed, so the same index gives another question in another process; the workers
run with ``PYTHONHASHSEED=0``, so an item is the same in every process and every run.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tasks.reasoning_gym.build import BuildError
from tasks.workers import Call, ProcessWide, WorkerPool

ScoreStatus = Literal["ok", "timeout", "error", "mismatch"]
_ROOT = str(Path(__file__).resolve().parents[2])  # the folder that holds the tasks package


@dataclass(frozen=True)
class Scored:
    """One ``score_answer`` call.

    Attributes:
        status: ``"ok"``; ``"timeout"`` (the deadline passed: the worker was killed); ``"error"``
            (``score_answer`` raised, or the worker failed); ``"mismatch"`` (the problem's
            index does not give its question under these options).
        score: the dataset's score in [0, 1] (0 unless ``status == "ok"``).
        error: a short message when not ``"ok"``.
        seconds: wall time of the call.
    """

    status: ScoreStatus
    score: float = 0.0
    error: str = ""
    seconds: float = 0.0


def _command() -> list[str]:
    return [sys.executable, "-u", "-m", "tasks.reasoning_gym._score_worker"]


def _env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": _ROOT + (os.pathsep + path if path else ""), "PYTHONHASHSEED": "0"}


class ItemError(ValueError):
    """A dataset's generator raised on one index (countdown gives up on some: "Failed to generate
    valid expression after 100 attempts"); the task draws another index."""


GENERATION_TIMEOUT_S = 300.0
"""The deadline of building a dataset or generating one item (acre builds 10000 items in ~2 s;
knight_swap takes ~0.5 s an item): a generator that overruns it is a dataset fault, raised."""


def _checked(call: Call, request: Mapping[str, Any], what: str) -> Mapping[str, Any]:
    """The reply of a build or item request, or a :class:`BuildError` saying why there is none."""
    reply = call.reply
    if call.status != "ok" or reply is None or reply.get("status") == "error":
        detail = call.error or (reply or {}).get("error") or call.status
        raise BuildError([f"reasoning-gym's {request.get('dataset')}: {what} failed ({detail})"])
    return reply


class GymPool:
    """reasoning-gym workers, at most ``max_workers`` at once (thread-safe).

    Args:
        max_workers: the most worker processes alive at once.
        command: each worker's argument list (default: :mod:`tasks.reasoning_gym._score_worker`;
            tests pass a worker that hangs).
    """

    def __init__(self, max_workers: int = 2, command: Sequence[str] | None = None) -> None:
        self.workers = WorkerPool(command or _command(), "reasoning-gym", max_workers, _env())
        self.pid = os.getpid()
        self._built: dict[str, dict[str, Any]] = {}  # spec (JSON) -> its config's fields
        self._lock = threading.Lock()

    def build(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """Builds the dataset ``spec`` names (dataset, options, level, size) in a worker and
        returns its config's fields.

        Raises:
            BuildError: the options do not build it (every problem listed), or no worker could.
        """
        key = json.dumps(spec, sort_keys=True, default=repr)
        with self._lock:
            if key in self._built:  # a runner builds one task per environment: ask once
                return dict(self._built[key])
        reply = self._call({**spec, "op": "build"}, "build")
        if reply.get("status") == "invalid":
            raise BuildError(
                [str(e) for e in reply.get("errors", [])],
                [str(k) for k in reply.get("unknown", [])],
                [str(f) for f in reply.get("fields", [])],
            )
        config = dict(reply.get("config", {}))
        with self._lock:
            if len(self._built) >= 256:
                self._built.clear()
            self._built[key] = config
        return dict(config)

    def item(self, spec: Mapping[str, Any], index: int) -> tuple[str, str | None]:
        """Item ``index`` of the dataset ``spec`` names: its question and reference answer.

        Raises:
            ItemError: the dataset's generator raised on this index (some give up on a few).
            BuildError: the worker failed or overran :data:`GENERATION_TIMEOUT_S`.
        """
        request = {**spec, "op": "item", "index": index}
        call = self.workers.call(request, GENERATION_TIMEOUT_S)
        if call.status == "ok" and call.reply is not None and call.reply.get("status") == "error":
            raise ItemError(f"item {index}: {call.reply.get('error', '')}")
        reply = _checked(call, request, f"item {index}")
        answer = reply.get("answer")
        return str(reply.get("question", "")), None if answer is None else str(answer)

    def _call(self, request: Mapping[str, Any], what: str) -> Mapping[str, Any]:
        return _checked(self.workers.call(request, GENERATION_TIMEOUT_S), request, what)

    def score(self, request: Mapping[str, Any], timeout_s: float) -> Scored:
        """Scores ``request`` (dataset, options, level, size, index, question, answer) within
        ``timeout_s``. Never raises on the dataset's account."""
        call = self.workers.call({**request, "op": "score"}, timeout_s)
        reply = call.reply
        if call.status != "ok" or reply is None:
            status: ScoreStatus = "timeout" if call.status == "timeout" else "error"
            return Scored(status, error=call.error, seconds=call.seconds)
        status = reply.get("status", "error")
        if status not in ("ok", "error", "mismatch"):
            status = "error"
        try:
            score = float(reply.get("score", 0.0))
        except (TypeError, ValueError):
            score, status = 0.0, "error"
        if not math.isfinite(score):
            score, status = 0.0, "error"
        return Scored(
            status, score if status == "ok" else 0.0, str(reply.get("error", "")), call.seconds
        )

    def close(self) -> None:
        """Stops every idle worker."""
        self.workers.close()


_DEFAULT: ProcessWide[GymPool] = ProcessWide(
    lambda: GymPool(max_workers=max(1, min(2, os.cpu_count() or 1)))
)


def default_pool() -> GymPool:
    """The process-wide pool (a fresh one in a forked child: a parent's workers are not ours)."""
    return _DEFAULT.get()
