"""PlanBench's natural-language rendering of Blocksworld and its plan extraction, reproduced.

Rendering follows ``plan-bench/utils/pddl_to_text.py`` (task 1, plan generation) and
``utils/task_utils.py::optimality`` (task 2, optimal planning) of karthikv792/LLMs-Planning with the
``configs/blocksworld.yaml`` templates:

* objects ``a``..``l`` are ``red block``, ``blue block``, ... ``gold block``;
* facts are sorted by ``predicate + " " + " ".join(objects)`` on the PDDL names, rendered with the
  predicate templates and joined with ``", "`` except the last, which is joined with ``" and "``;
* a prompt is the domain description, a one-shot example (statement, plan, ``[PLAN END]``) and the
  query statement ending in ``[PLAN]``.

Extraction follows ``utils/text_to_pddl.py::text_to_plan_blocksworld``: the text is lowercased,
``pick up``/``put down`` become ``pick-up``/``put-down``; on each line the action is the first of
``pick-up, put-down, stack, unstack`` (the domain file's order) that occurs as a whitespace-separated
word; its objects are the block names found in the line, ordered by first occurrence (a block
counts once); a line whose object count differs from the action's arity is skipped. A block name is
``<colour> block`` as a whole phrase: the colour is not preceded, and ``block`` not followed, by a
letter or digit. PlanBench tests substrings (``"red block" in line``), so it reads "the tired
block" as the red block; we do not, which changes no verdict on PlanBench's recorded GPT-4
answers (``tests/tasks/blocksworld/test_blocksworld_planbench_official.py``). As PlanBench's
completion pipelines stop generation at ``[PLAN END]``, text from the first ``[PLAN END]`` on is
ignored by default; ``stop_at_end=False`` reads the whole reply as its chat-model evaluation does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from tasks.blocksworld.domain import ACTION_ARITY, ACTION_ORDER, Action, Fact, Instance

COLOURS = {
    "a": "red block",
    "b": "blue block",
    "c": "orange block",
    "d": "yellow block",
    "e": "white block",
    "f": "magenta block",
    "g": "black block",
    "h": "cyan block",
    "i": "green block",
    "j": "violet block",
    "k": "silver block",
    "l": "gold block",
}
"""PlanBench's ``encoded_objects``: PDDL object name -> block name."""
LETTERS = {v: k for k, v in COLOURS.items()}

PREDICATES = {
    "ontable": "the {} is on the table",
    "clear": "the {} is clear",
    "handempty": "the hand is empty",
    "holding": "the hand is currently holding {}",
    "on": "the {} is on top of the {}",
}
ACTIONS = {
    "pick-up": "pick up the {}",
    "put-down": "put down the {}",
    "stack": "stack the {} on top of the {}",
    "unstack": "unstack the {} from on top of the {}",
}

_RULES = """\
I can only pick up or unstack one block at a time.
I can only pick up or unstack a block if my hand is empty.
I can only pick up a block if the block is on the table and the block is clear. \
A block is clear if the block has no other blocks on top of it and if the block is not picked up.
I can only unstack a block from on top of another block if the block I am unstacking was really \
on top of the other block.
I can only unstack a block from on top of another block if the block I am unstacking is clear.
Once I pick up or unstack a block, I am holding the block.
I can only put down a block that I am holding.
I can only stack a block on top of another block if I am holding the block being stacked.
I can only stack a block on top of another block if the block onto which I am stacking the block \
is clear.
Once I put down or stack a block, my hand becomes empty.
Once you stack a block on top of a second block, the second block is no longer clear.
"""
DOMAIN_INTRO = (
    "I am playing with a set of blocks where I need to arrange the blocks into stacks. "
    "Here are the actions I can do\n\n"
    "Pick up a block\nUnstack a block from on top of another block\nPut down a block\n"
    "Stack a block on top of another block\n\n"
    "I have the following restrictions on my actions:\n" + _RULES
)
"""The domain description of PlanBench task 1 (``domain_intro``)."""
DOMAIN_INTRO_COST = (
    "I am playing with a set of blocks where I need to arrange the blocks into stacks. "
    "Here are the actions I can do:\n\n"
    "Pick up a block. It takes 1 minute to pick up a block.\n"
    "Unstack a block from on top of another block. It takes 1 minute to unstack a block from on "
    "top of another block.\n"
    "Put down a block. It takes 1 minute to put down a block.\n"
    "Stack a block on top of another block. It takes 1 minute to stack a block on top of another "
    "block.\n\n"
    "I have the following restrictions on my actions:\n" + _RULES
)
"""The domain description of PlanBench task 2, plan optimality (``domain_intro_cost``)."""

PLAN_END = "[PLAN END]"
MINIMIZE = " I want to minimize the time taken to achieve my goal."


# ---------------------------------------------------------------- rendering


def fact_sort_key(fact: Fact) -> str:
    """PlanBench's sort key: predicate name, a space, the PDDL object names joined by spaces."""
    return fact[0] + " " + " ".join(fact[1:])


def render_fact(fact: Fact) -> str:
    """``("on", "a", "b")`` -> ``"the red block is on top of the blue block"``."""
    return PREDICATES[fact[0]].format(*(COLOURS[a] for a in fact[1:]))


def render_facts(facts: Iterable[Fact]) -> str:
    """Sorted facts joined as PlanBench does: ``"x, y and z"`` (``""`` when there are none)."""
    phrases = [render_fact(f) for f in sorted(facts, key=fact_sort_key)]
    if len(phrases) > 1:
        return ", ".join(phrases[:-1]) + f" and {phrases[-1]}"
    return phrases[0] if phrases else ""


def render_action(action: Action) -> str:
    """``(unstack b c)`` -> ``"unstack the blue block from on top of the orange block"``."""
    return ACTIONS[action.name].format(*(COLOURS[a] for a in action.args))


def render_plan(plan: Sequence[Action]) -> str:
    """The plan as PlanBench writes it: one action per line, then ``[PLAN END]``."""
    return "".join(render_action(a) + "\n" for a in plan) + PLAN_END


def render_statement(
    instance: Instance, plan: Sequence[Action] | None, optimality: bool = False
) -> str:
    """One ``[STATEMENT]`` block; with ``plan`` it is a solved example, without it the query.

    ``optimality`` selects PlanBench task 2's wording (minimise time, total time after the plan).
    """
    init, goal = render_facts(instance.init), render_facts(instance.goal)
    if optimality:
        text = f"\n[STATEMENT]\nAs initial conditions I have that, {init.strip()}.\n"
        text += f"My goal is to have that {goal}.{MINIMIZE}\nMy plan is as follows:\n\n[PLAN]"
        if plan is None:
            return text + " "
        unit = "minutes" if len(plan) > 1 else "minute"
        cost = f"The total time to execute the plan is {len(plan)} {unit}.\n"
        return text + "\n" + render_plan(plan) + "\n" + cost
    text = f"\n[STATEMENT]\nAs initial conditions I have that, {init.strip()}." if init else ""
    text += f"\nMy goal is to have that {goal}." if goal else ""
    text += "\n\nMy plan is as follows:\n\n[PLAN]"
    if plan is not None:
        text += "\n" + render_plan(plan) + "\n"
    return text.replace("-", " ").replace("ontable", "on the table")


def render_prompt(
    instance: Instance,
    example: Instance,
    example_plan: Sequence[Action],
    optimality: bool = False,
) -> str:
    """The full PlanBench one-shot query: domain description, solved example, query statement."""
    intro = DOMAIN_INTRO_COST if optimality else DOMAIN_INTRO
    return (
        intro
        + render_statement(example, example_plan, optimality)
        + render_statement(instance, None, optimality)
    )


# ---------------------------------------------------------------- extraction

_TEXT_ACTIONS = (("pick up", "pick-up"), ("put down", "put-down"))
_COLOUR_NAMES = tuple(COLOURS.values())


def block_names(line: str) -> list[str]:
    """The block names (``"red block"``, ...) in a lowercased line, each once, ordered by first
    occurrence. A name counts only as a whole phrase, not preceded or followed by a letter or
    digit (``str.isalnum``), so "the tired block" names no block; ``_``, ``*`` and other
    punctuation are boundaries."""
    found = []
    for name in _COLOUR_NAMES:
        if name not in line:  # the common case, at C speed
            continue
        pos = line.index(name)
        while pos >= 0 and not _is_whole(line, pos, pos + len(name)):
            pos = line.find(name, pos + 1)
        if pos >= 0:
            found.append((pos, name))
    return [name for _, name in sorted(found)]


def _is_whole(line: str, start: int, end: int) -> bool:
    return (start == 0 or not line[start - 1].isalnum()) and (
        end == len(line) or not line[end].isalnum()
    )


class ExtractedPlan(NamedTuple):
    """The actions read from a reply.

    Attributes:
        actions: the plan, in order.
        skipped: lines that named an action but the wrong number of blocks.
        stopped_at_end: whether a ``[PLAN END]`` marker cut the text.
    """

    actions: list[Action]
    skipped: int
    stopped_at_end: bool


def extract_plan(
    text: str, stop_at_end: bool = True, max_chars: int = 200_000, max_actions: int = 10_000
) -> ExtractedPlan:
    """Reads a plan from free text exactly as PlanBench does (see the module docstring).

    Args:
        text: the reply.
        stop_at_end: ignore everything from the first ``[PLAN END]`` on, as PlanBench's
            completion pipelines do (generation stops there). ``False`` reads the whole reply, as
            PlanBench's chat-model evaluation does: explanations after ``[PLAN END]`` that name an
            action and the right number of blocks then join the plan.
        max_chars: at most this many characters are read (the reading is linear).
        max_actions: at most this many actions are kept.
    """
    text = text[:max_chars].lower()
    cut = text.find(PLAN_END.lower()) if stop_at_end else -1
    stopped = cut >= 0
    if stopped:
        text = text[:cut]
    text = text.strip()
    for phrase, hyphenated in _TEXT_ACTIONS:
        text = text.replace(phrase, hyphenated)
    actions: list[Action] = []
    skipped = 0
    for raw in text.split("\n"):
        line = raw.strip()
        words = set(line.split())
        name = next((a for a in ACTION_ORDER if a in words), None)
        if name is None:
            continue
        found = block_names(line)
        if len(found) != ACTION_ARITY[name]:
            skipped += 1
            continue
        actions.append(Action(name, tuple(LETTERS[c] for c in found)))
        if len(actions) >= max_actions:
            break
    return ExtractedPlan(actions, skipped, stopped)


# ---------------------------------------------------------------- reading statements back

_COLOUR = "(" + "|".join(_COLOUR_NAMES) + ")"
_FACT_PATTERNS = (
    (re.compile(rf"the {_COLOUR} is on top of the {_COLOUR}"), "on"),
    (re.compile(rf"the {_COLOUR} is on the table"), "ontable"),
    (re.compile(rf"the {_COLOUR} is clear"), "clear"),
    (re.compile(r"the hand is empty"), "handempty"),
    (re.compile(rf"the hand is currently holding {_COLOUR}"), "holding"),
)
_STATEMENT = re.compile(
    r"As initial conditions I have that, ([^.\n]{1,20000})\.\n"
    r"(?:My goal is to have that ([^.\n]{0,20000})\.)?"
)
_SPLIT = re.compile(r", | and ")


def parse_facts(text: str) -> list[Fact] | None:
    """The inverse of :func:`render_facts` (``None`` if any phrase is not a PlanBench fact)."""
    facts: list[Fact] = []
    for phrase in _SPLIT.split(text.strip()) if text.strip() else []:
        for pattern, predicate in _FACT_PATTERNS:
            match = pattern.fullmatch(phrase.strip())
            if match:
                facts.append((predicate, *(LETTERS[c] for c in match.groups())))
                break
        else:
            return None
    return facts


def parse_statement(text: str) -> Instance | None:
    """The instance of the first ``As initial conditions ... My goal is ...`` in ``text``.

    The blocks are the objects the initial conditions mention, in PDDL-name order.
    """
    match = _STATEMENT.search(text)
    if match is None:
        return None
    init = parse_facts(match.group(1))
    goal = parse_facts(match.group(2) or "")
    if init is None or goal is None:
        return None
    blocks = tuple(sorted({a for f in init for a in f[1:]}))
    return Instance(blocks, frozenset(init), frozenset(goal))


def last_statement(context: str) -> Instance | None:
    """The instance of the last ``[STATEMENT]`` block of ``context`` that parses (the query,
    not the one-shot example)."""
    end = len(context)
    while True:
        start = context.rfind("[STATEMENT]", 0, end)
        if start < 0:
            return None
        instance = parse_statement(context[start:])
        if instance is not None:
            return instance
        end = start
