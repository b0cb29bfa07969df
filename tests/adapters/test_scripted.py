"""Tests for the model-free policies in ``adapters.scripted`` and
``teamtr_core.policy.SamplingParams``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from adapters.scripted import ConstantPolicy, HumanPolicy, RandomPolicy, ScriptedExpert
from tasks import Problem
from tasks.arith import rules
from tasks.arith.task import ArithTask
from teamtr_core.policy import Generation, Policy, SamplingParams

RANDOM_ALPHABET = set("abcdefghijklmnopqrstuvwxyz0123456789 +-*=:.,?!\n")


def _arith_batch(n: int, seed: int = 0) -> tuple[ArithTask, list[Problem], list[str]]:
    task = ArithTask(digits=2, operators="+-*", operands=3)
    rng = np.random.default_rng(seed)
    problems = [task.sample(rng) for _ in range(n)]
    contexts = [
        f"System: be helpful.\n### Problem\n{task.prompt(p)}\n[alice] hmm\nCompute: 1 + 1\n"
        for p in problems
    ]
    return task, problems, contexts


# ---------------------------------------------------------------- ScriptedExpert


def test_expert_without_errors_is_always_right() -> None:
    task, problems, contexts = _arith_batch(300)
    expert = ScriptedExpert(task, error_rate=0.0, seed=1)
    gens = expert.generate(contexts, SamplingParams())
    assert len(gens) == len(problems)
    for problem, gen in zip(problems, gens, strict=True):
        assert isinstance(gen, Generation) and gen.token_ids == ()
        assert gen.text == f"Answer: {problem.answer}"
        assert task.grade(problem, gen.text).correct


def test_expert_error_rate_is_respected() -> None:
    task, problems, contexts = _arith_batch(2000, seed=3)
    expert = ScriptedExpert(task, error_rate=0.3)
    gens = expert.generate(contexts, SamplingParams(seed=2024))
    wrong = 0
    for problem, gen in zip(problems, gens, strict=True):
        value, how = rules.extract_answer(gen.text)
        assert how == "answer_tag"
        if value != problem.answer:
            wrong += 1
            assert 1 <= abs(value - problem.answer) <= 10  # type: ignore[operator]
    assert abs(wrong / len(problems) - 0.3) <= 0.04


def test_expert_error_rate_one_is_always_wrong() -> None:
    task, problems, contexts = _arith_batch(200)
    gens = ScriptedExpert(task, error_rate=1.0).generate(contexts, SamplingParams(seed=0))
    assert not any(task.grade(p, g.text).correct for p, g in zip(problems, gens, strict=True))


def test_expert_same_seed_same_output_different_seed_differs() -> None:
    task, _, contexts = _arith_batch(100)
    expert = ScriptedExpert(task, error_rate=0.5)
    first = expert.generate(contexts, SamplingParams(seed=11))
    again = expert.generate(contexts, SamplingParams(seed=11))
    other_instance = ScriptedExpert(task, error_rate=0.5, seed=999)
    assert other_instance.generate(contexts, SamplingParams(seed=11)) == first
    assert again == first
    assert expert.generate(contexts, SamplingParams(seed=12)) != first


def test_expert_internal_seed_used_without_sampling_seed() -> None:
    task, _, contexts = _arith_batch(100)
    a = ScriptedExpert(task, error_rate=0.5, seed=5)
    b = ScriptedExpert(task, error_rate=0.5, seed=5)
    a1, b1 = a.generate(contexts, SamplingParams()), b.generate(contexts, SamplingParams())
    assert a1 == b1
    assert a.generate(contexts, SamplingParams()) != a1  # the internal stream advances


def test_the_runner_gives_a_privileged_expert_each_episodes_problem() -> None:
    """MATH answers are not in the text: the expert solves every episode only because the runner
    hands it the problem, and nothing is remembered between calls (no process-wide index)."""
    import teamtr_env
    from teamtr_core.policy import PrivilegedPolicy
    from teamtr_env.runners import Runner

    expert = ScriptedExpert(teamtr_env.make("teamtr/Math-v0").task, seed=0)
    assert isinstance(expert, PrivilegedPolicy)
    runner = Runner(lambda: teamtr_env.make("teamtr/Math-v0"), expert, progress=False)
    problems = runner.sample_problems(20, seed=0)
    batch = runner.rollout(problems, group_size=2, seed=0)
    assert all(e.correct for e in batch.episodes)
    # The same contexts without their problems: the expert has nothing to recall them from.
    contexts = [m.context for m in batch.messages if m.turn == 0]
    blind = expert.generate(contexts, SamplingParams(seed=0))
    assert all("cannot find the problem" in g.text for g in blind)
    with pytest.raises(ValueError, match="2 prompts but 1 problems"):
        expert.generate_privileged(contexts[:2], problems[:1], SamplingParams())


def test_an_expert_without_the_problem_keyword_is_refused_naming_it() -> None:
    """``expert_reply`` always gets ``problem=``: an expert written without it (the signature of
    earlier versions) is refused when the policy is made, with the keyword to add."""

    class OldTask:
        name = "old"

        def expert_reply(self, context: str, rng: np.random.Generator, *, make_error: bool) -> str:
            return "wrong" if make_error else context.upper()

    with pytest.raises(
        TypeError,
        match=r"Task 'old': expert_reply\(context, rng, \*, make_error\) takes no 'problem' "
        r"keyword.*problem=None",
    ):
        ScriptedExpert(OldTask())  # type: ignore[arg-type]

    class KeywordsTask:  # **kwargs takes problem= too
        name = "kw"

        def expert_reply(self, context: str, rng: np.random.Generator, **kwargs: object) -> str:
            return f"{context}:{kwargs['problem']}"

    gens = ScriptedExpert(KeywordsTask()).generate(["a"], SamplingParams(seed=0))  # type: ignore[arg-type]
    assert [g.text for g in gens] == ["a:None"]


def test_expert_requires_expert_reply() -> None:
    class NoExpertTask:
        name = "no-expert"
        description = ""
        interactive = False

    with pytest.raises(TypeError, match="no-expert"):
        ScriptedExpert(NoExpertTask())  # type: ignore[arg-type]


@pytest.mark.parametrize("rate", [1.5, -0.1, float("nan")])
def test_expert_rejects_bad_error_rate(rate: float) -> None:
    with pytest.raises(ValueError, match="error_rate"):
        ScriptedExpert(ArithTask(), error_rate=rate)


def test_expert_on_context_without_problem() -> None:
    gens = ScriptedExpert(ArithTask()).generate(["", "no problem here"], SamplingParams(seed=0))
    assert [rules.extract_answer(g.text) for g in gens] == [(None, "none")] * 2


# ---------------------------------------------------------------- RandomPolicy


@pytest.mark.parametrize("max_chars", [0, 1, 5, 24])
def test_random_policy_lengths_and_alphabet(max_chars: int) -> None:
    policy = RandomPolicy(max_chars=max_chars, seed=0)
    gens = policy.generate(["ctx"] * 400, SamplingParams())
    assert len(gens) == 400
    lengths = [len(g.text) for g in gens]
    assert max(lengths) <= max_chars
    if max_chars >= 5:
        assert max(lengths) == max_chars and min(lengths) == 0  # the full range 0..max_chars
    for g in gens:
        assert set(g.text) <= RANDOM_ALPHABET


def test_random_policy_deterministic_under_seed() -> None:
    prompts = ["a", "b", "c"] * 20
    a = RandomPolicy(seed=3).generate(prompts, SamplingParams(seed=7))
    b = RandomPolicy(seed=4).generate(prompts, SamplingParams(seed=7))
    assert a == b
    assert RandomPolicy(seed=3).generate(prompts, SamplingParams(seed=8)) != a
    # Without a sampling seed the constructor seed decides.
    c = RandomPolicy(seed=3).generate(prompts, SamplingParams())
    assert RandomPolicy(seed=3).generate(prompts, SamplingParams()) == c
    assert RandomPolicy(seed=4).generate(prompts, SamplingParams()) != c


# ---------------------------------------------------------------- ConstantPolicy


def test_constant_policy_cycles_and_counts() -> None:
    policy = ConstantPolicy(["a", "b"])
    assert policy.calls == 0
    assert [g.text for g in policy.generate(["x"] * 5, SamplingParams())] == [
        "a",
        "b",
        "a",
        "b",
        "a",
    ]
    assert policy.calls == 1
    assert [g.text for g in policy.generate(["x"], SamplingParams())] == ["a"]  # restarts per call
    policy.generate([], SamplingParams())
    assert policy.calls == 3


def test_constant_policy_single_string() -> None:
    policy = ConstantPolicy("Answer: 7")
    assert policy.texts == ["Answer: 7"]
    assert [g.text for g in policy.generate(["p", "q", "r"], SamplingParams())] == ["Answer: 7"] * 3


# ---------------------------------------------------------------- HumanPolicy


def test_human_policy_uses_injected_io() -> None:
    shown: list[str] = []
    asked: list[str] = []
    replies = iter(["first", "second"])

    def read(prompt: str) -> str:
        asked.append(prompt)
        return next(replies)

    policy = HumanPolicy(read=read, show=shown.append)
    gens = policy.generate(["ctx one", "ctx two"], SamplingParams())
    assert [g.text for g in gens] == ["first", "second"]
    assert shown == ["ctx one", "ctx two"]
    assert asked == ["> ", "> "]


def test_human_policy_eof_gives_empty_text() -> None:
    answers: list[str | None] = ["yes", None, "later"]

    def read(_: str) -> str:
        value = answers.pop(0)
        if value is None:
            raise EOFError
        return value

    gens = HumanPolicy(read=read, show=lambda _: None).generate(["a", "b", "c"], SamplingParams())
    assert [g.text for g in gens] == ["yes", "", "later"]


# ---------------------------------------------------------------- SamplingParams


def test_sampling_params_reports_all_problems() -> None:
    with pytest.raises(ValueError) as info:
        SamplingParams(temperature=-1, top_p=0, top_k=-1, max_new_tokens=0)
    message = str(info.value)
    for needle in ("temperature", "top_p", "top_k", "max_new_tokens"):
        assert needle in message
    assert message.count(";") == 3


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"temperature": -0.01}, "temperature"),
        ({"top_p": 1.01}, "top_p"),
        ({"top_p": -0.5}, "top_p"),
        ({"top_k": -3}, "top_k"),
        ({"max_new_tokens": -5}, "max_new_tokens"),
    ],
)
def test_sampling_params_single_problem(kwargs: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle) as info:
        SamplingParams(**kwargs)
    assert ";" not in str(info.value)


def test_sampling_params_edges_are_valid() -> None:
    params = SamplingParams(temperature=0, top_p=1.0, top_k=0, max_new_tokens=1, stop=["\n", "###"])
    assert params.stop == ("\n", "###")
    assert SamplingParams().temperature == 0.8 and SamplingParams().seed is None
    with pytest.raises(AttributeError):
        params.seed = 3  # type: ignore[misc]


# ---------------------------------------------------------------- every policy


POLICIES: dict[str, Callable[[], Policy]] = {
    "scripted": lambda: ScriptedExpert(ArithTask(), error_rate=0.5, seed=0),
    "random": lambda: RandomPolicy(seed=0),
    "constant": lambda: ConstantPolicy(["x", "y", "z"]),
    "human": lambda: HumanPolicy(read=lambda _: "typed", show=lambda _: None),
}


@pytest.mark.parametrize("name", sorted(POLICIES))
@pytest.mark.parametrize("n", [0, 1, 7])
def test_every_policy_returns_one_generation_per_prompt(name: str, n: int) -> None:
    policy = POLICIES[name]()
    assert isinstance(policy, Policy)
    prompts = [f"Compute: {i} + 1\nReply with: Answer: <integer>" for i in range(n)]
    gens = policy.generate(prompts, SamplingParams(seed=1))
    assert isinstance(gens, list) and len(gens) == n
    assert all(isinstance(g, Generation) and isinstance(g.text, str) for g in gens)
    if name == "scripted":
        assert all(rules.extract_answer(g.text)[0] is not None for g in gens)


def test_constant_policy_rejects_an_empty_list() -> None:
    with pytest.raises(ValueError, match="at least one text"):
        ConstantPolicy([])
