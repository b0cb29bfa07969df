"""``teamtr/ARBench-SP-v0``: AR-Bench's Situation Puzzles as an interactive team task."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tasks.arbench import data, prompts, sp_rules
from tasks.arbench.common import (
    DEFAULT_ROUNDS,
    CasePoolTask,
    check_common,
    env_turns,
    mean_details,
)
from tasks.arbench.responders import Responder, resolve
from tasks.base import Episode, Problem, Score, Split, TaskConfigError

WRONG_ANSWER = "A: It was all a coincidence; nothing unusual happened and nobody was involved."
OFF_TOPIC = "Q: Was it raining on that day?"


@dataclass
class SPState:
    """One SP episode: the puzzle, the questions with the referee's replies, the final answer."""

    puzzle: dict[str, Any]
    max_rounds: int
    questions: list[tuple[str, str]] = field(default_factory=list)
    turns: int = 0
    answer: str | None = None
    finished: bool = False


class SituationPuzzleTask(CasePoolTask):
    """Uncover a situation puzzle's hidden story with yes/no questions, then tell it.

    Every agent message is one turn: ``Q: ...`` is a question for the referee (the responder),
    ``A: ...`` is the final answer and ends the episode. After ``max_rounds`` turns the next message
    is the final answer whatever its form (AR-Bench asks for it after 25 questions). The answer is
    scored by word-level F1 against the hidden story (``Score.reward``); character-level F1 is in
    ``details``. A turn limit reached first scores 0.

    Args:
        max_rounds: question turns before the final answer (AR-Bench: 25).
        responder: ``"scripted"`` (offline rule-based referee) or a :class:`Responder`, e.g.
            ``PolicyResponder(policy)``.
        success_f1: word F1 at which an episode counts as solved (for pass@k / avg@k).
        data_file: puzzles the generator samples from (official format); default the bundled demo
            puzzles.
        split: the split the puzzles sampled from ``data_file`` / the bundled demo are labelled with
            (a fixed pool, not a generator: the demo puzzles are a demo, not a held-out split).
        data_split: the split of rows loaded from official files (``--data-path``).

    Raises:
        TaskConfigError: listing every invalid argument at once.
    """

    name = "arbench_sp"
    bundled_file = "sp.json"
    convert = staticmethod(data.sp_problem)
    description = (
        "AR-Bench Situation Puzzles: yes/no questions to a referee, F1 vs the hidden story."
    )

    def __init__(
        self,
        max_rounds: int = DEFAULT_ROUNDS,
        responder: Any = "scripted",
        success_f1: float = 0.5,
        data_file: str | None = None,
        split: Split = "train",
        data_split: Split = "test",
    ) -> None:
        errors = check_common(max_rounds, split, data_split)
        self.responder: Responder
        self.responder, bad = resolve(responder, "answer_puzzle")
        errors += bad
        if not isinstance(success_f1, int | float) or not 0.0 <= success_f1 <= 1.0:
            errors.append(f"success_f1 must be a number in [0, 1], got {success_f1!r}")
        if errors:
            raise TaskConfigError("SituationPuzzleTask", errors)
        self.max_rounds = max_rounds
        self.success_f1 = float(success_f1)
        self._open_pool(data_file, split, data_split)

    def prompt(self, problem: Problem) -> str:
        return prompts.sp_prompt(problem.data["surface"], self.max_rounds)

    def start(self, problem: Problem, rng: np.random.Generator) -> SPState:
        return SPState(dict(problem.data), self.max_rounds)

    def respond(self, state: SPState, speaker: str, text: str) -> str | None:
        """The referee's reply to a question; ``None`` after the final answer."""
        if state.finished:
            return None
        state.turns += 1
        parsed = sp_rules.parse_message(text)
        if state.turns > state.max_rounds or parsed.kind == "answer":
            state.answer = sp_rules.final_answer_text(text)
            state.finished = True
            return None
        if parsed.kind == "question" and parsed.text:
            reply = self.responder.answer_puzzle(state.puzzle, parsed.text)
        else:
            reply = sp_rules.NOT_A_QUESTION
        state.questions.append((parsed.text, reply))
        if state.turns == state.max_rounds:
            reply += "\n" + sp_rules.FINAL_ANSWER
        return reply

    def done(self, state: SPState) -> bool:
        return state.finished

    def score(self, episode: Episode) -> Score:
        """Word-level F1 of the final answer against ``bottom`` (0 without a final answer)."""
        state: SPState = episode.state
        base = {"turns_used": state.turns, "questions": len(state.questions)}
        if state.answer is None:
            details = {"reason": "no_final_answer", "f1_char": 0.0, "f1_word": 0.0, **base}
            return Score(0.0, False, None, details)
        f1_char, f1_word = sp_rules.f1_scores(state.answer, str(state.puzzle.get("bottom", "")))
        solved = f1_word >= self.success_f1
        details = {
            "reason": "answered" if solved else "low_f1",
            "f1_char": f1_char,
            "f1_word": f1_word,
            **base,
        }
        return Score(f1_word, solved, state.answer[:1000], details)

    def aggregate_details(self, details: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        """Episode means of the score details (the evaluation report's task metrics)."""
        return mean_details(details, ("f1_char", "f1_word", "turns_used", "questions"))

    def expert_reply(
        self,
        context: str,
        rng: np.random.Generator,
        *,
        make_error: bool,
        problem: Problem | None = None,
    ) -> str:
        """Asks the puzzle's key questions in order, then answers with the hidden story
        (privileged: reads them from ``problem``). With ``make_error`` a question turn asks an
        off-topic question and the answer turn gives a wrong story; without the problem, a wrong
        story."""
        if problem is None:
            return WRONG_ANSWER
        keys = list(problem.data.get("key_question", []))
        asked = env_turns(context, self.name)
        plan = min(len(keys), self.max_rounds)
        if asked < plan and sp_rules.FINAL_ANSWER not in context:
            return OFF_TOPIC if make_error else f"Q: {keys[asked]}"
        return WRONG_ANSWER if make_error else f"A: {problem.data['bottom']}"
