"""``RolloutBatch``: what a batch of team episodes produced, as plain serialisable records.

No environment or policy objects live inside, so a batch can be saved as JSON, pickled, or sent to
another process (rollout workers later) unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np


@dataclass(frozen=True)
class MessageRecord:
    """One message an agent wrote.

    Attributes:
        episode: index of the episode in the batch.
        group: index of the problem (the episode's group of ``group_size`` samples).
        turn: the turn index within the episode.
        agent: who wrote it.
        context: the rendered context the agent saw (its prompt).
        text: the text as generated (before the protocol cleaned it for the shared context).
        token_ids: the generated token ids when the policy reports them.
        clipped: generation stopped at the token limit without an end token or stop string
            (``Generation.clipped``): the message was probably cut off.
        logprobs: the sampler's log-probs of ``token_ids`` (``Generation.logprobs``: a vLLM
            engine's), empty when the policy reports none.
    """

    episode: int
    group: int
    turn: int
    agent: str
    context: str
    text: str
    token_ids: tuple[int, ...] = ()
    clipped: bool = False
    logprobs: tuple[float, ...] = ()


@dataclass(frozen=True)
class EpisodeRecord:
    """One finished episode.

    Attributes:
        episode, group: indices as in :class:`MessageRecord`.
        problem_id: the problem's id.
        prompt: the task's opening prompt.
        reward, correct, answer, details: the task's ``Score``.
        transcript: the shared context as ``{"role", "speaker", "text"}`` dicts.
        turns: turns played.
        truncated: the turn limit ended an interactive episode before the task did.
        split, meta: the problem's split and breakdown fields.
        context_truncated: some agent's context was cut to the protocol's ``max_context_chars``
            (old messages dropped, or the start of the problem cut off): that agent did not see
            everything.
        local_rewards: each agent's local reward, from a task that gives them
            (:class:`tasks.SupportsLocalRewards`; empty otherwise).
    """

    episode: int
    group: int
    problem_id: str
    prompt: str
    reward: float
    correct: bool
    answer: str | None
    details: Mapping[str, Any]
    transcript: tuple[Mapping[str, str], ...]
    turns: int
    truncated: bool
    split: str = "train"
    meta: Mapping[str, Any] = field(default_factory=dict)
    context_truncated: bool = False
    local_rewards: Mapping[str, float] = field(default_factory=dict)


def message_record(i: int, group: int, env: Any, prompt: str, gen: Any) -> MessageRecord:
    """The record of ``gen`` (a ``Generation``), the message the agent to act in ``env`` (a
    ``TeamEnv``; episode ``i`` of ``group``) wrote to ``prompt``, before the environment takes
    it."""
    return MessageRecord(
        episode=i,
        group=group,
        turn=env.turn,
        agent=env.agent_selection,
        context=prompt,
        text=gen.text,
        token_ids=gen.token_ids,
        clipped=bool(gen.clipped),
        logprobs=tuple(getattr(gen, "logprobs", ())),
    )


def episode_record(i: int, group: int, env: Any) -> EpisodeRecord:
    """The record of a finished episode ``i`` of ``group`` in ``env`` (a ``TeamEnv``)."""
    assert env.score is not None and env.problem is not None
    return EpisodeRecord(
        episode=i,
        group=group,
        problem_id=env.problem.id,
        prompt=env.task.prompt(env.problem),
        reward=float(env.score.reward),
        correct=bool(env.score.correct),
        answer=env.score.answer,
        details=dict(env.score.details),
        transcript=tuple(m.to_dict() for m in env.transcript),
        turns=env.turn,
        truncated=any(env.truncations.values()),
        split=env.problem.split,
        meta=dict(env.problem.meta),
        context_truncated=env.context_truncated,
        local_rewards=dict(env.local_rewards),
    )


def format_episode(episode: EpisodeRecord) -> str:
    """A readable transcript: the prompt, every message with its speaker, and the score."""
    lines = [f"[problem] {episode.prompt}"]
    lines += [f"[{m['speaker']}] {m['text']}" for m in episode.transcript]
    lines.append(
        f"[score] reward={episode.reward} correct={episode.correct} answer={episode.answer!r} "
        f"reason={episode.details.get('reason')!r}"
    )
    if episode.context_truncated:
        lines.append(
            "[note] an agent's context was cut to max_context_chars: it did not see everything"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class RolloutStats:
    """Counters and timings of one ``Runner.rollout`` call.

    Attributes:
        envs: episodes played (problems x group size).
        steps: lockstep steps (each advances every unfinished episode by one turn).
        policy_calls: ``generate`` calls per agent.
        messages: messages generated.
        chars_generated: characters generated.
        tokens_generated: generated tokens (0 for policies that report no token ids).
        wall_s: wall time of the ``rollout`` call: resets, lockstep loop, records (not the
            one-time construction of environments the pool did not have yet).
        policy_s: wall time inside ``generate``; the rest is env and runner bookkeeping.
    """

    envs: int
    steps: int
    policy_calls: Mapping[str, int]
    messages: int
    chars_generated: int
    tokens_generated: int
    wall_s: float
    policy_s: float

    @property
    def total_policy_calls(self) -> int:
        return sum(self.policy_calls.values())

    @property
    def overhead_s(self) -> float:
        """Time spent outside the policies (environment stepping, rendering, bookkeeping)."""
        return max(self.wall_s - self.policy_s, 0.0)


@dataclass(frozen=True)
class RolloutBatch:
    """Episodes ``[group * group_size + g]`` for every problem ``group`` and sample ``g``."""

    messages: tuple[MessageRecord, ...]
    episodes: tuple[EpisodeRecord, ...]
    group_size: int
    stats: RolloutStats

    def messages_of(self, agent: str) -> list[MessageRecord]:
        """The messages ``agent`` wrote, in order."""
        return [m for m in self.messages if m.agent == agent]

    def clipped_ratios(self) -> dict[str, float]:
        """Per agent (in order of its first message), the share of its messages that hit the
        token limit (``MessageRecord.clipped``); agents without a message are left out. TRL
        logs the same share as ``completions/clipped_ratio``."""
        counts: dict[str, list[int]] = {}
        for m in self.messages:
            c = counts.setdefault(m.agent, [0, 0])
            c[0] += m.clipped
            c[1] += 1
        return {agent: clipped / total for agent, (clipped, total) in counts.items()}

    def rewards(self) -> np.ndarray:
        """Team rewards, shape ``(num_episodes,)``."""
        return np.array([e.reward for e in self.episodes], dtype=np.float64)

    def group_rewards(self) -> np.ndarray:
        """Team rewards, shape ``(num_problems, group_size)`` (the layout of group advantages)."""
        return self.rewards().reshape(-1, self.group_size)

    def local_rewards(self, agent: str) -> np.ndarray:
        """``agent``'s local reward in each episode (0 where the task gave it none), shape
        ``(num_episodes,)``."""
        return np.array([float(e.local_rewards.get(agent, 0.0)) for e in self.episodes])

    def has_local_rewards(self) -> bool:
        """Whether any episode carries local rewards."""
        return any(e.local_rewards for e in self.episodes)

    @property
    def num_groups(self) -> int:
        """How many problems (advantage groups) the batch holds."""
        return len(self.episodes) // self.group_size

    def groups(self, start: int, stop: int) -> RolloutBatch:
        """The sub-batch of groups ``[start, stop)``, renumbered from 0 (episode ``e`` of the
        sub-batch is episode ``start * group_size + e`` here). Its stats count only its own
        episodes, messages and generated text; wall and policy times are pro-rated.

        Raises:
            ValueError: the range is empty or outside ``[0, num_groups]``.
        """
        if not 0 <= start < stop <= self.num_groups:
            raise ValueError(
                f"groups({start}, {stop}): expected 0 <= start < stop <= {self.num_groups}"
            )
        g, first = self.group_size, start * self.group_size
        last = stop * g
        episodes = tuple(
            replace(e, episode=e.episode - first, group=e.group - start)
            for e in self.episodes[first:last]
        )
        messages = tuple(
            replace(m, episode=m.episode - first, group=m.group - start)
            for m in self.messages
            if first <= m.episode < last
        )
        share = len(episodes) / max(len(self.episodes), 1)
        stats = replace(
            self.stats,
            envs=len(episodes),
            messages=len(messages),
            chars_generated=sum(len(m.text) for m in messages),
            tokens_generated=sum(len(m.token_ids) for m in messages),
            wall_s=self.stats.wall_s * share,
            policy_s=self.stats.policy_s * share,
        )
        return RolloutBatch(messages, episodes, g, stats)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (inverse: :meth:`from_dict`); ``pickle`` works too."""
        return {
            "group_size": self.group_size,
            "stats": asdict(self.stats),
            "episodes": [_jsonable(asdict(e)) for e in self.episodes],
            "messages": [_jsonable(asdict(m)) for m in self.messages],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RolloutBatch:
        episodes = tuple(
            EpisodeRecord(**{**e, "transcript": tuple(e["transcript"])}) for e in data["episodes"]
        )
        messages = tuple(
            MessageRecord(
                **{
                    **m,
                    "token_ids": tuple(m["token_ids"]),
                    "logprobs": tuple(m.get("logprobs", ())),
                }
            )
            for m in data["messages"]
        )
        return cls(messages, episodes, int(data["group_size"]), RolloutStats(**data["stats"]))


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_jsonable(v) for v in value]
    return value
