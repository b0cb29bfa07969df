"""Guessing Numbers: AR-Bench's feedback rule and sentences, guess extraction, wasted turns, the
round limit, early stop, scoring and the consistent-guess expert."""

from __future__ import annotations

import numpy as np
import pytest

from tasks import Episode, Problem, TaskConfigError
from tasks.arbench import GuessingNumbersTask, gn_rules
from tasks.arbench.gn import GNState


def secret_problem(secret: str) -> Problem:
    return Problem(id=f"arbench-gn:{secret}", answer=secret)


def play(task: GuessingNumbersTask, secret: str, messages: list[str]) -> tuple[GNState, list]:
    state = task.start(secret_problem(secret), np.random.default_rng(0))
    replies = []
    for text in messages:
        if task.done(state):
            break
        replies.append(task.respond(state, "solver", text))
    return state, replies


def score(task: GuessingNumbersTask, state: GNState, secret: str):
    return task.score(Episode(secret_problem(secret), (), None, state))


# -- pure rules ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("secret", "guess", "expected"),
    [
        ("1234", "1234", (4, 0)),
        ("1234", "1243", (2, 2)),
        ("0521", "1250", (0, 4)),
        ("1234", "5678", (0, 0)),
        ("1234", "1111", (1, 0)),  # repeated digits: multiset intersection, as AR-Bench
        ("1234", "2121", (0, 2)),
        ("1234", "2211", (1, 1)),
        ("6850", "5680", (1, 3)),  # from AR-Bench's own example trajectory
        ("6850", "8650", (2, 2)),
    ],
)
def test_compare_matches_arbench_compare_guess(secret: str, guess: str, expected: tuple) -> None:
    assert gn_rules.compare(secret, guess) == expected


def test_feedback_uses_arbench_sentences_verbatim() -> None:
    text = gn_rules.feedback_text(3, "1243", 2, 2)
    assert text == (
        "Turn 3: Guess: 1243\n"
        "2 digits are present in the answer and in the correct positions\n"
        "2 digits are present in the answer but in the different positions"
    )
    assert gn_rules.parse_feedback("x\n" + text + "\ny") == [("1243", 2, 2)]


@pytest.mark.parametrize(
    ("text", "guess"),
    [
        ("Guess: 1234", "1234"),
        ("Maybe 5678... no. Guess: 0123", "0123"),  # the LAST run
        ("12345", "1234"),  # re.findall(r"\d{4}") reads the first four digits of a longer run
        ("123456789", "5678"),
        ("Guess: [0123]", "0123"),
        ("no digits at all", None),
        ("Guess: 12 34", None),
        ("Guess: 0, 1, 2, 3", None),  # AR-Bench's extract_and_convert_guess finds no \d{4} here
        ("Guess: \uff11\uff12\uff13\uff14", None),  # full-width digits are not ASCII digits
        ("", None),
    ],
)
def test_extract_guess_is_the_last_four_digit_run(text: str, guess: str | None) -> None:
    assert gn_rules.extract_guess(text) == guess


def test_secret_space() -> None:
    secrets = gn_rules.all_secrets()
    assert len(secrets) == 5040 == len(set(secrets))
    assert "0123" in secrets and "9876" in secrets and "1123" not in secrets
    assert all(gn_rules.is_secret(s) for s in secrets[::97])
    assert not gn_rules.is_secret("1123") and not gn_rules.is_secret(1234)
    rng = np.random.default_rng(0)
    drawn = {gn_rules.sample_secret(rng) for _ in range(2000)}
    assert all(gn_rules.is_secret(s) for s in drawn)
    assert any(s.startswith("0") for s in drawn)  # a leading 0 is allowed


def test_consistent_candidates_reproduce_every_feedback() -> None:
    rng = np.random.default_rng(1)
    for _ in range(5):
        secret = gn_rules.sample_secret(rng)
        history = []
        for guess in ("0123", "4567", "1111", "8901"):
            history.append((guess, *gn_rules.compare(secret, guess)))
        candidates = gn_rules.consistent(history)
        assert secret in candidates
        for candidate in candidates:
            assert all(gn_rules.compare(candidate, g) == (a, b) for g, a, b in history)
        brute = [
            s
            for s in gn_rules.all_secrets()
            if all(gn_rules.compare(s, g) == (a, b) for g, a, b in history)
        ]
        assert candidates == brute


# -- the task -----------------------------------------------------------------------------------
def test_a_reply_without_a_guess_is_a_wasted_turn_with_arbench_refine_prompt() -> None:
    task = GuessingNumbersTask()
    state, replies = play(task, "0521", ["I think it starts with five", "Guess: 0521"])
    assert replies[0] == f"Turn 1: {gn_rules.NO_GUESS}"
    assert "Guess: [number]" in replies[0]
    assert state.guesses[0] == (None, 0, 0)
    assert state.turns == 2 and task.done(state)
    result = score(task, state, "0521")
    assert result.correct and result.reward == 1.0 and result.answer == "0521"
    assert result.details["turns_used"] == 2 and result.details["wasted_turns"] == 1


@pytest.mark.parametrize(
    "text", ["", "\x00\ud800", "9" * 3, "x" * 100_000, "١٢٣٤", "Guess: -1234", None.__repr__()]
)
def test_any_text_is_a_turn_and_never_crashes(text: str) -> None:
    task = GuessingNumbersTask()
    state, replies = play(task, "5678", [text])
    assert isinstance(replies[0], str) and state.turns == 1


def test_repeated_digits_follow_arbench_by_default_or_waste_the_turn() -> None:
    state, replies = play(GuessingNumbersTask(), "1234", ["Guess: 1111"])
    assert state.guesses == [("1111", 1, 0)]
    assert "1 digits are present in the answer and in the correct positions" in replies[0]
    strict = GuessingNumbersTask(allow_repeated=False)
    state, replies = play(strict, "1234", ["Guess: 1111"])
    assert state.guesses == [(None, 0, 0)]
    assert "repeated digits" in replies[0]


def test_final_guess_after_max_rounds_decides() -> None:
    task = GuessingNumbersTask(max_rounds=2)
    state, replies = play(task, "1234", ["Guess: 5678", "Guess: 1243", "Guess: 1234", "x"])
    assert gn_rules.FINAL_GUESS in replies[1] and gn_rules.FINAL_GUESS not in replies[0]
    assert len(replies) == 3 and task.done(state)
    assert score(task, state, "1234").correct
    state, _ = play(task, "1234", ["Guess: 5678", "Guess: 1243", "Guess: 4321"])
    result = score(task, state, "1234")
    assert not result.correct and result.details["reason"] == "wrong_final_guess"
    state, _ = play(task, "1234", ["Guess: 5678", "Guess: 1243", "I give up"])
    assert score(task, state, "1234").details["reason"] == "no_final_guess"


def test_early_stop_option() -> None:
    task = GuessingNumbersTask(max_rounds=3)
    state, _ = play(task, "1234", ["Guess: 1234"])
    assert task.done(state) and score(task, state, "1234").details["turns_used"] == 1
    no_stop = GuessingNumbersTask(max_rounds=3, early_stop=False)
    state, _ = play(no_stop, "1234", ["Guess: 1234"])
    assert not no_stop.done(state)
    state, _ = play(no_stop, "1234", ["Guess: 1234", "Guess: 1234", "Guess: 5678", "Guess: 9012"])
    assert no_stop.done(state) and state.turns == 4
    assert not score(no_stop, state, "1234").correct  # the FINAL guess counts, as in AR-Bench


def test_unfinished_episode_scores_zero_with_a_reason() -> None:
    task = GuessingNumbersTask()
    state, _ = play(task, "1234", ["Guess: 5678"])
    result = score(task, state, "1234")
    assert result.reward == 0.0 and result.details["reason"] == "turn_limit"
    empty = task.start(secret_problem("1234"), np.random.default_rng(0))
    assert score(task, empty, "1234").details["reason"] == "turn_limit"


def test_bad_options_are_all_reported() -> None:
    with pytest.raises(TaskConfigError) as err:
        GuessingNumbersTask(max_rounds=0, early_stop="yes", split="dev")  # type: ignore[arg-type]
    assert len(err.value.errors) == 3


def test_bad_problem_secret_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="4 distinct digits"):
        GuessingNumbersTask().start(secret_problem("1123"), np.random.default_rng(0))


def test_generator_respects_the_split_partition() -> None:
    from tasks.base import split_of

    for split in ("train", "test"):
        task = GuessingNumbersTask(split=split)
        rng = np.random.default_rng(0)
        problems = [task.sample(rng) for _ in range(20)]
        assert all(p.split == split and split_of(p.id) == split for p in problems)
        assert all(gn_rules.is_secret(p.answer) for p in problems)


# -- the expert ---------------------------------------------------------------------------------
def expert_game(task: GuessingNumbersTask, secret: str) -> int:
    """Plays the expert on a bare context (prompt + feedback) and returns the guesses used."""
    state = task.start(secret_problem(secret), np.random.default_rng(0))
    context = task.prompt(secret_problem(secret)) + "\n"
    rng = np.random.default_rng(0)
    while not task.done(state):
        reply = task.expert_reply(context, rng, make_error=False)
        feedback = task.respond(state, "solver", reply)
        context += f"### solver\n{reply}\n### arbench_gn\n{feedback}\n"
    assert score(task, state, secret).correct
    return state.turns


def test_expert_solves_every_sampled_secret_within_eight_guesses() -> None:
    task = GuessingNumbersTask()
    secrets = gn_rules.all_secrets()[::84]  # 60 secrets spread over the space
    turns = [expert_game(task, s) for s in secrets]
    assert max(turns) <= 8
    assert np.mean(turns) < 6.5


def test_expert_error_is_an_inconsistent_guess() -> None:
    task = GuessingNumbersTask()
    history = [("0123", 1, 1), ("4567", 0, 2)]
    context = "\n".join(gn_rules.feedback_text(i + 1, *h) for i, h in enumerate(history))
    allowed = set(gn_rules.consistent(history))
    rng = np.random.default_rng(0)
    for _ in range(20):
        good = gn_rules.extract_guess(task.expert_reply(context, rng, make_error=False))
        bad = gn_rules.extract_guess(task.expert_reply(context, rng, make_error=True))
        assert good in allowed and bad not in allowed
