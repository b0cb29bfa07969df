"""The team protocol: who is on the team, what each agent is told, how the shared context is shown
to the active agent, which message is the final answer, and the limits on messages and turns.

The protocol is part of the state an agent conditions on, so it is fixed uniformly for every agent
(paper App. G.7) and is a frozen, validated dataclass.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from tasks.base import Message
from teamtr_core.choices import choice_errors
from teamtr_core.errors import ConfigError
from teamtr_core.toolcalls import canonicalize_tool_calls

ReasoningMode = Literal["keep", "strip"]
ToolCallMode = Literal["keep", "canonical"]
Visibility = Literal["all", "own", "rounds", "previous"]
FinalAnswer = Literal["final_agent", "majority"]

DEFAULT_AGENTS: tuple[str, ...] = ("solver", "critic", "aggregator")
DEFAULT_SYSTEM_PROMPTS: Mapping[str, str] = MappingProxyType(
    {
        "solver": "You are the solver. Solve the problem and end with the final answer.",
        "critic": "You are the critic. Check the previous answer and give the corrected final answer.",
        "aggregator": "You are the aggregator. Give the team's final answer.",
    }
)
_AGENT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_KEEP_CONTROLS = frozenset("\n\t")


def default_system_prompt(agent: str) -> str:
    """The built-in system prompt of a role; a generic team-member prompt for other names."""
    return DEFAULT_SYSTEM_PROMPTS.get(
        agent, f"You are {agent}, a member of a team solving the problem together."
    )


@dataclass(frozen=True)
class CleanedMessage:
    """A message as it enters the shared context, with what was done to it."""

    text: str
    notes: tuple[str, ...]


@dataclass(frozen=True)
class TeamProtocol:
    """How a team talks.

    Attributes:
        agents: agent names (roles), in their default speaking order. Names are identifiers
            (letters, digits, ``_``); at least one.
        system_prompts: per-agent system prompt; agents missing here get
            :func:`default_system_prompt`; an explicit ``""`` means no system prompt.
        final_agent: whose last message is graded as the team's answer (default: the last agent).
        max_turns: turns per episode (default: one round, ``len(agents)``).
        max_message_chars: longer messages are truncated (noted in ``infos``).
        max_context_chars: the rendered context is cut to this length by dropping the oldest
            messages first, then cutting from the left (noted in ``infos``).
        reasoning: ``"keep"`` or ``"strip"`` ``<think>...</think>`` blocks before a message enters
            the shared context (an unterminated ``<think>`` is stripped to the end).
        header: the line introducing the task's opening prompt in the rendered context.
        tool_calls: ``"canonical"`` rewrites every tool call a model writes (Hermes/Qwen, Llama,
            OpenAI, Mistral, fenced JSON) into ``<tool_call>{"arguments":...,"name":...}
            </tool_call>`` before the message enters the context (``teamtr_core.toolcalls``).
        visibility: which earlier messages an agent sees. ``"all"`` (a shared context, the
            default); ``"own"``: only its own messages (independent samples, as in
            self-consistency); ``"rounds"``: every message of the *completed* rounds of
            ``round_size`` turns plus its own (debate: answers stay private within a round);
            ``"previous"``: a relay or pipeline, where the agent of turn 0 sees the problem and
            every later agent sees only the message(s) of the turn just before its own (not the
            problem, not its own earlier messages), so each message carries what the next agent
            needs.
        round_size: turns per round for ``visibility="rounds"`` (default: the number of agents
            outside ``full_view``).
        full_view: agents that always see every message (e.g. a debate's judge).
        final_answer: ``"final_agent"`` grades the final agent's last message; ``"majority"``
            grades each agent's last message (agents in ``full_view`` excluded) and keeps the
            most common extracted answer (ties: the earliest); single-answer tasks only.

    Raises:
        ConfigError: listing every invalid field at once.
    """

    agents: tuple[str, ...] = DEFAULT_AGENTS
    system_prompts: Mapping[str, str] = field(default_factory=dict)
    final_agent: str | None = None
    max_turns: int | None = None
    max_message_chars: int = 2000
    max_context_chars: int = 32000
    reasoning: ReasoningMode = "keep"
    header: str = "Problem"
    tool_calls: ToolCallMode = "keep"
    visibility: Visibility = "all"
    round_size: int | None = None
    full_view: tuple[str, ...] = ()
    final_answer: FinalAnswer = "final_agent"

    def __post_init__(self) -> None:
        errors: list[str] = []
        agents: tuple[str, ...] = ()
        if isinstance(self.agents, str):
            agents = (self.agents,)
        elif isinstance(self.agents, Sequence):
            agents = tuple(self.agents)
        else:
            errors.append(f"agents: expected a list of names, got {self.agents!r}")
        object.__setattr__(self, "agents", agents)
        if isinstance(self.full_view, str):
            object.__setattr__(self, "full_view", (self.full_view,))
        elif isinstance(self.full_view, Sequence):
            object.__setattr__(self, "full_view", tuple(self.full_view))
        else:
            errors.append(f"full_view: expected a list of agent names, got {self.full_view!r}")
            object.__setattr__(self, "full_view", ())
        if isinstance(self.system_prompts, Mapping):
            object.__setattr__(self, "system_prompts", MappingProxyType(dict(self.system_prompts)))
        else:
            errors.append(
                f"system_prompts: expected a mapping agent -> text, got {self.system_prompts!r}"
            )
            object.__setattr__(self, "system_prompts", MappingProxyType({}))
        errors += _validate(self, errors)
        if errors:
            raise ConfigError("TeamProtocol", errors)
        if self.final_agent is None:
            object.__setattr__(self, "final_agent", agents[-1])
        if self.max_turns is None:
            object.__setattr__(self, "max_turns", len(agents))
        if self.round_size is None:
            object.__setattr__(
                self, "round_size", max(1, len([a for a in agents if a not in self.full_view]))
            )

    def sees(self, viewer: str, viewer_turn: int, speaker: str, message_turn: int) -> bool:
        """Whether ``viewer``, about to play turn ``viewer_turn``, sees a message of turn
        ``message_turn`` by ``speaker`` (environment feedback counts as its turn's agent's)."""
        if self.visibility == "all" or viewer in self.full_view:
            return True
        if self.visibility == "previous":
            return message_turn == viewer_turn - 1
        if speaker == viewer:
            return True
        if self.visibility == "own":
            return False
        size = int(self.round_size or 1)
        return message_turn // size < viewer_turn // size

    @property
    def turn_limit(self) -> int:
        """``max_turns`` after defaulting (always an int)."""
        return int(self.max_turns or len(self.agents))

    def system_prompt(self, agent: str) -> str:
        """The system prompt ``agent`` sees (possibly empty)."""
        return self.system_prompts.get(agent, default_system_prompt(agent))

    def clean(self, text: object) -> CleanedMessage:
        """Turns an arbitrary action into the text that enters the shared context.

        Never raises: non-strings are converted, control characters (other than newline and tab)
        and lone surrogates are removed, reasoning is stripped if asked, and the result is
        truncated to ``max_message_chars``.
        """
        notes: list[str] = []
        if isinstance(text, str):
            out = text
        elif isinstance(text, bytes):
            out = text.decode("utf-8", errors="replace")
            notes.append("decoded_bytes")
        elif text is None:
            out = ""
            notes.append("none_action")
        else:
            out = str(text)
            notes.append("non_string_action")
        if self.reasoning == "strip" and "<think>" in out.lower():
            out = _THINK.sub("", out).strip()
            notes.append("reasoning_stripped")
        if len(out) > self.max_message_chars:
            out = out[: self.max_message_chars]
            notes.append("truncated")
        if self.tool_calls == "canonical":
            out, replaced = canonicalize_tool_calls(out)
            if replaced:
                notes.append("tool_calls_canonicalized")
                out = out[: self.max_message_chars]
        cleaned = _strip_controls(out)
        if cleaned != out:
            notes.append("control_chars_removed")
        return CleanedMessage(cleaned, tuple(notes))

    def shows_prompt(self, viewer: str, viewer_turn: int) -> bool:
        """Whether ``viewer``, about to play turn ``viewer_turn``, sees the task's opening prompt
        (always, except for ``visibility="previous"`` after turn 0)."""
        return self.visibility != "previous" or viewer_turn == 0 or viewer in self.full_view

    def render(
        self, prompt: str | None, transcript: Sequence[Message], agent: str
    ) -> tuple[str, bool]:
        """The context ``agent`` sees: system prompt, the task's prompt (``None``: not shown),
        every message so far and a cue line naming the active agent.

        ``TeamEnv`` renders the same text incrementally (``teamtr_env.context.ContextHistory``)
        unless a subclass overrides this method or :meth:`sees`.

        Returns:
            ``(text, truncated)``; ``truncated`` is true when old messages were dropped or the
            text was cut to ``max_context_chars``.
        """
        head, cue = self.frame(prompt, agent)
        blocks = [self.message_block(m) for m in transcript]
        budget = self.max_context_chars - len(head) - len(cue)
        kept: list[str] = []
        for block in reversed(blocks):
            if len(block) > budget:
                break
            kept.append(block)
            budget -= len(block)
        return self.fit(head, "".join(reversed(kept)), cue, dropped=len(kept) < len(blocks))

    def message_block(self, message: Message) -> str:
        """How one message appears in a rendered context (a ``### speaker`` line, then the text)."""
        return f"### {message.speaker}\n{message.text}\n"

    def frame(self, prompt: str | None, agent: str) -> tuple[str, str]:
        """The ``(head, cue)`` around the messages of ``agent``'s context: the head holds the
        system prompt and the task's prompt (``None``: not shown), the cue names ``agent``."""
        system = self.system_prompt(agent)
        head = (f"{system}\n" if system else "") + (
            f"### {self.header}\n{prompt}\n" if prompt is not None else ""
        )
        return head, f"### {agent}\n"

    def fit(self, head: str, body: str, cue: str, *, dropped: bool) -> tuple[str, bool]:
        """Joins a context and cuts it from the left to ``max_context_chars``; returns
        ``(text, truncated)``, where ``dropped`` says whether old messages were left out."""
        text = head + body + cue
        if len(text) > self.max_context_chars:
            return text[-self.max_context_chars :], True
        return text, dropped


def _strip_controls(text: str) -> str:
    if text.isprintable():  # fast path: no control characters, no surrogates
        return text
    return "".join(
        c for c in text if c in _KEEP_CONTROLS or unicodedata.category(c) not in ("Cc", "Cs")
    )


def _validate(protocol: TeamProtocol, earlier: list[str]) -> list[str]:
    errors: list[str] = []
    agents = protocol.agents
    if not agents and not any(p.startswith("agents:") for p in earlier):
        errors.append("agents: expected at least one agent name, got none")
    for name in agents:
        if not isinstance(name, str) or not _AGENT_NAME.match(name):
            errors.append(
                f"agents: {name!r} is not a valid name (letters, digits and '_', starting with a "
                "letter)"
            )
    duplicates = sorted({a for a in agents if agents.count(a) > 1})
    if duplicates:
        errors.append(f"agents: names must be unique, repeated: {duplicates}")
    unknown = sorted(set(protocol.system_prompts) - set(agents))
    if unknown:
        errors.append(f"system_prompts: keys {unknown} are not agents {list(agents)}")
    if protocol.final_agent is not None and protocol.final_agent not in agents:
        errors.append(
            f"final_agent: {protocol.final_agent!r} is not one of the agents {list(agents)}"
        )
    if protocol.max_turns is not None and (
        not isinstance(protocol.max_turns, int) or protocol.max_turns < 1
    ):
        errors.append(f"max_turns: expected a positive integer, got {protocol.max_turns!r}")
    if not isinstance(protocol.max_message_chars, int) or protocol.max_message_chars < 1:
        errors.append(
            f"max_message_chars: expected a positive integer, got {protocol.max_message_chars!r}"
        )
    if not isinstance(protocol.max_context_chars, int) or protocol.max_context_chars < 256:
        errors.append(
            f"max_context_chars: expected an integer >= 256, got {protocol.max_context_chars!r}"
        )
    errors += choice_errors("tool_calls", protocol.tool_calls, ToolCallMode)
    errors += choice_errors("visibility", protocol.visibility, Visibility)
    errors += choice_errors("final_answer", protocol.final_answer, FinalAnswer)
    if protocol.round_size is not None and (
        not isinstance(protocol.round_size, int) or protocol.round_size < 1
    ):
        errors.append(f"round_size: expected a positive integer, got {protocol.round_size!r}")
    outsiders = sorted(set(protocol.full_view) - set(agents))
    if outsiders:
        errors.append(f"full_view: {outsiders} are not agents {list(agents)}")
    if protocol.final_answer == "majority" and not set(agents) - set(protocol.full_view):
        errors.append("final_answer: 'majority' needs at least one agent outside full_view")
    errors += choice_errors("reasoning", protocol.reasoning, ReasoningMode)
    return errors
