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
unpickled (OpenEnv parses JSON into the model). ``step`` or ``state`` before ``reset`` is an
error, not a crash; requests are bounded by :mod:`teamtr_env.openenv_guard`.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import Field

from tasks.openenv.importing import import_openenv_core
from teamtr_core.errors import ConfigError, EpisodeOverError
from teamtr_core.policy import Policy, SamplingParams
from teamtr_env.env import TeamEnv
from teamtr_env.openenv_guard import (
    MAX_REQUEST_BYTES,
    RequestGuard,
    seed_problem,
    seed_validation_error,
    without_inputs,
)
from teamtr_env.runners.lockstep import Seats, play_lockstep

import_openenv_core()  # `openenv.core` without Gradio's 6 s, before the import below
from openenv.core import Action, Environment, Observation, State  # noqa: E402

MAX_ACTION_CHARS = 100_000
"""The longest action text a request may carry (the environment then cuts it to the protocol's
``max_message_chars``, as it does any message)."""

NO_EPISODE = "no episode yet: send reset before step or state"
"""The error of ``step`` or ``state`` before ``reset`` (OpenEnv's ``EXECUTION_ERROR`` over
WebSocket)."""

NO_HTTP_EPISODE = (
    "no episode: OpenEnv runs each HTTP /step and /state on a fresh environment (HTTP keeps no "
    "session), so there is never an episode to step or show; play an episode over the WebSocket "
    "/ws (OpenEnv's GenericEnvClient(base_url=URL).sync(): reset, then step)"
)
"""The 409 answer of HTTP ``/step`` and ``/state``."""


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
        lock: held while a policy generates: the sessions of one server share it, as they share
            the policies (:func:`create_team_app` gives them one); default: this session's own.

    The seats the server plays are played as every rollout is
    (:func:`~teamtr_env.runners.lockstep.play_lockstep` over the session's one environment,
    each call seeded by the episode's seed, the turn and the agent).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(
        self,
        make_env: Callable[[], TeamEnv],
        *,
        seat: str | None = None,
        policies: Mapping[str, Policy] | None = None,
        sampling: Mapping[str, SamplingParams] | None = None,
        lock: threading.Lock | None = None,
    ) -> None:
        super().__init__()
        self.env = make_env()
        self.seat = seat
        lock = lock if lock is not None else threading.Lock()
        self.seats = Seats(self.env.possible_agents, policies or {}, sampling, lock)
        errors = seat_errors(self.env.possible_agents, seat, self.seats.policies)
        if errors:
            raise ConfigError("teamtr serve", errors)
        self._episode_id: str | None = None
        self._seed: int | None = None

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> TeamObservation:
        """Starts an episode (``seed`` draws its problem and seeds the served seats' messages)
        and plays the other seats up to the caller's first turn.

        Raises:
            pydantic.ValidationError: ``seed`` is not a whole number >= 0 or ``None`` (the
                WebSocket route hands it over unchecked).
        """
        if seed_problem(seed) is not None:
            raise seed_validation_error(seed)
        self.env.reset(seed=seed)
        self._seed = seed
        self._episode_id = episode_id or uuid.uuid4().hex
        return self._advance()

    def step(
        self, action: TeamAction, timeout_s: float | None = None, **kwargs: Any
    ) -> TeamObservation:
        """Plays ``action.text`` as the acting agent's message, then the other seats.

        Raises:
            EpisodeOverError: no ``reset`` yet.
        """
        if self.env.problem is None:
            raise EpisodeOverError(NO_EPISODE)
        if self.env.episode_over:
            return self._observation(note="the episode is over: reset to start another")
        self.env.step(action.text)
        return self._advance()

    @property
    def state(self) -> TeamState:
        """The episode's id, turn, problem and agent to act.

        Raises:
            EpisodeOverError: no ``reset`` yet.
        """
        env = self.env
        if env.problem is None:
            raise EpisodeOverError(NO_EPISODE)
        return TeamState(
            episode_id=self._episode_id,
            step_count=int(env.turn),
            problem_id=env.problem.id if env.problem is not None else None,
            agent=None if env.episode_over else env.agent_selection,
        )

    # -- helpers ---------------------------------------------------------------------------------
    def _advance(self) -> TeamObservation:
        """Plays the seats the server holds until the caller's turn or the end."""
        if self.seat is not None:
            env, seat = self.env, self.seat
            play_lockstep(
                [env], self.seats, self._seed, first_step=int(env.turn),
                until=lambda e: e.agent_selection == seat,
            )  # fmt: skip
        return self._observation()

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
    env: TeamEnv | None = None,
) -> Any:
    """The OpenEnv FastAPI app serving ``make_env``'s team (one environment per session), with
    request bodies and WebSocket messages bounded to :data:`MAX_REQUEST_BYTES`
    (:class:`~teamtr_env.openenv_guard.RequestGuard`) and errors that name the problem without
    repeating the input. ``env``: an environment of ``make_env``'s already built (``teamtr
    serve``'s), which the first session plays in; otherwise one is built here.

    Raises:
        ConfigError: the seat or the policies do not fit the team (checked once, on the first
            session's environment, before serving).
    """
    from openenv.core import create_app

    lock = threading.Lock()  # the sessions share the policies: one generates at a time

    def session(build: Callable[[], TeamEnv]) -> TeamEnvironment:
        return TeamEnvironment(build, seat=seat, policies=policies, sampling=sampling, lock=lock)

    built = env if env is not None else make_env()
    first = [session(lambda: built)]  # checks the seats: a ConfigError before serving

    def factory() -> TeamEnvironment:
        return first.pop() if first else session(make_env)

    app = create_app(
        factory,
        TeamAction,
        TeamObservation,
        env_name=name,
        max_concurrent_envs=max_sessions,
        state_cls=TeamState,
        mode="simulation",
    )

    _add_error_handlers(app)
    app.add_middleware(RequestGuard, max_bytes=MAX_REQUEST_BYTES)
    return app


def _add_error_handlers(app: Any) -> None:
    """HTTP errors that name the problem and never repeat the refused input: a 409 for
    ``/step`` or ``/state`` (no episode over HTTP), 422s without pydantic's ``input``."""
    from fastapi.encoders import jsonable_encoder
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response
    from starlette.exceptions import HTTPException

    async def no_episode(request: Any, exc: Any) -> Response:
        return JSONResponse({"detail": NO_HTTP_EPISODE}, status_code=409)

    async def invalid_request(request: Any, exc: Any) -> Response:
        detail = jsonable_encoder(without_inputs(list(exc.errors())))
        return JSONResponse({"detail": detail}, status_code=422)

    async def http_error(request: Any, exc: Any) -> Response:  # e.g. OpenEnv's 422 of an action
        if exc.status_code in (204, 304):  # no body allowed (as FastAPI's own handler)
            return Response(status_code=exc.status_code, headers=exc.headers)
        detail = jsonable_encoder(without_inputs(exc.detail))
        return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=exc.headers)

    app.add_exception_handler(EpisodeOverError, no_episode)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(HTTPException, http_error)
