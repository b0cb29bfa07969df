"""Pure STRIPS rules of the 4-operator Blocksworld (PlanBench's ``blocksworld-4ops`` domain).

Two independent representations, each used where it is the right tool:

* *fact sets* (``frozenset`` of tuples such as ``("on", "a", "b")``) with the domain's exact
  preconditions, add and delete lists. Plan validation uses them, so a plan is judged the way VAL
  and pyperplan judge it: every step's preconditions hold in order (``(state - del) | add``), and
  every goal fact holds at the end. Nothing is assumed about the state being physically sensible.
* *compact states* for search: ``below[i]`` is the index of the block that block ``i`` sits on,
  :data:`TABLE` or :data:`HELD`. :func:`optimal_plan` runs A* over them with an admissible
  lower bound (:func:`lower_bound`), so the plans it returns are optimal (tests check the lengths
  against pyperplan's breadth-first search).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

Fact = tuple[str, ...]
"""A ground atom: ``("on", "a", "b")``, ``("clear", "a")``, ``("handempty",)``."""

TABLE = -1
HELD = -2

ACTION_ORDER = ("pick-up", "put-down", "stack", "unstack")
"""The operators in the order of PlanBench's domain file (its plan extraction depends on it)."""
ACTION_ARITY = {"pick-up": 1, "put-down": 1, "stack": 2, "unstack": 2}
PREDICATE_ARITY = {"clear": 1, "ontable": 1, "handempty": 0, "holding": 1, "on": 2}

DEFAULT_MAX_EXPANSIONS = 2_000_000
"""Search effort cap of :func:`optimal_plan`; far above what 8 blocks need (see the benchmark)."""


class Action(NamedTuple):
    """A ground action, e.g. ``Action("stack", ("a", "b"))`` = ``(stack a b)``."""

    name: str
    args: tuple[str, ...]

    def __str__(self) -> str:
        return "(" + " ".join((self.name, *self.args)) + ")"


def parse_action(text: str) -> Action:
    """``"(stack a b)"`` -> ``Action("stack", ("a", "b"))``.

    Raises:
        ValueError: unknown operator or wrong number of arguments.
    """
    parts = text.strip().strip("()").split()
    if not parts or parts[0] not in ACTION_ARITY:
        raise ValueError(f"expected one of {ACTION_ORDER} in {text!r}")
    if len(parts) - 1 != ACTION_ARITY[parts[0]]:
        raise ValueError(f"{parts[0]} takes {ACTION_ARITY[parts[0]]} argument(s), got {text!r}")
    return Action(parts[0], tuple(parts[1:]))


def parse_fact(text: str) -> Fact:
    """``"(on a b)"`` -> ``("on", "a", "b")``.

    Raises:
        ValueError: unknown predicate or wrong number of arguments.
    """
    parts = tuple(text.strip().strip("()").split())
    if not parts or parts[0] not in PREDICATE_ARITY:
        raise ValueError(f"expected one of {sorted(PREDICATE_ARITY)} in {text!r}")
    if len(parts) - 1 != PREDICATE_ARITY[parts[0]]:
        raise ValueError(f"{parts[0]} takes {PREDICATE_ARITY[parts[0]]} argument(s), got {text!r}")
    return parts


def fact_str(fact: Fact) -> str:
    """``("on", "a", "b")`` -> ``"(on a b)"``."""
    return "(" + " ".join(fact) + ")"


def schema(action: Action) -> tuple[frozenset[Fact], frozenset[Fact], frozenset[Fact]]:
    """``(preconditions, add list, delete list)`` of a ground action, as in the domain file."""
    name, args = action
    if name == "pick-up":
        (x,) = args
        pre = {("clear", x), ("ontable", x), ("handempty",)}
        return frozenset(pre), frozenset({("holding", x)}), frozenset(pre)
    if name == "put-down":
        (x,) = args
        add = {("clear", x), ("handempty",), ("ontable", x)}
        return frozenset({("holding", x)}), frozenset(add), frozenset({("holding", x)})
    if name == "stack":
        x, y = args
        pre = {("clear", y), ("holding", x)}
        add = {("handempty",), ("clear", x), ("on", x, y)}
        return frozenset(pre), frozenset(add), frozenset(pre)
    if name == "unstack":
        x, y = args
        pre = {("on", x, y), ("clear", x), ("handempty",)}
        add = {("holding", x), ("clear", y)}
        return frozenset(pre), frozenset(add), frozenset(pre)
    raise ValueError(f"unknown action {name!r}; expected one of {ACTION_ORDER}")


def apply(state: frozenset[Fact], action: Action) -> frozenset[Fact] | None:
    """The successor state, or ``None`` if a precondition does not hold."""
    pre, add, delete = schema(action)
    if not pre <= state:
        return None
    return (state - delete) | add


@dataclass(frozen=True)
class Instance:
    """A Blocksworld problem: the blocks (PDDL names ``a``..``l``), the initial state and the goal.

    ``goal`` is a conjunction of facts (PlanBench goals are ``on`` facts only).
    """

    blocks: tuple[str, ...]
    init: frozenset[Fact]
    goal: frozenset[Fact]

    def goal_holds(self, state: frozenset[Fact]) -> bool:
        """Whether every goal fact is true in ``state``."""
        return self.goal <= state


class PlanCheck(NamedTuple):
    """The verdict of :func:`simulate`.

    Attributes:
        valid: every step applicable in order and the goal holds at the end.
        reason: ``"valid"``, ``"inapplicable_action"`` or ``"goal_not_reached"``.
        step: the 1-based index of the first inapplicable step (``None`` otherwise).
        unsatisfied: for ``inapplicable_action`` the failed preconditions (or unknown objects),
            for ``goal_not_reached`` the goal facts that do not hold; sorted PDDL strings.
    """

    valid: bool
    reason: str
    step: int | None = None
    unsatisfied: tuple[str, ...] = ()


def simulate(instance: Instance, plan: Sequence[Action]) -> PlanCheck:
    """Executes ``plan`` from ``instance.init`` (STRIPS semantics, as VAL does).

    An action naming an object that is not one of the instance's blocks is inapplicable (VAL
    rejects such a plan).
    """
    state = instance.init
    known = set(instance.blocks)
    for step, action in enumerate(plan, 1):
        unknown = [a for a in action.args if a not in known]
        if unknown:
            return PlanCheck(
                False, "inapplicable_action", step, tuple(f"object {a}" for a in unknown)
            )
        nxt = apply(state, action)
        if nxt is None:
            missing = schema(action)[0] - state
            return PlanCheck(
                False, "inapplicable_action", step, tuple(sorted(map(fact_str, missing)))
            )
        state = nxt
    if not instance.goal_holds(state):
        return PlanCheck(
            False, "goal_not_reached", None, tuple(sorted(map(fact_str, instance.goal - state)))
        )
    return PlanCheck(True, "valid")


# ---------------------------------------------------------------- compact states and search


def facts_from_below(blocks: Sequence[str], below: Sequence[int]) -> frozenset[Fact]:
    """The fact set of a compact state (``handempty`` unless a block is held)."""
    facts: set[Fact] = set()
    covered = {b for b in below if b >= 0}
    held = False
    for i, support in enumerate(below):
        if support == HELD:
            facts.add(("holding", blocks[i]))
            held = True
            continue
        if support == TABLE:
            facts.add(("ontable", blocks[i]))
        else:
            facts.add(("on", blocks[i], blocks[support]))
        if i not in covered:
            facts.add(("clear", blocks[i]))
    if not held:
        facts.add(("handempty",))
    return frozenset(facts)


def below_from_facts(blocks: Sequence[str], facts: Iterable[Fact]) -> tuple[int, ...]:
    """The compact form of a complete, physically consistent fact set.

    Raises:
        ValueError: naming what is inconsistent (a block with no or two positions, two blocks on
            one block, a cycle, ``clear``/``handempty`` facts that contradict the positions, or an
            unknown object).
    """
    index = {b: i for i, b in enumerate(blocks)}
    below: list[int | None] = [None] * len(blocks)
    errors: list[str] = []
    facts = frozenset(facts)

    def place(block: str, value: int) -> None:
        i = index[block]
        if below[i] is not None:
            errors.append(f"block {block} has two positions")
        below[i] = value

    for fact in sorted(facts):
        unknown = [a for a in fact[1:] if a not in index]
        if unknown:
            errors.append(f"{fact_str(fact)} names unknown object(s) {unknown}")
            continue
        if fact[0] == "ontable":
            place(fact[1], TABLE)
        elif fact[0] == "holding":
            place(fact[1], HELD)
        elif fact[0] == "on":
            place(fact[1], index[fact[2]])
    errors += [f"block {blocks[i]} has no position" for i, b in enumerate(below) if b is None]
    if not errors:
        compact = tuple(b for b in below if b is not None)
        errors += _consistency_errors(blocks, compact, facts)
        if not errors:
            return compact
    raise ValueError("; ".join(errors))


def _consistency_errors(
    blocks: Sequence[str], below: tuple[int, ...], facts: frozenset[Fact]
) -> list[str]:
    errors = []
    supports = [b for b in below if b >= 0]
    for b in sorted({b for b in supports if supports.count(b) > 1}):
        errors.append(f"more than one block is on {blocks[b]}")
    if sum(b == HELD for b in below) > 1:
        errors.append("more than one block is held")
    for i in range(len(below)):
        seen, j = set(), i
        while j >= 0 and below[j] >= 0:
            if j in seen:
                errors.append(f"block {blocks[i]} is in a cycle")
                break
            seen.add(j)
            j = below[j]
    if not errors and facts != facts_from_below(blocks, below):
        extra = sorted(map(fact_str, facts - facts_from_below(blocks, below)))
        lack = sorted(map(fact_str, facts_from_below(blocks, below) - facts))
        errors.append(
            f"clear/handempty facts contradict the positions (extra {extra}, missing {lack})"
        )
    return errors


def successors(below: tuple[int, ...]) -> Iterator[tuple[tuple[str, int, int], tuple[int, ...]]]:
    """Applicable actions and successors of a compact state, in a fixed order.

    Actions are ``(name, block, other)`` with ``other`` = -1 for one-argument actions.
    """
    n = len(below)
    covered = set(below)
    held = next((i for i in range(n) if below[i] == HELD), None)
    if held is None:
        for x in range(n):
            if x in covered:
                continue
            nxt = list(below)
            nxt[x] = HELD
            if below[x] == TABLE:
                yield ("pick-up", x, -1), tuple(nxt)
            else:
                yield ("unstack", x, below[x]), tuple(nxt)
    else:
        nxt = list(below)
        nxt[held] = TABLE
        yield ("put-down", held, -1), tuple(nxt)
        for y in range(n):
            if y == held or y in covered:
                continue
            nxt = list(below)
            nxt[held] = y
            yield ("stack", held, y), tuple(nxt)


def lower_bound(below: tuple[int, ...], goal_on: dict[int, int], goal_under: dict[int, int]) -> int:
    """An admissible estimate of the remaining plan length (every move costs two actions).

    A block *must move* when its goal support differs from its current one, when a block below it
    must move, or when the goal puts a different block on the block it sits on. Each such block
    needs at least a pick-up/unstack and a put-down/stack of its own: 2 actions. A held block needs
    at least one action if the goal mentions it or any other block must move (the hand has to be
    emptied first).

    Args:
        below: the compact state.
        goal_on: ``x -> y`` for every goal fact ``(on x y)``.
        goal_under: ``y -> x`` for every goal fact ``(on x y)``.
    """
    n = len(below)
    must: list[bool | None] = [None] * n
    held = False
    count = 0
    for i in range(n):
        if below[i] == HELD:
            must[i] = False
            held = True
            continue
        # Walk down to the first block whose status is known, then fill statuses back up.
        chain = []
        j = i
        while j >= 0 and must[j] is None:
            chain.append(j)
            j = below[j]
        status = bool(must[j]) if j >= 0 else False
        for k in reversed(chain):
            support = below[k]
            status = (
                status
                or goal_on.get(k, support) != support
                or (support >= 0 and goal_under.get(support, k) != k)
            )
            must[k] = status
            count += status
    total = 2 * count
    if held:
        h = below.index(HELD)
        if count or h in goal_on or h in goal_under:
            total += 1
    return total


class SearchResult(NamedTuple):
    """What :func:`optimal_plan` found.

    Attributes:
        plan: an optimal plan, or ``None`` (unsolvable, or the expansion cap was reached).
        expanded: states expanded.
        exhausted: ``True`` when the cap stopped the search (the optimum is then unknown).
    """

    plan: list[Action] | None
    expanded: int
    exhausted: bool


def optimal_plan(
    instance: Instance,
    max_expansions: int = DEFAULT_MAX_EXPANSIONS,
    use_heuristic: bool = True,
) -> SearchResult:
    """An optimal plan by A* with :func:`lower_bound` (or breadth-first when
    ``use_heuristic=False``).

    The bound is admissible but not consistent, so a state is re-expanded whenever a cheaper path
    to it is found; with that, the first goal state popped is optimal.

    Raises:
        ValueError: if the initial state is not a consistent blocksworld state or the goal has
            facts other than ``on``/``clear``/``ontable``/``holding``/``handempty`` over the blocks.
    """
    blocks = instance.blocks
    index = {b: i for i, b in enumerate(blocks)}
    start = below_from_facts(blocks, instance.init)
    for fact in instance.goal:
        if fact[0] not in PREDICATE_ARITY or any(a not in index for a in fact[1:]):
            raise ValueError(f"goal fact {fact_str(fact)} is not over the blocks {list(blocks)}")
    goal_on = {index[f[1]]: index[f[2]] for f in instance.goal if f[0] == "on"}
    goal_under = {index[f[2]]: index[f[1]] for f in instance.goal if f[0] == "on"}
    simple = all(f[0] == "on" for f in instance.goal)

    def is_goal(below: tuple[int, ...]) -> bool:
        if simple:
            return all(below[x] == y for x, y in goal_on.items())
        return instance.goal <= facts_from_below(blocks, below)

    def h(below: tuple[int, ...]) -> int:
        return lower_bound(below, goal_on, goal_under) if use_heuristic and simple else 0

    best = {start: 0}
    parent: dict[tuple[int, ...], tuple[tuple[int, ...], tuple[str, int, int]]] = {}
    tie = itertools.count()
    frontier = [(h(start), 0, next(tie), start)]
    expanded = 0
    while frontier:
        _, neg_g, _, below = heapq.heappop(frontier)
        g = -neg_g
        if g > best[below]:
            continue  # a stale entry: a cheaper path was found after it was pushed
        if is_goal(below):
            return SearchResult(_trace(blocks, parent, below), expanded, False)
        if expanded >= max_expansions:
            return SearchResult(None, expanded, True)
        expanded += 1
        for move, nxt in successors(below):
            if g + 1 < best.get(nxt, g + 2):
                best[nxt] = g + 1
                parent[nxt] = (below, move)
                # Ties on f prefer deeper nodes (-g): they are closer to a goal.
                heapq.heappush(frontier, (g + 1 + h(nxt), -(g + 1), next(tie), nxt))
    return SearchResult(None, expanded, False)


def _trace(
    blocks: Sequence[str],
    parent: dict[tuple[int, ...], tuple[tuple[int, ...], tuple[str, int, int]]],
    below: tuple[int, ...],
) -> list[Action]:
    plan = []
    while below in parent:
        below, (name, x, y) = parent[below]
        args = (blocks[x],) if y < 0 else (blocks[x], blocks[y])
        plan.append(Action(name, args))
    return plan[::-1]
