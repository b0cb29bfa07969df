"""The warm start of a training run: behaviour cloning from the task's scripted expert
(``config.sft``), with one shared clone for same-shaped agents and a cache keyed by everything
that determines the clone (``sft.cache_dir``)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from teamtr_core.policy import TrainablePolicy
from teamtr_core.team import Team
from trainers.config import TrainConfig
from trainers.placement.updaters import ActorPolicy, RayUpdater
from trainers.run import rundir


def warm_start(
    config: TrainConfig,
    env_fn: Callable[[], Any],
    env: Any,
    policies: Mapping[str, Any],
    console: Console,
) -> dict[str, Any]:
    """Behaviour cloning from the task's scripted expert. With ``sft_shared`` one model learns
    every agent's expert messages (in their own contexts) and each agent starts from a copy of it
    (separate parameters from then on): a third of the cost for a three-agent team. Agents
    trained in agent actors (:class:`~trainers.placement.updaters.ActorPolicy`) are cloned there, all
    at once, with the same numbers. A shared policy (``team.shared_policy``) is one model: it
    learns every agent's expert messages, as with ``sft_shared``."""
    from trainers.optim.sft import collect_expert_data

    sft = config.sft
    assert sft is not None
    trainable = {a: p for a, p in policies.items() if isinstance(p, TrainablePolicy)}
    t0 = time.perf_counter()
    cache = behaviour_clone_cache(config)
    if cache is not None and cache.exists():
        try:
            cached = rundir.read_file(cache)
            for agent, policy in trainable.items():
                policy.load_state_dict(cached["states"][agent])
        except Exception as exc:  # truncated, crafted or stale: clone again
            console.print(
                f"behaviour cloning: the cache {cache} is unusable ({exc}); cloning again"
            )
        else:
            console.print(f"behaviour cloning: loaded from the cache {cache}")
            return {**cached["info"], "cached": str(cache)}
    data = collect_expert_data(
        env_fn,
        env.task,
        list(trainable),
        sft.problems,
        error_rate=sft.expert_error_rate,
        seed=sft.seed,
    )
    first = next(iter(trainable))
    # One model per slot learns its agents' expert messages (a role-sharing slot: every agent's);
    # with sft_shared (same-shaped models), one model learns them all and the others copy it.
    slots = [s for s in Team.of(policies).slots if isinstance(s.policy, TrainablePolicy)]
    shared = len(slots) == 1 or (config.sft_shared and _same_shapes([s.policy for s in slots]))
    groups = {first: list(trainable)} if shared else {s.agents[0]: list(s.agents) for s in slots}
    curves = _clone(
        {name: trainable[name] for name in groups},
        {name: [pair for a in agents for pair in data[a]] for name, agents in groups.items()},
        config,
    )
    if shared:
        for slot in slots:
            if first not in slot.agents:
                _copy_weights(trainable[first], slot.policy)
    seconds = time.perf_counter() - t0
    what = "one shared model" if shared else f"{len(trainable)} agents"
    if not shared and len(groups) < len(trainable):
        what = f"{len(groups)} models for {len(trainable)} agents"
    steps = max((len(c) for c in curves.values()), default=0)
    stopped = (
        f" (stopped early at the target accuracy; limit {sft.steps})" if steps < sft.steps else ""
    )
    console.print(f"behaviour cloning: {what} x {steps} steps{stopped} in {seconds:.1f} s")
    info = {
        "seconds": seconds,
        "shared": shared,
        "steps": steps,
        "final_loss": {a: c[-1] if c else None for a, c in curves.items()},
    }
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        states = {a: p.state_dict() for a, p in trainable.items()}
        rundir.write_file(cache, {"states": states, "info": info})
    return info


def behaviour_clone_cache(config: TrainConfig) -> Path | None:
    """Where ``sft.cache_dir`` keeps this run's behaviour-cloned weights (``None``: no cache).

    The key is everything the clone depends on: the task and its options, the model, the team and
    the ``sft`` settings, whose ``sft.seed`` seeds the expert episodes and the minibatches. The
    run's ``seed`` is not in it: the clone does not depend on it, so runs that differ only in their
    seed (a comparison's seeds) share one clone; give them different ``sft.seed`` for different
    starts."""
    if config.sft is None or config.sft.cache_dir is None:
        return None
    key = {
        "task": config.task,
        "task_options": config.task_options,
        "team": dataclasses.asdict(config.team) if config.team is not None else None,
        "tiny_model": dataclasses.asdict(config.tiny_model),
        "sft": {k: v for k, v in dataclasses.asdict(config.sft).items() if k != "cache_dir"},
        "sft_shared": config.sft_shared,
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()
    return Path(config.sft.cache_dir) / f"bc-{digest[:16]}.pt"


def _clone(
    policies: dict[str, Any], data: dict[str, list[tuple[str, str]]], config: TrainConfig
) -> dict[str, list[float]]:
    """:func:`trainers.optim.sft.behaviour_clone`, in the agent actors for agents trained there."""
    from trainers.optim.sft import behaviour_clone, run_clones

    sft = config.sft
    assert sft is not None
    if not any(isinstance(p, ActorPolicy) for p in policies.values()):
        return behaviour_clone(policies, data, sft, progress=config.progress)
    clones = {}
    for index, (agent, policy) in enumerate(policies.items()):
        if not isinstance(policy, ActorPolicy):
            raise TypeError(f"{agent}: a team clones in agent actors or here, not both")
        policy.updater.clone_start(index, data[agent], sft)
        clones[agent] = _ActorClone(policy.updater)
    return run_clones(clones, sft, progress=config.progress)


class _ActorClone:
    """One agent's behaviour cloning in its agent actor (a ``trainers.optim.sft.CloneRunner``)."""

    def __init__(self, updater: RayUpdater) -> None:
        self.updater = updater

    def submit(self, agent: str, sft: Any, first: int, last: int, check: bool) -> Any:
        return self.updater.submit_clone_steps(agent, sft, first, last, check)

    def wait(self, handle: Any) -> tuple[list[float], float | None]:
        result: tuple[list[float], float | None] = self.updater.result(handle)
        return result


def _copy_weights(source: Any, target: Any) -> None:
    """``target`` starts from ``source``'s weights (between agent actors through the object
    store, never the driver)."""
    if isinstance(source, ActorPolicy) and isinstance(target, ActorPolicy):
        target.updater.load_weights(source.updater.weights_ref())
    else:
        target.load_state_dict(source.state_dict())


def _same_shapes(policies: list[Any]) -> bool:
    shapes = [_shapes(p) for p in policies]
    return all(s == shapes[0] for s in shapes)


def _shapes(policy: Any) -> dict[str, tuple[int, ...]]:
    if isinstance(policy, ActorPolicy):  # asked of the actor: its weights stay there
        return policy.updater.shapes()
    return {k: tuple(v.shape) for k, v in policy.state_dict().items()}
