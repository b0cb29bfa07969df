"""The reasoning-gym task plugin: the catalogue, options, grading, time limits, splits, the
scripted expert and curricula (the PettingZoo conformance of every id is in
tests/teamtr_env/test_conformance.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers_skip import skip_module_without

import teamtr_env
from adapters.scripted import ScriptedExpert
from tasks import Problem, SupportsExpert, split_of
from tasks.reasoning_gym import CATALOGUE, ReasoningGymTask, extract_answer, make_task
from tasks.reasoning_gym.catalogue import NO_DEFAULT_BUILD, REASONING_GYM_VERSION
from tasks.reasoning_gym.scoring import GymPool
from tasks.reasoning_gym.task import SPLIT_RANGES
from teamtr_core.errors import ConfigError
from teamtr_env.evaluation import evaluate
from teamtr_env.runners import Runner
from teamtr_env.splits import count_split_problems

skip_module_without("reasoning_gym")
STUCK_WORKER = (
    Path(__file__).resolve().parents[2] / "fixtures" / "reasoning_gym" / "stuck_worker.py"
)
WITH_ANSWER = sorted(n for n, (_, _, answer) in CATALOGUE.items() if answer)


# -- the catalogue ----------------------------------------------------------------------------
def test_the_catalogue_is_the_installed_reasoning_gym() -> None:
    from importlib.metadata import version

    from reasoning_gym import factory

    assert version("reasoning_gym") == REASONING_GYM_VERSION
    assert sorted(CATALOGUE) == sorted(factory.DATASETS) and len(CATALOGUE) == 106
    for name, (category, levels, _) in CATALOGUE.items():
        dataset_cls, _ = factory.DATASETS[name]
        assert dataset_cls.__module__.split(".")[1] == category, name
        if name in factory.CURRICULA:
            curriculum = factory.create_curriculum(name)
            assert levels == max(len(a.levels) for a in curriculum.attributes.values()), name
        else:
            assert levels == 0, name


def test_listing_the_ids_does_not_import_reasoning_gym() -> None:
    code = (
        "import sys, teamtr_env; ids = [i for i in teamtr_env.registry "
        "if i.startswith('reasoning_gym/')]; print(len(ids)); "
        "print(teamtr_env.registry['reasoning_gym/basic_arithmetic-v0'].source); "
        "print('reasoning_gym' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["106", "reasoning-gym", "False"]


def test_every_id_makes_or_says_why_not() -> None:
    env = teamtr_env.make("reasoning_gym/basic_arithmetic")  # no version: the highest
    assert (
        isinstance(env.task, ReasoningGymTask) and env.task.name == "reasoning_gym/basic_arithmetic"
    )
    with pytest.raises(ConfigError, match="Must specify at least one dataset"):
        teamtr_env.make("reasoning_gym/composite-v0")
    assert set(NO_DEFAULT_BUILD) == {"composite"}


# -- options ------------------------------------------------------------------------------------
def test_bad_options_are_all_reported_with_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as err:
        teamtr_env.make(
            "reasoning_gym/basic_arithmetic",
            min_term=3,
            max_terms="x",
            seed=4,
            curriculum_level=9,
            threshold=0,
        )
    text = str(err.value)
    assert "'min_term' is not accepted by reasoning_gym/basic_arithmetic-v0" in text
    assert "Did you mean 'min_terms'?" in text and "'allow_parentheses'" in text  # the valid ones
    for option in ("curriculum_level", "size", "split", "threshold", "timeout_s", "max_turns"):
        assert f"'{option}'" in text  # the task's own options and the environment's are listed
    assert "'seed' is not an option" in text and "teamtr sets it" in text
    assert "threshold must be in (0, 1]" in text
    # The dataset's options are checked once the task's own are right.
    with pytest.raises(ConfigError) as err:
        teamtr_env.make("reasoning_gym/basic_arithmetic", max_terms="x", min_digits=0)
    text = str(err.value)
    assert "max_terms: expected int like its default 6, got 'x'" in text
    with pytest.raises(ConfigError, match="min_digits must be positive"):
        teamtr_env.make("reasoning_gym/basic_arithmetic", min_digits=0)


def test_a_misspelt_environment_option_is_suggested_beside_the_datasets() -> None:
    """``max_turn`` is closer to the environment's ``max_turns`` than to the dataset's
    ``max_terms``: the suggestion covers both (issue #46, D8)."""
    with pytest.raises(ConfigError) as err:
        teamtr_env.make("reasoning_gym/basic_arithmetic", max_turn=3)
    text = str(err.value)
    assert "'max_turn' is not accepted" in text and "Did you mean 'max_turns'?" in text
    assert "environment options: [" in text and "'max_terms'" in text
    assert teamtr_env.make("reasoning_gym/basic_arithmetic", max_turns=3).protocol.max_turns == 3


def test_config_fields_pass_through() -> None:
    task = make_task("basic_arithmetic", min_terms=3, max_terms=3, operators=["+"])
    rng = np.random.default_rng(0)
    for _ in range(5):
        question = task.sample(rng).data["question"]
        assert question.count("+") >= 2 and "*" not in question, question


def test_a_curriculum_level_sets_the_difficulty() -> None:
    easy = make_task("basic_arithmetic", curriculum_level=0).dataset_config
    hard = make_task("basic_arithmetic", curriculum_level=4).dataset_config
    assert (easy["max_terms"], easy["max_digits"]) == (2, 1)
    assert (hard["max_terms"], hard["max_digits"]) == (6, 4)
    with pytest.raises(ConfigError) as err:
        teamtr_env.make("reasoning_gym/basic_arithmetic", curriculum_level=5, max_terms=3)
    assert "expected 0..4" in str(err.value) and "set by curriculum_level" in str(err.value)
    with pytest.raises(ConfigError, match="acre has no curriculum"):
        teamtr_env.make("reasoning_gym/acre", curriculum_level=0)


def test_composite_takes_its_datasets_as_json() -> None:
    datasets = [
        {"name": "chain_sum", "weight": 1, "config": {}},
        {"name": "gcd", "weight": 1, "config": {}},
    ]
    task = make_task("composite", datasets=datasets)
    rng = np.random.default_rng(0)
    problem = task.sample(rng)
    assert task.grade(problem, f"Answer: {problem.answer}").correct
    with pytest.raises(ConfigError, match=r"datasets\[0\]: expected"):
        make_task("composite", datasets=[{"nme": "gcd"}])


# -- grading ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Answer: 42", ("42", "answer_line")),
        ("so answer: -4\n", ("-4", "answer_line")),
        ("Answer: 1\nAnswer: 2", ("2", "answer_line")),
        ("<answer>\n1 2\n3 4\n</answer> done", ("1 2\n3 4", "answer_tag")),
        ("Answer: 9 <answer>7</answer>", ("7", "answer_tag")),
        ("Answer:\n1 2\n3 4", ("1 2\n3 4", "answer_line")),
        ("no final answer", (None, "none")),
        ("Answer:   ", (None, "answer_line")),
        ("<answer></answer>", (None, "answer_tag")),
    ],
)
def test_extract_answer(text: str, expected: tuple[str | None, str]) -> None:
    assert extract_answer(text) == expected


def test_the_dataset_scores_the_answer() -> None:
    task = make_task("basic_arithmetic")
    problem = task.sample(np.random.default_rng(0))
    right = task.grade(problem, f"I think... Answer: {problem.answer}")
    assert (right.reward, right.correct, right.answer) == (1.0, True, problem.answer)
    assert right.details["reason"] == "correct" and right.details["extraction"] == "answer_line"
    wrong = task.grade(problem, "Answer: 123456789")
    assert (wrong.reward, wrong.correct, wrong.details["reason"]) == (0.0, False, "wrong_answer")
    none = task.grade(problem, "the answer is seven")
    assert none.details["reason"] == "no_answer_found" and none.answer is None


def test_partial_credit_is_the_reward_and_the_threshold_decides_correct() -> None:
    # reasoning-gym's default score_answer gives len(gold)/len(answer) when the gold is inside.
    strict = make_task("basic_arithmetic")
    problem = strict.sample(np.random.default_rng(1))
    text = f"Answer: {problem.answer} apples"
    partial = strict.grade(problem, text)
    assert 0 < partial.reward < 1 and not partial.correct
    assert partial.details["reason"] == "partial_credit"
    lenient = make_task("basic_arithmetic", threshold=partial.reward)
    assert lenient.grade(problem, text).correct


def test_a_raising_score_answer_is_a_logged_zero() -> None:
    task = make_task("prime_factorization")  # its score_answer raises on non-numbers
    problem = task.sample(np.random.default_rng(0))
    score = task.grade(problem, "Answer: abc")
    assert (score.reward, score.correct, score.details["reason"]) == (0.0, False, "scorer_error")
    assert "ValueError" in score.details["error"]
    assert task.grade(problem, f"Answer: {problem.answer}").correct  # the worker goes on


def test_a_hanging_score_answer_times_out_to_a_zero_and_the_next_answer_is_scored() -> None:
    task = make_task("basic_arithmetic", timeout_s=0.5)
    problem = task.sample(np.random.default_rng(0))
    task.pool = GymPool(max_workers=1, command=[sys.executable, "-u", str(STUCK_WORKER)])
    try:
        assert task.grade(problem, "Answer: 1").reward == 1.0  # the worker is up
        t0 = time.monotonic()
        score = task.grade(problem, "Answer: hang")
        assert time.monotonic() - t0 < 5
        assert (score.reward, score.details["reason"]) == (0.0, "scorer_timeout")
        assert task.grade(problem, "Answer: 1").reward == 1.0  # a fresh worker scores on
        assert task.pool.workers.started == 2
    finally:
        task.pool.close()


def test_a_problem_that_is_not_its_index_scores_zero() -> None:
    task = make_task("basic_arithmetic")
    real = task.sample(np.random.default_rng(0))
    forged = Problem(real.id, {**real.data, "question": "Calculate 1 + 1."}, "2")
    score = task.grade(forged, "Answer: 2")
    assert (score.reward, score.details["reason"]) == (0.0, "problem_mismatch")


GARBAGE = [
    "",
    "Answer: " + "9" * 200_000,
    "Answer: \u2212\u0664\u0662 \U0001f600 \ud800",
    "Answer: \x00\x01\x1b[31m\x7f",
    "<answer>" * 1000,
    "Answer: <answer></answer>\n" * 50,
]


@pytest.mark.parametrize("dataset", ["basic_arithmetic", "arc_1d", "propositional_logic"])
@pytest.mark.parametrize("text", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage_answers_score_without_raising(dataset: str, text: str) -> None:
    task = make_task(dataset)
    problem = task.sample(np.random.default_rng(0))
    score = task.grade(problem, text)
    assert 0.0 <= score.reward <= 1.0 and isinstance(score.details["reason"], str)


@pytest.mark.parametrize("action", [*GARBAGE[:4], None, b"\xff bytes", 12345])
def test_garbage_actions_in_the_team_env(action: object) -> None:
    env = teamtr_env.make("reasoning_gym/basic_arithmetic")
    env.reset(seed=0)
    for _agent in env.agent_iter():
        _, _, terminated, truncated, info = env.last()
        env.step(None if terminated or truncated else action)  # type: ignore[arg-type]
    assert 0.0 <= info["score"]["reward"] <= 1.0


# -- splits -------------------------------------------------------------------------------------
@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_problems_stay_in_their_split(split: str) -> None:
    task = make_task("basic_arithmetic", split=split)
    low, high = SPLIT_RANGES[split]
    rng = np.random.default_rng(0)
    for _ in range(20):
        problem = task.sample(rng)
        assert problem.split == split and split_of(problem.id) == split
        assert low * task.size <= problem.data["index"] < high * task.size


def test_a_small_generator_s_splits_are_counted_and_share_nothing() -> None:
    # The easiest level with + and - only repeats itself: each split is counted, none overlap
    # (two splits: each split draws from its own generator, and validation is a split like test,
    # checked by test_problems_stay_in_their_split).
    counts = count_split_problems(
        "reasoning_gym/basic_arithmetic",
        600,
        splits=("train", "test"),
        curriculum_level=0,
        operators=["+", "-"],
    )
    by = {c.split: c for c in counts}
    assert all(c.shared == 0 for c in counts)
    assert by["test"].exhausted and 150 < by["test"].distinct < 260
    assert by["train"].distinct > by["test"].distinct


def test_question_repeats_are_the_same_problem() -> None:
    task = make_task("basic_arithmetic", curriculum_level=0, operators=["+"])
    rng = np.random.default_rng(0)
    problems = [task.sample(rng) for _ in range(400)]
    by_id: dict[str, str] = {}
    for p in problems:
        assert by_id.setdefault(p.id, p.data["question"]) == p.data["question"]
    assert len(by_id) < len(problems)  # repeats exist, and share an id


def test_teamtr_eval_refuses_the_training_split(capsys: pytest.CaptureFixture[str]) -> None:
    from teamtr_cli.app import main

    assert main(["eval", "reasoning_gym/basic_arithmetic", "--split", "train"]) != 0
    assert "--allow-train" in capsys.readouterr().err


# -- the scripted expert ------------------------------------------------------------------------
def test_a_dataset_without_reference_answers_has_no_expert() -> None:
    assert not isinstance(make_task("propositional_logic"), SupportsExpert)
    assert isinstance(make_task("basic_arithmetic"), SupportsExpert)


@pytest.mark.parametrize(
    "dataset",
    ["basic_arithmetic", "tower_of_hanoi", "arc_1d", "rotate_matrix", "decimal_arithmetic"],
)
def test_the_expert_s_answer_scores_and_its_error_does_not(dataset: str) -> None:
    _expert_round_trip(dataset, problems=3)


@pytest.mark.slow
@pytest.mark.parametrize("dataset", [d for d in WITH_ANSWER if d not in NO_DEFAULT_BUILD])
def test_every_dataset_s_expert_answer_scores(dataset: str) -> None:
    _expert_round_trip(dataset, problems=2, errors=False)


def _expert_round_trip(dataset: str, problems: int, errors: bool = True) -> None:
    env = teamtr_env.make(f"reasoning_gym/{dataset}", split="test")
    task = env.task
    rng = np.random.default_rng(0)
    for _ in range(problems):
        problem = task.sample(rng)
        env.reset(options={"problem": problem.to_dict()})
        context = env.context(env.agent_selection)
        right = task.expert_reply(context, rng, make_error=False, problem=problem)
        assert len(right) <= env.protocol.max_message_chars
        assert task.grade(problem, right).correct, (dataset, problem.answer, right)
        if errors:
            wrong = task.expert_reply(context, rng, make_error=True, problem=problem)
            assert not task.grade(problem, wrong).correct, (dataset, problem.answer, wrong)


@pytest.mark.slow  # docs/tasks/reasoning_gym.md's example checks the same on 100 problems
def test_scripted_team_scores_its_error_rate() -> None:
    make = lambda: teamtr_env.make("reasoning_gym/basic_arithmetic", split="test")  # noqa: E731
    runner = Runner(make, ScriptedExpert(make().task, error_rate=0.2, seed=0), progress=False)
    report = evaluate(runner, runner.sample_problems(200, seed=0), k=4)
    assert report.n_problems_distinct == 200
    assert 0.72 < report.metrics["avg@4"].mean < 0.88


def test_problems_are_json_and_the_same_in_every_process() -> None:
    """Some generators iterate sets (their order follows the process's hash seed): the workers
    run with one hash seed, so a problem is the same in a new process."""
    task = make_task("ransom_note", split="test")
    problems = [task.sample(np.random.default_rng(0)) for _ in range(3)]
    again = Problem.from_dict(json.loads(json.dumps(problems[0].to_dict())))
    assert again == problems[0] and problems[0] == problems[1]
    code = (
        "import numpy as np; from tasks.reasoning_gym import make_task; "
        "print(make_task('ransom_note', split='test').sample(np.random.default_rng(0)).id)"
    )
    # A new interpreter: another hash seed than this process's (the workers' is pinned).
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == problems[0].id
    assert task.grade(problems[0], f"Answer: {problems[0].answer}").correct


@pytest.mark.slow  # a benchmark smoke run
def test_the_speed_benchmark_measures_and_writes_json(tmp_path: Path) -> None:
    script = Path(__file__).resolve().parents[3] / "benchmarks" / "reasoning_gym_speed.py"
    out = tmp_path / "speed.json"
    done = subprocess.run(
        [sys.executable, str(script), "--only", "basic_arithmetic,propositional_logic",
         "--problems", "4", "--json", str(out)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "| basic_arithmetic" in done.stdout and "n/a" in done.stdout
    rows = {r["dataset"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["basic_arithmetic"]["right"] == 1.0 and rows["basic_arithmetic"]["graded_per_s"] > 0
    assert not rows["propositional_logic"]["reference_answer"]


def test_no_reference_answer_refuses_the_scripted_policy_but_plays_random(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from teamtr_cli.app import main

    assert main(["eval", "reasoning_gym/propositional_logic", "--policy", "scripted"]) != 0
    assert "no scripted expert" in capsys.readouterr().err.replace("\n", " ")
    assert main(["eval", "reasoning_gym/propositional_logic", "--policy", "random",
                 "--problems", "5", "--k", "1"]) == 0  # fmt: skip


def test_an_index_the_generator_gives_up_on_is_skipped() -> None:
    from tasks.reasoning_gym.scoring import ItemError

    class Flaky(GymPool):
        def __init__(self, fails: int) -> None:
            super().__init__(max_workers=1)
            self.fails = fails

        def item(self, spec: dict, index: int) -> tuple[str, str | None]:  # type: ignore[override]
            if self.fails:
                self.fails -= 1
                raise ItemError(f"item {index}: ValueError: Failed to generate")
            return super().item(spec, index)

    task = make_task("basic_arithmetic")
    task.pool = Flaky(fails=3)
    try:
        assert task.sample(np.random.default_rng(0)).answer is not None
        task.pool.fails = 10_000
        with pytest.raises(RuntimeError, match="failed on 100 indices in a row"):
            task.sample(np.random.default_rng(0))
    finally:
        task.pool.close()


def test_the_team_protocols_work_on_a_reasoning_gym_task() -> None:
    """A relay (each later agent sees only the previous message) of two rounds: the scripted
    team, privileged, answers from the problem; the context of the second agent holds no
    problem."""
    make = lambda: teamtr_env.make(  # noqa: E731
        "reasoning_gym/chain_sum",
        agents=["first", "second"],
        visibility="previous",
        max_turns=4,
        split="test",
    )
    env = make()
    env.reset(seed=0)
    env.step("Answer: 1")
    assert env.agent_selection == "second" and "Answer: 1" in env.context("second")
    assert "arithmetic problem" not in env.context("second")
    runner = Runner(make, ScriptedExpert(env.task, error_rate=0.0, seed=0), progress=False)
    report = evaluate(runner, runner.sample_problems(20, seed=0), k=2)
    assert report.metrics["avg@2"].mean == 1.0
