"""The math-verify worker process (run as a script by :mod:`tasks.math.verifier`; imports nothing
from this project).

Protocol, one JSON object per line: the worker first writes ``{"ready": true}``; then for each
request ``{"id", "gold", "pred", "limit"}`` on stdin it writes ``{"id", "status", "correct",
"gold", "pred", "error"}`` on stdout, where ``gold`` / ``pred`` are the parsed values as text
(``null`` when math-verify found nothing) and ``status`` is ``"ok"`` or ``"error"``. It exits on
end of input.

math-verify's own timeouts (``signal.alarm``) are disabled: the parent enforces the per-answer
deadline by killing this process. As a backstop for an orphaned worker, each request also arms
``alarm(limit + 5 s)`` with SIGALRM's default action (terminate), which stops even a computation
stuck in C code.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import sys
from typing import Any


def _limit_memory(megabytes: int) -> None:
    try:
        import resource

        limit = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):  # not POSIX, or a lower hard limit: keep it
        pass


def main() -> None:
    """Serves verification requests until stdin closes."""
    memory_mb = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # stray prints from libraries must not corrupt the protocol
    logging.disable(logging.CRITICAL)
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    config = [LatexExtractionConfig(), ExprExtractionConfig()]
    golds: dict[str, Any] = {}

    def parsed(latex: str) -> Any:
        return parse("\\boxed{" + latex + "}", extraction_config=config, parsing_timeout=None)

    parsed("1")  # warm up the grammar before saying ready
    if memory_mb > 0:
        _limit_memory(memory_mb)
    has_alarm = hasattr(signal, "alarm")
    out.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        reply: dict[str, Any] = {"id": request["id"], "status": "ok", "error": ""}
        if has_alarm:
            signal.alarm(math.ceil(float(request.get("limit", 5.0))) + 5)
        try:
            gold = golds.get(request["gold"])
            if gold is None:
                gold = parsed(request["gold"])
                if len(golds) >= 4096:
                    golds.clear()
                golds[request["gold"]] = gold
            pred = parsed(request["pred"])
            reply["gold"] = str(gold[0])[:200] if gold else None
            reply["pred"] = str(pred[0])[:200] if pred else None
            reply["correct"] = bool(gold and pred and verify(gold, pred, timeout_seconds=None))
        except Exception as exc:  # any failure is a verdict, not a crash (MemoryError too)
            reply.update(status="error", correct=False, error=f"{type(exc).__name__}: {exc}"[:300])
        finally:
            if has_alarm:
                signal.alarm(0)
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
