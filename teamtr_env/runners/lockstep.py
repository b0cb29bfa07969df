"""One lockstep rollout: a batch of environments played together, one policy call per acting
agent per step.

At each step every unfinished episode has exactly one acting agent. :func:`play_lockstep` groups
the episodes by it and asks that agent's policy ONCE for all of their messages
(:meth:`Seats.call`), so a step costs at most one ``generate`` call per agent, however many
episodes run. Every way teamtr plays a team is this loop: the local runner's batches
(:mod:`teamtr_env.runners.local`), a tree's candidates and continuations
(:mod:`teamtr_env.runners.tree`), and the seats a served environment plays
(:mod:`teamtr_env.openenv_server`). :class:`Tally` counts what the calls generated, for the
batch's :class:`~teamtr_env.rollout.RolloutStats`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from teamtr_core.errors import PolicyError
from teamtr_core.policy import Generation, Policy, PrivilegedPolicy, SamplingParams
from teamtr_core.seeds import CALL_STREAM, derive_seed
from teamtr_env.env import TeamEnv
from teamtr_env.rollout import RolloutStats

__all__ = ["Call", "Seats", "Tally", "play_lockstep"]


@dataclass(frozen=True)
class Call:
    """One policy call of a step: the acting agent's prompts, its generations (one per prompt,
    in order) and the seconds the call took."""

    prompts: list[str]
    generations: list[Generation]
    seconds: float


class Seats:
    """Who plays each agent and how it is asked: every agent's policy and sampling parameters.

    A call is seeded by the rollout's call seed, the step and the agent
    (``derive_seed(call_seed, step, agent index, CALL_STREAM)``), so a batch is a function of its
    seed; a scripted expert (:class:`~teamtr_core.policy.PrivilegedPolicy`) is also given its
    episodes' problems.

    Args:
        agents: the team's agents, in order (their indices seed the calls).
        policies: each agent's policy.
        sampling: each agent's sampling parameters (default ``SamplingParams()``).
        lock: held during every policy call (a served team's sessions share its policies, and a
            model generates for one caller at a time); default: none.
    """

    def __init__(
        self,
        agents: Sequence[str],
        policies: Mapping[str, Policy],
        sampling: Mapping[str, SamplingParams] | None = None,
        lock: contextlib.AbstractContextManager[Any] | None = None,
    ) -> None:
        self.agents, self.policies = list(agents), dict(policies)
        self.sampling = dict(sampling or {})
        self.lock = lock if lock is not None else contextlib.nullcontext()

    def call(self, agent: str, envs: Sequence[TeamEnv], call_seed: int | None, step: int) -> Call:
        """``agent``'s messages in ``envs`` (one policy call; unseeded when ``call_seed`` is
        ``None``: the sampling parameters' own seed, if any).

        Raises:
            PolicyError: the policy did not return one generation (or string) per prompt.
        """
        prompts = [env.context(agent) for env in envs]
        sampling = self.sampling.get(agent, SamplingParams())
        if call_seed is not None:
            seed = derive_seed(call_seed, step, self.agents.index(agent), CALL_STREAM)
            sampling = dataclasses.replace(sampling, seed=seed)
        policy = self.policies[agent]
        with self.lock:
            t0 = time.perf_counter()
            if isinstance(policy, PrivilegedPolicy):  # a scripted expert: its problems
                gens = policy.generate_privileged(prompts, [env.problem for env in envs], sampling)
            else:
                gens = policy.generate(prompts, sampling)
            seconds = time.perf_counter() - t0
        return Call(prompts, checked_generations(gens, len(prompts), agent), seconds)


@dataclass
class Tally:
    """What a rollout's policy calls generated (every message counts, trained on or not)."""

    steps: int = 0
    generated: int = 0
    chars: int = 0
    tokens: int = 0
    policy_s: float = 0.0
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, agent: str, call: Call) -> None:
        self.calls[agent] += 1
        self.policy_s += call.seconds
        self.generated += len(call.generations)
        self.chars += sum(len(g.text) for g in call.generations)
        self.tokens += sum(len(g.token_ids) for g in call.generations)

    def stats(self, envs: int, start: float) -> RolloutStats:
        """The rollout's stats: ``envs`` environments, ``steps`` steps, timed from ``start``."""
        return RolloutStats(
            envs=envs,
            steps=self.steps,
            policy_calls=dict(self.calls),
            messages=self.generated,
            chars_generated=self.chars,
            tokens_generated=self.tokens,
            wall_s=time.perf_counter() - start,
            policy_s=self.policy_s,
        )


OnMessage = Callable[[int, str, Generation], None]
"""Called with each message before it is played: its environment's index in the batch, its
prompt and its generation."""


def play_lockstep(
    envs: Sequence[TeamEnv],
    seats: Seats,
    call_seed: int | None,
    tally: Tally | None = None,
    *,
    on_message: OnMessage | None = None,
    on_step: Callable[[int], None] | None = None,
    steps: int | None = None,
    first_step: int = 0,
    until: Callable[[TeamEnv], bool] | None = None,
) -> int:
    """Plays the unfinished episodes of ``envs`` in lockstep until each is over: at each step,
    one :meth:`Seats.call` per acting agent over its episodes (seeded by ``call_seed`` and the
    step, counted from ``first_step``), each message then played.

    Args:
        tally: counts the calls and what they generated.
        on_message: sees every message before it is played (the records of a batch).
        on_step: called after each step with the number of episodes that step ended.
        steps: play at most this many steps.
        until: an episode stops being played once ``until(env)`` is true (a served
            environment's caller's turn).

    Returns:
        The steps played.
    """

    def playing(i: int) -> bool:
        return not envs[i].episode_over and not (until is not None and until(envs[i]))

    active = [i for i in range(len(envs)) if playing(i)]
    played = 0
    while active and (steps is None or played < steps):
        by_agent: dict[str, list[int]] = defaultdict(list)
        for i in active:
            by_agent[envs[i].agent_selection].append(i)
        for agent, idxs in by_agent.items():
            call = seats.call(agent, [envs[i] for i in idxs], call_seed, first_step + played)
            if tally is not None:
                tally.add(agent, call)
            for i, prompt, gen in zip(idxs, call.prompts, call.generations):
                if on_message is not None:
                    on_message(i, prompt, gen)
                envs[i].step(gen.text)
        played += 1
        still = [i for i in active if playing(i)]
        if on_step is not None:
            on_step(sum(1 for i in active if envs[i].episode_over))
        active = still
    return played


def checked_generations(gens: object, expected: int, agent: str) -> list[Generation]:
    """A policy's answer as one :class:`~teamtr_core.policy.Generation` per prompt.

    Raises:
        PolicyError: not a sequence of ``expected`` generations or strings.
    """
    if not isinstance(gens, Sequence) or len(gens) != expected:
        got = len(gens) if isinstance(gens, Sequence) else type(gens).__name__
        raise PolicyError(
            f"The policy of agent {agent!r} returned {got} generations for {expected} prompts; "
            "generate() must return exactly one Generation (or str) per prompt, in order."
        )
    out = []
    for g in gens:
        if isinstance(g, Generation):
            out.append(g)
        elif isinstance(g, str):
            out.append(Generation(g))
        else:
            raise PolicyError(
                f"The policy of agent {agent!r} returned a {type(g).__name__}; expected a "
                "Generation or a str per prompt."
            )
    return out
