"""Incremental context rendering: each message is rendered once, when it is played, so the cost of
an agent's context does not grow with the length of the episode.

``TeamProtocol.render(prompt, visible_messages, agent)`` formats every visible message and keeps
the newest ones that fit ``max_context_chars``; called at every turn, that is O(turns) work per
step and O(turns^2) per episode. :class:`ContextHistory` keeps each message's block (its rendered
text) with running sums of the blocks' lengths, so the messages an agent sees are a few slices of
that history and the newest ones that fit the budget are found by bisection: a context costs
O(log turns) plus the length of the text it returns. The text, and the ``truncated`` flag, are
exactly those of ``TeamProtocol.render`` (a property test checks it on random histories).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from tasks.base import Message
from teamtr_env.protocol import TeamProtocol


class _Blocks:
    """Rendered blocks and the running sums of their lengths: ``ends[i]`` is the length of
    ``blocks[:i]`` (so ``ends[0] == 0``)."""

    def __init__(self) -> None:
        self.blocks: list[str] = []
        self.ends: list[int] = [0]

    def append(self, block: str) -> None:
        self.blocks.append(block)
        self.ends.append(self.ends[-1] + len(block))

    def newest_fitting(self, lo: int, hi: int, budget: int) -> int:
        """The smallest ``i`` in ``lo..hi`` with ``len("".join(blocks[i:hi])) <= budget``
        (``hi`` when not even the newest block fits). Blocks are never empty, so this is where a
        newest-first scan that stops at the first block over the budget stops."""
        if budget < 0:
            return hi
        return min(bisect_left(self.ends, self.ends[hi] - budget, lo, hi + 1), hi)


class ContextHistory:
    """The messages of one episode, rendered once each, for :meth:`TeamProtocol.render`-identical
    contexts at a cost independent of the episode's length.

    Args:
        protocol: the team protocol; its ``message_block``, ``frame``, ``fit`` and visibility
            rules are used (``TeamEnv`` falls back to ``protocol.render`` when a subclass
            overrides ``render`` or ``sees``).
    """

    def __init__(self, protocol: TeamProtocol) -> None:
        self.protocol = protocol
        self._all = _Blocks()
        self._turns: list[int] = []  # per message, non-decreasing
        self._owned: dict[str, list[int]] = {}  # agent -> indices of the messages of its turns
        self._owned_blocks: dict[str, _Blocks] = {}

    def __len__(self) -> int:
        return len(self._turns)

    def append(self, message: Message, owner: str, turn: int) -> None:
        """Adds a message played at ``turn`` (environment feedback is owned by its turn's agent)."""
        if self._turns and turn < self._turns[-1]:
            raise ValueError(f"turns must not decrease: got turn {turn} after {self._turns[-1]}")
        block = self.protocol.message_block(message)
        self._owned.setdefault(owner, []).append(len(self._turns))
        self._owned_blocks.setdefault(owner, _Blocks()).append(block)
        self._all.append(block)
        self._turns.append(turn)

    def render(self, prompt: str | None, agent: str, turn: int) -> tuple[str, bool]:
        """``protocol.render(prompt, <the messages agent sees at turn>, agent)``, incrementally.

        Args:
            prompt: the task's prompt, or ``None`` when ``agent`` is not shown it.
            agent: the viewer (whose cue line ends the context).
            turn: the turn ``agent`` is about to play (every message is of an earlier turn).
        """
        head, cue = self.protocol.frame(prompt, agent)
        budget = self.protocol.max_context_chars - len(head) - len(cue)
        pieces: list[str] = []  # newest segment first
        dropped = False
        for blocks, lo, hi in reversed(self._visible(agent, turn)):
            start = blocks.newest_fitting(lo, hi, budget)
            pieces.append("".join(blocks.blocks[start:hi]))
            budget -= blocks.ends[hi] - blocks.ends[start]
            if start > lo:
                dropped = True
                break
        return self.protocol.fit(head, "".join(reversed(pieces)), cue, dropped=dropped)

    def _visible(self, agent: str, turn: int) -> Sequence[tuple[_Blocks, int, int]]:
        """The messages ``agent`` sees at ``turn``, oldest first, as slices ``(blocks, lo, hi)``
        of the whole history or of ``agent``'s own messages; mirrors ``TeamProtocol.sees``."""
        p = self.protocol
        n = len(self._turns)
        if p.visibility == "all" or agent in p.full_view:
            return [(self._all, 0, n)]
        if p.visibility == "previous":
            lo, hi = bisect_left(self._turns, turn - 1), bisect_left(self._turns, turn)
            return [(self._all, lo, hi)]
        own = self._owned_blocks.get(agent, _Blocks())
        owned = self._owned.get(agent, [])
        if p.visibility == "own":
            return [(own, 0, len(owned))]
        # "rounds": every message of the completed rounds, then its own messages of this round
        size = int(p.round_size or 1)
        completed = bisect_left(self._turns, turn // size * size)
        first_own = bisect_left(owned, completed)
        return [(self._all, 0, completed), (own, first_own, len(owned))]
