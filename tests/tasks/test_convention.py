"""Tests for the ``teamtr/Convention-v0`` task: rules (the transforms, parsing, the observed word)
and the ``ConventionTask`` plugin (options, sampling and splits, grading, the scripted expert, and
expert teams that do and do not share a convention)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import teamtr_env
from adapters.scripted import ScriptedExpert
from tasks import Problem, SupportsExpert, SupportsStateKey, TaskConfigError, split_of
from tasks.convention import ConventionTask, rules
from teamtr_env.runners import Runner

AGENTS = ("a1", "a2", "a3")


def make(**options):
    return teamtr_env.make("teamtr/Convention-v0", **options)


def play(transforms: dict[str, str], problems: int = 200, error_rate: float = 0.0, **options):
    """An expert team (``transforms``: agent -> transform) on test secrets: (secrets, rewards)."""
    env_fn = lambda: make(split="test", expert_transforms=transforms, **options)  # noqa: E731
    expert = ScriptedExpert(env_fn().task, error_rate=error_rate, seed=0)
    runner = Runner(env_fn, expert, progress=False)
    batch = runner.rollout(runner.sample_problems(problems, seed=0), group_size=1, seed=0)
    secrets = [e.problem_id.rsplit(":", 1)[1] for e in batch.episodes]
    return secrets, batch.rewards()


# -- rules ---------------------------------------------------------------------------------------


def test_every_transform_is_a_bijection_that_invert_undoes() -> None:
    rng = np.random.default_rng(0)
    assert len(rules.TRANSFORMS) == 8 and len(set(rules.TRANSFORMS)) == 8
    for length in (2, 3, 5, 8):
        words = {"".join(rng.choice(list(rules.ALPHABET), size=length)) for _ in range(300)}
        for name in rules.TRANSFORMS:
            images = {rules.apply(name, w) for w in words}
            assert len(images) == len(words), (name, length)  # injective on the sample
            for w in words:
                out = rules.apply(name, w)
                assert rules.is_word(out, length)
                assert rules.invert(name, out) == w
                assert rules.apply(name, rules.invert(name, w)) == w
    # Bijection on the whole space of 2-letter words.
    every = ["".join(p) for p in itertools.product(rules.ALPHABET, repeat=2)]
    for name in rules.TRANSFORMS:
        assert sorted(rules.apply(name, w) for w in every) == every, name


def test_transforms_do_what_they_say() -> None:
    assert rules.apply("identity", "kqz") == "kqz"
    assert rules.apply("reverse", "kqz") == "zqk"
    assert rules.apply("shift1", "kqz") == "lra"
    assert rules.apply("reverse_shift1", "kqz") == "arl"
    assert rules.apply("shift2", "xyz") == "zab"
    assert rules.apply("unshift1", "abc") == "zab"
    assert rules.apply("reverse_unshift1", "abc") == "baz"
    assert rules.invert("shift2", "abc") == "yza"
    assert rules.apply("unshift2", rules.apply("shift2", "kqz")) == "kqz"
    for bad_name, bad_word in (("rot13", "abc"), ("identity", "Abc"), ("reverse", "")):
        with pytest.raises(ValueError):
            rules.apply(bad_name, bad_word)


def test_composite_of_a_chain_of_transforms() -> None:
    assert rules.composite([]) == (False, 0)
    assert rules.composite(["reverse", "reverse", "identity"]) == (False, 0)
    assert rules.composite(["reverse", "identity", "identity"]) == (True, 0)
    assert rules.composite(["reverse_shift1", "reverse_unshift1", "shift2"]) == (False, 2)
    assert rules.composite(["shift1", "unshift2"]) == (False, 25)
    assert rules.is_coordinated(["shift1", "identity", "unshift1"])
    assert rules.composite(["shift1"] * 26) == (False, 0)
    assert rules.is_coordinated(["reverse", "reverse", "identity"])
    assert not rules.is_coordinated(["reverse_shift1", "reverse_shift1"])  # shift2
    # The composite is what a chain of transforms does to a word (reversal and shifts commute).
    rng = np.random.default_rng(1)
    for _ in range(50):
        chain = list(rng.choice(rules.TRANSFORMS, size=int(rng.integers(1, 7))))
        word = "".join(rng.choice(list(rules.ALPHABET), size=4))
        out = word
        for name in chain:
            out = rules.apply(name, out)
        reverse, k = rules.composite(chain)
        expected = "".join(rules.ALPHABET[(ord(c) - 97 + k) % 26] for c in word)
        assert out == (expected[::-1] if reverse else expected)


def test_parsing_messages() -> None:
    assert rules.parse_message("kqz", 3) == "kqz"
    assert rules.parse_message("  kqz\n", 3) == "kqz"
    bad_messages = ("kq", "kqzz", "Kqz", "KQZ", "kq1", "123", "kqz abc", "k qz", "", "  ")
    for bad in (*bad_messages, "secret kqz", "kqz\nabc"):
        assert rules.parse_message(bad, 3) is None, bad
    assert rules.parse_message(None, 3) is None  # type: ignore[arg-type]
    assert rules.parse_message("ab", 2) == "ab" and rules.parse_message("abcdefgh", 8)
    assert rules.parse_message("kqzé", 4) is None and rules.parse_message("kqz\x00", 4) is None


def test_observed_word_and_agent_name() -> None:
    assert rules.observed_word("sys\n### Problem\nsecret kqz\n### a1\n", 3) == "kqz"
    assert rules.observed_word("sys\n### a1\nzqk\n### a2\n", 3) == "zqk"
    assert rules.observed_word("### a1\nI think\nzqk\n### a2\n", 3) == "zqk"
    assert rules.observed_word("### a1\nzqkk\n### a2\n", 3) is None  # the wrong length
    assert rules.observed_word("### Problem\nsecret kqzz\n### a1\n", 3) is None
    assert rules.observed_word("no word here\n### a1\n", 3) is None
    # Only the last block (the prompt or the previous message) counts, not a system prompt's word.
    assert rules.observed_word("sys\n### a1\nZQK\n### a2\n", 3) is None
    assert rules.observed_word("abc\n### Problem\nsecret kqz\n### a1\n", 3) == "kqz"
    assert rules.observed_word("secret kqz\nzqk", 3) == "zqk"  # no headers: read whole
    assert rules.agent_name("sys\n### Problem\nsecret kqz\n### a1\n") == "a1"
    assert rules.agent_name("### a1\nzqk\n### agent_2\n") == "agent_2"
    assert rules.agent_name("no cue") is None


# -- options -------------------------------------------------------------------------------------


def test_every_bad_option_is_reported_at_once() -> None:
    with pytest.raises(TaskConfigError) as err:
        ConventionTask(
            length=1,
            conventions=9,
            split="dev",
            expert_transforms={"a1": "rot13", "a2": "reverse", "2b": "identity"},
        )
    errors = err.value.errors
    assert len(errors) == 5, errors
    text = "\n".join(errors)
    for needle in ("length", "conventions", "split", "'rot13'", "'2b'"):
        assert needle in text, needle
    # A transform beyond the first `conventions` is refused.
    with pytest.raises(TaskConfigError, match="reverse_shift1"):
        ConventionTask(conventions=3, expert_transforms={"a1": "reverse_shift1"})
    for bad in (True, 2.0, "3", 9):
        with pytest.raises(TaskConfigError, match="length must be an integer in 2..8"):
            ConventionTask(length=bad)  # type: ignore[arg-type]
    with pytest.raises(TaskConfigError, match="expected a mapping"):
        ConventionTask(expert_transforms=["reverse"])  # type: ignore[arg-type]
    assert ConventionTask(length=8, conventions=8).transforms == rules.TRANSFORMS


# -- sampling ------------------------------------------------------------------------------------


def test_sampling_labels_splits_and_gives_distinct_held_out_secrets() -> None:
    rng = np.random.default_rng(0)
    for split in ("train", "validation", "test"):
        task = ConventionTask(split=split)
        problems = [task.sample(rng) for _ in range(50)]
        for p in problems:
            assert p.split == split and split_of(p.id) == split
            assert p.id == f"convention:L3:{p.answer}" and p.data["secret"] == p.answer
            assert rules.is_word(p.answer, 3) and task.prompt(p) == f"secret {p.answer}"
            assert task.check_problem(p) == []
    test = ConventionTask(split="test")
    secrets = {test.sample(rng).answer for _ in range(600)}
    assert len(secrets) >= 200  # the default (length 3) test split holds 1778
    train = ConventionTask(split="train")
    assert not {train.sample(rng).answer for _ in range(2000)} & secrets  # disjoint splits


def test_runner_samples_200_distinct_test_secrets() -> None:
    env_fn = lambda: make(split="test")  # noqa: E731
    runner = Runner(env_fn, ScriptedExpert(env_fn().task), progress=False)
    problems = runner.sample_problems(200, seed=0)
    assert len({p.id for p in problems}) == 200 and {p.split for p in problems} == {"test"}


def test_check_problem_of_loaded_rows() -> None:
    task = ConventionTask()
    good = Problem("convention:L3:kqz", {"secret": "kqz"}, answer="kqz", split="test")
    assert task.check_problem(good) == []
    assert "data.secret" in task.check_problem(Problem("p", {"secret": "kqzz"}, answer="kqzz"))[0]
    assert "data.secret" in task.check_problem(Problem("p", {"secret": 3}, answer=3))[0]
    assert "data.secret" in task.check_problem(Problem("p", {}, answer="kqz"))[0]
    assert "answer" in task.check_problem(Problem("p", {"secret": "kqz"}, answer="abc"))[0]


# -- grading -------------------------------------------------------------------------------------


def test_grading() -> None:
    task = ConventionTask()
    problem = Problem("convention:L3:kqz", {"secret": "kqz"}, answer="kqz")
    cases = {
        "kqz": (1.0, "correct", "kqz"),
        " kqz\n": (1.0, "correct", "kqz"),
        "zqk": (0.0, "wrong_answer", "zqk"),
        "Kqz": (0.0, "malformed", None),
        "kqzz": (0.0, "malformed", None),
        "kq1": (0.0, "malformed", None),
        "the kqz": (0.0, "malformed", None),
        "": (0.0, "malformed", None),
    }
    for text, (reward, reason, answer) in cases.items():
        score = task.grade(problem, text)
        assert (score.reward, score.details["reason"], score.answer) == (reward, reason, answer)
        assert score.correct == (reward == 1.0)


# -- the registered env and the scripted expert --------------------------------------------------


def test_registered_env_is_a_relay_with_a_prompt_per_agent() -> None:
    spec = teamtr_env.spec("teamtr/Convention-v0")
    assert spec.accepts("split") and spec.accepts("expert_transforms")
    env = make()
    assert env.protocol.visibility == "previous" and env.protocol.agents == AGENTS
    assert all("3 lowercase letters" in env.protocol.system_prompt(a) for a in AGENTS)
    env.reset(seed=0, options={"problem": Problem("p", {"secret": "kqz"}, answer="kqz")})
    assert env.context("a1").endswith("### Problem\nsecret kqz\n### a1\n")
    env.step("zqk")
    assert env.context("a2").endswith("### a1\nzqk\n### a2\n") and "kqz" not in env.context("a2")
    env.step("kqz")
    env.step("kqz")
    assert env.score is not None and env.score.correct


def test_expert_reads_its_own_agents_transform_and_not_the_problem() -> None:
    task = make(expert_transforms={"a1": "reverse", "a2": "shift1"}).task
    assert isinstance(task, SupportsExpert)
    rng = np.random.default_rng(0)
    wrong = Problem("p", {"secret": "abc"}, answer="abc")  # ignored: the expert reads the context
    first = "sys\n### Problem\nsecret kqz\n### a1\n"
    assert task.expert_reply(first, rng, make_error=False, problem=wrong) == "zqk"
    assert task.expert_reply("### a1\nzqk\n### a2\n", rng, make_error=False) == "arl"
    assert task.expert_reply("### a2\narl\n### a3\n", rng, make_error=False) == "arl"  # identity
    assert task.expert_reply("### a1\nI lost it\n### a2\n", rng, make_error=False) == (
        "I cannot find the word."
    )
    # An erring expert applies another of the first `conventions` transforms, uniformly.
    seen = {task.expert_reply(first, rng, make_error=True) for _ in range(200)}
    assert seen == {rules.apply(t, "kqz") for t in ("identity", "shift1", "unshift1")}


def test_state_key_is_the_observed_word() -> None:
    task = ConventionTask()
    assert isinstance(task, SupportsStateKey)
    assert task.state_key("sys\n### Problem\nsecret kqz\n### a1\n") == "kqz"
    assert task.state_key("sys\n### a1\nzqk\n### a2\n") == "zqk"
    assert task.state_key("sys\n### a1\nZQK\n### a2\n") is None


def test_a_coordinated_expert_team_always_wins() -> None:
    for transforms in (
        {},
        {"a1": "reverse", "a2": "reverse"},
        {"a2": "reverse", "a3": "reverse"},
        {"a1": "shift1", "a3": "unshift1"},
        {"a1": "reverse_shift1", "a2": "reverse_unshift1"},
    ):
        assert rules.is_coordinated([transforms.get(a, "identity") for a in AGENTS])
        _, rewards = play(transforms, conventions=6)
        assert rewards.mean() == 1.0, transforms


def test_a_miscoordinated_expert_team_wins_only_on_fixed_points() -> None:
    # reverse, identity, identity: the team names the reversed secret, right only on palindromes.
    secrets, rewards = play({"a1": "reverse"})
    expected = [float(s == s[::-1]) for s in secrets]
    assert list(rewards) == expected and rewards.mean() < 0.1
    # A shift has no fixed point: always wrong.
    _, rewards = play({"a1": "reverse", "a2": "reverse", "a3": "shift1"})
    assert rewards.mean() == 0.0


def test_with_rounds_the_composite_runs_over_every_turn() -> None:
    rounds = {"max_turns": 2 * len(AGENTS)}
    assert play({"a1": "reverse", "a2": "reverse"}, **rounds)[1].mean() == 1.0
    # One reversal per round: miscoordinated in one round, coordinated in two.
    assert play({"a1": "reverse"}, **rounds)[1].mean() == 1.0
    assert play({"a1": "shift1"}, **rounds)[1].mean() == 0.0  # shift2 over the two rounds
    _, rewards = play({"a1": "unshift1", "a2": "reverse"}, problems=50, max_turns=2)
    assert rewards.mean() == 0.0  # two turns (a1, a2): reverse_unshift1, no fixed points


def test_a_noisy_expert_team_is_a_mixture_of_conventions() -> None:
    """With two conventions (identity, reverse) an erring agent reverses: the team is right when
    an even number of its 3 agents err (probability (1 + (1 - 2p)^3) / 2), or on a palindrome."""
    p = 0.2
    secrets, rewards = play({}, problems=600, error_rate=p, conventions=2)
    even = (1 + (1 - 2 * p) ** 3) / 2
    palindromes = np.mean([s == s[::-1] for s in secrets])
    expected = palindromes + (1 - palindromes) * even
    assert abs(rewards.mean() - expected) < 0.06, (rewards.mean(), expected)
