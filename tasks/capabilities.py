"""What a task may do beyond :class:`tasks.base.Task` (each a ``runtime_checkable`` Protocol the
environment, the runners and the trainers test for): a scripted expert, seats of a game, local
rewards, an opening, a team check, an episode limit, closing, a hashable state for the occupancy
diagnostics, and the tabular and exact forms of small games."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from tasks.base import Episode, Message, Problem

__all__ = [
    "NO_STATE",
    "EpisodeLimit",
    "SupportsClose",
    "SupportsEpisodeLimit",
    "SupportsExactReward",
    "SupportsExpert",
    "SupportsLocalRewards",
    "SupportsOpening",
    "SupportsSeats",
    "SupportsStateKey",
    "SupportsTabular",
    "SupportsTeamCheck",
    "no_expert_reason",
]


@runtime_checkable
class SupportsExpert(Protocol):
    """Optional: a task with a scripted expert (``adapters.scripted.ScriptedExpert``).

    The expert is privileged: besides the context an agent sees, it is given the problem of the
    episode, so tasks whose answer is not in the text (a MATH answer, a tool-use task's gold
    actions, a situation puzzle's hidden story) can still play it. It is an oracle for tests,
    behaviour-cloning data and probes, never something a model policy can reach.
    """

    def expert_reply(
        self,
        context: str,
        rng: np.random.Generator,
        *,
        make_error: bool,
        problem: Problem | None = None,
    ) -> str:
        """The expert's message for an agent that sees ``context`` in an episode of
        ``problem`` (the runner always passes it; ``None`` when a caller has only the text, where
        a privileged expert answers as best it can); a plausible wrong reply when
        ``make_error`` is true."""
        ...


def no_expert_reason(task: Any) -> str | None:
    """Why ``task`` has no scripted expert, said for a user (``None``: it has one). A task may say
    it in its own words with a ``no_expert_reason`` attribute (a reasoning-gym dataset: no
    reference answer to play)."""
    if isinstance(task, SupportsExpert):
        return None
    own = getattr(task, "no_expert_reason", None)
    if isinstance(own, str) and own:
        return own
    name = getattr(task, "name", type(task).__name__)
    return f"{name} has no scripted expert (its task does not implement expert_reply)"


@runtime_checkable
class SupportsSeats(Protocol):
    """Optional: a game whose players see different things and whose rules say who acts (a card
    game where each player sees every hand but its own; a game that gives a player another try
    after an invalid move).

    ``TeamEnv`` then takes its agents from ``seats()`` (a user's ``agents`` must name the same
    seats), asks ``to_act(state)`` for the active agent at every turn instead of a router, and
    renders each agent's context from ``view(state, agent)``, the game's own prompt and the
    messages that player has been shown, instead of the shared transcript. The transcript still
    records every agent's message, for scoring and for the episode's log.
    """

    def seats(self) -> list[str]:
        """The team's agents, one per player, in the game's seat order."""
        ...

    def to_act(self, state: Any) -> str:
        """The seat whose turn it is, in the episode whose state ``start`` returned."""
        ...

    def view(self, state: Any, agent: str) -> tuple[str | None, list[Message]]:
        """What ``agent`` has been shown: the game's prompt for that player (``None``: none) and
        the messages since, oldest first."""
        ...


@runtime_checkable
class SupportsLocalRewards(Protocol):
    """Optional: a task that gives each agent a local reward of its own besides the team reward
    (credit for the agent's own part: a valid tool call, a correct step of a relay).

    ``TeamEnv`` calls it once an episode has been scored and keeps the result beside the team
    score (``EpisodeRecord.local_rewards``, the final ``info["local_rewards"]``); a training
    config mixes the two per agent (``reward: {team: 1.0, local: 0.5}``), evaluations log each
    agent's mean. The team reward stays what the team is evaluated on. Like ``score``, it must
    never raise on any model output; an agent it leaves out gets no local reward (0)."""

    def local_rewards(self, episode: Episode) -> Mapping[str, float]:
        """Each agent's local reward for ``episode`` (finite numbers; usually in [0, 1])."""
        ...


@runtime_checkable
class SupportsOpening(Protocol):
    """Optional: an interactive task whose episode opens with a message of the environment's,
    known only once the episode has started (an external environment's first observation).
    ``TeamEnv`` records it before the first agent acts, as an environment message."""

    def opening(self, state: Any) -> str | None:
        """The episode's first environment message (``None``: none), given ``start``'s state."""
        ...


@runtime_checkable
class SupportsTeamCheck(Protocol):
    """Optional: a task that asks something of the team's agents (an OpenEnv task's ``actor``,
    whose messages are the actions, must be one of them). ``TeamEnv`` reports these problems
    with its own when it is made, before any episode."""

    def team_errors(self, agents: Sequence[str]) -> list[str]:
        """One line per problem of a team of ``agents`` for this task (none: the team fits)."""
        ...


class EpisodeLimit(NamedTuple):
    """The most episodes a task plays at once, and why (for the messages that cite it)."""

    episodes: int
    why: str


@runtime_checkable
class SupportsEpisodeLimit(Protocol):
    """Optional: a task that plays at most so many episodes at once (each holds a session of a
    server). The local runner plays a larger batch in blocks of at most that many, one after
    another (as ``Runner.rollout(..., shards=N)`` does), and refuses a group larger than it."""

    def episode_limit(self) -> EpisodeLimit | None:
        """The limit (``None``: none known; a server's refusal may still set one)."""
        ...


@runtime_checkable
class SupportsClose(Protocol):
    """Optional: a task that holds something for its current episode (an environment, a server
    session) that ``TeamEnv.close()`` releases. The task releases it too when the episode ends
    and before it starts the next one."""

    def close(self) -> None:
        """Releases what the current episode holds; the next ``start`` makes it anew."""
        ...


@runtime_checkable
class SupportsStateKey(Protocol):
    """Optional: a task whose agents' contexts have a small exact state (a tabular game).

    The trainer's occupancy diagnostics (``diagnostics.occupancy: task`` or ``auto``) featurise
    each message's context as ``(turn, state_key(context))`` instead of a hashed bucket of the
    text, so the occupancy drift D_occ is measured over the game's own states.
    """

    def state_key(self, context: str) -> Hashable | None:
        """The exact state an agent is in, given the context it sees (``None``: unknown)."""
        ...


#: The tabular state of a context that shows no state of the game (a malformed message from a
#: teammate that is not tabular): one more row of every tabular agent's table.
NO_STATE = "none"


@runtime_checkable
class SupportsTabular(Protocol):
    """Optional: a task that a team of tabular policies can play (``backend: tabular`` in a team
    config, :class:`adapters.tabular.TabularPolicy`): a finite set of states an agent can be in
    and a finite set of messages it can say.

    ``tabular_state(context)`` must give one of ``tabular_states()`` for every context an agent
    of the task can see (:data:`NO_STATE` when it shows none), and every message of
    ``tabular_messages()`` must be a valid move. Sizes: ``len(states) * len(messages)`` is one
    table per agent.
    """

    def tabular_states(self) -> list[str]:
        """Every state key, in table-row order (:data:`NO_STATE` among them)."""
        ...

    def tabular_messages(self) -> list[str]:
        """Every message text, in table-column order."""
        ...

    def tabular_state(self, context: str) -> str:
        """The state key of an agent that sees ``context``."""
        ...


@runtime_checkable
class SupportsExactReward(Protocol):
    """Optional: a tabular task whose expected reward a team of tables gives can be computed
    exactly (the relay: a product of transition matrices). Evaluations of a team of tabular
    agents report it beside the sampled avg@K (``eval/exact_J``)."""

    def exact_reward(self, tables: Sequence[Any], turns: int) -> float:
        """The expected reward of the team whose agents, in speaking order, sample from
        ``tables`` (each ``[len(tabular_states()), len(tabular_messages())]``
        row-stochastic, numpy), over ``turns`` turns (agent ``t mod n`` at turn ``t``) with a
        problem drawn from the task's own distribution."""
        ...
