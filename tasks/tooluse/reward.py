"""tau-bench's reward: the final database must equal the gold one, and every required output must
have been said to the user.

``reward = 1`` iff ``hash(final DB) == hash(DB after replaying the gold actions on a fresh copy)``
and every string of ``outputs`` occurs, lower-cased, in some message to the user that is
lower-cased with commas removed (tau-bench's ``calculate_reward``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tasks.tooluse.db import canonical_hash, copy_db
from tasks.tooluse.tasks_data import Action
from tasks.tooluse.toolbox import ToolBox


@dataclass(frozen=True)
class GoldState:
    """The database the gold actions lead to.

    Attributes:
        hash: canonical hash of that database.
        errors: ``"index name: error"`` for gold actions that failed during the replay (they
            leave the database unchanged, as in tau-bench).
        failed: the indices of those actions.
    """

    hash: str
    errors: tuple[str, ...] = ()
    failed: tuple[int, ...] = ()


def replay_gold(
    base_db: Mapping[str, Any], actions: Sequence[Action], toolbox: ToolBox
) -> GoldState:
    """Replays the gold actions on a fresh copy of ``base_db``."""
    db = copy_db(base_db)
    errors, failed = [], []
    for i, action in enumerate(actions):
        outcome = toolbox.execute(db, action.name, dict(action.kwargs))
        if not outcome.ok:
            errors.append(f"{i} {action.name}: {outcome.text[:200]}")
            failed.append(i)
    return GoldState(canonical_hash(db), tuple(errors), tuple(failed))


def outputs_found(outputs: Sequence[str], messages: Sequence[str]) -> dict[str, bool]:
    """For each required output, whether some message to the user contains it."""
    said = [m.lower().replace(",", "") for m in messages]
    return {out: any(out.lower() in m for m in said) for out in outputs}
