"""User simulators: who the team is talking to.

A simulator opens the conversation with the user's request and answers every message the team
sends to the user. It says ``###STOP###`` when it considers the conversation over, which ends the
episode (tau-bench's convention).

* :class:`ScriptedUser` (the default) is rule-based and offline, driven by the task's
  instruction and the user's database record.
* :class:`PolicyUser` wraps any project policy (``teamtr_core.policy.Policy``: an LLM through
  ``HFPolicy`` / ``VLLMPolicy``, or a scripted one) with a user-simulator prompt, like tau-bench's
  LLM user.
"""

from __future__ import annotations

import dataclasses
import re
import zlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from tasks.tooluse.tasks_data import ToolTask
from teamtr_core.policy import Policy, SamplingParams

STOP = "###STOP###"
MAX_USER_CHARS = 1000

Speaker = Literal["user", "agent"]


@dataclass(frozen=True)
class Turn:
    """One message of the user conversation (tool calls and their results are not in it)."""

    speaker: Speaker
    text: str


@runtime_checkable
class UserSimulator(Protocol):
    """What the task needs of a user simulator."""

    def opening(self, task: ToolTask) -> str:
        """The user's first message. Must be deterministic for a given task (it is part of the
        prompt every agent sees)."""
        ...

    def reply(self, task: ToolTask, conversation: Sequence[Turn], rng: np.random.Generator) -> str:
        """The user's answer to the last (agent) turn of ``conversation``; contains
        :data:`STOP` when the user is done."""
        ...


# -- the scripted user ----------------------------------------------------------------------------
_SWAPS: tuple[tuple[str, str], ...] = (
    (r"\byou are\b", "I am"),
    (r"\byou were\b", "I was"),
    (r"\byou're\b", "I'm"),
    (r"\byou've\b", "I've"),
    (r"\byou'd\b", "I'd"),
    (r"\byou'll\b", "I'll"),
    (r"\byourself\b", "myself"),
    (r"\byours\b", "mine"),
    (r"\byour\b", "my"),
)
_SWAP_RES = tuple((re.compile(p, re.IGNORECASE), r) for p, r in _SWAPS)
# "you" after a verb or preposition that takes an object becomes "me", elsewhere "I".
_OBJECT_YOU = re.compile(
    r"\b(to|for|with|about|from|ask|asks|asked|tell|tells|told|give|gives|gave|help|helps|let|"
    r"lets|offer|offers|send|sends|show|shows|thank|contact|call|remind|reminds)\s+you\b",
    re.IGNORECASE,
)
_SUBJECT_YOU = re.compile(r"\byou\b", re.IGNORECASE)
_BYE = re.compile(
    r"anything else|something else|have a (?:great|nice|good|wonderful) day|goodbye|bye\b",
    re.IGNORECASE,
)
_CONFIRM = re.compile(
    r"\(yes/no\)|yes or no|do you confirm|please confirm|(?:shall|should|can|may) i (?:go ahead|"
    r"proceed)|(?:would|do) you (?:like|want) me to (?:go ahead|proceed)",
    re.IGNORECASE,
)
_ASKING = re.compile(r"\?|please|provide|could you|can you|may i|tell me|share", re.IGNORECASE)
_EMAIL = re.compile(r"e-?mail", re.IGNORECASE)
_NAME_ZIP = re.compile(r"\bzip|postal|(?:full|first|last) name|your name", re.IGNORECASE)
_USER_ID = re.compile(r"user ?id", re.IGNORECASE)


def first_person(text: str) -> str:
    """Rewrites a second-person instruction ("You want your order ...") in the first person
    ("I want my order ..."): enough for a scripted opening, not a grammar."""

    def swap(pattern: re.Pattern[str], repl: str, s: str) -> str:
        def keep_case(match: re.Match[str]) -> str:
            return repl[0].upper() + repl[1:] if match.group(0)[0].isupper() else repl

        return pattern.sub(keep_case, s)

    for pattern, repl in _SWAP_RES:
        text = swap(pattern, repl, text)
    text = _OBJECT_YOU.sub(lambda m: m.group(1) + " me", text)
    return _SUBJECT_YOU.sub("I", text)


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


class ScriptedUser:
    """A rule-based user.

    * Opening: the instruction in the first person, without its first sentence when that one
      only says who the user is ("You are Ada Park (email ...)."): like a real customer, the user
      identifies only when asked.
    * Replies, first rule that matches the team's message:

      1. "anything else?" / goodbye: ``"No, that's all. Thank you! ###STOP###"``;
      2. a confirmation request ("(yes/no)", "do you confirm", "shall I proceed"):
         ``"Yes, please go ahead."``;
      3. a request for the email, name and zip, or user id: the answer from the user's database
         record (email first when several are asked);
      4. any other question: the whole request again, in the first person;
      5. a statement: ``"Okay, thank you."``.

    Args:
        users: the ``users`` table (the user's record answers identification questions).
    """

    def __init__(self, users: Mapping[str, Any]) -> None:
        self.users = users
        self._openings: dict[str, str] = {}

    def opening(self, task: ToolTask) -> str:
        cached = self._openings.get(task.instruction)
        if cached is None:
            sentences = _sentences(task.instruction)
            if len(sentences) > 1 and re.match(r"you are\b", sentences[0], re.IGNORECASE):
                sentences = sentences[1:]
            cached = "Hi! " + first_person(" ".join(sentences))
            if len(self._openings) < 100_000:
                self._openings[task.instruction] = cached
        return cached

    def reply(self, task: ToolTask, conversation: Sequence[Turn], rng: np.random.Generator) -> str:
        message = conversation[-1].text if conversation else ""
        if _BYE.search(message):
            return f"No, that's all. Thank you! {STOP}"
        if _CONFIRM.search(message):
            return "Yes, please go ahead."
        if _ASKING.search(message):
            identity = self._identity(task, message)
            if identity is not None:
                return identity
        if "?" in message:
            return "Here is what I need: " + first_person(task.instruction)
        return "Okay, thank you."

    def _identity(self, task: ToolTask, message: str) -> str | None:
        user = self.users.get(task.user_id)
        asked_email = _EMAIL.search(message)
        asked_name = _NAME_ZIP.search(message)
        asked_id = _USER_ID.search(message)
        if not (asked_email or asked_name or asked_id):
            return None
        if not isinstance(user, Mapping):
            return "Sorry, I would rather not share that."
        if asked_email and user.get("email"):
            return f"My email is {user['email']}."
        if asked_name:
            name = user.get("name", {})
            zip_code = user.get("address", {}).get("zip", "")
            return (
                f"My name is {name.get('first_name', '')} {name.get('last_name', '')} and my "
                f"zip code is {zip_code}."
            )
        return f"My user id is {task.user_id}."


# -- a user played by a policy --------------------------------------------------------------------
USER_SYSTEM_PROMPT = (
    "You are a customer talking to the support agent of an online store. Play the customer "
    "described below. Write only the customer's next message, short and natural. Reveal "
    "information only when the agent asks for it, never invent facts that the description does "
    "not give, and do not repeat the description word for word. When your request is fully "
    f"handled, or you are transferred to a human agent, reply with exactly {STOP}."
)


class PolicyUser:
    """A user simulator played by any project policy (LLM or scripted).

    The prompt is ``system`` + the task's instruction + the conversation so far, rendered like a
    team context (``### user`` / ``### agent`` blocks) and ending with the cue ``### user``. The
    opening is generated once per task (seeded from the task id) and cached, because it is part
    of the prompt every agent sees.

    Args:
        policy: anything with ``generate(prompts, sampling) -> [Generation | str]``.
        sampling: sampling parameters (the seed is replaced per call).
        system: the simulator's instructions.
        max_chars: replies are cut to this length.
        cache_size: how many openings to keep.

    Raises:
        TypeError: if ``policy`` has no ``generate``.

    Override :meth:`render` to apply a chat template for instruction-tuned models.
    """

    def __init__(
        self,
        policy: Policy,
        sampling: SamplingParams | None = None,
        system: str = USER_SYSTEM_PROMPT,
        max_chars: int = MAX_USER_CHARS,
        cache_size: int = 4096,
    ) -> None:
        if not callable(getattr(policy, "generate", None)):
            raise TypeError(
                f"PolicyUser needs a policy with generate(prompts, sampling), got "
                f"{type(policy).__name__}"
            )
        self.policy = policy
        self.sampling = sampling or SamplingParams(temperature=0.7, max_new_tokens=128)
        self.system = system
        self.max_chars = max_chars
        self.cache_size = cache_size
        self._openings: OrderedDict[tuple[str, str], str] = OrderedDict()

    def render(self, task: ToolTask, conversation: Sequence[Turn]) -> str:
        """The simulator's prompt."""
        lines = [self.system, "### Customer description", task.instruction.strip()]
        lines += [f"### {turn.speaker}\n{turn.text}" for turn in conversation]
        return "\n".join(lines) + "\n### user\n"

    def opening(self, task: ToolTask) -> str:
        key = (task.id, task.instruction)
        if key not in self._openings:
            seed = zlib.crc32(f"{task.id}\n{task.instruction}".encode())
            text = self._generate(task, [], seed).replace(STOP, "").strip()
            self._openings[key] = text or "Hi, I need some help with my order."
            while len(self._openings) > self.cache_size:
                self._openings.popitem(last=False)
        return self._openings[key]

    def reply(self, task: ToolTask, conversation: Sequence[Turn], rng: np.random.Generator) -> str:
        return self._generate(task, conversation, int(rng.integers(2**31 - 1))) or "..."

    def _generate(self, task: ToolTask, conversation: Sequence[Turn], seed: int) -> str:
        sampling = dataclasses.replace(self.sampling, seed=seed)
        out = self.policy.generate([self.render(task, conversation)], sampling)
        first = out[0] if out else ""
        text = first if isinstance(first, str) else str(getattr(first, "text", ""))
        return text.strip()[: self.max_chars]
