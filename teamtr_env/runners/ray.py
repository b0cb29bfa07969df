"""Rollouts on Ray: the :class:`~teamtr_env.runners.local.Runner` interface, played by Ray actors.

``RayRunner(env_fn, policies, sampling, workers=N)`` starts N rollout workers (Ray actors). Each
owns its environments and a replica of every agent's policy (shipped once through the object
store), and plays one contiguous block of the problems of every :meth:`RayRunner.rollout`; the
blocks merge into one :class:`~teamtr_env.rollout.RolloutBatch` in problem order. The records are
exactly those of the local ``Runner.rollout(problems, group_size, seed, shards=N)`` (tested):
environments are seeded by their episode's index in the whole batch and each block's policy calls
by the block.

**Weight sync.** A trainer calls :meth:`RayRunner.sync` after every accepted update; the new state
dict goes into the object store once, and every worker loads it before its next block. Workers
report the version of each agent they played, so :attr:`RayRunner.last_versions` can be checked
against the trainer's (TeamTR's rollouts for update i come from the team after update i - 1).

**Faults.** A worker that dies mid-rollout is replaced and its block is played again, from its
seeds, so nothing is lost or counted twice. A block that fails ``max_retries + 1`` times stops
the rollout with the ids of its problems.

``ray`` is an optional dependency (``pip install -e ".[ray]"``); Ray starts locally when no
address is given. (This module is ``teamtr_env.runners.ray``; with absolute imports, ``import
ray`` in it is always the Ray library.)
"""

from __future__ import annotations

import copy
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from tasks.base import Problem
from teamtr_core.errors import ConfigError, TeamTRError
from teamtr_core.policy import engine_syncs, syncs_since
from teamtr_env.rollout import RolloutBatch
from teamtr_env.runners.local import (
    PolicyMap,
    Runner,
    SamplingMap,
    check_rollout,
    merge_batches,
    shard_plan,
)
from teamtr_env.runners.tree import Tree

log = logging.getLogger(__name__)


class RolloutFailed(TeamTRError):
    """A block of problems failed on every retry (its problem ids and the last error)."""


def ray_module() -> Any:
    """``ray``, or a clear error naming the extra to install."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(
            "ray", ['the Ray backend needs ray: pip install -e ".[ray]" (or pip install ray)']
        ) from exc
    return ray


def init_ray(address: str | None = None) -> Any:
    """Connects to the Ray cluster at ``address`` ("auto" finds a running one), or starts a local
    Ray with this machine's CPUs and no dashboard; a running connection is reused."""
    ray = ray_module()
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
    return ray


def short_of_resources(
    ray: Any, count: int, num_cpus: float, num_gpus: float, what: str = "actors"
) -> list[str]:
    """What ``count`` actors asking ``num_cpus`` and ``num_gpus`` each need beyond the
    cluster's free resources (empty: they fit), waiting up to 10 s for the resources of actors
    just killed to come back (not when the whole cluster is too small). Actors that do not fit
    would wait for resources forever."""
    asks = [
        (name, key, count * need)
        for name, key, need in (("CPUs", "CPU", num_cpus), ("GPUs", "GPU", num_gpus))
        if need
    ]
    total = ray.cluster_resources()
    deadline = time.monotonic() + 10.0
    while True:
        free = ray.available_resources()
        short = [
            f"{count} {what} x {amount / count:g} {name} = {amount:g} {name}, but the Ray "
            f"cluster has {free.get(key, 0):g} free (fewer {what}, or a bigger cluster)"
            for name, key, amount in asks
            if amount > free.get(key, 0) + 1e-9
        ]
        never = any(amount > total.get(key, 0) + 1e-9 for _, key, amount in asks)
        if not short or never or time.monotonic() > deadline:
            return short  # what the whole cluster cannot hold is refused without waiting
        time.sleep(0.2)


TRAIN_ENV = "train"  # the key of the environments a RayRunner was made with


class _Worker:
    """A Ray actor's state: the team's policies (sent, or built from a team builder), a local
    runner per environment it plays (training, held-out, validation) and the weight versions
    it has loaded."""

    def __init__(self, env_fn: Callable[[], Any], policies: Any, sampling: Any) -> None:
        try:  # one torch thread per worker: the workers share the machine's cores
            import torch

            torch.set_num_threads(1)
        except ImportError:
            pass
        if isinstance(policies, _Build):
            policies = policies.team()
        self.sampling = sampling
        self.runner = Runner(env_fn, policies, sampling, progress=False)
        self.runners: dict[str, Runner] = {TRAIN_ENV: self.runner}
        self.versions: dict[str, int] = {}

    def play(
        self,
        problems: Sequence[Problem],
        group_size: int,
        seed: int,
        first_group: int,
        call_seed: int,
        weights: Mapping[str, tuple[int, Any]],
        env: tuple[str, list[Any]] = (TRAIN_ENV, []),
    ) -> tuple[RolloutBatch, dict[str, int], float, dict[str, float] | None]:
        """Plays a block (after loading the weights whose version changed); returns the batch,
        the weight versions played, the load's seconds and the weight syncs into the worker's
        rollout engines during the block (``None`` without engines)."""
        import ray

        before = engine_syncs(self.runner.policies.values())
        t0 = time.perf_counter()
        for agent, (version, ref) in weights.items():
            if self.versions.get(agent) != version:
                cast(Any, self.runner.policies[agent]).load_state_dict(ray.get(ref))
                self.versions[agent] = version
        sync_s = time.perf_counter() - t0
        key, env_ref = env
        if key not in self.runners:  # another split's environments, the same policies
            env_fn = ray.get(env_ref[0])
            self.runners[key] = Runner(env_fn, self.runner.policies, self.sampling, progress=False)
        batch = self.runners[key].play_shard(
            problems, group_size, seed, first_group=first_group, call_seed=call_seed
        )
        made = syncs_since(before, engine_syncs(self.runner.policies.values()))
        return batch, dict(self.versions), sync_s, made


class _Build:
    """Tells a worker to build the team itself (``RayRunner(team=...)``)."""

    def __init__(self, team: Callable[[], Mapping[str, Any]]) -> None:
        self.team = team


class RayRunner(Runner):
    """A :class:`~teamtr_env.runners.local.Runner` whose rollouts are played by Ray actors.

    Args:
        env_fn, policies, sampling, progress, description: as for ``Runner`` (``env_fn`` and the
            policies are pickled to the workers once).
        workers: rollout actors; every rollout is split into this many blocks.
        address: a Ray cluster to join (``None``: start a local Ray, or reuse a connection).
        num_cpus, num_gpus: the resources each worker asks Ray for (put vLLM or HF-on-GPU
            workers on GPUs with ``num_gpus=1``).
        max_retries: how many times a failed block is played again (on a new worker when its
            worker died) before the rollout stops with :class:`RolloutFailed`.
        team: a picklable builder of every agent's policy (``trainers.run.team_eval.TeamSource``):
            each worker builds its replicas with it instead of receiving ``policies``, which
            then may be stand-ins (an agent actor's :class:`~trainers.placement.updaters.ActorPolicy`).

    Raises:
        ConfigError: ray is not installed, or a setting is out of range.
    """

    def __init__(
        self,
        env_fn: Callable[[], Any],
        policies: PolicyMap,
        sampling: SamplingMap | None = None,
        *,
        workers: int = 2,
        address: str | None = None,
        num_cpus: float = 1.0,
        num_gpus: float = 0.0,
        max_retries: int = 2,
        progress: bool | None = None,
        description: str = "rollout",
        team: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        errors = []
        if workers < 1:
            errors.append(f"workers must be >= 1, got {workers}")
        if num_cpus < 0 or num_gpus < 0 or max_retries < 0:
            errors.append("num_cpus, num_gpus and max_retries must be >= 0")
        if errors:
            raise ConfigError("RayRunner", errors)
        super().__init__(env_fn, policies, sampling, progress=progress, description=description)
        self.ray = init_ray(address)
        short = self._short_of_resources(workers, num_cpus, num_gpus)
        if short:  # the actors would wait for resources forever
            raise ConfigError("RayRunner", short)
        self.workers = workers
        self.max_retries = max_retries
        self._actor_class = self.ray.remote(num_cpus=num_cpus, num_gpus=num_gpus)(_Worker)
        # The policies (or the builder) travel once, as one object; every worker (and a
        # replacement) reads it.
        self._init_args = (
            self.ray.put(env_fn),
            self.ray.put(self.policies if team is None else _Build(team)),
            self.ray.put(self.sampling),
        )
        self._env: tuple[str, list[Any]] = (TRAIN_ENV, [])
        # for_env's splits by their factory (kept alive here): one key, one put, and one set of
        # environments per worker, however many evaluations use the split.
        self._splits: dict[int, tuple[Callable[[], Any], tuple[str, list[Any]]]] = {}
        self._actors = [self._new_actor() for _ in range(workers)]
        self._weights: dict[str, tuple[int, Any]] = {}
        self.last_versions: dict[str, int] = {}
        self.restarts = 0
        self.timing: dict[str, float] = {"sync_s": 0.0, "put_s": 0.0}
        # the weight syncs into the workers' rollout engines (summed over workers and blocks;
        # shared with the for_env views, as the workers are)
        self._engine_syncs: dict[str, float] = {}

    def _short_of_resources(self, workers: int, num_cpus: float, num_gpus: float) -> list[str]:
        return short_of_resources(self.ray, workers, num_cpus, num_gpus, "workers")

    def _new_actor(self) -> Any:
        return self._actor_class.remote(*self._init_args)

    def for_env(self, env_fn: Callable[[], Any], description: str = "rollout") -> RayRunner:
        """A runner of the same workers and weights on other environments (a held-out or
        validation split): it shares this runner's workers, their replicas and every weight
        sync, and each worker builds that split's environments once (the same ``env_fn`` is
        the same split in every later call)."""
        view = copy.copy(self)
        Runner.__init__(view, env_fn, self.policies, self.sampling, self.progress, description)
        known = self._splits.get(id(env_fn))
        if known is None or known[0] is not env_fn:  # a split the workers have not seen
            known = (env_fn, (f"env-{len(self._splits) + 1}", [self.ray.put(env_fn)]))
            self._splits[id(env_fn)] = known
        view._env = known[1]
        view.last_versions = {}
        return view

    def sync(self, agent: str, policy: Any, version: int) -> None:
        """Publishes ``agent``'s new weights (version ``version``) to every worker: one copy in
        the object store, loaded by each worker before its next block."""
        t0 = time.perf_counter()
        state = {k: v.detach().to("cpu") for k, v in policy.state_dict().items()}
        self._weights[agent] = (version, self.ray.put(state))
        self.timing["put_s"] += time.perf_counter() - t0

    def sync_ref(self, agent: str, ref: Any, version: int) -> None:
        """Publishes weights that are in the object store already (a Ray agent actor's
        state dict): the workers load them from there, and the driver never holds them."""
        self._weights[agent] = (version, ref)

    def rollout(
        self,
        problems: Sequence[Problem],
        group_size: int = 1,
        seed: int = 0,
        *,
        shards: int | None = None,
        strategy: Tree | None = None,
    ) -> RolloutBatch:
        """Plays the rollout on the workers, one block each (``shards``: default ``workers``),
        and merges the blocks; see the module docstring.

        Raises:
            ConfigError: a ``strategy`` (the workers play plain batches only: a tree's
                branches replay one main path, which is the local runner's).
        """
        if strategy is not None:
            raise ConfigError(
                "runner.backend",
                [
                    f"rollout workers play plain batches, not {type(strategy).__name__} "
                    "rollouts: use runner.backend: local"
                ],
            )
        check_rollout(problems, group_size)
        plan = shard_plan(len(problems), shards or self.workers, seed)
        start = time.perf_counter()
        weights = dict(self._weights)
        pending = {
            k: self._submit(k, problems[a:b], group_size, seed, a, call, weights)
            for k, (a, b, call) in enumerate(plan)
        }
        attempts = dict.fromkeys(pending, 0)
        parts: dict[int, RolloutBatch] = {}
        versions: dict[str, set[int]] = {}
        while pending:
            ready, _ = self.ray.wait(list(pending.values()), num_returns=1)
            k = next(key for key, ref in pending.items() if ref == ready[0])
            a, b, call = plan[k]
            try:
                batch, used, sync_s, made = self.ray.get(ready[0])
            except Exception as exc:  # a dead worker, or an error raised while playing
                attempts[k] += 1
                ids = [p.id for p in problems[a:b]]
                if attempts[k] > self.max_retries:
                    cause = getattr(exc, "cause", None) or exc  # a task's own exception
                    raise RolloutFailed(
                        f"the block of problems {ids} failed {attempts[k]} times on Ray "
                        f"({type(cause).__name__}: {cause})"
                    ) from exc
                if isinstance(exc, self.ray.exceptions.RayActorError):
                    worker = k % self.workers
                    log.warning("worker %d died; replacing it and playing its block again", worker)
                    self._actors[worker] = self._new_actor()
                    self.restarts += 1
                pending[k] = self._submit(k, problems[a:b], group_size, seed, a, call, weights)
                continue
            del pending[k]
            parts[k] = batch
            self.timing["sync_s"] += sync_s
            for key, value in (made or {}).items():
                self._engine_syncs[key] = self._engine_syncs.get(key, 0.0) + value
            for agent, version in used.items():
                versions.setdefault(agent, set()).add(version)
        stale = {a: v for a, v in versions.items() if v != {weights[a][0]} and a in weights}
        if stale:  # cannot happen by construction; a replica must never play old weights
            raise RolloutFailed(f"workers played stale weights {stale} (published {weights})")
        self.last_versions = {a: next(iter(v)) for a, v in versions.items()}
        ordered = [parts[k] for k in sorted(parts)]
        if len(ordered) == 1:
            return ordered[0]
        return merge_batches(ordered, group_size, wall_s=time.perf_counter() - start)

    def engine_syncs(self) -> dict[str, float] | None:
        """The weight syncs into the workers' rollout engines so far (``count``, ``tensors``,
        ``bytes``, ``seconds``: summed over workers, including replaced ones, and over this
        runner's :meth:`for_env` views), or ``None`` when no worker has started an engine."""
        return dict(self._engine_syncs) if self._engine_syncs else None

    def _submit(
        self,
        k: int,
        problems: Sequence[Problem],
        group_size: int,
        seed: int,
        first_group: int,
        call_seed: int,
        weights: Mapping[str, tuple[int, Any]],
    ) -> Any:
        actor = self._actors[k % self.workers]
        return actor.play.remote(
            list(problems), group_size, seed, first_group, call_seed, weights, self._env
        )

    def shutdown(self) -> None:
        """Stops the workers (Ray itself keeps running)."""
        for actor in self._actors:
            self.ray.kill(actor)
        self._actors = []
