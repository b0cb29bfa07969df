"""What the OpenEnv tests share: an ASGI app served by uvicorn in a thread on 127.0.0.1, the
guess environment of ``tests/fixtures/openenv_guess`` (its options, a served copy, a team of one
player) and a policy that solves it by bisection."""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from _served import free_port

from teamtr_core.policy import Generation, SamplingParams

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "openenv_guess"
"""The guess environment's folder (put it on ``sys.path`` to import ``guess_env``)."""

IN_PROCESS = {"env": "guess_env:GuessEnv", "action": "guess_env:GuessAction"}
"""``openenv/Env-v0``'s options for the guess environment in process."""

TEAM = {"agents": ["player"], "actor": "player", "max_turns": 8}
"""A team of one player, who acts in the environment."""


@contextlib.contextmanager
def serve_app(app: Any, **config: Any) -> Iterator[str]:
    """``app`` under uvicorn in a thread on a free port of 127.0.0.1 (``config``: more
    ``uvicorn.Config`` settings): yields its base URL once it has started, and stops it on
    exit."""
    import uvicorn

    port = free_port()
    config = {"log_level": "warning", **config}
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, **config))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


@contextlib.contextmanager
def guess_server(max_sessions: int, env_class: str = "GuessEnv") -> Iterator[str]:
    """The guess environment (``env_class`` of ``guess_env``) served by OpenEnv's
    ``create_app`` with ``max_sessions`` concurrent sessions; ``guess_env`` must be importable
    (:data:`FIXTURES` on ``sys.path``)."""
    from tasks.openenv.importing import import_openenv_core

    create_app = import_openenv_core().create_app  # before guess_env imports it: no Gradio
    import guess_env

    app = create_app(
        getattr(guess_env, env_class),
        guess_env.GuessAction,
        guess_env.GuessObservation,
        env_name="guess",
        max_concurrent_envs=max_sessions,
    )
    with serve_app(app) as url:
        yield url


class Bisect:
    """Guesses the digit by bisection, reading its earlier guesses and the hints from its context;
    with ``plain``, writes the bare number instead of JSON."""

    def __init__(self, plain: bool = False) -> None:
        self.plain = plain

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        out = []
        for text in prompts:
            low, high = 0, 9
            turns = re.findall(r"(\d)\D*\n### [^\n]+\n(higher|lower|right)", text)
            for guess, hint in turns:
                if hint == "higher":
                    low = max(low, int(guess) + 1)
                elif hint == "lower":
                    high = min(high, int(guess) - 1)
            guess = (low + high) // 2
            out.append(Generation(str(guess) if self.plain else f'{{"guess": {guess}}}'))
        return out
