"""Pure rules of the relay game: a secret symbol passed along a chain of agents.

The problem is a secret ``s`` in ``0..K-1``, rendered ``"secret 3"``. Every message is one symbol,
``"m0"`` .. ``"m{K-1}"``. The first agent sees the secret; each later agent (with
``visibility="previous"``) sees only the message before its turn. The last message is the team's
guess. Parsing uses two anchored, bounded regular expressions and ``int()`` on at most three
digits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

MAX_SYMBOLS = 100
_SECRET = re.compile(r"^secret (\d{1,3})$")
_MESSAGE = re.compile(r"^m(\d{1,3})$")


def render_prompt(secret: int) -> str:
    """``3`` -> ``"secret 3"`` (the opening prompt the first agent sees)."""
    return f"secret {secret}"


def render_message(symbol: int) -> str:
    """``3`` -> ``"m3"``."""
    return f"m{symbol}"


def parse_message(text: str) -> int | None:
    """``"m3"`` (surrounding whitespace allowed) -> ``3``; ``None`` for anything else."""
    match = _MESSAGE.match(text.strip()) if isinstance(text, str) else None
    return int(match.group(1)) if match else None


def observed_symbol(context: str) -> int | None:
    """The symbol an agent observes in its rendered context: the last line that is a secret
    (``"secret 3"``, the first agent) or a message (``"m3"``, every later agent); ``None`` if no
    line is either."""
    for line in reversed(context.split("\n")):
        line = line.strip()
        match = _SECRET.match(line) or _MESSAGE.match(line)
        if match:
            return int(match.group(1))
    return None


def exact_success(tables: Sequence[np.ndarray], turns: int) -> float:
    """The probability that a relay of ``turns`` turns (agent ``t mod n`` of the ``n`` tables at
    turn ``t``) ends on the secret, for a uniform secret: ``trace(P_{j(0)} ... P_{j(T-1)}) / K``,
    each ``P`` a row-stochastic ``[K, K]`` table ``P[x, y] = pi(m_y | x)``."""
    if not tables or turns < 1:
        raise ValueError(f"exact_success needs tables and turns >= 1, got {len(tables)}, {turns}")
    k = tables[0].shape[0]
    chain = np.eye(k)
    for t in range(turns):
        chain = chain @ tables[t % len(tables)]
    return float(np.trace(chain) / k)
