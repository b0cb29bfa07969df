"""Reads a puzzle back from its official text: houses, attributes, values and clues.

The scripted expert solves from what an agent sees, so it must recover the puzzle from the rendered
context. Clues are read by finding the *values* they mention (the official phrases, like ours, name a
person through a value: "the person who drives a honda civic") and the wording of the clue type.
A mention is a case-insensitive occurrence of a listed value that starts at a word boundary; it
must also end at one, unless no reading with whole words gives the clue its entity count (official
phrases such as "born in January" for the value ``jan``). Any doubt (a value listed twice, a clue of
unknown shape, the wrong number of mentions) makes the parse fail, never guess.

Only bounded, linear regexes are used; the input is capped at ``MAX_CHARS``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from tasks.zebra.attributes import AttributeSpec
from tasks.zebra.puzzle import (
    CLUES_HEADING,
    MAX_SIZE,
    MIN_SIZE,
    ORDINALS,
    Clue,
    ClueKind,
    Entity,
    Puzzle,
)

MAX_CHARS = 200_000
_INTRO = re.compile(r"There are ([0-9]) houses, numbered 1 to \1 from left to right")
_VALUE = re.compile(r"`([^`\n]{1,100})`")
_CLUE_LINE = re.compile(r"\s{0,8}([0-9]{1,3})\.\s{1,8}(\S.{0,1000})")
_AT_HOUSE = re.compile(r"\bis (not )?in the (" + "|".join(ORDINALS) + r") house\b")
# (phrase in the lower-cased clue, kind, whether the second mention comes first in the clue)
_TWO_ENTITY_PATTERNS: tuple[tuple[str, ClueKind, bool], ...] = (
    ("one house between", ClueKind.ONE_BETWEEN, False),
    ("two houses between", ClueKind.TWO_BETWEEN, False),
    ("next to each other", ClueKind.SIDE_BY_SIDE, False),
    ("directly left of", ClueKind.DIRECT_LEFT, False),
    ("directly right of", ClueKind.DIRECT_LEFT, True),
    ("somewhere to the left of", ClueKind.LEFT_OF, False),
    ("somewhere to the right of", ClueKind.RIGHT_OF, False),
)


@dataclass(frozen=True)
class PuzzleText:
    """The parts of a puzzle text, before the clues are interpreted.

    Attributes:
        n_houses: ``N``.
        intros: each attribute's introducing line (before the colon).
        values: each attribute's values, as listed.
        clues: the clue sentences, in order.
        end: offset just past the last clue line in the parsed text.
    """

    n_houses: int
    intros: tuple[str, ...]
    values: tuple[tuple[str, ...], ...]
    clues: tuple[str, ...]
    end: int


def split_puzzle_text(text: str) -> PuzzleText | None:
    """Finds the first puzzle in ``text`` and splits it into its parts (``None`` if there is none
    or it is malformed)."""
    text = text[:MAX_CHARS]
    intro = _INTRO.search(text)
    if intro is None:
        return None
    n = int(intro.group(1))
    lines = text[intro.start() :].split("\n")
    i, intros, values = 1, [], []
    while i < len(lines) and lines[i].lstrip().startswith("- "):
        desc, sep, rest = lines[i].lstrip()[2:].partition(": `")
        listed = tuple(_VALUE.findall("`" + rest)) if sep else ()
        if len(listed) != n:
            return None
        intros.append(desc.strip())
        values.append(listed)
        i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    if not values or i >= len(lines) or lines[i].strip() != CLUES_HEADING:
        return None
    clues: list[str] = []
    for line in lines[i + 1 :]:
        match = _CLUE_LINE.fullmatch(line)
        if match is None or int(match.group(1)) != len(clues) + 1:
            break
        clues.append(match.group(2).strip())
    if not clues or not MIN_SIZE <= n <= MAX_SIZE or not MIN_SIZE <= len(values) <= MAX_SIZE:
        return None
    end = intro.start() + sum(len(line) + 1 for line in lines[: i + 1 + len(clues)])
    return PuzzleText(n, tuple(intros), tuple(values), tuple(clues), end)


class _Mentions:
    """Finds the listed values a clue mentions, in order of appearance."""

    def __init__(self, values: tuple[tuple[str, ...], ...]) -> None:
        self.lookup: dict[str, Entity] = {}
        self.ambiguous = False
        for a, listed in enumerate(values):
            for v, value in enumerate(listed):
                key = value.strip().lower()
                if not key or key in self.lookup:
                    self.ambiguous = True
                self.lookup[key] = Entity(a, v)
        alternatives = "|".join(re.escape(k) for k in sorted(self.lookup, key=len, reverse=True))
        self.strict = re.compile(rf"(?<![a-z0-9])(?:{alternatives})(?![a-z0-9])")
        self.prefix = re.compile(rf"(?<![a-z0-9])(?:{alternatives})")

    def find(self, sentence: str, count: int) -> list[Entity] | None:
        low = sentence.lower()
        for pattern in (self.strict, self.prefix):
            found = [self.lookup[m.group(0)] for m in pattern.finditer(low)]
            if len(found) == count and len(set(found)) == count:
                return found
        return None


def parse_clue(sentence: str, mentions: _Mentions, n_houses: int) -> Clue | None:
    """One clue sentence as a :class:`Clue` (``None`` if its shape or mentions are unclear)."""
    low = sentence.lower()
    for phrase, kind, swapped in _TWO_ENTITY_PATTERNS:
        if phrase in low:
            pair = mentions.find(sentence, 2)
            if pair is None:
                return None
            first, second = pair[::-1] if swapped else pair
            return Clue(kind, first, second)
    at = _AT_HOUSE.search(low)
    if at is not None:
        house = ORDINALS.index(at.group(2))
        found = mentions.find(sentence, 1)
        if found is None or house >= n_houses:
            return None
        return Clue(ClueKind.NOT_AT if at.group(1) else ClueKind.FOUND_AT, found[0], house=house)
    if " is " not in low or re.search(r"\bnot\b", low):
        return None
    pair = mentions.find(sentence, 2)
    if pair is None or pair[0].attr == pair[1].attr:
        return None
    return Clue(ClueKind.SAME_HOUSE, pair[0], pair[1])


def find_headers(text: str, start: int, n_attrs: int) -> tuple[str, ...] | None:
    """The column names of the first JSON answer template (``{"solution": {"House 1": {...}}}``)
    at or after ``start`` (``None`` if there is none or its width is not ``n_attrs``)."""
    open_at = text.find("{", start, start + 20_000)
    if open_at < 0:
        return None
    depth = 0
    for match in re.finditer(r"[{}]", text[open_at : open_at + 50_000]):
        depth += 1 if match.group(0) == "{" else -1
        if depth == 0:
            try:
                template = json.loads(text[open_at : open_at + match.end()])
                headers = tuple(template["solution"]["House 1"])
            except (ValueError, KeyError, TypeError):
                return None
            ok = len(headers) == n_attrs and all(isinstance(h, str) for h in headers)
            return headers if ok else None
    return None


def parse_puzzle(text: str, headers: tuple[str, ...] | None = None) -> Puzzle | None:
    """The first puzzle in ``text`` with its clues interpreted.

    Args:
        text: a context or a bare puzzle text.
        headers: the column names; by default read from the JSON answer template after the
            clues (the task's prompt has one).

    Returns:
        the puzzle (attribute phrases left empty), or ``None`` if any part could not be read.
    """
    parts = split_puzzle_text(text)
    if parts is None:
        return None
    if headers is None:
        headers = find_headers(text[:MAX_CHARS], parts.end, len(parts.values))
    if headers is None or len(headers) != len(parts.values):
        return None
    mentions = _Mentions(parts.values)
    if mentions.ambiguous:
        return None
    clues = []
    for sentence in parts.clues:
        clue = parse_clue(sentence, mentions, parts.n_houses)
        if clue is None:
            return None
        clues.append(clue)
    attributes = tuple(
        AttributeSpec(header, intro, "", values)
        for header, intro, values in zip(headers, parts.intros, parts.values, strict=True)
    )
    return Puzzle(parts.n_houses, attributes, tuple(clues))
