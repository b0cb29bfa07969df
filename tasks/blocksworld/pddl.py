"""Reading and writing PlanBench's Blocksworld PDDL files.

PlanBench's instances (``plan-bench/instances/blocksworld/generated_basic/instance-N.pddl``) are
written by one small C program (``pddlgenerators/blocksworld/4ops/2pddl``) and have a fixed shape::

    (define (problem BW-rand-4)
    (:domain blocksworld-4ops)
    (:objects a b c d )
    (:init (handempty) (ontable a) (on b c) ... (clear d))
    (:goal (and (on c b))))

A 60-line s-expression reader covers that shape and reports errors as ``file:line: message``, which
pyperplan's parser does not (it also needs the domain file and exits on some errors). pyperplan is
used by the tests instead, as an independent validator and optimal planner on files written by
:func:`problem_to_pddl`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tasks.blocksworld.domain import (
    ACTION_ARITY,
    PREDICATE_ARITY,
    Fact,
    Instance,
    below_from_facts,
    fact_str,
)
from tasks.blocksworld.text import COLOURS

DOMAIN_PDDL = """\
(define (domain blocksworld-4ops)
  (:requirements :strips)
  (:predicates (clear ?x) (ontable ?x) (handempty) (holding ?x) (on ?x ?y))

  (:action pick-up
    :parameters (?ob)
    :precondition (and (clear ?ob) (ontable ?ob) (handempty))
    :effect (and (holding ?ob) (not (clear ?ob)) (not (ontable ?ob)) (not (handempty))))

  (:action put-down
    :parameters (?ob)
    :precondition (holding ?ob)
    :effect (and (clear ?ob) (handempty) (ontable ?ob) (not (holding ?ob))))

  (:action stack
    :parameters (?ob ?underob)
    :precondition (and (clear ?underob) (holding ?ob))
    :effect (and (handempty) (clear ?ob) (on ?ob ?underob)
                 (not (clear ?underob)) (not (holding ?ob))))

  (:action unstack
    :parameters (?ob ?underob)
    :precondition (and (on ?ob ?underob) (clear ?ob) (handempty))
    :effect (and (holding ?ob) (clear ?underob)
                 (not (on ?ob ?underob)) (not (clear ?ob)) (not (handempty)))))
"""
"""The 4-operator Blocksworld domain PlanBench uses (``generated_domain.pddl``)."""

INSTANCE_FILE = re.compile(r"instance-(\d{1,9})\.pddl", re.IGNORECASE)
MAX_FILE_CHARS = 1_000_000


class PddlError(ValueError):
    """A PDDL file that cannot be read as a PlanBench Blocksworld file (message: ``file:line: ...``)."""


@dataclass(frozen=True)
class Node:
    """An s-expression: a token (``items`` is ``None``) or a list, with its 1-based line."""

    line: int
    token: str = ""
    items: tuple[Node, ...] | None = None

    def words(self) -> list[str]:
        """The tokens of a flat list (``[]`` for a token)."""
        return [i.token for i in self.items or () if i.items is None]


_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def parse_sexpr(text: str, source: str) -> Node:
    """The single top-level s-expression of ``text`` (comments ``;`` to end of line dropped).

    Raises:
        PddlError: unbalanced parentheses or not exactly one top-level expression.
    """
    stack: list[tuple[int, list[Node]]] = [(1, [])]
    for lineno, line in enumerate(text.split("\n"), 1):
        for token in _TOKEN.findall(line.split(";", 1)[0]):
            if token == "(":
                stack.append((lineno, []))
            elif token == ")":
                if len(stack) == 1:
                    raise PddlError(f"{source}:{lineno}: unexpected ')'")
                start, items = stack.pop()
                stack[-1][1].append(Node(start, items=tuple(items)))
            else:
                stack[-1][1].append(Node(lineno, token=token.lower()))
    if len(stack) > 1:
        raise PddlError(f"{source}:{stack[-1][0]}: '(' is never closed")
    top = stack[0][1]
    if len(top) != 1 or top[0].items is None:
        raise PddlError(f"{source}:1: expected one (define ...) expression, got {len(top)} items")
    return top[0]


@dataclass(frozen=True)
class PddlProblem:
    """A parsed problem file: its name, the instance, and the line of every section."""

    name: str
    instance: Instance


def parse_problem(text: str, source: str = "<string>") -> PddlProblem:
    """Reads a PlanBench Blocksworld problem.

    Objects must be PlanBench's block names ``a``..``l`` (they map to the colours); the initial
    state must be a complete, consistent blocksworld state; goal facts are ground atoms of the
    domain's predicates (PlanBench's are ``on`` facts).

    Raises:
        PddlError: naming the file and line of what is wrong.
    """
    root = parse_sexpr(text, source)
    items = root.items or ()
    if not items or items[0].token != "define":
        raise PddlError(f"{source}:{root.line}: expected (define (problem NAME) ...)")
    sections = {}
    name = ""
    for item in items[1:]:
        words = item.words()
        if item.items and words and words[0] == "problem" and len(words) == 2:
            name = words[1]
        elif item.items and words and words[0] == "domain":
            raise PddlError(f"{source}:{item.line}: this is a domain file; expected a problem file")
        elif item.items and words and words[0].startswith(":"):
            sections[words[0]] = item
    missing = [s for s in (":objects", ":init", ":goal") if s not in sections]
    if not name or missing:
        what = ["(problem NAME)"] * (not name) + missing
        raise PddlError(f"{source}:{root.line}: missing {', '.join(what)}")
    objects_node = sections[":objects"]
    objects = objects_node.words()[1:]
    if len(objects_node.items or ()) != len(objects) + 1 or "-" in objects:
        raise PddlError(f"{source}:{objects_node.line}: expected untyped objects (:objects a b c)")
    bad = [o for o in objects if o not in COLOURS]
    if bad or len(set(objects)) != len(objects) or not objects:
        raise PddlError(
            f"{source}:{objects_node.line}: objects must be distinct PlanBench block names "
            f"{'..'.join((min(COLOURS), max(COLOURS)))}, got {objects}"
        )
    blocks = tuple(sorted(objects))
    init = _facts((sections[":init"].items or ())[1:], blocks, source)
    goal_items = (sections[":goal"].items or ())[1:]
    if len(goal_items) != 1:
        raise PddlError(f"{source}:{sections[':goal'].line}: expected one goal formula")
    goal_node = goal_items[0]
    if goal_node.items and goal_node.items[0].token == "and":
        goal = _facts(goal_node.items[1:], blocks, source)
    else:
        goal = _facts((goal_node,), blocks, source)
    try:
        below_from_facts(blocks, init)
    except ValueError as exc:
        line = sections[":init"].line
        raise PddlError(
            f"{source}:{line}: the initial state is not a blocksworld state: {exc}"
        ) from exc
    return PddlProblem(name, Instance(blocks, frozenset(init), frozenset(goal)))


def _facts(nodes: tuple[Node, ...], blocks: tuple[str, ...], source: str) -> list[Fact]:
    facts = []
    for node in nodes:
        words = node.words()
        if node.items is None or len(words) != len(node.items) or not words:
            raise PddlError(f"{source}:{node.line}: expected a ground atom like (on a b)")
        predicate, args = words[0], tuple(words[1:])
        if PREDICATE_ARITY.get(predicate) != len(args):
            raise PddlError(
                f"{source}:{node.line}: unknown atom {fact_str((predicate, *args))}; expected one "
                f"of (clear x) (ontable x) (handempty) (holding x) (on x y)"
            )
        unknown = [a for a in args if a not in blocks]
        if unknown:
            raise PddlError(f"{source}:{node.line}: {unknown} not declared in :objects")
        facts.append((predicate, *args))
    return facts


def check_domain(text: str, source: str) -> None:
    """Checks that a domain file defines the four Blocksworld operators with their arities.

    Raises:
        PddlError: naming the file and what differs.
    """
    root = parse_sexpr(text, source)
    actions = {}
    for item in root.items or ():
        words = item.words()
        if item.items and words[:1] == [":action"] and len(words) >= 2:
            params = next(
                (
                    item.items[i + 1]
                    for i, n in enumerate(item.items[:-1])
                    if n.token == ":parameters"
                ),
                None,
            )
            actions[words[1]] = len(params.words()) if params is not None else -1
    expected = dict(ACTION_ARITY)
    if actions != expected:
        raise PddlError(
            f"{source}:{root.line}: not the 4-operator Blocksworld domain: expected actions "
            f"{expected}, found {actions}"
        )


def problem_to_pddl(instance: Instance, name: str | None = None) -> str:
    """A problem file in the layout of PlanBench's generator (``2pddl``)."""
    name = name or f"BW-rand-{len(instance.blocks)}"
    lines = [f"(define (problem {name})", "(:domain blocksworld-4ops)"]
    lines.append("(:objects " + "".join(f"{b} " for b in instance.blocks) + ")")
    order = {"handempty": 0, "holding": 1, "ontable": 2, "on": 2, "clear": 3}
    init = sorted(instance.init, key=lambda f: (order[f[0]], f[1:]))
    lines += ["(:init", *map(fact_str, init), ")", "(:goal", "(and"]
    lines += [*map(fact_str, sorted(instance.goal)), ")", ")", ")"]
    return "\n".join(lines) + "\n"


def instance_files(directory: Path) -> list[tuple[int, Path]]:
    """``(N, path)`` of every ``instance-N.pddl`` in ``directory``, by N."""
    found = []
    for path in directory.iterdir():
        match = INSTANCE_FILE.fullmatch(path.name)
        if match and path.is_file():
            found.append((int(match.group(1)), path))
    return sorted(found)


def read_text(path: Path, max_bytes: int = MAX_FILE_CHARS) -> str:
    """A file's text, refusing files larger than ``max_bytes`` (PDDL instances are tiny)."""
    size = path.stat().st_size
    if size > max_bytes:
        raise PddlError(
            f"{path}:1: {size} bytes is larger than the {max_bytes} this reader accepts"
        )
    return path.read_text(encoding="utf-8")
