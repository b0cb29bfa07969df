"""``teamtr/ARBench-DC-v0``: AR-Bench's Detective Cases as an interactive team task."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tasks.arbench import data, dc_rules, prompts
from tasks.arbench.common import (
    DEFAULT_ROUNDS,
    CasePoolTask,
    check_common,
    env_turns,
    mean_details,
)
from tasks.arbench.responders import Responder, resolve
from tasks.base import Episode, Problem, Score, Split, TaskConfigError


@dataclass
class DCState:
    """One DC episode: the case, each suspect's conversation, the final answer."""

    case: dict[str, Any]
    names: list[str]
    max_rounds: int
    conversations: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    turns: int = 0
    invalid_turns: int = 0
    answer_text: str | None = None
    choice: str = ""
    finished: bool = False


class DetectiveCaseTask(CasePoolTask):
    """Find the murderer among five suspects by interrogating them, then name them A-E.

    Every agent message is one turn: ``Suspect: <whole name>`` and ``Question: ...`` interrogate
    that suspect (the responder plays them; the murderer deceives); a name that is not a suspect's
    whole name gets AR-Bench's correction and still uses the turn. A message with ``Answer:`` is the
    final answer (the last of A-E on that line, AR-Bench's parser) and ends the episode; after
    ``max_rounds`` turns the next message is the final answer whatever its form. Score: accuracy.

    Args:
        max_rounds: interrogation turns before the final answer (AR-Bench: 25).
        responder: ``"scripted"`` (offline rule-based suspects) or a :class:`Responder`.
        data_file: cases the generator samples from (official format); default the bundled demo
            cases.
        split: the split the cases sampled from ``data_file`` / the bundled demo are labelled with
            (a fixed pool, not a generator: the demo cases are a demo, not a held-out split).
        data_split: the split of rows loaded from official files (``--data-path``).

    Raises:
        TaskConfigError: listing every invalid argument at once.
    """

    name = "arbench_dc"
    bundled_file = "dc.json"
    convert = staticmethod(data.dc_problem)
    description = "AR-Bench Detective Cases: interrogate 5 suspects, name the murderer (A-E)."

    def __init__(
        self,
        max_rounds: int = DEFAULT_ROUNDS,
        responder: Any = "scripted",
        data_file: str | None = None,
        split: Split = "train",
        data_split: Split = "test",
    ) -> None:
        errors = check_common(max_rounds, split, data_split)
        self.responder: Responder
        self.responder, bad = resolve(responder, "answer_suspect")
        errors += bad
        if errors:
            raise TaskConfigError("DetectiveCaseTask", errors)
        self.max_rounds = max_rounds
        self._open_pool(data_file, split, data_split)

    def prompt(self, problem: Problem) -> str:
        return prompts.dc_prompt(problem.data, self.max_rounds)

    def start(self, problem: Problem, rng: np.random.Generator) -> DCState:
        case = dict(problem.data)
        names = [str(s["name"]) for s in case["initial_information"]["suspect"]]
        return DCState(case, names, self.max_rounds, {n: [] for n in names})

    def respond(self, state: DCState, speaker: str, text: str) -> str | None:
        """The named suspect's reply, or a correction; ``None`` after the final answer."""
        if state.finished:
            return None
        state.turns += 1
        if state.turns > state.max_rounds or dc_rules.is_final(text):
            state.answer_text = text
            state.choice = dc_rules.extract_choice(text)
            state.finished = True
            return None
        turn = dc_rules.parse_interrogation(text, state.names)
        if not turn.valid:
            state.invalid_turns += 1
            reply = f"{dc_rules.REFINE_SELECT}. The suspects are: {', '.join(state.names)}"
        elif not turn.question:
            state.invalid_turns += 1
            reply = dc_rules.NO_QUESTION
        else:
            suspect = next(
                (s for s in state.case["suspects"] if s.get("name") == turn.suspect),
                {"name": turn.suspect},
            )
            history = state.conversations[turn.suspect]
            answer = self.responder.answer_suspect(
                state.case, suspect, turn.question, list(history)
            )
            history.append((turn.question, answer))
            reply = f"{turn.suspect}: {answer}"
        if state.turns == state.max_rounds:
            reply += "\n" + dc_rules.SELECT_MURDERER.format(
                choice=dc_rules.choices_line(state.names)
            )
        return reply

    def done(self, state: DCState) -> bool:
        return state.finished

    def score(self, episode: Episode) -> Score:
        """1 if the chosen letter is the murderer's, else 0 (no final answer: 0)."""
        state: DCState = episode.state
        gold = str(episode.problem.answer)
        base = {"turns_used": state.turns, "invalid_turns": state.invalid_turns, "label": gold}
        if state.answer_text is None:
            return Score(0.0, False, None, {"reason": "no_final_answer", **base})
        correct = state.choice == gold
        reason = "correct" if correct else ("no_choice" if not state.choice else "wrong_choice")
        return Score(float(correct), correct, state.choice or None, {"reason": reason, **base})

    def aggregate_details(self, details: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        """Episode means of the score details (the evaluation report's task metrics)."""
        return mean_details(details, ("turns_used", "invalid_turns"))

    def expert_reply(
        self,
        context: str,
        rng: np.random.Generator,
        *,
        make_error: bool,
        problem: Problem | None = None,
    ) -> str:
        """Questions each suspect once about the time of the murder, then names the murderer
        (privileged: reads the case from ``problem``). With ``make_error`` a question turn names
        nobody valid and the answer turn names an innocent; without the problem it guesses."""
        if problem is None:
            return "Reason: I could not read the case.\nAnswer: A"
        names = [str(s["name"]) for s in problem.data["initial_information"]["suspect"]]
        asked = env_turns(context, self.name)
        forced = dc_rules.SELECT_MURDERER.split(",", 1)[0] in context
        if asked < min(len(names), self.max_rounds) and not forced:
            if make_error:
                return "Suspect: the butler\nQuestion: Did you do it?"
            victim = problem.data["victim"]["name"]
            return (
                f"Suspect: {names[asked]}\n"
                f"Question: Where were you and what did you see when {victim} was killed?"
            )
        gold = str(problem.answer)
        letter = gold
        if make_error:
            others = [c for c in dc_rules.LETTERS[: len(names)] if c != gold]
            letter = others[int(rng.integers(len(others)))]
        return f"Reason: the interrogations point to one suspect.\nAnswer: {letter}"
