"""A team's slots (teamtr_core.team): one policy and the agents that play it; a mapping read as
slots; build_team says a role-sharing team's one slot itself."""

from __future__ import annotations

import pytest

from adapters.team import build_team, team_config_from_dict
from teamtr_core.team import Slot, Team

AGENTS = ["solver", "critic", "aggregator"]


def test_a_mapping_with_one_object_for_several_agents_is_one_slot_in_the_teams_order() -> None:
    shared, own = object(), object()
    team = Team.of({"solver": shared, "critic": own, "aggregator": shared})
    assert list(team) == AGENTS and team["aggregator"] is shared and len(team) == 3
    assert [s.agents for s in team.slots] == [("solver", "aggregator"), ("critic",)]
    assert team.slot_of("aggregator").shared and not team.slot_of("critic").shared
    assert Team.of(team) is team


def test_an_agent_in_two_slots_or_an_order_of_other_agents_is_refused() -> None:
    with pytest.raises(ValueError, match="'a' is in two slots"):
        Team([Slot(1, ("a",)), Slot(2, ("a", "b"))])
    with pytest.raises(ValueError, match="is not the team's agents"):
        Team([Slot(1, ("a",))], ["a", "b"])


def test_build_team_gives_a_role_sharing_team_one_slot_and_separate_agents_one_each() -> None:
    shared, _ = build_team(
        team_config_from_dict({"shared_policy": True, "default": {"backend": "random"}}), AGENTS
    )
    (slot,) = shared.slots
    assert slot.agents == tuple(AGENTS) and list(shared) == AGENTS
    assert slot.config is not None and slot.config.backend == "random"  # what it was built from
    separate, _ = build_team(team_config_from_dict({"default": {"backend": "random"}}), AGENTS)
    assert [s.agents for s in separate.slots] == [(a,) for a in AGENTS]
