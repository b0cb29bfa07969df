"""Detective Cases: AR-Bench's answer parser, suspect selection, the scripted suspects, turns,
scoring and the expert (on the hand-written fixture cases)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tasks import Episode, Problem, TaskConfigError
from tasks.arbench import DetectiveCaseTask, dc_rules
from tasks.arbench.dc import DCState

FIXTURE = Path(__file__).parents[2] / "fixtures" / "arbench" / "dc.json"


@pytest.fixture(scope="module")
def case_problem() -> Problem:
    return DetectiveCaseTask().load(FIXTURE)[0]  # the harbour case: murderer Mr. Dale Hudson (C)


def play(task: DetectiveCaseTask, problem: Problem, messages: list[str]) -> tuple[DCState, list]:
    state = task.start(problem, np.random.default_rng(0))
    replies = []
    for text in messages:
        if task.done(state):
            break
        replies.append(task.respond(state, "solver", text))
    return state, replies


@pytest.mark.parametrize(
    ("text", "choice"),
    [
        ("Reason: he had the key.\nAnswer: C", "C"),
        ("Answer: Mr. Dale Hudson (C)", "C"),  # the last of A-E on the line: D of "Dale", then C
        ("Answer: B or D", "D"),
        ("Answer: [A, B, C, D or E]", "E"),  # the template itself: last letter, as AR-Bench
        ("Answer:\nC", "C"),  # \s* crosses the newline
        ("Answer: C\nAnswer: A", "C"),  # the first Answer: line decides
        ("answer: C", ""),  # case-sensitive like AR-Bench
        ("Answer: none of them", ""),
        ("I think C", ""),
    ],
)
def test_extract_choice_is_arbench_parser(text: str, choice: str) -> None:
    assert dc_rules.extract_choice(text) == choice


def test_parse_interrogation(case_problem: Problem) -> None:
    names = [s["name"] for s in case_problem.data["initial_information"]["suspect"]]
    turn = dc_rules.parse_interrogation(
        "Suspect: Mr. Dale Hudson\nQuestion: Where were you?", names
    )
    assert (turn.suspect, turn.valid, turn.question) == ("Mr. Dale Hudson", True, "Where were you?")
    turn = dc_rules.parse_interrogation("Mr. Dale Hudson.\nWhere were you?", names)
    assert turn.valid and turn.question == "Where were you?"  # AR-Bench strips end punctuation
    turn = dc_rules.parse_interrogation("**Suspect:** Ms. Nora Blake\n**Q:** Why?", names)
    assert turn.valid and turn.suspect == "Ms. Nora Blake" and turn.question == "Why?"
    assert not dc_rules.parse_interrogation("Suspect: Dale Hudson\nQ: Why?", names).valid
    assert not dc_rules.parse_interrogation("Suspect: mr. dale hudson\nQ: Why?", names).valid
    assert not dc_rules.parse_interrogation("", names).valid


def test_wrong_name_gets_arbench_correction_and_uses_the_turn(case_problem: Problem) -> None:
    task = DetectiveCaseTask()
    state, replies = play(task, case_problem, ["Suspect: The butler\nQuestion: Did you do it?"])
    assert replies[0].startswith(dc_rules.REFINE_SELECT)
    assert "Mr. Dale Hudson" in replies[0]
    assert state.turns == 1 and state.invalid_turns == 1 and not task.done(state)
    state, replies = play(task, case_problem, ["Suspect: Mr. Felix Grant"])
    assert replies[0] == dc_rules.NO_QUESTION and state.invalid_turns == 1


def test_scripted_suspects_answer_and_the_murderer_deflects(case_problem: Problem) -> None:
    task = DetectiveCaseTask()
    messages = [
        "Suspect: Ms. Ines Moreau\nQuestion: Did you see anyone near Warehouse 7?",
        "Suspect: Mr. Dale Hudson\nQuestion: Did you use the iron mooring hook?",
        "Suspect: Mr. Dale Hudson\nQuestion: What did you do at 08:00 PM?",
        "Suspect: Mr. Owen Pike\nQuestion: Where were you?",
    ]
    state, replies = play(task, case_problem, messages)
    assert replies[0] == (
        "Ms. Ines Moreau: 11:00 PM: Sees Mr. Hudson walking away from Warehouse 7 in a hurry."
    )
    assert replies[1].startswith("Mr. Dale Hudson: I had nothing to do with Captain Rosa Vale")
    assert "mooring" not in replies[1].lower()
    assert replies[2] == "Mr. Dale Hudson: 08:00 PM: Mr. Hudson checks the evening deliveries."
    assert replies[3] == f"Mr. Owen Pike: {dc_rules.NOTHING_TO_SAY}"
    assert [q for q, _ in state.conversations["Mr. Dale Hudson"]] == [
        "Did you use the iron mooring hook?",
        "What did you do at 08:00 PM?",
    ]


def test_murderer_never_reveals_the_crime(case_problem: Problem) -> None:
    murderer = next(s for s in case_problem.data["suspects"] if s.get("is_murderer"))
    for question in ("What happened at 10:55 PM?", "Did you strike her?", "Where is the key?"):
        reply = dc_rules.suspect_answer(case_problem.data, murderer, question)
        assert "killing" not in reply and "Strikes" not in reply


def test_answer_ends_the_episode_and_is_scored(case_problem: Problem) -> None:
    task = DetectiveCaseTask()
    state, replies = play(task, case_problem, ["Reason: key and gloves.\nAnswer: C", "more"])
    assert replies == [None] and task.done(state)
    result = task.score(Episode(case_problem, (), None, state))
    assert (result.reward, result.correct, result.answer) == (1.0, True, "C")
    state, _ = play(task, case_problem, ["Answer: A"])
    result = task.score(Episode(case_problem, (), None, state))
    assert (result.correct, result.details["reason"]) == (False, "wrong_choice")
    state, _ = play(task, case_problem, ["Answer: the foreman"])
    assert task.score(Episode(case_problem, (), None, state)).details["reason"] == "no_choice"


def test_after_max_rounds_the_next_message_is_final(case_problem: Problem) -> None:
    task = DetectiveCaseTask(max_rounds=1)
    state, replies = play(task, case_problem, ["Suspect: Ms. Nora Blake\nQ: Why?", "C", "x"])
    assert "who is more likely to be the true murderer" in replies[0]
    assert "A. Ms. Ines Moreau, B. Mr. Felix Grant, C. Mr. Dale Hudson" in replies[0]
    assert len(replies) == 2 and task.done(state)
    assert task.score(Episode(case_problem, (), None, state)).details["reason"] == "no_choice"


def test_no_final_answer_scores_zero(case_problem: Problem) -> None:
    task = DetectiveCaseTask()
    state, _ = play(task, case_problem, ["Suspect: Ms. Nora Blake\nQ: Why?"])
    result = task.score(Episode(case_problem, (), None, state))
    assert (result.reward, result.details["reason"]) == (0.0, "no_final_answer")


def test_bad_options_are_all_reported() -> None:
    with pytest.raises(TaskConfigError) as err:
        bad: dict = {"max_rounds": True, "responder": object(), "data_split": "dev"}
        DetectiveCaseTask(**bad)
    assert len(err.value.errors) == 3


def test_expert_interrogates_everyone_then_answers(case_problem: Problem) -> None:
    task = DetectiveCaseTask()
    state = task.start(case_problem, np.random.default_rng(0))
    context = task.prompt(case_problem) + "\n"
    rng = np.random.default_rng(0)
    while not task.done(state):
        reply = task.expert_reply(context, rng, make_error=False, problem=case_problem)
        feedback = task.respond(state, "solver", reply)
        context += f"### solver\n{reply}\n### arbench_dc\n{feedback}\n"
    assert state.turns == 6 and state.invalid_turns == 0
    assert task.score(Episode(case_problem, (), None, state)).correct
    wrong = task.expert_reply(context, rng, make_error=True, problem=case_problem)
    assert dc_rules.extract_choice(wrong) not in ("", "C")
