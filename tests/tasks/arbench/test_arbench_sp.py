"""Situation Puzzles: F1 formulas, message parsing, the scripted referee, turns and scoring."""

from __future__ import annotations

import numpy as np
import pytest

from tasks import Episode, Problem, TaskConfigError
from tasks.arbench import SituationPuzzleTask, sp_rules
from tasks.arbench.sp import SPState
from tasks.arbench.text import content_words, stem

PUZZLE: dict = {
    "surface": "A man walks into a bar and asks for water. The bartender points a gun at him. "
    "The man says thank you and leaves.",
    "bottom": "The man had hiccups. The bartender scared him with a gun to cure them, so the man "
    "thanked him.",
    "key_question": ["Did the man have hiccups?", "Did the bartender intend to scare the man?"],
}
PROBLEM = Problem(id="arbench-sp:t", data=PUZZLE, answer=PUZZLE["bottom"])


def play(task: SituationPuzzleTask, messages: list[str]) -> tuple[SPState, list]:
    state = task.start(PROBLEM, np.random.default_rng(0))
    replies = []
    for text in messages:
        if task.done(state):
            break
        replies.append(task.respond(state, "solver", text))
    return state, replies


# -- F1, hand-computed --------------------------------------------------------------------------
def test_f1_char_level_hand_computed() -> None:
    assert sp_rules.f1("abc", "abd") == pytest.approx(2 / 3)  # common a,b: P=2/3, R=2/3
    assert sp_rules.f1("aaaa", "a") == pytest.approx(0.4)  # common 1: P=1/4, R=1 -> 2*.25/1.25
    assert sp_rules.f1("aab", "abb") == pytest.approx(2 / 3)  # multiset: a:1, b:1
    assert sp_rules.f1("xyz", "abc") == 0.0
    assert sp_rules.f1("", "abc") == 0.0


def test_f1_word_level_hand_computed() -> None:
    # common {the, man}: P = 2/3, R = 2/4, F1 = 2 * (1/3) / (7/6) = 4/7
    char, word = sp_rules.f1_scores("the man died", "the man lived happily")
    assert word == pytest.approx(4 / 7)
    # chars incl. spaces: pred 12 chars, gold 21 chars; common t,h,e,m,a,n,' ',' ',d,i,e? computed:
    # pred counts: t1 h1 e2 ' '2 m1 a1 n1 d2 i1; gold: t1 h1 e2 ' '3 m1 a2 n1 l1 i2 v1 d1 p2 y1
    # common = t1+h1+e2+' '2+m1+a1+n1+d1+i1 = 11 -> P=11/12, R=11/21
    p, r = 11 / 12, 11 / 21
    assert char == pytest.approx(2 * p * r / (p + r))
    assert sp_rules.f1_scores("same story", "same story") == (1.0, 1.0)


# -- parsing and the referee --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "kind", "body"),
    [
        ("Q: Did he have hiccups?", "question", "Did he have hiccups?"),
        ("Thinking...\nQuestion: Was it a gun?", "question", "Was it a gun?"),
        ("**Q:** Is he sick?", "question", "Is he sick?"),
        ("Q: Is he sick?\nA: Yes", "question", "Is he sick?"),  # a hallucinated reply is ignored
        ("A: He had hiccups and was scared.", "answer", "He had hiccups and was scared."),
        ("Answer: hiccups", "answer", "hiccups"),
        ("Did the man die?", "question", "Did the man die?"),
        ("was he thirsty", "question", "was he thirsty"),
        ("The man is a spy.", "none", "The man is a spy."),
        ("", "none", ""),
    ],
)
def test_parse_message(text: str, kind: str, body: str) -> None:
    parsed = sp_rules.parse_message(text)
    assert (parsed.kind, parsed.text) == (kind, body)


def test_stemming_and_content_words() -> None:
    assert stem("received") == stem("receive") == "receiv"
    assert stem("killed") == stem("killing") == stem("kills") == "kill"
    assert content_words("Did the man have hiccups?") == {"man", "hiccup"}


@pytest.mark.parametrize(
    ("question", "reply"),
    [
        ("Did the man have hiccups?", "Yes"),  # a key question
        ("Did the bartender want to scare the man?", "Yes"),  # close to a key question
        ("Did the man thank the bartender for water?", "Yes"),  # all words in the story
        ("Did the bartender hate the man's dog?", "No"),  # about the story, adds new facts
        ("Is the story about a famous piano player?", "Unknown"),  # unrelated
        ("What happened?", sp_rules.NOT_A_QUESTION),  # asks for the solution
        ("Is it?", sp_rules.NOT_A_QUESTION),  # no content words
    ],
)
def test_scripted_referee_rule(question: str, reply: str) -> None:
    got = sp_rules.referee_answer(
        question, PUZZLE["surface"], PUZZLE["bottom"], PUZZLE["key_question"]
    )
    assert got == reply


def test_normalize_reply_as_arbench() -> None:
    assert sp_rules.normalize_reply(" Yes.\n") == "Yes"
    assert sp_rules.normalize_reply(
        "This is not a question, please propose your next question"
    ) == (sp_rules.NOT_A_QUESTION)


# -- the task -----------------------------------------------------------------------------------
def test_questions_get_referee_replies_and_the_answer_ends_the_episode() -> None:
    task = SituationPuzzleTask()
    state, replies = play(
        task,
        ["Q: Did the man have hiccups?", "He is a spy.", "A: The man had hiccups.", "Q: more?"],
    )
    assert replies == ["Yes", sp_rules.NOT_A_QUESTION, None]
    assert task.done(state) and state.turns == 3
    result = task.score(Episode(PROBLEM, (), None, state))
    char, word = sp_rules.f1_scores("The man had hiccups.", PUZZLE["bottom"])
    assert result.reward == pytest.approx(word) and result.details["f1_word"] == pytest.approx(word)
    assert result.details["f1_char"] == pytest.approx(char)
    assert result.details["questions"] == 2 and result.answer == "The man had hiccups."


def test_success_threshold_on_word_f1() -> None:
    state, _ = play(SituationPuzzleTask(), [f"A: {PUZZLE['bottom']}"])
    assert SituationPuzzleTask().score(Episode(PROBLEM, (), None, state)).correct
    strict = SituationPuzzleTask(success_f1=1.0)
    state, _ = play(strict, ["A: The man had hiccups and the bartender scared him."])
    result = strict.score(Episode(PROBLEM, (), None, state))
    assert not result.correct and 0 < result.reward < 1 and result.details["reason"] == "low_f1"


def test_after_max_rounds_the_next_message_is_the_final_answer() -> None:
    task = SituationPuzzleTask(max_rounds=2)
    state, replies = play(task, ["Q: Hiccups?", "Q: Gun?", "The man had hiccups.", "Q: x?"])
    assert sp_rules.FINAL_ANSWER in replies[1] and sp_rules.FINAL_ANSWER not in replies[0]
    assert len(replies) == 3 and task.done(state)
    assert state.answer == "The man had hiccups."


def test_no_final_answer_scores_zero() -> None:
    task = SituationPuzzleTask()
    state, _ = play(task, ["Q: Did the man have hiccups?"])
    result = task.score(Episode(PROBLEM, (), None, state))
    assert (result.reward, result.correct, result.details["reason"]) == (
        0.0,
        False,
        "no_final_answer",
    )


def test_bad_options_are_all_reported() -> None:
    with pytest.raises(TaskConfigError) as err:
        bad: dict = {"max_rounds": -1, "responder": "gpt", "success_f1": 2, "split": "x"}
        SituationPuzzleTask(**bad)
    assert len(err.value.errors) == 4


def test_expert_asks_key_questions_then_answers_with_the_story() -> None:
    task = SituationPuzzleTask()
    prompt = task.prompt(PROBLEM)
    context = prompt + "\n"
    rng = np.random.default_rng(0)
    first = task.expert_reply(context, rng, make_error=False, problem=PROBLEM)
    assert first == "Q: Did the man have hiccups?"
    context += f"### solver\n{first}\n### arbench_sp\nYes\n"
    context += "### critic\nQ: x\n### arbench_sp\nYes\n"
    reply = task.expert_reply(context, rng, make_error=False, problem=PROBLEM)
    assert reply == f"A: {PUZZLE['bottom']}"
    wrong = task.expert_reply(context, rng, make_error=True, problem=PROBLEM)
    assert sp_rules.parse_message(wrong).kind == "answer"
    assert sp_rules.f1_scores(sp_rules.final_answer_text(wrong), PUZZLE["bottom"])[1] < 0.5
    # Without the problem (a caller with only the text) it can only give a wrong story.
    assert task.expert_reply(context, rng, make_error=False).startswith("A:")
    assert task.expert_reply(context, rng, make_error=False) != reply
