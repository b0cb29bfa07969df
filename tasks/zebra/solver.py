"""SAT encoding of zebra puzzles with python-sat (``pysat``).

Why a SAT solver from python-sat: it is maintained, ships binary wheels (no compiler needed), and its
solvers are *incremental*: one solver instance answers many queries under assumptions. Each clue is
guarded by a selector variable, so the generator's hundreds of "is this clue subset still uniquely
solvable?" questions become solves under different assumptions of one solver, and uniqueness is
proved by adding a blocking clause that excludes the known solution (UNSAT => no second solution).

Encoding: Boolean ``x(h, a, v)`` = "house ``h`` has value ``v`` of attribute ``a``"; each house has
exactly one value per attribute and each value is in exactly one house (pairwise at-most-one).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import TracebackType

from pysat.solvers import Solver

from tasks.zebra.puzzle import Clue, ClueKind, Entity, Grid, Puzzle

SOLVER_NAME = "glucose4"

_OFFSETS = {
    ClueKind.SIDE_BY_SIDE: (-1, 1),
    ClueKind.ONE_BETWEEN: (-2, 2),
    ClueKind.TWO_BETWEEN: (-3, 3),
    ClueKind.DIRECT_LEFT: (1,),
}


class GridEncoding:
    """Variable numbering and CNF for an ``n_houses`` x ``n_attrs`` grid."""

    def __init__(self, n_houses: int, n_attrs: int) -> None:
        self.n = n_houses
        self.m = n_attrs

    @property
    def n_vars(self) -> int:
        """How many grid variables there are (numbered 1..n_vars)."""
        return self.n * self.m * self.n

    def var(self, house: int, attr: int, value: int) -> int:
        """The variable "``house`` has ``value`` of ``attr``"."""
        return 1 + (house * self.m + attr) * self.n + value

    def at(self, entity: Entity, house: int) -> int:
        """The variable "``entity`` is in ``house``"."""
        return self.var(house, entity.attr, entity.value)

    def base_clauses(self) -> list[list[int]]:
        """Every attribute is a permutation of its values over the houses."""
        clauses: list[list[int]] = []
        n = self.n
        for a in range(self.m):
            for fixed in range(n):
                # house `fixed` has exactly one value; value `fixed` is in exactly one house
                for group in (
                    [self.var(fixed, a, v) for v in range(n)],
                    [self.var(h, a, fixed) for h in range(n)],
                ):
                    clauses.append(group)
                    clauses += [[-p, -q] for i, p in enumerate(group) for q in group[i + 1 :]]
        return clauses

    def clue_clauses(self, clue: Clue) -> list[list[int]]:
        """CNF of one clue (given the base clauses: each entity is in exactly one house)."""
        n, a = self.n, clue.first
        if clue.house is not None:
            lit = self.at(a, clue.house)
            return [[lit]] if clue.kind is ClueKind.FOUND_AT else [[-lit]]
        b = clue.second
        assert b is not None  # Clue.__post_init__ guarantees it
        clauses = []
        for h in range(n):
            if clue.kind is ClueKind.SAME_HOUSE:
                clauses += [[-self.at(a, h), self.at(b, h)], [self.at(a, h), -self.at(b, h)]]
                continue
            if clue.kind is ClueKind.LEFT_OF:
                targets = list(range(h + 1, n))
            elif clue.kind is ClueKind.RIGHT_OF:
                targets = list(range(h))
            else:
                targets = [h + d for d in _OFFSETS[clue.kind] if 0 <= h + d < n]
            # a in h => b in one of the target houses (an empty target list forbids h for a)
            clauses.append([-self.at(a, h)] + [self.at(b, t) for t in targets])
        return clauses

    def decode(self, model: Sequence[int]) -> Grid:
        """The grid of a solver model."""
        true = {lit for lit in model if lit > 0}
        grid = []
        for a in range(self.m):
            row = []
            for h in range(self.n):
                row.append(next(v for v in range(self.n) if self.var(h, a, v) in true))
            grid.append(tuple(row))
        return tuple(grid)

    def blocking_clause(self, grid: Grid) -> list[int]:
        """A clause that every grid except ``grid`` satisfies."""
        return [-self.var(h, a, v) for a, row in enumerate(grid) for h, v in enumerate(row)]


class ClueSolver:
    """An incremental solver over one grid with switchable clues.

    Clue ``i`` is active in a query when its index is in ``active`` (default: all clues).

    Args:
        n_houses: ``N``.
        n_attrs: ``M``.
        clues: every clue a query may switch on.
        solver_name: a python-sat solver name.
    """

    def __init__(
        self,
        n_houses: int,
        n_attrs: int,
        clues: Sequence[Clue],
        solver_name: str = SOLVER_NAME,
    ) -> None:
        self.encoding = GridEncoding(n_houses, n_attrs)
        self.n_clues = len(clues)
        self._next_var = self.encoding.n_vars + 1
        self._solver = Solver(name=solver_name, bootstrap_with=self.encoding.base_clauses())
        self._selectors = []
        for clue in clues:
            selector = self._fresh()
            self._selectors.append(selector)
            for clause in self.encoding.clue_clauses(clue):
                self._solver.add_clause([-selector, *clause])

    @classmethod
    def for_puzzle(cls, puzzle: Puzzle) -> ClueSolver:
        """A solver over ``puzzle``'s grid and clues."""
        return cls(puzzle.n_houses, len(puzzle.attributes), puzzle.clues)

    def _fresh(self) -> int:
        self._next_var += 1
        return self._next_var - 1

    def _assumptions(self, active: Iterable[int] | None) -> list[int]:
        if active is None:
            return list(self._selectors)
        return [self._selectors[i] for i in active]

    def exclude(self, grid: Grid) -> None:
        """Forbids ``grid`` in every later query (e.g. the known solution, to test uniqueness)."""
        self._solver.add_clause(self.encoding.blocking_clause(grid))

    def solve(self, active: Iterable[int] | None = None) -> Grid | None:
        """A grid satisfying the active clues, or ``None`` if there is none."""
        if not self._solver.solve(assumptions=self._assumptions(active)):
            return None
        model = self._solver.get_model()
        return self.encoding.decode(model) if model is not None else None

    def solutions(self, active: Iterable[int] | None = None, limit: int = 2) -> list[Grid]:
        """Up to ``limit`` distinct solutions of the active clues (two prove non-uniqueness)."""
        assumptions = self._assumptions(active)
        guard = self._fresh()  # the blocking clauses of this query only
        found: list[Grid] = []
        while len(found) < limit and self._solver.solve(assumptions=[*assumptions, guard]):
            model = self._solver.get_model()
            if model is None:
                break
            found.append(self.encoding.decode(model))
            self._solver.add_clause([-guard, *self.encoding.blocking_clause(found[-1])])
        self._solver.add_clause([-guard])
        return found

    def close(self) -> None:
        """Frees the native solver."""
        self._solver.delete()

    def __enter__(self) -> ClueSolver:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def solve_puzzle(puzzle: Puzzle, limit: int = 2) -> list[Grid]:
    """Up to ``limit`` solutions of ``puzzle`` (exactly one means the puzzle is well posed)."""
    with ClueSolver.for_puzzle(puzzle) as solver:
        return solver.solutions(limit=limit)
