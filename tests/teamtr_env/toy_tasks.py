"""Small tasks used by several test modules."""

from __future__ import annotations

import numpy as np

from tasks import Episode, InteractiveTask, Problem, Score


class CountdownTask(InteractiveTask):
    """Interactive toy: the env answers each message; done when someone says 'stop' or after the
    secret number of messages. Correct if the last env feedback said 'found'."""

    name = "countdown"
    description = "toy interactive task"

    def sample(self, rng: np.random.Generator) -> Problem:
        return Problem(id="cd", data={"target": "stop"}, answer="stop")

    def prompt(self, problem: Problem) -> str:
        return "Say stop."

    def start(self, problem: Problem, rng: np.random.Generator) -> dict:
        return {"found": False, "said": 0}

    def respond(self, state: dict, speaker: str, text: str) -> str | None:
        state["said"] += 1
        state["found"] = "stop" in text
        return "found" if state["found"] else f"not yet ({state['said']})"

    def done(self, state: dict) -> bool:
        return state["found"]

    def score(self, episode: Episode) -> Score:
        ok = bool(episode.state["found"])
        return Score(float(ok), ok, None, {"reason": "found" if ok else "not_found"})
