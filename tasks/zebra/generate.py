"""The ZebraLogic generator (Lin et al. 2025, Algorithm 1), deterministic given a numpy ``Generator``.

1. Draw a random solution: ``M`` attributes (``Name`` first, the rest from the pool), ``N`` values
   each, every attribute a random permutation over the houses.
2. Enumerate every clue that is true of the solution, of all types.
3. Reduce while the puzzle stays uniquely solvable: remove random batches of 10% of the clues until
   that fails, then 5%, then single clues (clues drawn with the per-type removal weights below);
   after a single removal fails, try removing each remaining clue once, in random order.
4. Shuffle the surviving clues.

Uniqueness is checked with one incremental SAT solver (``solver.ClueSolver``) in which the known
solution is blocked: a clue subset determines the grid iff the solver finds no model under it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tasks.zebra.attributes import NAME, POOL, AttributeSpec
from tasks.zebra.puzzle import MAX_SIZE, MIN_SIZE, Clue, ClueKind, Entity, Grid, Puzzle
from tasks.zebra.solver import ClueSolver

REMOVAL_WEIGHTS: dict[ClueKind, float] = {
    ClueKind.FOUND_AT: 0.75,
    ClueKind.NOT_AT: 0.75,
    ClueKind.SAME_HOUSE: 0.75,
    ClueKind.SIDE_BY_SIDE: 1.2,
    ClueKind.LEFT_OF: 1.2,
    ClueKind.RIGHT_OF: 1.2,
    ClueKind.ONE_BETWEEN: 1.5,
    ClueKind.TWO_BETWEEN: 1.5,
    ClueKind.DIRECT_LEFT: 1.0,  # not in the published weights: the reference default of 1
}
"""Relative probability of a clue being drawn for removal (BENCHMARKS.md section 2): the cheap,
direct clues are kept more often, the between-clues removed more often."""


def random_attributes(
    rng: np.random.Generator, n_houses: int, n_attrs: int
) -> tuple[AttributeSpec, ...]:
    """``Name`` plus ``n_attrs - 1`` pool attributes, each with ``n_houses`` values in random order."""
    picked = [NAME] + [POOL[i] for i in rng.choice(len(POOL), size=n_attrs - 1, replace=False)]
    return tuple(
        AttributeSpec(
            spec.header,
            spec.intro,
            spec.phrase,
            tuple(spec.values[i] for i in rng.choice(len(spec.values), n_houses, replace=False)),
        )
        for spec in picked
    )


def random_grid(rng: np.random.Generator, n_houses: int, n_attrs: int) -> Grid:
    """A uniformly random solution: one permutation of the value indices per attribute."""
    return tuple(tuple(int(v) for v in rng.permutation(n_houses)) for _ in range(n_attrs))


def all_true_clues(grid: Grid, rng: np.random.Generator) -> list[Clue]:
    """Every clue true of ``grid``, each fact once.

    FOUND_AT / NOT_AT for every entity and house; SAME_HOUSE for every pair sharing a house;
    DIRECT_LEFT and SIDE_BY_SIDE for every pair in adjacent houses; for every pair in houses
    ``h1 < h2`` either LEFT_OF or the equivalent RIGHT_OF (a fair coin); ONE_BETWEEN / TWO_BETWEEN
    for pairs two / three houses apart. Symmetric clues name their two entities in random order.
    """
    n = len(grid[0])
    by_house = [[Entity(a, row[h]) for a, row in enumerate(grid)] for h in range(n)]
    clues: list[Clue] = []

    def pair(kind: ClueKind, x: Entity, y: Entity) -> None:
        first, second = (x, y) if rng.random() < 0.5 else (y, x)
        clues.append(Clue(kind, first, second))

    for h, people in enumerate(by_house):
        for e in people:
            clues.append(Clue(ClueKind.FOUND_AT, e, house=h))
            clues += [Clue(ClueKind.NOT_AT, e, house=k) for k in range(n) if k != h]
        for i, x in enumerate(people):
            for y in people[i + 1 :]:
                pair(ClueKind.SAME_HOUSE, x, y)
    for h1 in range(n):
        for h2 in range(h1 + 1, n):
            for x in by_house[h1]:
                for y in by_house[h2]:
                    if h2 == h1 + 1:
                        clues.append(Clue(ClueKind.DIRECT_LEFT, x, y))
                        pair(ClueKind.SIDE_BY_SIDE, x, y)
                    if rng.random() < 0.5:
                        clues.append(Clue(ClueKind.LEFT_OF, x, y))
                    else:
                        clues.append(Clue(ClueKind.RIGHT_OF, y, x))
                    if h2 - h1 == 2:
                        pair(ClueKind.ONE_BETWEEN, x, y)
                    elif h2 - h1 == 3:
                        pair(ClueKind.TWO_BETWEEN, x, y)
    return clues


def reduce_clues(grid: Grid, clues: Sequence[Clue], rng: np.random.Generator) -> list[Clue]:
    """A minimal subset of ``clues`` that still determines ``grid`` uniquely (step 3 above).

    Raises:
        ValueError: if even all of ``clues`` do not determine ``grid``.
    """
    n, m = len(grid[0]), len(grid)
    weights = np.array([REMOVAL_WEIGHTS[c.kind] for c in clues])
    with ClueSolver(n, m, clues) as solver:
        solver.exclude(grid)  # from now on: "no model" == "grid is the unique solution"
        kept = [int(i) for i in rng.permutation(len(clues))]
        if solver.solve(kept) is not None:
            raise ValueError("the clues do not determine the solution")

        def try_remove(count: int) -> bool:
            nonlocal kept
            if count < 1:
                return False
            p = weights[kept] / weights[kept].sum()
            drawn = {kept[int(i)] for i in rng.choice(len(kept), size=count, replace=True, p=p)}
            rest = [i for i in kept if i not in drawn]
            if solver.solve(rest) is None:
                kept = rest
                return True
            return False

        while True:
            if try_remove(len(kept) // 10) or try_remove(len(kept) // 20):
                continue
            if not try_remove(1):
                break
        # One pass suffices for minimality: a clue needed by a set is needed by all its subsets.
        for i in [kept[int(j)] for j in rng.permutation(len(kept))]:
            rest = [k for k in kept if k != i]
            if solver.solve(rest) is None:
                kept = rest
    return [clues[i] for i in kept]


def draw_solution(
    rng: np.random.Generator, n_houses: int, n_attrs: int
) -> tuple[tuple[AttributeSpec, ...], Grid]:
    """Step 1: the attributes (with their values) and a random solution grid.

    Raises:
        ValueError: if a size is outside 2..6.
    """
    for label, size in (("n_houses", n_houses), ("n_attrs", n_attrs)):
        if not MIN_SIZE <= size <= MAX_SIZE:
            raise ValueError(f"{label} must be in {MIN_SIZE}..{MAX_SIZE}, got {size}")
    return random_attributes(rng, n_houses, n_attrs), random_grid(rng, n_houses, n_attrs)


def build_puzzle(
    rng: np.random.Generator, attributes: tuple[AttributeSpec, ...], grid: Grid
) -> Puzzle:
    """Steps 2-4: the clues of a uniquely solvable puzzle whose solution is ``grid``."""
    clues = reduce_clues(grid, all_true_clues(grid, rng), rng)
    order = rng.permutation(len(clues))
    return Puzzle(len(grid[0]), attributes, tuple(clues[int(i)] for i in order))


def generate_puzzle(rng: np.random.Generator, n_houses: int, n_attrs: int) -> tuple[Puzzle, Grid]:
    """A uniquely solvable ``n_houses`` x ``n_attrs`` puzzle and its solution (steps 1-4).

    Raises:
        ValueError: if a size is outside 2..6.
    """
    attributes, grid = draw_solution(rng, n_houses, n_attrs)
    return build_puzzle(rng, attributes, grid), grid
