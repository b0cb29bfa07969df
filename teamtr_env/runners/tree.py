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

A tree is a rollout strategy: ``runner.rollout(problems, width, seed, strategy=Tree(select))``
(the local runner's). Its candidates and continuations are played by the one lockstep loop
(:func:`~teamtr_env.runners.lockstep.play_lockstep`) with the runner's seats.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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
    episode_record,
    message_record,
)
from teamtr_env.runners.lockstep import Seats, Tally, play_lockstep

TREE_STREAM = 15_485_863
"""Seeds of a tree rollout's policy calls: ``derive_seed(seed, TREE_STREAM, depth, phase)``."""

Select = Callable[[EpisodeRecord, str], float]
"""How a candidate's episode scores for the agent that wrote it (the best one continues)."""

Environments = Callable[[int], list[TeamEnv]]
"""``n`` environments to play in (a runner's pool, grown as needed)."""


def team_reward(episode: EpisodeRecord, agent: str) -> float:
    """The default :data:`Select`: the episode's team reward."""
    return float(episode.reward)


@dataclass(frozen=True)
class Tree:
    """The tree rollout strategy (see the module text): ``runner.rollout(problems, width, seed,
    strategy=Tree(select))``; ``select`` scores a candidate's episode for its agent."""

    select: Select = team_reward

    def play(
        self,
        environments: Environments,
        seats: Seats,
        problems: Sequence[Problem],
        width: int,
        seed: int,
    ) -> RolloutBatch:
        """The tree of ``problems`` (:func:`play_tree`)."""
        return play_tree(environments, seats, problems, width, seed, self.select)


def play_tree(
    environments: Environments,
    seats: Seats,
    problems: Sequence[Problem],
    width: int,
    seed: int,
    select: Select = team_reward,
) -> RolloutBatch:
    """Tree-structured sampling of ``problems`` (see the module text) in ``environments``, the
    agents played by ``seats``; group ``g`` of the batch is the ``g``-th node, nodes ordered by
    depth, then by problem.

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
    tally = Tally()
    while live:
        envs = _branch(environments, problems, paths, live, width, seed)
        first = len(episodes)  # the nodes of this depth: groups first // width, ...
        acting = [env.agent_selection for env in envs]
        call_seed = derive_seed(seed, TREE_STREAM, tally.steps, 0)
        messages += _candidates(envs, seats, first, width, call_seed, tally)
        ended_here = [env.episode_over for env in envs]  # the candidate ended its episode
        # every candidate finished under the current team (not training messages)
        play_lockstep(envs, seats, derive_seed(seed, TREE_STREAM, tally.steps, 1), tally)
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


def _candidates(
    envs: list[TeamEnv], seats: Seats, first: int, width: int, call_seed: int, tally: Tally
) -> list[MessageRecord]:
    """Every environment's candidate (episode ``first + i``, node ``(first + i) // width``): one
    lockstep step (a policy call per acting agent over every node of the depth). The records
    are in episode order."""
    records: list[MessageRecord | None] = [None] * len(envs)

    def record(i: int, prompt: str, gen: Generation) -> None:
        records[i] = message_record(first + i, (first + i) // width, envs[i], prompt, gen)

    play_lockstep(envs, seats, call_seed, tally, on_message=record, steps=1)
    return [r for r in records if r is not None]


def _branch(
    environments: Environments,
    problems: Sequence[Problem],
    paths: list[list[str]],
    live: list[int],
    width: int,
    seed: int,
) -> list[TeamEnv]:
    """``width`` environments per live problem, each reset with the problem's seed and replayed
    along its main path: every copy of a node is in the same state."""
    envs = environments(len(live) * width)
    for i, env in enumerate(envs):
        p = live[i // width]
        env.reset(seed=derive_seed(seed, p), options={"problem": problems[p]})
        for text in paths[p]:
            env.step(text)
    return envs
