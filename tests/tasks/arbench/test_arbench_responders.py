"""Responders: the protocol, the scripted default, and a PolicyResponder around a project policy
swapped into the SP and DC environments."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

import teamtr_env
from adapters.scripted import ConstantPolicy
from tasks import TaskConfigError
from tasks.arbench import (
    DetectiveCaseTask,
    PolicyResponder,
    Responder,
    ScriptedResponder,
    SituationPuzzleTask,
    sp_rules,
)
from teamtr_core.policy import Generation, SamplingParams

FIXTURES = Path(__file__).parents[2] / "fixtures" / "arbench"


class Recorder:
    """A policy that records its prompts and always says ``reply``."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.prompts: list[str] = []
        self.sampling: list[SamplingParams] = []

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        self.prompts += list(prompts)
        self.sampling.append(sampling)
        return [Generation(self.reply) for _ in prompts]


def step_all(env: teamtr_env.TeamEnv, messages: list[str]) -> list[str]:
    """Plays ``messages`` and returns the environment replies that entered the context."""
    env.reset(seed=0)
    for text in messages:
        env.step(text)
    return [m.text for m in env.transcript if m.role == "env"]


def test_both_responders_satisfy_the_protocol() -> None:
    assert isinstance(ScriptedResponder(), Responder)
    assert isinstance(PolicyResponder(ConstantPolicy("Yes")), Responder)
    with pytest.raises(TypeError, match="generate"):
        PolicyResponder(object())


def test_constant_policy_referee_swaps_into_the_sp_env() -> None:
    responder = PolicyResponder(ConstantPolicy(" No.\n"))
    env = teamtr_env.make("teamtr/ARBench-SP-v0", responder=responder, agents=["solver"])
    replies = step_all(env, ["Q: Did the man have hiccups?", "Q: Was he blind?"])
    assert replies == ["No", "No"]  # cleaned as AR-Bench: strip().strip(".")
    assert responder.calls == 2
    scripted = teamtr_env.make("teamtr/ARBench-SP-v0", agents=["solver"])
    scripted.reset(seed=0)
    assert isinstance(getattr(scripted.task, "responder", None), ScriptedResponder)


def test_referee_prompt_holds_the_hidden_story_and_the_question() -> None:
    policy = Recorder("Yes")
    task = SituationPuzzleTask(responder=PolicyResponder(policy))
    problem = task.load(FIXTURES / "sp.json")[2]
    state = task.start(problem, None)  # type: ignore[arg-type]
    assert task.respond(state, "solver", "Q: Was the man blind?") == "Yes"
    prompt = policy.prompts[0]
    assert problem.data["bottom"] in prompt and problem.data["surface"] in prompt
    assert prompt.endswith("### Player\nWas the man blind?\n### You\n")
    assert "Yes, No, Unknown" in prompt
    assert policy.sampling[0].temperature == 0.7 and policy.sampling[0].top_p == 0.7
    assert task.respond(state, "solver", "He fell.") == sp_rules.NOT_A_QUESTION
    assert len(policy.prompts) == 1  # untagged statements never reach the responder


def test_suspect_prompt_keeps_each_suspects_conversation() -> None:
    policy = Recorder("I was at the harbour office.")
    env = teamtr_env.make(
        "teamtr/ARBench-DC-v0",
        responder=PolicyResponder(policy, max_chars=10),
        data_path=str(FIXTURES / "dc.json"),
        agents=["detective"],
    )
    assert env.problems is not None
    env.reset(options={"problem": env.problems[0]})
    for text in (
        "Suspect: Mr. Dale Hudson\nQuestion: Where were you?",
        "Suspect: Ms. Nora Blake\nQuestion: When did you arrive?",
        "Suspect: Mr. Dale Hudson\nQuestion: Who had the key?",
    ):
        env.step(text)
    replies = [m.text for m in env.transcript if m.role == "env"]
    assert replies[0] == "Mr. Dale Hudson: I was at t"  # max_chars=10
    hudson = [p for p in policy.prompts if "Your Name: Mr. Dale Hudson" in p]
    assert len(hudson) == 2
    assert "You are the true murderer" in hudson[0]  # the deceptive task reaches the model
    assert "### Player\nWhere were you?\n### You\nI was at t\n" in hudson[1]
    assert hudson[1].endswith("### Player\nWho had the key?\n### You\n")
    blake = [p for p in policy.prompts if "Your Name: Ms. Nora Blake" in p]
    assert "Where were you?" not in blake[0]


def test_custom_render_and_prompt_templates() -> None:
    policy = Recorder("Unknown")
    responder = PolicyResponder(
        policy,
        referee_prompt="STORY={bottom}",
        render=lambda system, history, question: f"<s>{system}|{question}</s>",
    )
    puzzle = {"surface": "s", "bottom": "b", "key_question": []}
    assert responder.answer_puzzle(puzzle, "q?") == "Unknown"
    assert policy.prompts == ["<s>STORY=b|q?</s>"]


@pytest.mark.parametrize("responder", ["llm", 3, object()])
def test_bad_responders_are_config_errors(responder: object) -> None:
    with pytest.raises(TaskConfigError, match="responder"):
        SituationPuzzleTask(responder=responder)
    with pytest.raises(TaskConfigError, match="responder"):
        DetectiveCaseTask(responder=responder)
