"""Pure rules of the convention game: a secret word passed along a relay in a code of the team's
choosing.

The problem is a secret word of ``length`` lowercase letters, rendered ``"secret kqz"``. Every
message is one word of ``length`` lowercase letters (``"zqk"``). The first agent sees the secret;
each later agent (with ``visibility="previous"``) sees only the message before its turn. The last
message is the team's guess.

The task does not fix the encoding. It names a family of *transforms*, bijections of the words of
a given length (:data:`TRANSFORMS`): each reverses the word or not and shifts every letter by
``-2..2`` places (mod 26); the family is closed under inverses from ``C = 4`` on (``shift1`` and
``unshift1`` undo each other), so the scripted experts can coordinate with shifts as well as with
reversals. Reversal and shifts commute, so a chain of transforms composes to one
``(reversed, shift)`` pair: the parity of its reversals and the sum of its shifts mod 26
(:func:`composite`). A team is *coordinated* when the composite of its turns is the identity.

Nothing here evaluates text: words are read with anchored, bounded regular expressions.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

MIN_LENGTH = 2
MAX_LENGTH = 8
ALPHABET = "abcdefghijklmnopqrstuvwxyz"

TRANSFORMS: tuple[str, ...] = (
    "identity",
    "reverse",
    "shift1",
    "unshift1",
    "reverse_shift1",
    "reverse_unshift1",
    "shift2",
    "unshift2",
)
"""The family of transforms, in order: a task with ``conventions=C`` uses the first ``C``."""

# Each transform as (reverses the word, shifts every letter by this many places).
_PARTS: dict[str, tuple[bool, int]] = {
    "identity": (False, 0),
    "reverse": (True, 0),
    "shift1": (False, 1),
    "unshift1": (False, -1),
    "reverse_shift1": (True, 1),
    "reverse_unshift1": (True, -1),
    "shift2": (False, 2),
    "unshift2": (False, -2),
}

_WORD = re.compile(r"[a-z]{1,8}")
_SECRET = re.compile(r"secret ([a-z]{1,8})")
_CUE = re.compile(r"### ([A-Za-z][A-Za-z0-9_]{0,127})")


def render_prompt(secret: str) -> str:
    """``"kqz"`` -> ``"secret kqz"`` (the opening prompt the first agent sees)."""
    return f"secret {secret}"


def all_words(length: int) -> list[str]:
    """Every word of ``length`` lowercase letters, in alphabetical order."""
    return ["".join(w) for w in itertools.product(ALPHABET, repeat=length)]


def is_word(text: object, length: int) -> bool:
    """Whether ``text`` is exactly one word of ``length`` lowercase letters ``a-z``."""
    return isinstance(text, str) and len(text) == length and _WORD.fullmatch(text) is not None


def parse_message(text: object, length: int) -> str | None:
    """``" kqz\\n"`` -> ``"kqz"`` for ``length=3`` (surrounding whitespace allowed); ``None`` for
    anything else (another length, capitals, digits, two words, an empty message)."""
    if not isinstance(text, str):
        return None
    word = text.strip()
    return word if is_word(word, length) else None


def observed_word(context: str, length: int) -> str | None:
    """The word an agent observes in its rendered context: the last line that is a secret
    (``"secret kqz"``, the first agent) or a word of ``length`` letters (the previous message,
    every later agent); ``None`` if no line is either.

    Only the last block is read: the lines after the last ``### `` header that precedes the
    context's closing cue line (``### a2``), i.e. the opening prompt for the first agent and the
    previous message for the others, so a word in a system prompt is never taken for a message
    (a context without headers is read whole)."""
    lines = context.rstrip("\n").split("\n")
    if lines and _CUE.fullmatch(lines[-1].strip()):
        lines.pop()  # the cue naming the agent about to speak
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("### "):
            break  # the start of the last block
        secret = _SECRET.fullmatch(line)
        if secret is not None and len(secret.group(1)) == length:
            return secret.group(1)
        if is_word(line, length):
            return line
    return None


def agent_name(context: str) -> str | None:
    """The name on the context's last cue line ``### name`` (the agent about to speak); ``None``
    when there is none."""
    for line in reversed(context.split("\n")):
        cue = _CUE.fullmatch(line.strip())
        if cue is not None:
            return cue.group(1)
    return None


def _check(name: str, word: str) -> tuple[bool, int]:
    if name not in _PARTS:
        raise ValueError(f"unknown transform {name!r}; expected one of {list(TRANSFORMS)}")
    if not isinstance(word, str) or _WORD.fullmatch(word) is None:
        raise ValueError(f"expected a word of 1-8 lowercase letters a-z, got {word!r:.80}")
    return _PARTS[name]


def _shift(word: str, k: int) -> str:
    return "".join(ALPHABET[(ord(c) - ord("a") + k) % 26] for c in word)


def apply(name: str, word: str) -> str:
    """The transform ``name`` applied to ``word``: ``apply("reverse_shift1", "kqz") == "arl"``.

    Raises:
        ValueError: ``name`` is not a transform or ``word`` is not lowercase letters.
    """
    reverse, k = _check(name, word)
    shifted = _shift(word, k)
    return shifted[::-1] if reverse else shifted


def invert(name: str, word: str) -> str:
    """The inverse of ``name`` applied to ``word``: ``invert(name, apply(name, w)) == w``.

    Raises:
        ValueError: ``name`` is not a transform or ``word`` is not lowercase letters.
    """
    reverse, k = _check(name, word)
    shifted = _shift(word, -k)
    return shifted[::-1] if reverse else shifted


def composite(names: Iterable[str]) -> tuple[bool, int]:
    """The chain of transforms ``names`` (in turn order) as one ``(reversed, shift)``: whether it
    reverses the word (an odd number of reversals) and the total shift mod 26.

    Raises:
        ValueError: a name is not a transform.
    """
    reverse, k = False, 0
    for name in names:
        if name not in _PARTS:
            raise ValueError(f"unknown transform {name!r}; expected one of {list(TRANSFORMS)}")
        reverse ^= _PARTS[name][0]
        k = (k + _PARTS[name][1]) % 26
    return reverse, k


def is_coordinated(names: Iterable[str]) -> bool:
    """Whether the chain of transforms ``names`` (one per turn) composes to the identity: an even
    number of reversals and a total shift of 0 mod 26. Such a team names every secret."""
    return composite(names) == (False, 0)
