"""A team as slots: each slot is one policy and the agents that play it (one agent each, or several
for a role-sharing team). :func:`adapters.team.build_team` returns a :class:`Team`, and the
trainer, warm start, evaluation and export iterate over its slots, so that whether two agents
share a model is said once, by the slot, and never worked out again from the objects."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Slot", "Team"]


@dataclass(frozen=True)
class Slot:
    """One policy of a team and the agents that play it, in the team's order.

    Attributes:
        policy: the policy (a trainable one is trained once, on every agent's messages).
        agents: the agents that play it (several: a role-sharing team's shared policy).
        config: the policy's config (a team config's ``AgentPolicyConfig``: what
            :func:`adapters.team.build_team` built it from); ``None`` for a policy given as an
            object.
    """

    policy: Any
    agents: tuple[str, ...]
    config: Any = None

    @property
    def shared(self) -> bool:
        """Several agents play this slot's policy."""
        return len(self.agents) > 1


class Team(Mapping[str, Any]):
    """Every agent's policy (a mapping ``agent -> policy``, in the team's order), grouped in
    :class:`Slot`\\ s.

    Args:
        slots: the team's slots; every agent is in exactly one.
        order: the agents' order (default: slot by slot).

    Raises:
        ValueError: an agent in two slots, or an order that is not the slots' agents.
    """

    def __init__(self, slots: Sequence[Slot], order: Sequence[str] | None = None) -> None:
        self.slots = tuple(slots)
        self._of: dict[str, Slot] = {}
        for slot in self.slots:
            for agent in slot.agents:
                if agent in self._of:
                    raise ValueError(f"agent {agent!r} is in two slots of the team")
                self._of[agent] = slot
        self._order = list(order) if order is not None else list(self._of)
        if sorted(self._order) != sorted(self._of):
            raise ValueError(f"order {self._order} is not the team's agents {list(self._of)}")

    @classmethod
    def of(cls, policies: Mapping[str, Any]) -> Team:
        """``policies`` as a team: itself if it is one; otherwise a slot per policy object, so
        that a mapping that gives one object for several agents (a role-sharing team built by
        hand) is one slot of those agents (the one place a team is read from objects)."""
        if isinstance(policies, Team):
            return policies
        slots: list[tuple[Any, list[str]]] = []
        for agent, policy in policies.items():
            for held, agents in slots:
                if held is policy:
                    agents.append(agent)
                    break
            else:
                slots.append((policy, [agent]))
        return cls([Slot(policy, tuple(agents)) for policy, agents in slots], list(policies))

    def slot_of(self, agent: str) -> Slot:
        """The slot ``agent`` plays in."""
        return self._of[agent]

    def __getitem__(self, agent: str) -> Any:
        return self._of[agent].policy

    def __iter__(self) -> Iterator[str]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._of)
