"""The zebra puzzle data model: grids, entities, the clue types with their truth semantics, and the
official ZebraLogic text rendering.

A puzzle has ``N`` houses and ``M`` attributes; each attribute lists ``N`` values. A *grid* (a
candidate solution) says which value of each attribute is in each house: ``grid[a][h]`` is the index
(into ``attributes[a].values``) of attribute ``a``'s value in house ``h`` (0-based). An *entity* is
one (attribute, value) pair, i.e. one person described by one of their attributes.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from tasks.zebra.attributes import AttributeSpec

Grid = tuple[tuple[int, ...], ...]
"""``grid[a][h]``: the value index of attribute ``a`` in house ``h`` (each row a permutation)."""

ORDINALS: tuple[str, ...] = ("first", "second", "third", "fourth", "fifth", "sixth")
MIN_SIZE, MAX_SIZE = 2, 6
INTRO = (
    "There are {n} houses, numbered 1 to {n} from left to right, as seen from across the street. "
    "Each house is occupied by a different person. Each house has a unique attribute for each of "
    "the following characteristics:"
)
CLUES_HEADING = "## Clues:"


class ClueKind(str, enum.Enum):
    """The clue types of ZebraLogic (the paper's eight, with left/right counted apart)."""

    FOUND_AT = "found_at"  # A is in the k-th house
    NOT_AT = "not_at"  # A is not in the k-th house
    SAME_HOUSE = "same_house"  # A is B
    DIRECT_LEFT = "direct_left"  # A is directly left of B
    SIDE_BY_SIDE = "side_by_side"  # A and B are next to each other
    LEFT_OF = "left_of"  # A is somewhere to the left of B
    RIGHT_OF = "right_of"  # A is somewhere to the right of B
    ONE_BETWEEN = "one_between"  # there is one house between A and B
    TWO_BETWEEN = "two_between"  # there are two houses between A and B


POSITIONAL = frozenset({ClueKind.FOUND_AT, ClueKind.NOT_AT})


@dataclass(frozen=True)
class Entity:
    """One attribute value, i.e. the person who has it: ``(attribute index, value index)``."""

    attr: int
    value: int


@dataclass(frozen=True)
class Clue:
    """One clue. ``house`` (0-based) is set for FOUND_AT / NOT_AT, ``second`` for the others."""

    kind: ClueKind
    first: Entity
    second: Entity | None = None
    house: int | None = None

    def __post_init__(self) -> None:
        if (self.kind in POSITIONAL) != (self.house is not None) or (self.kind in POSITIONAL) == (
            self.second is not None
        ):
            raise ValueError(f"{self.kind.value} clue with second={self.second} house={self.house}")

    def holds(self, where: Sequence[Sequence[int]]) -> bool:
        """Whether the clue is true when ``where[a][v]`` is the house of value ``v`` of ``a``."""
        p = where[self.first.attr][self.first.value]
        if self.house is not None:
            return p == self.house if self.kind is ClueKind.FOUND_AT else p != self.house
        assert self.second is not None  # guaranteed by __post_init__
        q = where[self.second.attr][self.second.value]
        return _RELATIONS[self.kind](p, q)


_RELATIONS = {
    ClueKind.SAME_HOUSE: lambda p, q: p == q,
    ClueKind.DIRECT_LEFT: lambda p, q: q == p + 1,
    ClueKind.SIDE_BY_SIDE: lambda p, q: abs(p - q) == 1,
    ClueKind.LEFT_OF: lambda p, q: p < q,
    ClueKind.RIGHT_OF: lambda p, q: p > q,
    ClueKind.ONE_BETWEEN: lambda p, q: abs(p - q) == 2,
    ClueKind.TWO_BETWEEN: lambda p, q: abs(p - q) == 3,
}


def positions(grid: Grid) -> list[list[int]]:
    """Inverts a grid: ``positions(grid)[a][v]`` is the house holding value ``v`` of ``a``."""
    where = []
    for row in grid:
        inverse = [0] * len(row)
        for house, value in enumerate(row):
            inverse[value] = house
        where.append(inverse)
    return where


@dataclass(frozen=True)
class Puzzle:
    """A puzzle: houses, attributes (values in the order the text lists them) and clues.

    Attributes:
        n_houses: ``N`` (2-6).
        attributes: ``M`` attributes, each with exactly ``N`` values. Parsed official puzzles have
            an empty ``phrase`` (the text is given, not rendered).
        clues: the clues, in the order of the text.
    """

    n_houses: int
    attributes: tuple[AttributeSpec, ...]
    clues: tuple[Clue, ...]

    @property
    def headers(self) -> tuple[str, ...]:
        """The solution columns after ``House``."""
        return tuple(a.header for a in self.attributes)

    @property
    def size(self) -> str:
        """The official size label ``"N*M"``."""
        return f"{self.n_houses}*{len(self.attributes)}"

    def satisfied_by(self, grid: Grid) -> bool:
        """Whether every clue holds in ``grid``."""
        where = positions(grid)
        return all(clue.holds(where) for clue in self.clues)

    def describe(self, entity: Entity) -> str:
        """The noun phrase for an entity (lower-case start)."""
        attr = self.attributes[entity.attr]
        return attr.describe(attr.values[entity.value])


def render_clue(puzzle: Puzzle, clue: Clue) -> str:
    """One clue as an English sentence, in the official ZebraLogic wording."""
    a = puzzle.describe(clue.first)
    b = puzzle.describe(clue.second) if clue.second is not None else ""
    house = ORDINALS[clue.house] if clue.house is not None else ""
    text = {
        ClueKind.FOUND_AT: f"{a} is in the {house} house.",
        ClueKind.NOT_AT: f"{a} is not in the {house} house.",
        ClueKind.SAME_HOUSE: f"{a} is {b}.",
        ClueKind.DIRECT_LEFT: f"{a} is directly left of {b}.",
        ClueKind.SIDE_BY_SIDE: f"{a} and {b} are next to each other.",
        ClueKind.LEFT_OF: f"{a} is somewhere to the left of {b}.",
        ClueKind.RIGHT_OF: f"{a} is somewhere to the right of {b}.",
        ClueKind.ONE_BETWEEN: f"There is one house between {a} and {b}.",
        ClueKind.TWO_BETWEEN: f"There are two houses between {a} and {b}.",
    }[clue.kind]
    return text[:1].upper() + text[1:]


def render_puzzle(puzzle: Puzzle) -> str:
    """The puzzle text exactly as the official ``puzzle`` field lays it out."""
    lines = [INTRO.format(n=puzzle.n_houses)]
    for attr in puzzle.attributes:
        lines.append(f" - {attr.intro}: " + ", ".join(f"`{v}`" for v in attr.values))
    lines += ["", CLUES_HEADING]
    lines += [f"{i}. {render_clue(puzzle, clue)}" for i, clue in enumerate(puzzle.clues, 1)]
    return "\n".join(lines)


def solution_table(puzzle: Puzzle, grid: Grid) -> dict[str, list]:
    """The official ``solution`` field: ``{"header": ["House", ...], "rows": [["1", ...], ...]}``."""
    rows = [
        [str(h + 1)] + [attr.values[grid[a][h]] for a, attr in enumerate(puzzle.attributes)]
        for h in range(puzzle.n_houses)
    ]
    return {"header": ["House", *puzzle.headers], "rows": rows}
