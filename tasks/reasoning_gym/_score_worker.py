"""The reasoning-gym worker (``python -m tasks.reasoning_gym._score_worker``, started by
:mod:`tasks.reasoning_gym.scoring` through :class:`tasks.workers.WorkerPool` with
``PYTHONHASHSEED=0``: some generators iterate sets, so an item is the same in every process and
run only under one hash seed).

Requests (one JSON object per line; each names ``dataset``, ``options``, ``level`` and ``size``):

- ``{"op": "build"}``: builds the dataset (cached); replies ``{"status": "ok", "config": {...}}``
  or ``{"status": "invalid", "errors": [...]}``.
- ``{"op": "item", "index": i}``: replies ``{"status": "ok", "question", "answer"}`` (``answer``
  a string or ``null``).
- ``{"op": "score", "index", "question", "answer"}``: rebuilds item ``index``, checks that its
  question is the one graded, and replies ``{"status", "score", "error"}`` with ``status``
  ``"ok"``, ``"mismatch"`` (the item is another question) or ``"error"`` (``score_answer``
  raised).

The parent kills the worker at its deadline; each request also arms ``alarm(limit + 5 s)`` as a
backstop for an orphaned worker.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import signal
import sys
from collections import OrderedDict
from typing import Any

from tasks.reasoning_gym import build
from tasks.workers import limit_memory

MEMORY_MB = 4096


def _entry(cache: OrderedDict[str, Any], request: dict[str, Any]) -> tuple[Any, Any]:
    key = json.dumps(
        [request[k] for k in ("dataset", "options", "level", "size", "index")], sort_keys=True
    )
    hit = cache.get(key)
    if hit is None:
        dataset = _dataset(request)
        hit = cache[key] = (dataset, dataset[int(request["index"])])
        while len(cache) > 4096:
            cache.popitem(last=False)
    return hit


def _dataset(request: dict[str, Any]) -> Any:
    return build.dataset(request["dataset"], request["options"], request["level"], request["size"])


def _config(dataset: Any) -> dict[str, Any]:
    config = dataset.config
    is_object = dataclasses.is_dataclass(config) and not isinstance(config, type)
    fields = dataclasses.asdict(config) if is_object else {}
    return json.loads(json.dumps(fields, default=repr))


def serve(request: dict[str, Any], cache: OrderedDict[str, Any]) -> dict[str, Any]:
    """One request's reply (without its id)."""
    op = request.get("op", "score")
    if op == "build":
        try:
            return {"status": "ok", "config": _config(_dataset(request))}
        except build.BuildError as exc:
            return {
                "status": "invalid",
                "errors": exc.errors,
                "unknown": exc.unknown,
                "fields": exc.fields,
            }
    if op == "item":
        _, entry = _entry(cache, request)
        answer = entry.get("answer")
        return {
            "status": "ok",
            "question": str(entry["question"]),
            "answer": None if answer is None else str(answer),
        }
    dataset, entry = _entry(cache, request)
    if entry["question"] != request["question"]:
        return {"status": "mismatch", "score": 0.0, "error": "the item is another question"}
    return {"status": "ok", "score": float(dataset.score_answer(request["answer"], entry))}


def main() -> None:
    """Serves requests until stdin closes."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # stray prints from libraries must not corrupt the protocol
    logging.disable(logging.CRITICAL)
    import reasoning_gym  # noqa: F401  (imported before saying ready)

    limit_memory(MEMORY_MB)
    has_alarm = hasattr(signal, "alarm")
    cache: OrderedDict[str, Any] = OrderedDict()
    out.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        if has_alarm:
            signal.alarm(math.ceil(float(request.get("limit", 10.0))) + 5)
        try:
            reply = serve(request, cache)
        except Exception as exc:  # any failure is a verdict, not a crash (MemoryError too)
            reply = {"status": "error", "score": 0.0, "error": f"{type(exc).__name__}: {exc}"[:300]}
        finally:
            if has_alarm:
                signal.alarm(0)
        reply["id"] = request["id"]
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
