"""The ``teamtr/Relay-v0`` task plugin: pass a secret symbol along a relay of agents."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tasks.base import Problem, Score, SingleAnswerTask, TaskConfigError, is_int
from tasks.capabilities import NO_STATE
from tasks.relay import rules


class RelayTask(SingleAnswerTask):
    """A secret symbol relayed through a team: the exact team game of ``docs/exact-games.md``.

    The problem is a secret ``s`` uniform on ``0..K-1`` (prompt ``"secret 3"``). Played with
    ``visibility="previous"`` (as registered), the agent of turn 0 sees the secret and every later
    agent only the message of the turn before its own, so the team must agree on a code. Every
    message should be one symbol ``"m0"`` .. ``"m{K-1}"``; the final message is the team's guess,
    reward 1 iff it is ``"m{s}"``. For ``R`` rounds with ``n`` agents pass ``max_turns=n*R``
    (the default is one round).

    A toy without a held-out split: there are only ``K`` distinct secrets, so a validation or test
    split could not differ from training. The task therefore takes no ``split`` option and labels
    every problem ``train`` (``teamtr eval`` needs ``--allow-train``). Each problem's id carries a
    draw number (``relay:K4:s3:d123``), so even distinct-id sampling can give more than ``K``
    problems (each secret several times).

    Args:
        symbols: ``K``, the alphabet size (2-100).

    Raises:
        TaskConfigError: listing every invalid argument at once.
    """

    name = "relay"
    description = (
        "A secret symbol passed along a relay; each later agent sees only the previous message."
    )

    def __init__(self, symbols: int = 4) -> None:
        if not is_int(symbols) or not 2 <= symbols <= rules.MAX_SYMBOLS:
            raise TaskConfigError(
                "RelayTask",
                [f"symbols must be an integer in 2..{rules.MAX_SYMBOLS}, got {symbols!r}"],
            )
        self.symbols = symbols

    def sample(self, rng: np.random.Generator) -> Problem:
        """A uniform secret (and a draw number that makes the id unique)."""
        secret = int(rng.integers(self.symbols))
        draw = int(rng.integers(10**9))
        return Problem(
            id=f"relay:K{self.symbols}:s{secret}:d{draw}",
            data={"secret": secret, "symbols": self.symbols},
            answer=secret,
            split="train",
            meta={"secret": secret},
        )

    def prompt(self, problem: Problem) -> str:
        return rules.render_prompt(int(problem.data["secret"]))

    def check_problem(self, problem: Problem) -> list[str]:
        """A loaded row needs a symbol ``data["secret"]`` in ``0..symbols-1`` and the same
        ``answer``."""
        secret = problem.data.get("secret")
        if (
            not isinstance(secret, int)
            or isinstance(secret, bool)
            or not 0 <= secret < self.symbols
        ):
            return [
                f"data.secret: expected an integer in 0..{self.symbols - 1}, got {secret!r:.80}"
            ]
        if problem.answer != secret:
            return [f"answer: expected the secret {secret}, got {problem.answer!r:.80}"]
        return []

    def grade(self, problem: Problem, text: str) -> Score:
        symbol = rules.parse_message(text)
        if symbol is None:
            return Score(0.0, False, None, {"reason": "malformed"})
        if symbol >= self.symbols:
            return Score(0.0, False, str(symbol), {"reason": "out_of_range"})
        correct = symbol == problem.answer
        return Score(
            float(correct),
            correct,
            str(symbol),
            {"reason": "correct" if correct else "wrong_answer"},
        )

    def state_key(self, context: str) -> int | None:
        """The relay's exact agent state: the observed symbol (the secret for the first agent,
        the previous message for the others); ``None`` when the context shows neither."""
        return rules.observed_symbol(context)

    # -- a team of tabular policies (backend: tabular) --------------------------------------
    def tabular_states(self) -> list[str]:
        """The symbols ``"0"`` .. ``"K-1"`` an agent can observe, and ``"none"``."""
        return [str(i) for i in range(self.symbols)] + [NO_STATE]

    def tabular_messages(self) -> list[str]:
        """The messages ``"m0"`` .. ``"m{K-1}"``."""
        return [rules.render_message(i) for i in range(self.symbols)]

    def tabular_state(self, context: str) -> str:
        """The observed symbol as a state key (``"none"`` when there is none in range)."""
        symbol = rules.observed_symbol(context)
        return str(symbol) if symbol is not None and symbol < self.symbols else NO_STATE

    def exact_reward(self, tables: Sequence[Any], turns: int) -> float:
        """J of a team of tables (:meth:`tabular_states` x :meth:`tabular_messages`, speaking
        order) over ``turns`` turns: ``trace(P_0 P_1 ... P_{T-1}) / K`` with ``P`` the tables'
        symbol rows (docs/exact-games.md); the ``"none"`` row is never reached."""
        return rules.exact_success([np.asarray(t)[: self.symbols] for t in tables], turns)

    def expert_reply(
        self,
        context: str,
        rng: np.random.Generator,
        *,
        make_error: bool,
        problem: Problem | None = None,
    ) -> str:
        """The identity code: repeats the observed symbol (a different one when
        ``make_error``)."""
        symbol = rules.observed_symbol(context)
        if symbol is None or symbol >= self.symbols:
            return "I cannot find the symbol."
        if make_error:
            symbol = int((symbol + rng.integers(1, self.symbols)) % self.symbols)
        return rules.render_message(symbol)
