"""Tree-structured sampling (AT-GRPO's, arXiv 2510.11062): at every turn of an episode, the acting
agent writes ``width`` candidate messages for the same context; each candidate is scored by
finishing its episode under the current team; the best candidate's branch is the episode's main
path, and the next turn branches from it.

The result is an ordinary :class:`~teamtr_env.rollout.RolloutBatch` whose groups are the tree's
nodes: a node (a problem and a turn of its main path) holds ``width`` episodes, one per candidate
(the main path so far, the candidate, and the team's continuation), so group advantages compare
the candidates of one agent at one turn. ``batch.messages`` holds the candidates alone (one per
episode, the messages a learner trains on); the continuations are played, counted in the stats
and kept in the episodes' transcripts, but are not training messages. A main path that ends
(the task says done, or the turn limit) ends its problem's tree.

PettingLLMs scores a candidate by the environment's reward right after its step (its environments
report a reward at every turn). A teamtr task rewards the team when the episode ends, so here a
candidate is scored by one continuation to the end: a one-sample estimate of its value under the
current team (``select`` says how an episode scores; default: its team reward).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from tasks.base import Problem
from teamtr_core.errors import ConfigError
from teamtr_core.policy import Generation
from teamtr_core.seeds import derive_seed
from teamtr_env.env import TeamEnv
from teamtr_env.rollout import (
    EpisodeRecord,
    MessageRecord,
    RolloutBatch,
    RolloutStats,
    episode_record,
    message_record,
)


class TreeRunner(Protocol):
    """What a tree rollout uses of its runner (:class:`~teamtr_env.runners.local.Runner`): its
    environment factory and pool, and its seeded policy calls."""

    env_fn: Callable[[], TeamEnv]
    _pool: list[TeamEnv]

    def _generate(
        self, agent: str, envs: Sequence[TeamEnv], call_seed: int, step: int
    ) -> tuple[list[str], list[Generation], float]: ...


TREE_STREAM = 15_485_863
"""Seeds of a tree rollout's policy calls: ``derive_seed(seed, TREE_STREAM, depth, phase)``."""

Select = Callable[[EpisodeRecord, str], float]
"""How a candidate's episode scores for the agent that wrote it (the best one continues)."""


def team_reward(episode: EpisodeRecord, agent: str) -> float:
    """The default :data:`Select`: the episode's team reward."""
    return float(episode.reward)


def play_tree(
    runner: TreeRunner,
    problems: Sequence[Problem],
    width: int,
    seed: int,
    select: Select = team_reward,
) -> RolloutBatch:
    """Tree-structured sampling of ``problems`` (see the module text); group ``g`` of the batch
    is the ``g``-th node, nodes ordered by depth, then by problem.

    Raises:
        ConfigError: ``width < 2`` (a node needs candidates to compare) or no problems.
    """
    errors = []
    if width < 2:
        errors.append(f"tree width must be >= 2 (candidates per turn to compare), got {width}")
    if not problems:
        errors.append("no problems to roll out")
    if errors:
        raise ConfigError("tree rollout", errors)
    start = time.perf_counter()
    paths: list[list[str]] = [[] for _ in problems]  # each problem's main path, as messages
    live = list(range(len(problems)))
    messages: list[MessageRecord] = []
    episodes: list[EpisodeRecord] = []
    tally = _Tally()
    while live:
        envs = _branch(runner, problems, paths, live, width, seed)
        first = len(episodes)  # the nodes of this depth: groups first // width, ...
        acting = [env.agent_selection for env in envs]
        call_seed = derive_seed(seed, TREE_STREAM, tally.steps, 0)
        messages += _candidates(runner, envs, first, width, call_seed, tally)
        ended_here = [env.episode_over for env in envs]  # the candidate ended its episode
        _finish(runner, envs, derive_seed(seed, TREE_STREAM, tally.steps, 1), tally)
        episodes += [episode_record(first + i, (first + i) // width, e) for i, e in enumerate(envs)]
        still = []  # the best candidate of each node continues its problem's main path
        for j, p in enumerate(live):
            node = range(j * width, (j + 1) * width)
            best = node[int(np.argmax([select(episodes[first + i], acting[i]) for i in node]))]
            paths[p].append(messages[first + best].text)
            if not ended_here[best]:
                still.append(p)
        tally.steps += 1
        live = still
    return RolloutBatch(tuple(messages), tuple(episodes), width, tally.stats(len(episodes), start))


@dataclass
class _Tally:
    """What a tree rollout generated: every candidate and continuation counts."""

    steps: int = 0
    generated: int = 0
    chars: int = 0
    tokens: int = 0
    policy_s: float = 0.0
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, agent: str, gens: Sequence[Generation], seconds: float) -> None:
        self.calls[agent] += 1
        self.policy_s += seconds
        self.generated += len(gens)
        self.chars += sum(len(g.text) for g in gens)
        self.tokens += sum(len(g.token_ids) for g in gens)

    def stats(self, envs: int, start: float) -> RolloutStats:
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


def _candidates(
    runner: TreeRunner,
    envs: list[TeamEnv],
    first: int,
    width: int,
    call_seed: int,
    tally: _Tally,
) -> list[MessageRecord]:
    """Every environment's candidate (episode ``first + i``, node ``(first + i) // width``): one
    policy call per acting agent over every node of the depth, each candidate then stepped. The
    records are in episode order."""
    by_agent: dict[str, list[int]] = defaultdict(list)
    for i, env in enumerate(envs):
        by_agent[env.agent_selection].append(i)
    records: list[MessageRecord | None] = [None] * len(envs)
    for agent, idxs in by_agent.items():
        prompts, gens, seconds = runner._generate(agent, [envs[i] for i in idxs], call_seed, 0)
        tally.add(agent, gens, seconds)
        for i, prompt, gen in zip(idxs, prompts, gens):
            records[i] = message_record(first + i, (first + i) // width, envs[i], prompt, gen)
            envs[i].step(gen.text)
    return [r for r in records if r is not None]


def _branch(
    runner: TreeRunner,
    problems: Sequence[Problem],
    paths: list[list[str]],
    live: list[int],
    width: int,
    seed: int,
) -> list[TeamEnv]:
    """``width`` environments per live problem, each reset with the problem's seed and replayed
    along its main path: every copy of a node is in the same state."""
    n = len(live) * width
    while len(runner._pool) < n:
        runner._pool.append(runner.env_fn())
    envs = runner._pool[:n]
    for i, env in enumerate(envs):
        p = live[i // width]
        env.reset(seed=derive_seed(seed, p), options={"problem": problems[p]})
        for text in paths[p]:
            env.step(text)
    return envs


def _finish(runner: TreeRunner, envs: list[TeamEnv], call_seed: int, tally: _Tally) -> None:
    """Plays every unfinished episode of ``envs`` to its end under the current team, in
    lockstep (one policy call per agent per step); its messages are not training messages."""
    active = [i for i, env in enumerate(envs) if not env.episode_over]
    step = 0
    while active:
        by_agent: dict[str, list[int]] = defaultdict(list)
        for i in active:
            by_agent[envs[i].agent_selection].append(i)
        for agent, idxs in by_agent.items():
            _, gens, seconds = runner._generate(agent, [envs[i] for i in idxs], call_seed, step)
            tally.add(agent, gens, seconds)
            for i, gen in zip(idxs, gens):
                envs[i].step(gen.text)
        step += 1
        active = [i for i in active if not envs[i].episode_over]
