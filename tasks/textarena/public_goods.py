"""The public goods game (``textarena/PublicGoods-v0``): the team outcome and a scripted player.

**Reward.** The team's total payoff, the sum of every player's total score over the rounds, divided
by its maximum, the payoff when every player contributes its whole endowment in every round
(``rounds * players * endowment * multiplication_factor``). TextArena's own ``close()`` ranks
the players against each other (the top scorer wins), a competitive reading that teamtr does not
use: the team is the players together. Keeping everything gives ``1 / multiplication_factor`` of
the maximum (2/3 at the default 1.5).

**Scripted player.** In a conversation turn it proposes that everyone contribute everything
(``{All give all.}``: the braces hold the public part); in a decision turn it contributes its
whole endowment (``[20]``). A wrong move (``make_error``) free-rides: it says it keeps its tokens
and contributes nothing. Its messages are short, so that a tiny model can clone them.

**Options.** ``num_rounds``, ``communication_turns`` and ``endowment`` are integers of at least
1 (TextArena holds one conversation turn a round even at 0, and nothing is at stake with no
endowment); ``multiplication_factor`` is a finite number above 1 (at or below 1, keeping
everything pays the maximum, and a team of free riders would count as solved).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from tasks.base import Problem
from tasks.textarena.options import integer, number_above

METRICS = ("team_payoff",)
"""The score details an evaluation reports the mean of."""

_DECISION = "Decision phase"
_NEW_ROUND = "--- Starting Round"
_ENDOWMENT = re.compile(r"you receive (\d+) tokens")


def score(env: Any, problem: Problem) -> tuple[float, dict[str, Any]]:
    """The team's total payoff / its maximum, with each player's total."""
    state = env.state.game_state
    totals = {int(p): float(s) for p, s in state["total_scores"].items()}
    best = state["num_rounds"] * len(totals) * state["endowment"] * state["multiplication_factor"]
    payoff = sum(totals.values())
    details = {
        "team_payoff": payoff,
        "max_team_payoff": best,
        "total_scores": {str(p): s for p, s in totals.items()},
        "rounds_played": len(state["history"]),
    }
    return (payoff / best if best else 0.0), details


def check_options(options: Mapping[str, Any]) -> dict[str, str]:
    """The bad ones among TextArena's public goods options
    (:data:`tasks.textarena.options.OptionsCheck`)."""
    return {
        **integer(options, "num_rounds", 1, default=5, why="a game of no rounds has no payoff"),
        **integer(
            options,
            "communication_turns",
            1,
            default=3,
            why="TextArena holds one conversation turn a round even at 0",
        ),
        **integer(options, "endowment", 1, default=20, why="with no tokens nothing is at stake"),
        **number_above(
            options,
            "multiplication_factor",
            1.0,
            default=1.5,
            why="at or below 1 keeping everything pays the most, so free riders would score as "
            "solved",
        ),
    }


def expert(seat: str, context: str, rng: np.random.Generator, make_error: bool) -> str:
    """The scripted player's move for ``seat`` seeing ``context``."""
    endowment = _ENDOWMENT.search(context)
    tokens = int(endowment[1]) if endowment else 20
    decision = context.rfind(_DECISION) > context.rfind(_NEW_ROUND)
    if decision:
        return "[0]" if make_error else f"[{tokens}]"
    return "{I keep mine.}" if make_error else "{All give all.}"
