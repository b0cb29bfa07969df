"""The ``BlocksworldTask`` plugin: options, generation, grading, the scripted expert and the env."""

from __future__ import annotations

import json

import numpy as np
import pytest

import teamtr_env
from adapters.scripted import ScriptedExpert
from tasks import Problem, SupportsExpert, TaskConfigError, split_of
from tasks.blocksworld import BlocksworldTask, text
from tasks.blocksworld.domain import Instance, parse_action, simulate
from tasks.blocksworld.problems import DEFAULT_EXAMPLE, instance_from_data, make_problem
from teamtr_env.evaluation import evaluate
from teamtr_env.runners import Runner

SOLUTION = (
    "unstack the blue block from on top of the orange block\nput down the blue block\n"
    "pick up the orange block\nstack the orange block on top of the blue block\n[PLAN END]"
)


def example_problem() -> Problem:
    """b on c, goal c on b; optimal length 4."""
    return make_problem(DEFAULT_EXAMPLE, "bw:example", "test")


def grade(reply: str, problem: Problem | None = None, **options: object):
    return BlocksworldTask(**options).grade(problem or example_problem(), reply)  # type: ignore[arg-type]


# ---------------------------------------------------------------- options


def test_options_are_validated_all_at_once() -> None:
    with pytest.raises(TaskConfigError) as err:
        BlocksworldTask(blocks=9, require_optimal="yes", stop_at_plan_end=1, split="dev")  # type: ignore[arg-type]
    assert len(err.value.errors) == 4
    assert "blocks must be an integer in 3..8" in str(err.value)


@pytest.mark.parametrize(
    ("blocks", "expected"),
    [(5, (5, 5)), ("3-5", (3, 5)), ("4..8", (4, 8)), ([3, 6], (3, 6)), ("7", (7, 7))],
)
def test_block_ranges(blocks: object, expected: tuple[int, int]) -> None:
    assert BlocksworldTask(blocks=blocks).blocks == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("blocks", [2, "5-3", [3], "three", True, 3.0, [3, 9]])
def test_bad_block_ranges(blocks: object) -> None:
    with pytest.raises(TaskConfigError, match="blocks must be"):
        BlocksworldTask(blocks=blocks)  # type: ignore[arg-type]


# ---------------------------------------------------------------- generation


def test_generated_problems_are_non_trivial_optimal_and_in_their_split() -> None:
    task = BlocksworldTask(blocks="3-8", split="validation")
    rng = np.random.default_rng(0)
    sizes = set()
    for _ in range(60):
        problem = task.sample(rng)
        inst = instance_from_data(problem.data)
        assert problem.split == "validation" == split_of(problem.id)
        assert not inst.goal <= inst.init and all(f[0] == "on" for f in inst.goal)
        answer = problem.answer
        assert answer["optimal_length"] == len(answer["optimal_plan"])
        assert answer["optimal_length"] == problem.meta["optimal_length"]
        assert simulate(inst, [parse_action(a) for a in answer["optimal_plan"]]).valid
        sizes.add(len(inst.blocks))
    assert sizes == {3, 4, 5, 6, 7, 8}


def test_generation_is_seeded_and_generate_drops_duplicates() -> None:
    task = BlocksworldTask(blocks=3, split="train")
    a = [task.sample(np.random.default_rng(1)).id for _ in range(2)]
    assert a[0] == a[1]
    problems = task.generate(60, np.random.default_rng(2))
    assert len({p.id for p in problems}) == 60
    with pytest.raises(ValueError, match="distinct problems"):
        BlocksworldTask(blocks=3, split="test").generate(40, np.random.default_rng(3))


def test_splits_partition_the_instances() -> None:
    ids = {
        split: {
            BlocksworldTask(blocks=3, split=split).sample(np.random.default_rng(s)).id
            for s in range(40)
        }
        for split in ("train", "test")
    }
    assert ids["train"] and ids["test"] and not ids["train"] & ids["test"]


# ---------------------------------------------------------------- grading


def test_valid_plan() -> None:
    score = grade(SOLUTION)
    assert score.correct and score.reward == 1.0
    assert score.answer == "(unstack b c)\n(put-down b)\n(pick-up c)\n(stack c b)"
    assert score.details["reason"] == "valid"
    assert (score.details["plan_length"], score.details["optimal_length"]) == (4, 4)
    json.dumps(score.to_dict())


def test_inapplicable_action_names_the_step() -> None:
    score = grade(
        "unstack the blue block from on top of the orange block\npick up the orange block"
    )
    assert not score.correct
    assert score.details["reason"] == "inapplicable_action"
    assert (score.details["step"], score.details["action"]) == (2, "(pick-up c)")
    assert score.details["unsatisfied"] == ["(handempty)"]


def test_goal_not_reached() -> None:
    score = grade("unstack the blue block from on top of the orange block\nput down the blue block")
    assert (score.correct, score.details["reason"]) == (False, "goal_not_reached")
    assert score.details["unsatisfied"] == ["(on c b)"]


def test_no_plan_found() -> None:
    score = grade("I am not sure how to do this.")
    assert (score.correct, score.answer, score.details["reason"]) == (False, None, "no_plan_found")


def test_already_satisfied_goal() -> None:
    done = Instance(DEFAULT_EXAMPLE.blocks, DEFAULT_EXAMPLE.init, frozenset({("on", "b", "c")}))
    problem = make_problem(done, "bw:done", "test")
    assert problem.answer["optimal_length"] == 0
    assert grade("Nothing to do, the goal already holds.\n[PLAN END]", problem).correct
    assert grade("", problem, require_optimal=True).correct
    assert grade("pick up the red block\nput down the red block", problem).correct
    late = grade("pick up the red block\nput down the red block", problem, require_optimal=True)
    assert late.details["reason"] == "not_optimal"
    assert grade("put down the red block", problem).details["reason"] == "inapplicable_action"


def test_wrong_arity_lines_are_skipped() -> None:
    reply = SOLUTION.replace(
        "put down the blue block", "put down the blue block\nstack the orange block"
    )
    score = grade(reply)
    assert score.correct and score.details["skipped_lines"] == 1


def test_capitalisation() -> None:
    assert grade(SOLUTION.upper()).correct
    assert grade(SOLUTION.title()).correct


def test_extra_chatter_lines() -> None:
    reply = (
        "Let me think about the blocks.\nThe blue block is on the orange one, so:\n\n" + SOLUTION
    )
    assert grade(reply).correct
    after = SOLUTION + "\nThen I could unstack the orange block from on top of the blue block."
    assert grade(after).correct
    assert grade(after, stop_at_plan_end=False).details["reason"] == "goal_not_reached"


def test_non_optimal_valid_plan() -> None:
    reply = "pick up the yellow block\nput down the yellow block\n" + SOLUTION
    loose, strict = grade(reply), grade(reply, require_optimal=True)
    assert loose.correct and loose.details["plan_length"] == 6
    assert not strict.correct and strict.details["reason"] == "not_optimal"
    assert grade(SOLUTION, require_optimal=True).correct


def test_unknown_colour_is_inapplicable() -> None:
    score = grade("pick up the gold block")
    assert (score.details["reason"], score.details["unsatisfied"]) == (
        "inapplicable_action",
        ["object l"],
    )


def test_grade_never_raises() -> None:
    task = BlocksworldTask()
    rng = np.random.default_rng(0)
    chars = [*"abcdefghijklmnopqrstuvwxyz ()[]\n-.,:", "red block", "stack", "pick up"]
    for _ in range(200):
        junk = "".join(rng.choice(chars, size=int(rng.integers(0, 120))))
        assert task.grade(example_problem(), junk).reward in (0.0, 1.0)
    assert task.grade(example_problem(), "stack " * 100_000).details["reason"] == "no_plan_found"
    broken = Problem("bad", data={"blocks": ["z"], "init": [], "goal": []})
    assert task.grade(broken, SOLUTION).details["reason"] == "invalid_problem"
    assert task.grade(broken, None).details["reason"] == "invalid_problem"  # type: ignore[arg-type]


def test_missing_stored_answer_is_recomputed() -> None:
    problem = example_problem()
    bare = Problem(problem.id, problem.data, None, "test")
    strict = BlocksworldTask(require_optimal=True)
    assert strict.grade(bare, SOLUTION).details["optimal_length"] == 4
    capped = Problem(problem.id, problem.data, {"optimal_length": None}, "test")
    assert strict.grade(capped, SOLUTION).details["reason"] == "optimal_length_unknown"
    assert BlocksworldTask().grade(capped, SOLUTION).correct


# ---------------------------------------------------------------- scripted expert


def context_for(task: BlocksworldTask, problem: Problem) -> str:
    return f"### Problem\n{task.prompt(problem)}\n### agent_0\n"


def test_expert_solves_every_generated_instance_and_errors_are_invalid() -> None:
    assert isinstance(BlocksworldTask(), SupportsExpert)
    rng = np.random.default_rng(11)
    for optimality in (False, True):
        task = BlocksworldTask(blocks="3-8", require_optimal=optimality)
        for _ in range(60):
            problem = task.sample(rng)
            context = context_for(task, problem)
            reply = task.expert_reply(context, rng, make_error=False)
            assert reply.endswith("[PLAN END]")
            assert task.grade(problem, reply).correct, (problem.id, reply)
            wrong = task.expert_reply(context, rng, make_error=True)
            assert not task.grade(problem, wrong).correct


def test_expert_reads_the_last_statement_not_the_example() -> None:
    task = BlocksworldTask()
    problem = task.sample(np.random.default_rng(5))
    context = context_for(task, problem) + SOLUTION + "\n### agent_1\n"
    reply = task.expert_reply(context, np.random.default_rng(0), make_error=False)
    assert reply != SOLUTION and task.grade(problem, reply).correct


def test_expert_without_a_statement() -> None:
    task = BlocksworldTask()
    reply = task.expert_reply("### Problem\nhello\n", np.random.default_rng(0), make_error=False)
    assert task.grade(example_problem(), reply).details["reason"] == "no_plan_found"


def test_expert_error_on_an_empty_plan_is_still_wrong() -> None:
    done = Instance(DEFAULT_EXAMPLE.blocks, DEFAULT_EXAMPLE.init, frozenset({("on", "b", "c")}))
    problem = make_problem(done, "bw:done", "test")
    task = BlocksworldTask()
    reply = task.expert_reply(context_for(task, problem), np.random.default_rng(0), make_error=True)
    assert not task.grade(problem, reply).correct


# ---------------------------------------------------------------- environment


def test_registered_env_and_expert_rates() -> None:
    env_fn = lambda: teamtr_env.make("teamtr/Blocksworld-v0", blocks="3-6", split="test")  # noqa: E731
    task = env_fn().task
    for rate, low, high in ((0.0, 1.0, 1.0), (0.3, 0.55, 0.85)):
        runner = Runner(env_fn, ScriptedExpert(task, error_rate=rate, seed=0), progress=False)
        report = evaluate(runner, runner.sample_problems(40, seed=1), k=4, seed=0)
        assert low <= report.metrics["avg@4"].mean <= high


def test_env_prompt_and_plan_fit_the_default_limits() -> None:
    env = teamtr_env.make("teamtr/Blocksworld-v0", blocks=8)
    task = env.task
    assert isinstance(task, BlocksworldTask)
    rng = np.random.default_rng(0)
    for seed in range(20):
        env.reset(seed=seed)
        context = env.observe(env.agent_selection)["text"]
        reply = task.expert_reply(context, rng, make_error=False)
        assert len(reply) < env.protocol.max_message_chars
        assert len(context) + 3 * len(reply) < env.protocol.max_context_chars
    # Worst case for 8 blocks: unstacking everything and rebuilding takes at most 4 * (8 - 1)
    # actions; the longest action line has 58 characters plus a newline.
    longest = max(len(line) for line in text.ACTIONS.values()) - 4 + 2 * len("magenta block")
    assert longest == 58
    assert 4 * 7 * (longest + 1) + len(text.PLAN_END) < env.protocol.max_message_chars
