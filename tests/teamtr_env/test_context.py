"""Incremental contexts (issue #15 A): the same text as ``TeamProtocol.render``, at a per-step cost
that does not grow with the episode."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toy_tasks import CountdownTask

import teamtr_env
import teamtr_env.env as env_module
from tasks import Message
from teamtr_env import TeamEnv, TeamProtocol
from teamtr_env.context import ContextHistory
from teamtr_env.router import TranscriptView

AGENTS = ("a", "b", "c")


def reference(
    protocol: TeamProtocol,
    prompt: str | None,
    played: list[tuple[Message, str, int]],
    agent: str,
    turn: int,
) -> tuple[str, bool]:
    """The full rendering: filter every message with ``sees``, then ``protocol.render``."""
    shown = [m for m, owner, t in played if protocol.sees(agent, turn, owner, t)]
    return protocol.render(prompt, shown, agent)


@st.composite
def protocols(draw: Any) -> TeamProtocol:
    return TeamProtocol(
        agents=AGENTS,
        system_prompts={a: draw(st.sampled_from(["", "S" * 40, f"You are {a}."])) for a in AGENTS},
        visibility=draw(st.sampled_from(["all", "own", "rounds", "previous"])),
        round_size=draw(st.none() | st.integers(1, 4)),
        full_view=draw(st.sampled_from([(), ("c",), ("a", "b")])),
        max_context_chars=draw(st.integers(256, 700)),
        max_turns=100,
    )


# A turn: its agent's message and, sometimes, environment feedback (owned by the same agent).
turns = st.lists(
    st.tuples(
        st.sampled_from(AGENTS),
        st.text(max_size=150),
        st.none() | st.text(max_size=60),
    ),
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(
    protocols(),
    st.sampled_from([None, "Compute: 1 + 1", "P" * 400]),
    turns,
)
def test_incremental_rendering_equals_full_rendering(
    protocol: TeamProtocol, prompt: str | None, history: list[tuple[str, str, str | None]]
) -> None:
    incremental = ContextHistory(protocol)
    played: list[tuple[Message, str, int]] = []
    for turn, (speaker, text, feedback) in enumerate(history):
        for agent in AGENTS:  # every view before this turn, and one turn ahead
            for viewer_turn in (turn, turn + 1):
                assert incremental.render(prompt, agent, viewer_turn) == reference(
                    protocol, prompt, played, agent, viewer_turn
                )
        messages = [Message("agent", speaker, text)]
        if feedback is not None:
            messages.append(Message("env", "task", feedback))
        for message in messages:
            incremental.append(message, speaker, turn)
            played.append((message, speaker, turn))
    end = len(history)
    for agent in AGENTS:
        assert incremental.render(prompt, agent, end) == reference(
            protocol, prompt, played, agent, end
        )


@settings(max_examples=60, deadline=None)
@given(protocols(), st.lists(st.text(max_size=120), min_size=1, max_size=20))
def test_env_contexts_equal_full_rendering(protocol: TeamProtocol, replies: list[str]) -> None:
    """Through ``TeamEnv``: interactive feedback, cleaning and routing included."""
    protocol = dataclasses.replace(protocol, max_turns=len(replies))
    env = TeamEnv(CountdownTask(), protocol=protocol)
    env.reset(seed=0)
    for reply in replies:
        if not env.agents or env.episode_over:
            break
        played = [(m, owner, t) for m, (owner, t) in zip(env.transcript, env._origin)]
        for agent in AGENTS:
            prompt = env._prompt if protocol.shows_prompt(agent, env.turn) else None
            assert env.context(agent) == reference(protocol, prompt, played, agent, env.turn)[0]
        env.step(reply.replace("stop", ""))


@dataclass
class Work:
    """Counts the work that grows with the history in a full rendering: reads of a message's
    ``speaker``/``text`` and calls of ``TeamProtocol.sees``."""

    units: int = 0


@pytest.mark.parametrize("visibility", ["all", "own", "rounds", "previous"])
def test_per_step_work_does_not_grow_with_the_history(
    monkeypatch: pytest.MonkeyPatch, visibility: str
) -> None:
    work = Work()

    class CountingMessage(Message):
        def __getattribute__(self, name: str) -> Any:
            if name in ("speaker", "text"):
                work.units += 1
            return super().__getattribute__(name)

    original_sees = TeamProtocol.sees

    def counting_sees(self: TeamProtocol, *args: Any) -> bool:
        work.units += 1
        return original_sees(self, *args)

    monkeypatch.setattr(env_module, "Message", CountingMessage)
    monkeypatch.setattr(TeamProtocol, "sees", counting_sees)
    env = teamtr_env.make("teamtr/Arith-v0", max_turns=1200, visibility=visibility)
    env.reset(seed=0)
    per_step = []
    for _ in range(1100):
        before = work.units
        env.observe(env.agent_selection)
        env.step("Answer: 1")
        per_step.append(work.units - before)
    early, late = per_step[50:60], per_step[-10:]
    assert max(late) <= max(early) <= 10, (early, late)


def test_a_protocol_that_overrides_render_is_still_used() -> None:
    class Shouting(TeamProtocol):
        def render(self, prompt: str | None, transcript: Any, agent: str) -> tuple[str, bool]:
            text, truncated = super().render(prompt, transcript, agent)
            return text.upper(), truncated

    env = TeamEnv(teamtr_env.make("teamtr/Arith-v0").task, protocol=Shouting())
    env.reset(seed=0)
    env.step("answer: 1")
    assert env.context("critic").endswith("### SOLVER\nANSWER: 1\n### CRITIC\n")


def test_a_transcript_changed_outside_step_is_rendered_in_full() -> None:
    env = teamtr_env.make("teamtr/Arith-v0")
    env.reset(seed=0)
    env.step("Answer: 1")
    env.transcript.append(Message("system", "note", "appended by hand"))
    assert env.context("critic").endswith("### note\nappended by hand\n### critic\n")


def test_transcript_view_is_a_free_snapshot() -> None:
    messages = [Message("agent", "a", str(i)) for i in range(3)]
    view = TranscriptView(messages)
    messages.append(Message("agent", "b", "later"))
    assert len(view) == 3 and [m.text for m in view] == ["0", "1", "2"]
    assert view[-1].text == "2" and view[1:] == tuple(messages[1:3])
    assert view == tuple(messages[:3]) and tuple(messages[:3]) == view
    assert view != tuple(messages) and hash(view) == hash(tuple(messages[:3]))
    with pytest.raises(IndexError):
        view[3]
