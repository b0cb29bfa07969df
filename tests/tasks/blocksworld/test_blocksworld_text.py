"""PlanBench rendering (checked against hand-written expected text) and plan extraction."""

from __future__ import annotations

import pytest

from tasks.blocksworld import text
from tasks.blocksworld.domain import Action, Instance, parse_action
from tasks.blocksworld.problems import DEFAULT_EXAMPLE, DEFAULT_EXAMPLE_PLAN

# PlanBench's first task-1 query shows this example statement (generated_basic/instance-1).
EXAMPLE_STATEMENT = (
    "\n[STATEMENT]\nAs initial conditions I have that, the red block is clear, the blue block is "
    "clear, the yellow block is clear, the hand is empty, the blue block is on top of the orange "
    "block, the red block is on the table, the orange block is on the table and the yellow block "
    "is on the table.\nMy goal is to have that the orange block is on top of the blue block.\n\n"
    "My plan is as follows:\n\n[PLAN]\nunstack the blue block from on top of the orange block\n"
    "put down the blue block\npick up the orange block\nstack the orange block on top of the blue "
    "block\n[PLAN END]\n"
)

QUERY = Instance(
    tuple("abcd"),
    frozenset(
        {
            ("handempty",),
            ("ontable", "a"),
            ("on", "b", "a"),
            ("on", "c", "b"),
            ("ontable", "d"),
            ("clear", "c"),
            ("clear", "d"),
        }
    ),
    frozenset({("on", "a", "d"), ("on", "d", "c")}),
)
QUERY_STATEMENT = (
    "\n[STATEMENT]\nAs initial conditions I have that, the orange block is clear, the yellow block "
    "is clear, the hand is empty, the blue block is on top of the red block, the orange block is "
    "on top of the blue block, the red block is on the table and the yellow block is on the table."
    "\nMy goal is to have that the red block is on top of the yellow block and the yellow block is "
    "on top of the orange block.\n\nMy plan is as follows:\n\n[PLAN]"
)


def acts(*texts: str) -> list[Action]:
    return [parse_action(t) for t in texts]


# ---------------------------------------------------------------- rendering


def test_example_statement_is_planbench_text() -> None:
    assert text.render_statement(DEFAULT_EXAMPLE, DEFAULT_EXAMPLE_PLAN) == EXAMPLE_STATEMENT


def test_query_statement_sorts_facts_by_predicate_then_pddl_names() -> None:
    assert text.render_statement(QUERY, None) == QUERY_STATEMENT


def test_prompt_is_intro_example_query() -> None:
    prompt = text.render_prompt(QUERY, DEFAULT_EXAMPLE, DEFAULT_EXAMPLE_PLAN)
    assert prompt == text.DOMAIN_INTRO + EXAMPLE_STATEMENT + QUERY_STATEMENT
    assert prompt.startswith("I am playing with a set of blocks where I need to arrange")
    assert "no longer clear.\n\n[STATEMENT]\nAs initial" in prompt
    assert prompt.endswith("[PLAN]")


def test_optimality_prompt_uses_task_two_wording() -> None:
    prompt = text.render_prompt(QUERY, DEFAULT_EXAMPLE, DEFAULT_EXAMPLE_PLAN, optimality=True)
    assert prompt.startswith(text.DOMAIN_INTRO_COST)
    assert "It takes 1 minute to pick up a block." in prompt
    assert (
        "on top of the blue block. I want to minimize the time taken to achieve my goal.\n"
        "My plan is as follows:\n\n[PLAN]\nunstack the blue block" in prompt
    )
    assert "[PLAN END]\nThe total time to execute the plan is 4 minutes.\n\n[STATEMENT]" in prompt
    assert prompt.endswith("achieve my goal.\nMy plan is as follows:\n\n[PLAN] ")


def test_fact_joining() -> None:
    assert text.render_facts([]) == ""
    assert text.render_facts([("handempty",)]) == "the hand is empty"
    two = text.render_facts([("ontable", "l"), ("holding", "k")])
    assert two == "the hand is currently holding silver block and the gold block is on the table"


def test_plan_rendering_ends_with_plan_end() -> None:
    rendered = text.render_plan(acts("(pick-up e)", "(stack e f)"))
    assert rendered == (
        "pick up the white block\nstack the white block on top of the magenta block\n[PLAN END]"
    )


# ---------------------------------------------------------------- extraction


def test_extracts_a_clean_plan() -> None:
    out = text.extract_plan(text.render_plan(DEFAULT_EXAMPLE_PLAN))
    assert out == text.ExtractedPlan(DEFAULT_EXAMPLE_PLAN, 0, True)


def test_capitalisation_numbering_and_chatter() -> None:
    reply = (
        "Sure! Here is my plan:\n\n1. UNSTACK the Blue Block from on top of the Orange Block\n"
        "2. Put Down the blue block.\n   3. pick up the orange block\n"
        "4. stack the orange block on top of the blue block\nThat should do it."
    )
    assert text.extract_plan(reply).actions == DEFAULT_EXAMPLE_PLAN


def test_wrong_arity_lines_are_skipped() -> None:
    reply = "stack the orange block\npick up the red block\nstack the red block on the red block"
    out = text.extract_plan(reply)
    assert out.actions == acts("(pick-up a)")
    assert out.skipped == 2  # a colour counts once, as in PlanBench


def test_objects_are_ordered_by_position_not_by_colour() -> None:
    out = text.extract_plan("unstack the yellow block from on top of the red block")
    assert out.actions == acts("(unstack d a)")


def test_block_names_match_as_whole_phrases() -> None:
    """Issue #15: "the tired block" read as the red block (PlanBench tests substrings)."""
    assert text.extract_plan("put down the tired block").actions == []
    out = text.extract_plan("stack the tired block on top of the red block\npick up the red block")
    assert out.actions == acts("(pick-up a)") and out.skipped == 1
    assert text.extract_plan("put down the blue blocks").actions == []
    assert text.extract_plan("pick up theorange block").actions == []


@pytest.mark.parametrize(
    "line",
    [
        "stack the red block on top of the blue block",
        "Stack the **red block** on top of the __blue block__.",
        "stack (red block) on top of [blue block]",
        "stack red block,blue block",
        "stack the red block on the blue block; then the red block again",
    ],
)
def test_block_names_between_punctuation_still_match(line: str) -> None:
    assert text.extract_plan(line).actions == acts("(stack a b)")


@pytest.mark.parametrize(
    ("line", "names"),
    [
        ("the tired block", []),
        ("the bored block and the red block", ["red block"]),
        ("the blue block on the red block", ["blue block", "red block"]),
        ("the red blocks", []),
        ("red block2 or red block", ["red block"]),
        ("the reds block", []),
    ],
)
def test_block_names(line: str, names: list[str]) -> None:
    assert text.block_names(line) == names


def test_action_is_the_first_of_the_domain_order_present_as_a_word() -> None:
    # PlanBench scans pick-up, put-down, stack, unstack in the domain's order, not the line's.
    out = text.extract_plan("unstack the blue block from the orange block and stack it")
    assert out.actions == acts("(stack b c)")
    # Glued punctuation hides the action word, as in PlanBench.
    assert text.extract_plan("**unstack** the blue block from the orange block").actions == []


def test_text_after_plan_end_is_ignored_unless_asked() -> None:
    reply = (
        "pick up the red block\nstack the red block on top of the blue block\n[PLAN END]\n"
        "Finally I could pick up the orange block, but it is not needed."
    )
    assert text.extract_plan(reply).actions == acts("(pick-up a)", "(stack a b)")
    whole = text.extract_plan(reply, stop_at_end=False)
    assert whole.actions == acts("(pick-up a)", "(stack a b)", "(pick-up c)")
    assert not whole.stopped_at_end


def test_extraction_limits() -> None:
    long_reply = "pick up the red block\n" * 50
    assert len(text.extract_plan(long_reply, max_actions=7).actions) == 7
    assert text.extract_plan("pick up the red block", max_chars=10).actions == []
    assert text.extract_plan("").actions == []


# ---------------------------------------------------------------- reading statements back


def test_statements_parse_back() -> None:
    assert text.parse_statement(QUERY_STATEMENT) == QUERY
    assert text.parse_statement(EXAMPLE_STATEMENT) == DEFAULT_EXAMPLE
    prompt = text.render_prompt(QUERY, DEFAULT_EXAMPLE, DEFAULT_EXAMPLE_PLAN, optimality=True)
    assert text.last_statement(prompt) == QUERY


def test_last_statement_skips_unparsable_statements() -> None:
    prompt = text.render_prompt(QUERY, DEFAULT_EXAMPLE, DEFAULT_EXAMPLE_PLAN)
    assert text.last_statement(prompt + "\n### agent_0\n[STATEMENT] let me think") == QUERY
    assert text.last_statement("no statement here") is None


@pytest.mark.parametrize(
    "bad",
    [
        "the red block is on the floor",
        "the purple block is clear",
        "the red block is clear; the hand is empty",
    ],
)
def test_unknown_phrases_do_not_parse(bad: str) -> None:
    assert text.parse_facts(bad) is None
