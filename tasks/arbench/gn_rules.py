"""Pure rules of ARBench Guessing Numbers (GN): secrets, guess extraction, feedback, consistency.

The secret is 4 distinct digits, a leading 0 allowed (``10*9*8*7 = 5040`` secrets). A guess is read
from a reply exactly as AR-Bench's ``extract_and_convert_guess`` does: the LAST match of ``\\d{4}``
(non-overlapping, left to right, so ``"12345"`` reads ``1234``). Feedback is AR-Bench's
``compare_guess``: ``A`` = digits in the right position, ``B`` = multiset-common digits minus ``A``.
A guess with repeated digits is scored by the same multiset rule (AR-Bench accepts it).

Everything is a pure function of its arguments; consistency checks are vectorised with NumPy.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

DIGITS = 4
# AR-Bench's feedback sentences (reasoner/gn/prompt.py eval_prompt), verbatim up to trailing spaces.
CORRECT_POSITION = "{a} digits are present in the answer and in the correct positions"
DIFFERENT_POSITION = "{b} digits are present in the answer but in the different positions"
# AR-Bench's answer to a reply without a guess (refine_prompt), on one line.
NO_GUESS = (
    "Your output does not follow this format: Guess: [number] "
    "please propose a guess number, for example: Guess: 1234"
)
# AR-Bench's prompt after the last round (final_guess_prompt).
FINAL_GUESS = (
    "You have finished all the rounds of interaction, please give your final answer based on "
    "the guesses and feedback above:\nGuess: [number]"
)
MAX_SCAN_CHARS = 20_000  # only the tail of a huge reply is searched (the guess is the last run)

_FOUR_DIGITS = re.compile(r"\d{4}", re.ASCII)
_FEEDBACK = re.compile(
    r"^Turn \d{1,4}: Guess: (\d{4})\n"
    r"(\d) digits are present in the answer and in the correct positions\n"
    r"(\d) digits are present in the answer but in the different positions$",
    re.MULTILINE,
)


@lru_cache(maxsize=1)
def all_secrets() -> tuple[str, ...]:
    """The 5040 secrets in lexicographic order (``"0123"`` ... ``"9876"``)."""
    return tuple("".join(p) for p in itertools.permutations("0123456789", DIGITS))


@lru_cache(maxsize=1)
def _secret_index() -> dict[str, int]:
    return {s: i for i, s in enumerate(all_secrets())}


def is_secret(text: object) -> bool:
    """Whether ``text`` is a valid secret: a string of 4 distinct ASCII digits."""
    return (
        isinstance(text, str)
        and len(text) == DIGITS
        and all(c in "0123456789" for c in text)
        and len(set(text)) == DIGITS
    )


def sample_secret(rng: np.random.Generator) -> str:
    """A uniformly random secret (leading 0 allowed)."""
    return "".join(str(d) for d in rng.permutation(10)[:DIGITS])


def extract_guess(text: str) -> str | None:
    """The last ``\\d{4}`` run of ``text`` (AR-Bench's rule), or ``None`` if there is none.

    Only ASCII digits count (AR-Bench's ``\\d`` would also match other scripts' digits); only the
    last ``MAX_SCAN_CHARS`` characters are searched.
    """
    matches = _FOUR_DIGITS.findall(text[-MAX_SCAN_CHARS:])
    return matches[-1] if matches else None


def compare(secret: str, guess: str) -> tuple[int, int]:
    """AR-Bench's ``compare_guess``: ``(A, B)`` with ``A`` = same position, ``B`` = common digits
    (multiset intersection) in other positions.

    >>> compare("1234", "1243")
    (2, 2)
    >>> compare("1234", "1111")
    (1, 0)
    """
    if len(secret) != len(guess):
        raise ValueError(f"secret and guess must have the same length, got {secret!r}, {guess!r}")
    same = sum(s == g for s, g in zip(secret, guess))
    common = sum((Counter(secret) & Counter(guess)).values())
    return same, common - same


def feedback_text(turn: int, guess: str, a: int, b: int) -> str:
    """The environment's answer to a guess: the guess echoed, then AR-Bench's two sentences."""
    return (
        f"Turn {turn}: Guess: {guess}\n"
        + CORRECT_POSITION.format(a=a)
        + "\n"
        + DIFFERENT_POSITION.format(b=b)
    )


def parse_feedback(context: str) -> list[tuple[str, int, int]]:
    """Every ``(guess, A, B)`` that :func:`feedback_text` wrote into ``context``, in order."""
    return [(g, int(a), int(b)) for g, a, b in _FEEDBACK.findall(context)]


@lru_cache(maxsize=1)
def _secret_table() -> tuple[np.ndarray, np.ndarray]:
    """All secrets as an int8 digit array ``[5040, 4]`` and a 10-bit digit-set mask ``[5040]``."""
    digits = np.array([[int(c) for c in s] for s in all_secrets()], dtype=np.int8)
    masks = (1 << digits.astype(np.int64)).sum(axis=1)
    return digits, masks


_POPCOUNT = np.array([bin(i).count("1") for i in range(1 << 10)], dtype=np.int64)


def _feedback_codes(candidates: np.ndarray, guess: str) -> np.ndarray:
    """``5*A + B`` of ``guess`` against every candidate index (secrets have distinct digits, so
    the multiset intersection is the size of the digit-set intersection)."""
    digits, masks = _secret_table()
    g = np.array([int(c) for c in guess], dtype=np.int8)
    g_mask = int(sum(1 << int(d) for d in set(g.tolist())))
    same = (digits[candidates] == g).sum(axis=1)
    common = _POPCOUNT[masks[candidates] & g_mask]
    return 5 * same + (common - same)


def consistent(history: Sequence[tuple[str, int, int]]) -> list[str]:
    """The secrets that would have produced every ``(guess, A, B)`` of ``history``."""
    index = np.arange(len(all_secrets()))
    for guess, a, b in history:
        if len(guess) != DIGITS or not guess.isdigit():
            continue
        index = index[_feedback_codes(index, guess) == 5 * a + b]
    secrets = all_secrets()
    return [secrets[i] for i in index]


def best_consistent_guess(candidates: Sequence[str], max_scored: int = 64) -> str:
    """A candidate that splits the remaining candidates into the most feedback classes.

    Scores at most ``max_scored`` candidates (evenly spaced in the given order), each against all
    candidates; ties go to the earliest. Deterministic.

    Raises:
        ValueError: if ``candidates`` is empty.
    """
    if not candidates:
        raise ValueError("no candidate is consistent with the feedback")
    if len(candidates) <= 2:
        return candidates[0]
    digits, masks = _secret_table()
    lookup = _secret_index()
    pool = np.array([lookup[c] for c in candidates])
    step = max(1, len(candidates) // max_scored)
    scored = pool[::step][:max_scored]
    # codes[k, p] = 5*A + B of scored guess k against pool candidate p (all have distinct digits)
    same = (digits[scored][:, None, :] == digits[pool][None, :, :]).sum(axis=2)
    common = _POPCOUNT[masks[scored][:, None] & masks[pool][None, :]]
    codes = 5 * same + (common - same) + 25 * np.arange(len(scored))[:, None]
    classes = (np.bincount(codes.ravel(), minlength=25 * len(scored)).reshape(-1, 25) > 0).sum(1)
    return candidates[int(np.argmax(classes)) * step]
