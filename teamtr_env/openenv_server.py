"""Any teamtr environment served as an OpenEnv environment (``teamtr serve``).

OpenEnv (``openenv``, the ``openenv`` extra) is the Meta / Hugging Face environment standard:
``Environment.reset/step/state`` served over HTTP and WebSocket by ``create_app``, consumed by
TRL's ``GRPOTrainer``, SkyRL and OpenEnv's own ``EnvClient``. A teamtr team is several agents
taking turns; a session serves it in one of two modes:

* **every seat** (default): the caller plays every agent in turn. Each observation names the
  agent to act (``agent``, like TextArena's ``current_player_id``) and holds that agent's context
  (``text``); the caller's next action is that agent's message.
* **one seat** (``seat=NAME`` with ``policies`` for the others): the caller plays ``NAME``, and
  the project's policies (a team config's agents: models, scripted experts) play the other
  seats between the caller's turns, seeded by the episode's seed, the turn and the agent (a
  served episode is a function of its seed).

The reward is the team reward, given on the step that ends the episode (``done``), with the
task's score in the observation's ``metadata``. Every WebSocket session gets its own
environment (``SUPPORTS_CONCURRENT_SESSIONS``). An action is a pydantic model with one string
field, ``text``, at most :data:`MAX_ACTION_CHARS` characters: a malformed one is refused by the
server with a validation error and the session goes on; nothing in a request is evaluated or
unpickled (OpenEnv parses JSON into the model).
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from openenv.core import Action, Environment, Observation, State
from pydantic import Field

from teamtr_core.errors import ConfigError
from teamtr_core.policy import Policy, PrivilegedPolicy, SamplingParams
from teamtr_core.seeds import CALL_STREAM, derive_seed
from teamtr_env.env import TeamEnv

MAX_ACTION_CHARS = 100_000
"""The longest action text a request may carry (the environment then cuts it to the protocol's
``max_message_chars``, as it does any message)."""

MAX_REQUEST_BYTES = 1_000_000
"""The largest HTTP request body or WebSocket message the server reads (``teamtr serve``)."""


_POLICY_LOCK = threading.Lock()


class TeamAction(Action):
    """The acting agent's message."""

    text: str = Field(..., max_length=MAX_ACTION_CHARS, description="the acting agent's message")


class TeamObservation(Observation):
    """What the caller sees: the agent to act and its context, or the episode's end."""

    text: str = Field("", description="the context of the agent to act (empty once done)")
    agent: str = Field("", description="the agent whose message the next action is")
    turn: int = Field(0, description="the turn about to be played")
    agents: list[str] = Field(default_factory=list, description="the team's agents, in order")


class TeamState(State):
    """The session's episode: its problem, turn and agent to act."""

    problem_id: str | None = None
    agent: str | None = None


class TeamEnvironment(Environment[TeamAction, TeamObservation, TeamState]):
    """A teamtr environment as an OpenEnv ``Environment`` (one per session).

    Args:
        make_env: builds the session's ``TeamEnv`` (``lambda: teamtr_env.make(id, **options)``).
        seat: the one agent the caller plays; ``None``: every agent.
        policies: with ``seat``, the policies of the other agents, by name.
        sampling: their sampling parameters, by name.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(
        self,
        make_env: Callable[[], TeamEnv],
        *,
        seat: str | None = None,
        policies: Mapping[str, Policy] | None = None,
        sampling: Mapping[str, SamplingParams] | None = None,
    ) -> None:
        super().__init__()
        self.env = make_env()
        self.seat = seat
        self.policies = dict(policies or {})
        self.sampling = dict(sampling or {})
        errors = seat_errors(self.env.possible_agents, seat, self.policies)
        if errors:
            raise ConfigError("teamtr serve", errors)
        self._episode_id: str | None = None
        self._seed: int | None = None

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> TeamObservation:
        """Starts an episode (``seed`` draws its problem and seeds the served seats' messages)
        and plays the other seats up to the caller's first turn."""
        self.env.reset(seed=seed)
        self._seed = seed
        self._episode_id = episode_id or uuid.uuid4().hex
        return self._advance()

    def step(
        self, action: TeamAction, timeout_s: float | None = None, **kwargs: Any
    ) -> TeamObservation:
        """Plays ``action.text`` as the acting agent's message, then the other seats."""
        if self.env.problem is None or self.env.episode_over:
            return self._observation(note="the episode is over: reset to start another")
        self.env.step(action.text)
        return self._advance()

    @property
    def state(self) -> TeamState:
        env = self.env
        return TeamState(
            episode_id=self._episode_id,
            step_count=int(env.turn),
            problem_id=env.problem.id if env.problem is not None else None,
            agent=None if env.episode_over else env.agent_selection,
        )

    # -- helpers ---------------------------------------------------------------------------------
    def _advance(self) -> TeamObservation:
        """Plays the seats the server holds until the caller's turn or the end."""
        env = self.env
        while self.seat is not None and not env.episode_over and env.agent_selection != self.seat:
            agent = env.agent_selection
            env.step(self._generate(agent, env.observe(agent)["text"]))
        return self._observation()

    def _generate(self, agent: str, context: str) -> str:
        policy = self.policies[agent]
        sampling = self.sampling.get(agent, SamplingParams())
        if self._seed is not None and sampling.seed is None:  # the episode's seed decides
            agents = self.env.possible_agents
            seed = derive_seed(self._seed, int(self.env.turn), agents.index(agent), CALL_STREAM)
            sampling = dataclasses.replace(sampling, seed=seed)
        with _POLICY_LOCK:  # the sessions share the policies; a model generates for one at a time
            if isinstance(policy, PrivilegedPolicy):
                return policy.generate_privileged([context], [self.env.problem], sampling)[0].text
            return policy.generate([context], sampling)[0].text

    def _observation(self, note: str | None = None) -> TeamObservation:
        env = self.env
        agents = list(env.possible_agents)
        if env.episode_over:
            score = env.score
            assert score is not None
            metadata: dict[str, Any] = {"score": score.to_dict(), "problem_id": env.problem.id}  # type: ignore[union-attr]
            if note:
                metadata["note"] = note
            return TeamObservation(
                done=True,
                reward=float(score.reward),
                metadata=metadata,
                turn=int(env.turn),
                agents=agents,
            )
        agent = env.agent_selection
        return TeamObservation(
            text=env.observe(agent)["text"],
            agent=agent,
            turn=int(env.turn),
            agents=agents,
            done=False,
            reward=None,
            metadata={"problem_id": env.problem.id},  # type: ignore[union-attr]
        )


def seat_errors(agents: list[str], seat: str | None, policies: Mapping[str, Policy]) -> list[str]:
    """What a serving mode lacks: a seat that is not an agent, or an agent nobody plays."""
    if seat is None:
        return []
    if seat not in agents:
        return [f"--seat: {seat!r} is not one of the team's agents {agents}"]
    missing = [a for a in agents if a != seat and a not in policies]
    return [f"--team: no policy for {a!r}, a seat the server plays" for a in missing]


def create_team_app(
    make_env: Callable[[], TeamEnv],
    *,
    name: str,
    seat: str | None = None,
    policies: Mapping[str, Policy] | None = None,
    sampling: Mapping[str, SamplingParams] | None = None,
    max_sessions: int = 64,
) -> Any:
    """The OpenEnv FastAPI app serving ``make_env``'s team (one environment per session), with
    request bodies bounded to :data:`MAX_REQUEST_BYTES`.

    Raises:
        ConfigError: the seat or the policies do not fit the team (checked on one environment
            before serving).
    """
    from openenv.core import create_app

    errors = seat_errors(make_env().possible_agents, seat, policies or {})
    if errors:
        raise ConfigError("teamtr serve", errors)

    def factory() -> TeamEnvironment:
        return TeamEnvironment(make_env, seat=seat, policies=policies, sampling=sampling)

    app = create_app(
        factory,
        TeamAction,
        TeamObservation,
        env_name=name,
        max_concurrent_envs=max_sessions,
        state_cls=TeamState,
        mode="simulation",
    )

    @app.middleware("http")
    async def bounded(request: Any, call_next: Any) -> Any:  # a body past the limit: 413
        from fastapi.responses import JSONResponse

        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_REQUEST_BYTES):
            return JSONResponse(
                {"error": f"request body over {MAX_REQUEST_BYTES} bytes"}, status_code=413
            )
        return await call_next(request)

    return app
