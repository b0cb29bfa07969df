"""What ``index`` an agent's update in a stage may have: its 0-based position in the order the
learner runs the stage's updates (:class:`trainers.learners.base.Learner`), checked by
:meth:`trainers.learners.stage.Stage.update`."""

from __future__ import annotations

import numbers


def update_index_problem(index: int, n: int, previous: int) -> str | None:
    """Why ``index`` cannot be the ``index`` of the next update of a stage of ``n`` updates whose
    previous update had index ``previous`` (-1: none yet); ``None`` when it can. An index is the
    update's 0-based position in the stage's run order, so it stays in ``0..n-1`` and grows from
    one update to the next."""
    fix = (
        "pass index=i for the i-th update the learner runs in this stage (0-based, in the order "
        "it runs them; docs/adding-a-trainer.md#the-update-index)"
    )
    # a learner may pass anything: a NumPy integer is an index, a bool or a float is not
    if isinstance(index, bool) or not isinstance(index, numbers.Integral) or not 0 <= index < n:
        return (
            f"expected the update's position in the stage's run order, an integer in "
            f"0..{n - 1} (the stage updates {n} agent(s)), got {index!r}; {fix}"
        )
    if index <= previous:
        seen = "the same index again" if index == previous else f"{index}"
        return (
            f"expected an index above the previous update's ({previous}): positions in the run "
            f"order grow from one update to the next, got {seen}; {fix}"
        )
    return None
