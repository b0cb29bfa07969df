"""The runners: where a team's rollouts are played.

* :mod:`teamtr_env.runners.local`: :class:`Runner`, many episodes in lockstep in this process, one
  policy call per agent per step; the shard helpers (:func:`shard_plan`, :func:`merge_batches`)
  that make a sharded rollout reproducible (seeds: :mod:`teamtr_core.seeds`);
* :mod:`teamtr_env.runners.lockstep`: :func:`play_lockstep`, the one loop every rollout is
  (the local runner's, a tree's, a served environment's seats), and :class:`Seats`, how a policy
  is asked;
* :mod:`teamtr_env.runners.tree`: :class:`Tree`, the tree rollout strategy
  (``runner.rollout(..., strategy=Tree(select))``);
* :mod:`teamtr_env.runners.ray`: :class:`RayRunner`, the same rollouts in blocks on Ray actors
  (the ``ray`` extra; Ray itself is imported only when a ``RayRunner`` starts);
* :func:`make_runner` (here): the one place that picks a backend, for the CLI and the trainers.

The modules import one way (``ray`` -> ``local`` -> ``tree`` -> ``lockstep``; this package
imports them), which import-linter
checks in ``make lint``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from teamtr_core.errors import ConfigError
from teamtr_env.env import TeamEnv
from teamtr_env.runners.local import (
    PolicyMap,
    ProblemDraw,
    Runner,
    SamplingMap,
    check_rollout,
    distinct_by_id,
    merge_batches,
    shard_plan,
)
from teamtr_env.runners.lockstep import Seats, play_lockstep
from teamtr_env.runners.ray import RayRunner, RolloutFailed
from teamtr_env.runners.tree import Tree

BACKENDS = ("local", "ray")
RAY_OPTIONS = ("workers", "address", "num_cpus", "num_gpus", "max_retries")
"""The options of :class:`RayRunner` that :func:`make_runner` passes on (and reads from a
``settings`` section)."""


def make_runner(
    env_fn: Callable[[], TeamEnv],
    policies: PolicyMap,
    sampling: SamplingMap | None = None,
    *,
    backend: str | None = None,
    settings: Any = None,
    progress: bool | None = None,
    team: Callable[[], Any] | None = None,
    **ray_options: Any,
) -> Runner:
    """The local :class:`Runner`, or for the ``"ray"`` backend a :class:`RayRunner`.

    Args:
        env_fn, policies, sampling, progress: as for :class:`Runner`.
        backend: ``"local"`` or ``"ray"``; default ``settings.backend``, else ``"local"``.
        settings: a runner section, such as a training config's ``runner``: its attributes
            ``backend`` and those of :data:`RAY_OPTIONS` that it has are the defaults here.
        team: a Ray runner's workers build their replicas with this picklable builder of every
            agent's policy instead of receiving ``policies`` (see :class:`RayRunner`); the local
            runner plays ``policies``.
        **ray_options: :class:`RayRunner`'s options (``workers``, ``address``, ``num_cpus``,
            ``num_gpus``, ``max_retries``), over those of ``settings``; the local runner has no
            use for them.

    Raises:
        ConfigError: an unknown backend or option, or a ``RayRunner`` that cannot start (ray not
            installed, a setting out of range, too few resources).
    """
    unknown = sorted(set(ray_options) - set(RAY_OPTIONS))
    chosen = backend if backend is not None else getattr(settings, "backend", "local")
    errors = [f"unknown option {k!r}; expected one of {list(RAY_OPTIONS)}" for k in unknown]
    if chosen not in BACKENDS:
        errors.append(f"backend must be one of {list(BACKENDS)}, got {chosen!r}")
    if errors:
        raise ConfigError("runner", errors)
    if chosen == "local":
        return Runner(env_fn, policies, sampling, progress=progress)
    options = {k: getattr(settings, k) for k in RAY_OPTIONS if hasattr(settings, k)}
    options.update(ray_options)
    return RayRunner(env_fn, policies, sampling, progress=progress, team=team, **options)


__all__ = [
    "BACKENDS",
    "RAY_OPTIONS",
    "PolicyMap",
    "ProblemDraw",
    "RayRunner",
    "RolloutFailed",
    "Runner",
    "SamplingMap",
    "Seats",
    "Tree",
    "check_rollout",
    "distinct_by_id",
    "make_runner",
    "merge_batches",
    "play_lockstep",
    "shard_plan",
]
