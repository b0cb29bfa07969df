"""Reading puzzles back from text: round trips of generated puzzles and official-style wording."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.zebra.generate import generate_puzzle
from tasks.zebra.puzzle import INTRO, ClueKind, Entity, render_puzzle
from tasks.zebra.task import render_prompt
from tasks.zebra.textparse import find_headers, parse_puzzle, split_puzzle_text

K = ClueKind


def official(n: int, attrs: list[tuple[str, list[str]]], clues: list[str]) -> str:
    lines = [INTRO.format(n=n)]
    lines += [f" - {d}: " + ", ".join(f"`{v}`" for v in vals) for d, vals in attrs]
    lines += ["", "## Clues:"] + [f"{i}. {c}" for i, c in enumerate(clues, 1)]
    return "\n".join(lines)


@pytest.mark.parametrize(("n", "m"), [(2, 2), (3, 4), (4, 4), (5, 6), (6, 6), (6, 2)])
def test_generated_puzzles_round_trip(n: int, m: int) -> None:
    for seed in range(4):
        puzzle, _ = generate_puzzle(np.random.default_rng(seed), n, m)
        text = render_prompt(render_puzzle(puzzle), puzzle.headers, n)
        context = f"You are the solver.\n### Problem\n{text}\n### solver\n"
        parsed = parse_puzzle(context)
        assert parsed is not None, (n, m, seed)
        assert parsed.clues == puzzle.clues
        assert parsed.headers == puzzle.headers
        assert [a.values for a in parsed.attributes] == [a.values for a in puzzle.attributes]


NAMES = ("Each person has a unique name", ["Eric", "Peter", "Arnold"])
MONTHS = ("Each person has a unique birthday month", ["jan", "sept", "april"])
HEIGHTS = ("People have different heights", ["short", "very short", "tall"])


def test_official_wording_with_value_prefixes_and_longest_match() -> None:
    text = official(
        3,
        [NAMES, MONTHS, HEIGHTS],
        [
            "The person whose birthday is in January is directly right of Eric.",
            "The person who is very short is not in the third house.",
            "Arnold is the person who is short.",
            "The person who is tall and Peter are next to each other.",
        ],
    )
    puzzle = parse_puzzle(text, headers=("Name", "Birthday", "Height"))
    assert puzzle is not None
    jan, eric, very_short, arnold, short = (
        Entity(1, 0),
        Entity(0, 0),
        Entity(2, 1),
        Entity(0, 2),
        Entity(2, 0),
    )
    assert [(c.kind, c.first, c.second, c.house) for c in puzzle.clues] == [
        (K.DIRECT_LEFT, eric, jan, None),  # "directly right of" swaps the pair
        (K.NOT_AT, very_short, None, 2),
        (K.SAME_HOUSE, arnold, short, None),
        (K.SIDE_BY_SIDE, Entity(2, 2), Entity(0, 1), None),
    ]


@pytest.mark.parametrize(
    "clue",
    [
        "Eric is not Peter.",  # a negated identity is not a clue type of ZebraLogic
        "Eric is in the fourth house.",  # only three houses
        "Eric likes Peter.",  # no known shape
        "The Swedish person is in the first house.",  # no listed value mentioned
        "Eric is directly left of Eric.",  # the same entity twice
        "Eric is Peter.",  # two values of one attribute cannot share a house
    ],
)
def test_unreadable_clues_fail_the_parse(clue: str) -> None:
    text = official(3, [NAMES, MONTHS], ["Eric is in the first house.", clue])
    assert parse_puzzle(text, headers=("Name", "Birthday")) is None


def test_malformed_texts_fail() -> None:
    good = official(2, [(NAMES[0], ["Eric", "Peter"])], ["Eric is in the first house."])
    assert parse_puzzle(good, headers=("Name",)) is None  # one attribute is below the minimum
    two = [("Each person has a unique name", ["Eric", "Peter"]), ("Colors", ["red", "blue"])]
    ok = official(2, two, ["Eric is in the first house.", "Eric is red."])
    assert parse_puzzle(ok, headers=("Name", "Color")) is not None
    assert parse_puzzle(ok) is None  # no answer template to read the headers from
    assert parse_puzzle(ok, headers=("Name",)) is None
    assert parse_puzzle(ok.replace("`blue`", "`blue`, `green`"), headers=("Name", "Color")) is None
    assert parse_puzzle(ok.replace("## Clues:", "Clues"), headers=("Name", "Color")) is None
    dup = official(2, [two[0], ("Colors", ["eric", "blue"])], ["Eric is in the first house."])
    assert parse_puzzle(dup, headers=("Name", "Color")) is None  # ambiguous value
    assert parse_puzzle("nothing here") is None
    assert split_puzzle_text(ok.replace("1. Eric", "2. Eric")) is None  # numbering must start at 1


def test_clue_list_ends_at_the_first_other_line_and_headers_follow() -> None:
    two = [("Each person has a unique name", ["Eric", "Peter"]), ("Colors", ["red", "blue"])]
    text = official(2, two, ["Eric is in the first house.", "Eric is red."])
    prompt = render_prompt(text, ("Name", "Color"), 2) + "\n### critic\n1. Peter is red."
    parts = split_puzzle_text(prompt)
    assert parts is not None and len(parts.clues) == 2
    assert find_headers(prompt, parts.end, 2) == ("Name", "Color")
    assert find_headers(prompt, parts.end, 3) is None
    assert find_headers(text + "\n{not json}", 0, 2) is None
