"""Pure rules of the zebra task: clue semantics, the attribute pool, text rendering, the SAT encoding
(checked against brute force) and the generator (uniqueness, minimality, determinism)."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from tasks.zebra.attributes import NAME, POOL, AttributeSpec
from tasks.zebra.generate import REMOVAL_WEIGHTS, all_true_clues, generate_puzzle, reduce_clues
from tasks.zebra.puzzle import (
    Clue,
    ClueKind,
    Entity,
    Grid,
    Puzzle,
    positions,
    render_clue,
    render_puzzle,
    solution_table,
)
from tasks.zebra.solver import ClueSolver, solve_puzzle

K = ClueKind


def all_grids(n: int, m: int) -> list[Grid]:
    """Every (N!)^M assignment."""
    perms = list(itertools.permutations(range(n)))
    return [tuple(g) for g in itertools.product(perms, repeat=m)]


def brute_force(puzzle: Puzzle) -> list[Grid]:
    return [g for g in all_grids(puzzle.n_houses, len(puzzle.attributes)) if puzzle.satisfied_by(g)]


def small_puzzle(clues: tuple[Clue, ...], n: int = 4, m: int = 2) -> Puzzle:
    attrs = (NAME, POOL[0], POOL[2], POOL[3])[:m]
    trimmed = tuple(type(a)(a.header, a.intro, a.phrase, a.values[:n]) for a in attrs)
    return Puzzle(n, trimmed, clues)


# ---- clue semantics -------------------------------------------------------------------------

A, B = Entity(0, 0), Entity(1, 0)


@pytest.mark.parametrize(
    ("kind", "true_at", "false_at"),
    [
        (K.SAME_HOUSE, [(2, 2)], [(1, 2), (3, 2)]),
        (K.DIRECT_LEFT, [(0, 1), (2, 3)], [(1, 0), (0, 2), (1, 1)]),
        (K.SIDE_BY_SIDE, [(0, 1), (2, 1)], [(0, 2), (1, 1), (0, 3)]),
        (K.LEFT_OF, [(0, 1), (0, 3)], [(1, 1), (2, 1)]),
        (K.RIGHT_OF, [(3, 0), (1, 0)], [(0, 0), (0, 1)]),
        (K.ONE_BETWEEN, [(0, 2), (3, 1)], [(0, 1), (0, 3), (2, 2)]),
        (K.TWO_BETWEEN, [(0, 3), (3, 0)], [(0, 2), (1, 3), (1, 1)]),
    ],
)
def test_two_entity_clue_truth(
    kind: ClueKind, true_at: list[tuple[int, int]], false_at: list[tuple[int, int]]
) -> None:
    clue = Clue(kind, A, B)
    for p, q in true_at:
        assert clue.holds([[p], [q]]), (kind, p, q)
    for p, q in false_at:
        assert not clue.holds([[p], [q]]), (kind, p, q)


def test_positional_clue_truth_and_validation() -> None:
    assert Clue(K.FOUND_AT, A, house=1).holds([[1]])
    assert not Clue(K.FOUND_AT, A, house=1).holds([[0]])
    assert Clue(K.NOT_AT, A, house=1).holds([[0]])
    assert not Clue(K.NOT_AT, A, house=1).holds([[1]])
    with pytest.raises(ValueError):
        Clue(K.FOUND_AT, A, B)
    with pytest.raises(ValueError):
        Clue(K.LEFT_OF, A, house=1)


def test_positions_inverts_the_grid() -> None:
    assert positions(((2, 0, 1), (0, 1, 2))) == [[1, 2, 0], [0, 1, 2]]


# ---- attribute pool and rendering ---------------------------------------------------------------


def test_attribute_pool_invariants() -> None:
    specs = (NAME, *POOL)
    headers = [s.header for s in specs]
    assert len(set(headers)) == len(headers)
    assert all(re.fullmatch(r"[A-Z][a-z]+(?:[A-Z][a-z]+)*", h) for h in headers)
    values = [v.lower() for s in specs for v in s.values]
    assert len(set(values)) == len(values), "values must be distinct across the pool"
    for spec in specs:
        assert len(spec.values) >= 6
        for value in spec.values:
            assert value.lower() in spec.describe(value).lower()


def test_no_value_occurs_in_another_phrase_or_template() -> None:
    """The text parser finds entities by their values: no value may hide in other wording."""
    specs = (NAME, *POOL)
    placeholder = tuple(AttributeSpec(f"H{i}", "intro", "{v}", ("qqq", "zzz")) for i in range(2))
    templates = " ".join(
        render_clue(
            Puzzle(2, placeholder, ()),
            Clue(k, Entity(0, 0), house=1)
            if k in (K.FOUND_AT, K.NOT_AT)
            else Clue(k, Entity(0, 0), Entity(1, 1)),
        )
        for k in ClueKind
    ).lower()
    for other in {v.lower() for s in specs for v in s.values}:
        pattern = re.compile(rf"(?<![a-z0-9]){re.escape(other)}(?![a-z0-9])")
        assert not pattern.search(templates), other
        for spec in specs:
            for value in spec.values:
                phrase = spec.describe(value).lower().replace(value.lower(), " ")
                assert not pattern.search(phrase), (spec.header, value, other)


def test_article_choice() -> None:
    car = next(s for s in POOL if s.header == "CarModel")
    phone = next(s for s in POOL if s.header == "PhoneModel")
    assert car.describe("audi a4") == "the person who drives an audi a4"
    assert car.describe("honda civic") == "the person who drives a honda civic"
    assert phone.describe("oneplus 9") == "the person who uses a oneplus 9"


def test_render_clue_wording() -> None:
    puzzle = small_puzzle(())
    a, b = Entity(0, 1), Entity(1, 2)  # Eric; the person whose favorite color is blue
    expect = {
        Clue(K.FOUND_AT, a, house=1): "Eric is in the second house.",
        Clue(
            K.NOT_AT, b, house=3
        ): "The person whose favorite color is blue is not in the fourth house.",
        Clue(K.SAME_HOUSE, b, a): "The person whose favorite color is blue is Eric.",
        Clue(
            K.DIRECT_LEFT, a, b
        ): "Eric is directly left of the person whose favorite color is blue.",
        Clue(
            K.SIDE_BY_SIDE, a, b
        ): "Eric and the person whose favorite color is blue are next to each other.",
        Clue(
            K.LEFT_OF, a, b
        ): "Eric is somewhere to the left of the person whose favorite color is blue.",
        Clue(
            K.RIGHT_OF, a, b
        ): "Eric is somewhere to the right of the person whose favorite color is blue.",
        Clue(
            K.ONE_BETWEEN, a, b
        ): "There is one house between Eric and the person whose favorite color is blue.",
        Clue(
            K.TWO_BETWEEN, a, b
        ): "There are two houses between Eric and the person whose favorite color is blue.",
    }
    for clue, text in expect.items():
        assert render_clue(puzzle, clue) == text


def test_render_puzzle_official_layout() -> None:
    puzzle = small_puzzle((Clue(K.FOUND_AT, Entity(0, 0), house=0),), n=2)
    assert render_puzzle(puzzle).split("\n") == [
        "There are 2 houses, numbered 1 to 2 from left to right, as seen from across the street. "
        "Each house is occupied by a different person. Each house has a unique attribute for each "
        "of the following characteristics:",
        " - Each person has a unique name: `Arnold`, `Eric`",
        " - Each person has a favorite color: `red`, `green`",
        "",
        "## Clues:",
        "1. Arnold is in the first house.",
    ]
    assert solution_table(puzzle, ((1, 0), (0, 1))) == {
        "header": ["House", "Name", "Color"],
        "rows": [["1", "Eric", "red"], ["2", "Arnold", "green"]],
    }


# ---- SAT encoding vs brute force ----------------------------------------------------------------


@pytest.mark.parametrize("seed", range(12))
def test_sat_solutions_match_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, m = (3, 2) if seed % 2 else (3, 3)
    grid = tuple(tuple(int(v) for v in rng.permutation(n)) for _ in range(m))
    pool = all_true_clues(grid, rng)
    clues = tuple(pool[int(i)] for i in rng.choice(len(pool), size=3, replace=False))
    # also a clue that is false in `grid`, so solution sets are not all forced to contain it
    clues += (Clue(K.NOT_AT, Entity(0, grid[0][0]), house=0),)
    puzzle = small_puzzle(clues, n=n, m=m)
    expected = sorted(brute_force(puzzle))
    got = solve_puzzle(puzzle, limit=10_000)
    assert sorted(got) == expected
    assert len(set(got)) == len(got)


def test_every_clue_kind_is_encoded_like_its_semantics() -> None:
    n = 4
    for kind in ClueKind:
        for a_val, b_val in [(0, 0), (1, 3)]:
            a = Entity(0, a_val)
            clue = (
                Clue(kind, a, house=a_val)
                if kind in (K.FOUND_AT, K.NOT_AT)
                else Clue(kind, a, Entity(1, b_val))
            )
            puzzle = small_puzzle((clue,), n=n, m=2)
            assert len(solve_puzzle(puzzle, limit=1000)) == len(brute_force(puzzle)), kind


def test_solver_selectors_and_exclusion() -> None:
    clues = (Clue(K.FOUND_AT, Entity(0, 0), house=0), Clue(K.FOUND_AT, Entity(1, 1), house=1))
    with ClueSolver(2, 2, clues) as solver:
        assert len(solver.solutions([], limit=10)) == 4
        assert len(solver.solutions([0], limit=10)) == 2
        assert solver.solutions([0, 1], limit=10) == [((0, 1), (0, 1))]
        solver.exclude(((0, 1), (0, 1)))
        assert solver.solve([0, 1]) is None
        assert len(solver.solutions([], limit=10)) == 3  # query-local blocking clauses are gone


# ---- generator -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "m"), [(2, 2), (2, 3), (3, 2), (3, 3)])
def test_generated_puzzles_have_exactly_one_solution_by_brute_force(n: int, m: int) -> None:
    for seed in range(8):
        puzzle, grid = generate_puzzle(np.random.default_rng(seed), n, m)
        assert brute_force(puzzle) == [grid], (n, m, seed)


@pytest.mark.parametrize(("n", "m"), [(4, 4), (5, 3), (6, 6)])
def test_larger_puzzles_unique_and_minimal(n: int, m: int) -> None:
    puzzle, grid = generate_puzzle(np.random.default_rng(n * 10 + m), n, m)
    assert solve_puzzle(puzzle) == [grid]
    for i in range(len(puzzle.clues)):  # every clue is needed
        rest = Puzzle(n, puzzle.attributes, puzzle.clues[:i] + puzzle.clues[i + 1 :])
        assert len(solve_puzzle(rest)) == 2, i


def test_all_true_clues_are_true_and_cover_every_kind() -> None:
    rng = np.random.default_rng(3)
    grid = tuple(tuple(int(v) for v in rng.permutation(5)) for _ in range(3))
    clues = all_true_clues(grid, rng)
    where = positions(grid)
    assert all(c.holds(where) for c in clues)
    assert {c.kind for c in clues} == set(ClueKind)
    assert set(REMOVAL_WEIGHTS) == set(ClueKind)
    # each fact once: FOUND_AT 15, NOT_AT 60, SAME_HOUSE 5*3, DIRECT_LEFT / SIDE_BY_SIDE 4*9,
    # LEFT_OF+RIGHT_OF C(5,2)*9, ONE_BETWEEN 3*9, TWO_BETWEEN 2*9
    assert len(clues) == 15 + 60 + 15 + 36 + 36 + 90 + 27 + 18


def test_reduce_rejects_clues_that_do_not_determine_the_grid() -> None:
    grid = ((0, 1), (0, 1))
    with pytest.raises(ValueError, match="do not determine"):
        reduce_clues(grid, [Clue(K.FOUND_AT, Entity(0, 0), house=0)], np.random.default_rng(0))


def test_generation_is_seeded_and_validated() -> None:
    first = render_puzzle(generate_puzzle(np.random.default_rng(7), 4, 4)[0])
    again = render_puzzle(generate_puzzle(np.random.default_rng(7), 4, 4)[0])
    other = render_puzzle(generate_puzzle(np.random.default_rng(8), 4, 4)[0])
    assert first == again != other
    with pytest.raises(ValueError, match="n_houses must be in 2..6"):
        generate_puzzle(np.random.default_rng(0), 7, 3)
    with pytest.raises(ValueError, match="n_attrs must be in 2..6"):
        generate_puzzle(np.random.default_rng(0), 3, 1)


def test_generated_attributes_name_first_and_distinct() -> None:
    puzzle, _ = generate_puzzle(np.random.default_rng(1), 6, 6)
    assert puzzle.headers[0] == "Name"
    assert len(set(puzzle.headers)) == 6
    assert all(len(set(a.values)) == 6 for a in puzzle.attributes)
