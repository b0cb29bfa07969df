"""How many episodes a rollout plays at once, for a task that holds a resource per episode (an
OpenEnv server's session: ``tasks.SupportsEpisodeLimit``, ``tasks.EpisodeLimitError``).

The local runner plays a batch larger than the limit in blocks of whole groups, one block after
another, exactly as ``Runner.rollout(..., shards=N)`` does. A limit comes from the task (its
``episode_limit()``) or from a refusal: a task that refuses to start an episode while the batch
starts says so, the runner ends the episodes it had started and plays the batch again in blocks
of as many as had started (nothing was generated yet, so nothing is lost)."""

from __future__ import annotations

import logging

from tasks.base import EpisodeLimitError, Task
from tasks.capabilities import EpisodeLimit, SupportsEpisodeLimit
from teamtr_core.errors import ConfigError

log = logging.getLogger(__name__)


def episode_limit(task: Task, learned: EpisodeLimit | None) -> EpisodeLimit | None:
    """The smaller of the task's own limit and the one a refusal taught (``None``: no limit)."""
    limits = [learned] if learned is not None else []
    if isinstance(task, SupportsEpisodeLimit) and (own := task.episode_limit()) is not None:
        limits.append(own)
    return min(limits, key=lambda limit: limit.episodes) if limits else None


def blocks_for(
    task: Task, n_problems: int, group_size: int, shards: int, limit: EpisodeLimit | None
) -> int:
    """The blocks to play ``n_problems`` groups of ``group_size`` episodes in: ``shards``, or
    more when ``limit`` holds fewer episodes at once than a block would play.

    Raises:
        ConfigError: ``limit`` holds fewer episodes than one group (a group is played at once).
    """
    if limit is None:
        return shards
    if limit.episodes < group_size:
        raise ConfigError(
            "rollout",
            [
                f"{task.name} plays at most {limit.episodes} episode(s) "
                f"at once ({limit.why}), and the {group_size} episodes of a group (group size, "
                f"--k) are played together: ask for a group size of at most {limit.episodes}, "
                "or raise that limit"
            ],
        )
    per_block = limit.episodes // group_size
    return max(shards, -(-n_problems // per_block))


def learned_limit(refused: EpisodeLimitError, group_size: int) -> EpisodeLimit:
    """The limit a refusal while a batch started teaches: as many episodes as had started.

    Raises:
        ConfigError: fewer had started than a group holds (:func:`refusal_error`).
    """
    started = refused.started or 0
    if started < group_size:
        raise refusal_error(
            refused,
            f"fewer than the {group_size} episodes of a group, which are played together: free "
            f"the server's sessions or raise its capacity, or ask for a group size (--k) of at "
            f"most {max(started, 1)}",
        ) from None
    log.warning(
        "%s. This batch asked for %s episodes at once: playing it in blocks of at most %d.",
        refused.errors[0] if refused.errors else str(refused),
        refused.asked,
        started,
    )
    return EpisodeLimit(started, f"{started} had started when the task refused another")


def refusal_error(refused: EpisodeLimitError, why: str) -> ConfigError:
    """A refusal that smaller blocks cannot get around, said with the task's reason, the number
    of episodes asked for at once, the number that had started, and ``why``."""
    return ConfigError(
        "rollout",
        [
            *refused.errors,
            f"this batch asked for {refused.asked} episodes at once and {refused.started or 0} "
            f"had started when the task refused another; {why}",
        ],
    )
