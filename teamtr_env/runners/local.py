"""The local runner: many team episodes in lockstep, one policy call per agent per step
(:func:`~teamtr_env.runners.lockstep.play_lockstep`).

At each step every unfinished episode has exactly one active agent. The runner groups the episodes
by active agent and calls that agent's policy ONCE with all of their contexts, so a step costs at
most one ``generate`` call per agent, however many episodes run. With a round-robin team every
episode has the same active agent, so policy calls equal steps. A rollout strategy plays the
problems another way with the same seats and environments (``strategy=Tree(select)``:
:mod:`teamtr_env.runners.tree`).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tasks.base import EpisodeLimitError, Problem
from tasks.capabilities import EpisodeLimit
from teamtr_core.errors import ConfigError
from teamtr_core.policy import Generation, Policy, SamplingParams
from teamtr_core.seeds import SHARD_STREAM, derive_seed
from teamtr_env.env import TeamEnv
from teamtr_env.rollout import (
    MessageRecord,
    RolloutBatch,
    RolloutStats,
    episode_record,
    message_record,
)
from teamtr_env.runners.limits import blocks_for, episode_limit, learned_limit, refusal_error
from teamtr_env.runners.lockstep import Seats, Tally, play_lockstep
from teamtr_env.runners.tree import Tree

PolicyMap = Policy | Mapping[str, Policy]
SamplingMap = SamplingParams | Mapping[str, SamplingParams]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProblemDraw:
    """What :meth:`Runner.sample_distinct` found: how many distinct problems were asked for and how
    many exist or were found.

    Attributes:
        requested: the number of problems asked for.
        found: the distinct problems returned (``<= requested``).
        source: ``"problem set"`` (a loaded file or list) or ``"generator"`` (the task's ``sample``).
        available: the distinct problems of a loaded set; ``None`` for a generator (unknown).
        draws: generator draws made (0 for a problem set).
        split: the generator task's split label, if it has one.
    """

    requested: int
    found: int
    source: Literal["problem set", "generator"]
    available: int | None = None
    draws: int = 0
    split: str | None = None

    @property
    def shortfall(self) -> bool:
        """Fewer distinct problems than asked for exist (set) or were found (generator)."""
        return self.found < self.requested

    @property
    def message(self) -> str:
        """One line saying what was found, and why it is fewer than asked for when it is."""
        head = f"asked for {self.requested} problems, found {self.found} distinct"
        if not self.shortfall:
            return head
        if self.source == "problem set":
            return (
                f"{head}: the problem set holds only {self.available} distinct problems "
                "(repeating one would not make it an independent problem)"
            )
        split = f" (split {self.split!r})" if self.split else ""
        return (
            f"{head}: the generator{split} gave only {self.found} distinct problems in "
            f"{self.draws} draws, so its problem space is too small for {self.requested} (use a "
            "larger task configuration or ask for fewer problems)"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the report's ``sampling`` field), with the ``shortfall`` message or
        ``None``."""
        return {
            **dataclasses.asdict(self),
            "shortfall": self.message if self.shortfall else None,
        }


def distinct_by_id(problems: Sequence[Problem]) -> list[Problem]:
    """The first problem of every id, in order (a repeated problem is not an independent one)."""
    first: dict[str, Problem] = {}
    for problem in problems:
        first.setdefault(problem.id, problem)
    return list(first.values())


class Runner:
    """Rolls out a team on batches of problems.

    Args:
        env_fn: builds one environment (e.g. ``lambda: teamtr_env.make("teamtr/Arith-v0")``);
            the runner keeps a pool and reuses environments across calls.
        policies: one policy for every agent, or a mapping ``agent -> policy``.
        sampling: sampling parameters for every agent, or a mapping ``agent -> params``.
        progress: show a progress bar; ``None`` shows one when stderr is a terminal.
        description: the progress bar's label.
    """

    def __init__(
        self,
        env_fn: Callable[[], TeamEnv],
        policies: PolicyMap,
        sampling: SamplingMap | None = None,
        progress: bool | None = None,
        description: str = "rollout",
    ) -> None:
        self.env_fn = env_fn
        self._pool: list[TeamEnv] = [env_fn()]
        agents = self._pool[0].possible_agents
        self.agents = list(agents)
        #: Who plays each agent (its policy and sampling) and how it is asked.
        self.seats = Seats(
            self.agents,
            self._per_agent(policies, "policies"),
            self._per_agent(sampling or SamplingParams(), "sampling"),
        )
        self.progress = progress
        self.description = description
        self._warned: set[tuple[int, int]] = set()
        self._learned_limit: EpisodeLimit | None = None  # from a task's refusal (limits.py)

    @property
    def policies(self) -> dict[str, Policy]:
        """Each agent's policy (the seats')."""
        return self.seats.policies

    @property
    def sampling(self) -> dict[str, SamplingParams]:
        """Each agent's sampling parameters (the seats')."""
        return self.seats.sampling

    def environments(self, n: int) -> list[TeamEnv]:
        """``n`` of the runner's environments (its pool, grown as needed; built outside any timed
        window)."""
        while len(self._pool) < n:
            self._pool.append(self.env_fn())
        return self._pool[:n]

    @property
    def env(self) -> TeamEnv:
        """The runner's first environment, for its task, protocol and problem set (do not step
        it: the runner does)."""
        return self._pool[0]

    def _per_agent(self, value: object, what: str) -> dict:
        if not isinstance(value, Mapping):
            return {a: value for a in self.agents}
        missing = [a for a in self.agents if a not in value]
        extra = [k for k in value if k not in self.agents]
        errors = [f"{what}: no entry for agent {a!r}" for a in missing]
        errors += [f"{what}: {k!r} is not an agent of this team {self.agents}" for k in extra]
        if errors:
            raise ConfigError("Runner", errors)
        return dict(value)

    def sample_problems(self, n: int, seed: int = 0, *, distinct: bool = True) -> list[Problem]:
        """Up to ``n`` distinct problems (by id) from the environment's problem set or task
        generator, seeded; see :meth:`sample_distinct`. Fewer than ``n`` exist or were found: the
        list is shorter and a warning is logged (once per runner and size).

        ``distinct=False`` gives exactly ``n`` i.i.d. draws instead (a problem may repeat): for
        training or behaviour-cloning data and throughput measurements, never for evaluation."""
        if not distinct:
            env, rng = self.env, np.random.default_rng(seed)
            if env.problems is not None:
                idx = rng.choice(len(env.problems), size=n, replace=n > len(env.problems))
                return [env.problems[int(i)] for i in idx]
            return [env.task.sample(rng) for _ in range(n)]
        problems, draw = self.sample_distinct(n, seed)
        if draw.shortfall and (n, draw.found) not in self._warned:
            self._warned.add((n, draw.found))
            log.warning("sample_problems: %s", draw.message)
        return problems

    def sample_distinct(
        self, n: int, seed: int = 0, *, in_order: bool = False
    ) -> tuple[list[Problem], ProblemDraw]:
        """Up to ``n`` distinct problems (by id) and a :class:`ProblemDraw` saying how many were
        asked for and found. Never repeats a problem; deterministic given ``seed``.

        - A loaded problem set: ``n`` of its distinct problems without replacement, in a seeded
          random order (``in_order``: its first ``n`` distinct problems in set order); all of them
          when ``n`` exceeds the set.
        - A generator: draws from ``task.sample`` until ``n`` distinct ids, or until ``20 n + 100``
          draws, or until ``10 * found + 100`` draws in a row found nothing new (the problem space
          is exhausted), and returns what was found in order of first appearance.
        """
        if n < 0:
            raise ConfigError("sample_problems", [f"n must be >= 0, got {n}"])
        env = self.env
        rng = np.random.default_rng(seed)
        if env.problems is not None:
            distinct = distinct_by_id(env.problems)
            order = range(len(distinct)) if in_order else rng.permutation(len(distinct))
            chosen = [distinct[int(i)] for i in order][:n]
            info = ProblemDraw(n, len(chosen), "problem set", available=len(distinct))
            return chosen, info
        found: dict[str, Problem] = {}
        draws = stale = 0
        while len(found) < n and draws < 20 * n + 100 and stale < 10 * len(found) + 100:
            problem = env.task.sample(rng)
            draws += 1
            if problem.id in found:
                stale += 1
            else:
                found[problem.id] = problem
                stale = 0
        split = getattr(env.task, "split", None)
        info = ProblemDraw(
            n, len(found), "generator", draws=draws, split=split if isinstance(split, str) else None
        )
        return list(found.values()), info

    def sync(self, agent: str, policy: Any, version: int) -> None:
        """Called by trainers after ``agent``'s policy changed (``version``: its accepted updates).
        The local runner plays the trainer's own policy objects, so there is nothing to send; a
        distributed runner ships the new weights to its workers."""

    def rollout(
        self,
        problems: Sequence[Problem],
        group_size: int = 1,
        seed: int = 0,
        *,
        shards: int = 1,
        strategy: Tree | None = None,
    ) -> RolloutBatch:
        """Plays ``group_size`` episodes of every problem and returns their records; with a
        ``strategy``, the strategy plays them (``Tree(select)``: a tree of ``group_size``
        candidates per turn, :mod:`teamtr_env.runners.tree`).

        Episode ``i`` plays ``problems[i // group_size]``. The same ``seed`` with the same policies
        gives the same batch.

        ``shards > 1`` plays the problems in that many contiguous blocks, one after another, as a
        distributed runner's workers play them (:func:`shard_bounds`): environments are seeded by
        their episode's index in the whole batch, and each block's policy calls by the block
        (block 0 as an unsharded rollout). A policy call samples its whole batch from one seeded
        stream, so the records depend on how episodes are blocked; the same ``seed`` and
        ``shards`` always give the same batch, here or on Ray.

        A task that plays only so many episodes at once (``tasks.SupportsEpisodeLimit``: an
        OpenEnv server's sessions) gets more blocks, each of whole groups; one that refuses an
        episode while the batch starts (``tasks.EpisodeLimitError``) has the episodes started
        ended, and the batch is played again in blocks of as many as had started (a warning says
        so; the runner keeps that limit).
        """
        check_rollout(problems, group_size)
        if shards < 1:
            raise ConfigError("rollout", [f"shards must be >= 1, got {shards}"])
        if strategy is not None:
            return strategy.play(self.environments, self.seats, problems, group_size, seed)
        start = time.perf_counter()
        try:
            parts = self._play_blocks(problems, group_size, seed, shards)
        except EpisodeLimitError as refused:  # its block had made no policy call yet
            self._learned_limit = learned_limit(refused, group_size)
            try:
                parts = self._play_blocks(problems, group_size, seed, shards)
            except EpisodeLimitError as again:
                why = f"refused again in blocks of {self._learned_limit.episodes}: free the server"
                raise refusal_error(again, why) from None
        if len(parts) == 1:
            return parts[0]
        return merge_batches(parts, group_size, wall_s=time.perf_counter() - start)

    def _play_blocks(
        self, problems: Sequence[Problem], group_size: int, seed: int, shards: int
    ) -> list[RolloutBatch]:
        """The rollout's blocks, one after another: ``shards``, or more for the episode limit."""
        task = self.env.task
        limit = episode_limit(task, self._learned_limit)
        blocks = blocks_for(task, len(problems), group_size, shards, limit)
        return [
            self.play_shard(problems[a:b], group_size, seed, first_group=a, call_seed=call)
            for a, b, call in shard_plan(len(problems), blocks, seed)
        ]

    def play_shard(
        self,
        problems: Sequence[Problem],
        group_size: int,
        seed: int,
        *,
        first_group: int = 0,
        call_seed: int | None = None,
    ) -> RolloutBatch:
        """One block of a (possibly sharded) rollout: ``problems`` are groups ``first_group, ...``
        of the whole batch, its environments seeded by their global episode index and its policy
        calls by ``call_seed`` (default ``seed``); records carry global indices."""
        check_rollout(problems, group_size)
        call_seed = seed if call_seed is None else call_seed
        first = first_group * group_size
        n = len(problems) * group_size
        envs = self.environments(n)  # one-time construction, outside the timed window
        start = time.perf_counter()  # wall_s covers resets, the loop and the records
        i = 0
        try:
            for i, env in enumerate(envs):
                env.reset(
                    seed=derive_seed(seed, first + i),
                    options={"problem": problems[i // group_size]},
                )
        except EpisodeLimitError as refused:  # end the episodes started: a server frees them
            for env in envs[:i]:
                env.close()
            refused.started, refused.asked = i, n
            raise
        messages: list[MessageRecord] = []

        def record(i: int, prompt: str, gen: Generation) -> None:
            group = first_group + i // group_size
            messages.append(message_record(first + i, group, envs[i], prompt, gen))

        tally = Tally()
        with self._progress(n) as bar:
            task_id = bar.add_task(self.description, total=n)
            tally.steps = play_lockstep(
                envs, self.seats, call_seed, tally, on_message=record,
                on_step=lambda ended: bar.advance(task_id, ended),
            )  # fmt: skip
        episodes = tuple(
            episode_record(first + i, first_group + i // group_size, env)
            for i, env in enumerate(envs)
        )
        return RolloutBatch(tuple(messages), episodes, group_size, tally.stats(n, start))

    def _progress(self, total: int) -> Progress:
        show = self.progress if self.progress is not None else sys.stderr.isatty()
        return Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("episodes"),
            TimeElapsedColumn(),
            disable=not show,
            transient=True,
        )


def check_rollout(problems: Sequence[Problem], group_size: int) -> None:
    """Raises ``ConfigError`` unless there is a problem and ``group_size >= 1``."""
    if group_size < 1 or not problems:
        raise ConfigError(
            "rollout",
            [f"expected >= 1 problem and group_size >= 1, got {len(problems)} and {group_size}"],
        )


def shard_plan(n_problems: int, shards: int, seed: int) -> list[tuple[int, int, int]]:
    """``(first, end, call_seed)`` of each non-empty block of ``n_problems`` problems split into
    ``shards`` contiguous, nearly equal blocks (sizes differ by at most one). Block
    0's policy calls use ``seed`` itself, so one block is exactly an unsharded rollout."""
    bounds = [round(k * n_problems / shards) for k in range(shards + 1)]
    return [
        (a, b, seed if k == 0 else derive_seed(seed, SHARD_STREAM, k))
        for k, (a, b) in enumerate(itertools.pairwise(bounds))
        if b > a
    ]


def merge_batches(parts: Sequence[RolloutBatch], group_size: int, wall_s: float) -> RolloutBatch:
    """The blocks of a sharded rollout as one batch: episodes in problem order, each block's
    messages after the previous block's; counters summed, ``steps`` the longest block's."""
    calls: dict[str, int] = defaultdict(int)
    for part in parts:
        for agent, count in part.stats.policy_calls.items():
            calls[agent] += count
    stats = RolloutStats(
        envs=sum(p.stats.envs for p in parts),
        steps=max(p.stats.steps for p in parts),
        policy_calls=dict(calls),
        messages=sum(p.stats.messages for p in parts),
        chars_generated=sum(p.stats.chars_generated for p in parts),
        tokens_generated=sum(p.stats.tokens_generated for p in parts),
        wall_s=wall_s,
        policy_s=sum(p.stats.policy_s for p in parts),
    )
    messages = tuple(m for p in parts for m in p.messages)
    episodes = tuple(sorted((e for p in parts for e in p.episodes), key=lambda e: e.episode))
    return RolloutBatch(messages, episodes, group_size, stats)
