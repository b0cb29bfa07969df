"""``teamtr/ARBench-GN-v0``: AR-Bench's Guessing Numbers as an interactive team task."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tasks.arbench import data, gn_rules, prompts
from tasks.arbench.common import DEFAULT_ROUNDS, check_common, mean_details
from tasks.base import Episode, InteractiveTask, Problem, Score, Split, TaskConfigError, split_of

REPEATED_DIGITS = "the secret has 4 distinct digits; propose a guess without repeated digits"


@dataclass
class GNState:
    """One GN episode: the secret, the options and what every turn guessed.

    ``guesses`` has one entry per turn: ``(guess, A, B)``, or ``(None, 0, 0)`` for a wasted turn
    (AR-Bench logs ``["", 0, 0]``).
    """

    secret: str
    max_rounds: int
    early_stop: bool
    allow_repeated: bool
    guesses: list[tuple[str | None, int, int]] = field(default_factory=list)
    finished: bool = False

    @property
    def turns(self) -> int:
        """Turns played so far (wasted ones included)."""
        return len(self.guesses)


class GuessingNumbersTask(InteractiveTask):
    """Find a secret of 4 distinct digits from AR-Bench's position feedback.

    Every agent message is one turn; its guess is the last 4-digit run. After ``max_rounds``
    turns with feedback the team gives one final guess (AR-Bench: 25 turns, then the final guess);
    the episode is solved when the final guess is the secret. With ``early_stop`` the episode
    also ends, solved, at the first guess with ``A = 4``.

    Args:
        max_rounds: turns with feedback before the final guess (AR-Bench: 25).
        early_stop: end the episode at the first entirely correct guess.
        allow_repeated: score guesses with repeated digits by AR-Bench's multiset rule (AR-Bench
            does); ``False`` makes them wasted turns with a correction.
        split: the split generated secrets are drawn from: the 5040 secrets are partitioned
            80/10/10 by a hash of the problem id (``tasks.base.split_of``).
        data_split: the split of rows loaded from official files (``--data-path``).

    Raises:
        TaskConfigError: listing every invalid argument at once.
    """

    name = "arbench_gn"
    description = "AR-Bench Guessing Numbers: 4 distinct digits, A/B feedback, 25 rounds."

    def __init__(
        self,
        max_rounds: int = DEFAULT_ROUNDS,
        early_stop: bool = True,
        allow_repeated: bool = True,
        split: Split = "train",
        data_split: Split = "test",
    ) -> None:
        errors = check_common(max_rounds, split, data_split)
        for option, value in (("early_stop", early_stop), ("allow_repeated", allow_repeated)):
            if not isinstance(value, bool):
                errors.append(f"{option} must be true or false, got {value!r}")
        if errors:
            raise TaskConfigError("GuessingNumbersTask", errors)
        self.max_rounds = max_rounds
        self.early_stop = early_stop
        self.allow_repeated = allow_repeated
        self.split: Split = split
        self.data_split: Split = data_split

    def sample(self, rng: np.random.Generator) -> Problem:
        """A uniformly random secret among those of this task's split."""
        for _ in range(10_000):
            problem = data.gn_from_secret(gn_rules.sample_secret(rng), self.split)
            if split_of(problem.id) == self.split:
                return problem
        raise RuntimeError(f"no secret of split {self.split!r} in 10000 draws")  # pragma: no cover

    def load(self, path: str | Path) -> list[Problem]:
        """AR-Bench's ``data/gn/*.json`` (a list of secrets) or the project's JSONL."""
        return data.load_file(path, data.gn_problem, self.data_split)

    def prompt(self, problem: Problem) -> str:
        return prompts.gn_prompt(self.max_rounds, self.early_stop)

    def start(self, problem: Problem, rng: np.random.Generator) -> GNState:
        if not gn_rules.is_secret(problem.answer):
            raise ValueError(
                f"GN problem {problem.id!r}: the answer must be a secret of 4 distinct digits "
                f"such as '0521', got {problem.answer!r}"
            )
        return GNState(str(problem.answer), self.max_rounds, self.early_stop, self.allow_repeated)

    def respond(self, state: GNState, speaker: str, text: str) -> str | None:
        """Scores the message's guess; a message without one is a wasted turn."""
        if state.finished:
            return None
        turn = state.turns + 1
        guess = gn_rules.extract_guess(text)
        if guess is None or (not state.allow_repeated and len(set(guess)) < gn_rules.DIGITS):
            state.guesses.append((None, 0, 0))
            reply = f"Turn {turn}: " + (
                gn_rules.NO_GUESS if guess is None else f"Guess: {guess}: {REPEATED_DIGITS}"
            )
        else:
            a, b = gn_rules.compare(state.secret, guess)
            state.guesses.append((guess, a, b))
            reply = gn_rules.feedback_text(turn, guess, a, b)
            state.finished = a == gn_rules.DIGITS and state.early_stop
        if turn > state.max_rounds:  # that was the final guess
            state.finished = True
        elif turn == state.max_rounds and not state.finished:
            reply += "\n" + gn_rules.FINAL_GUESS
        return reply

    def done(self, state: GNState) -> bool:
        return state.finished

    def score(self, episode: Episode) -> Score:
        """Solved iff the last turn's guess has ``A = 4`` (AR-Bench: ``guess_list[-1][1] == 4``);
        a wasted last turn is a failure."""
        state: GNState = episode.state
        final = state.guesses[-1] if state.guesses else (None, 0, 0)
        solved = final[0] is not None and final[1] == gn_rules.DIGITS
        if solved:
            reason = "solved"
        elif not state.finished:
            reason = "turn_limit"
        elif final[0] is None:
            reason = "no_final_guess"
        else:
            reason = "wrong_final_guess"
        wasted = sum(g is None for g, _, _ in state.guesses)
        details = {
            "reason": reason,
            "solved": solved,
            "turns_used": state.turns,
            "valid_guesses": state.turns - wasted,
            "wasted_turns": wasted,
            "secret": state.secret,
        }
        return Score(float(solved), solved, final[0], details)

    def aggregate_details(self, details: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        """Episode means of the score details (the evaluation report's task metrics)."""
        return mean_details(details, ("solved", "turns_used", "valid_guesses", "wasted_turns"))

    def expert_reply(
        self,
        context: str,
        rng: np.random.Generator,
        *,
        make_error: bool,
        problem: Problem | None = None,
    ) -> str:
        """A guess consistent with every feedback in ``context`` (the one splitting the remaining
        candidates most; first guess ``0123``); a random inconsistent guess when ``make_error``."""
        history = gn_rules.parse_feedback(context)
        candidates = gn_rules.consistent(history)
        if make_error or not candidates:
            allowed = set(candidates)
            for _ in range(100):
                guess = gn_rules.sample_secret(rng)
                if guess not in allowed:
                    break
            return f"Guess: {guess}"
        if not history:
            return "Guess: 0123"
        return f"Guess: {gn_rules.best_consistent_guess(candidates)}"
