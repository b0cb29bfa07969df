"""The one lockstep loop (teamtr_env.runners.lockstep): one seeded call per acting agent per step,
messages seen before they are played, a step limit, a stop predicate and a first step (what a
served environment's seats use), and the calls' tally."""

from __future__ import annotations

from collections.abc import Sequence

import teamtr_env
from adapters.scripted import RandomPolicy
from teamtr_core.policy import Generation, SamplingParams
from teamtr_core.seeds import CALL_STREAM, derive_seed
from teamtr_env.runners.lockstep import Seats, Tally, play_lockstep


class Seeds:
    """Records each call's seed and batch size; answers with random text."""

    def __init__(self) -> None:
        self.calls: list[tuple[int | None, int]] = []
        self.random = RandomPolicy(max_chars=4)

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        self.calls.append((sampling.seed, len(prompts)))
        return self.random.generate(prompts, sampling)


def _envs(n: int) -> list[teamtr_env.TeamEnv]:
    envs = [teamtr_env.make("teamtr/Arith-v0") for _ in range(n)]
    for i, env in enumerate(envs):
        env.reset(seed=i)
    return envs


def _seats() -> tuple[Seats, dict[str, Seeds]]:
    agents = teamtr_env.make("teamtr/Arith-v0").possible_agents
    policies = {a: Seeds() for a in agents}
    return Seats(agents, policies), policies


def test_each_step_is_one_seeded_call_per_acting_agent_and_every_message_is_seen() -> None:
    envs = _envs(3)
    seats, policies = _seats()
    seen: list[tuple[int, str]] = []
    tally = Tally()
    played = play_lockstep(envs, seats, 7, tally, on_message=lambda i, p, g: seen.append((i, p)))
    assert all(env.episode_over for env in envs)
    agents = list(seats.agents)
    assert played == len(agents)  # a round-robin team: one step per turn
    for step, agent in enumerate(agents):  # every env's agent acts at once, seeded by the step
        expected = derive_seed(7, step, agents.index(agent), CALL_STREAM)
        assert policies[agent].calls == [(expected, 3)]
    assert len(seen) == 3 * len(agents) and {i for i, _ in seen} == {0, 1, 2}
    assert tally.generated == len(seen) and sum(tally.calls.values()) == len(agents)


def test_a_step_limit_a_stop_predicate_and_a_first_step() -> None:
    seats, policies = _seats()
    agents = list(seats.agents)
    (env,) = _envs(1)
    assert play_lockstep([env], seats, 3, steps=1) == 1 and env.turn == 1
    # the caller's seat (the last agent) stops the loop; steps counted from first_step
    played = play_lockstep(
        [env], seats, 3, first_step=int(env.turn), until=lambda e: e.agent_selection == agents[-1]
    )
    assert played == len(agents) - 2 and env.agent_selection == agents[-1]
    assert policies[agents[1]].calls == [(derive_seed(3, 1, 1, CALL_STREAM), 1)]
    # unseeded calls keep the sampling's own seed
    seats.sampling[agents[-1]] = SamplingParams(seed=5)
    play_lockstep([env], seats, None)
    assert policies[agents[-1]].calls == [(5, 1)] and env.episode_over
