"""``openenv/Env-v0``: any OpenEnv environment as a team task.

The environment is either an ``Environment`` class run in this process (``env`` and ``action``,
``module:Class`` each) or a server (``url``) reached through OpenEnv's WebSocket client, one
session per episode (:mod:`tasks.openenv.remote`). An episode resets it with the problem's seed;
its first observation opens the team's context. The team talks as any team does, and every
message of the ``actor`` agent (one of the team's agents: checked when the environment is made)
is an action: parsed against the action's JSON schema (the server's ``/schema``, or the
class's; :mod:`tasks.openenv.actions`) and stepped; the resulting observation and reward come
back as an environment message. The episode ends when the environment says ``done`` (or at the
team's turn limit, a truncation), and the team reward is the sum of the rewards the environment
gave. The episode's environment is closed when it ends, as OpenEnv's server closes a session's.

A message that is not an action is answered with what was expected and not stepped; it is
counted in the score's ``invalid_actions``. No message reaches ``eval``.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tasks.base import InteractiveTask, Problem, Score, TaskConfigError, is_int
from tasks.capabilities import EpisodeLimit
from tasks.openenv import remote
from tasks.openenv.actions import action_fields, parse_action, render_observation, schema_errors
from tasks.openenv.importing import import_openenv_core
from tasks.openenv.remote import ActionRefused

DEFAULT_ACTOR = "aggregator"
"""The default ``actor``: the default team's last agent."""


@dataclass
class Session:
    """One episode's environment: an in-process ``Environment`` or a server session."""

    client: Any = None
    env: Any = None
    observation: dict[str, Any] = field(default_factory=dict)
    rewards: list[float] = field(default_factory=list)
    done: bool = False
    steps: int = 0
    invalid_actions: int = 0
    closed: bool = False

    def close(self) -> None:
        """Ends the episode's environment: the server session, or the in-process environment's
        ``close()`` (OpenEnv's server calls it when a session ends). Once only."""
        client, env = self.client, self.env
        self.client = self.env = None
        self.closed = True
        if client is not None:
            remote.close_client(client)
        if env is not None:
            env.close()


def _load(path: object, what: str, needs: tuple[str, ...]) -> tuple[Any, list[str]]:
    """The class ``path`` (``module:Class``) names, or ``(None, why not)``."""
    module, _, name = str(path).partition(":")
    if not isinstance(path, str) or not module or not name:
        return None, [f"{what}: expected 'module:Class', got {path!r}"]
    try:
        import_openenv_core()  # before the class's module imports it: without Gradio
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        return None, [
            f"{what}: cannot import {path!r} ({exc}); the module must be importable where teamtr "
            "runs: install its package, or add its folder to PYTHONPATH"
        ]
    missing = [m for m in needs if not callable(getattr(found, m, None))]
    if not isinstance(found, type) or missing:
        return None, [
            f"{what}: {path!r} is not an OpenEnv {what.capitalize()} class (it has no "
            f"{', '.join(missing) or 'class'}); give the {what.capitalize()} subclass"
        ]
    return found, []


def _env_name(env_class: type) -> str:
    """The name OpenEnv's server publishes in ``/metadata`` for ``env_class``: its
    ``get_metadata().name``, by default the class's name (then no environment is made)."""
    Environment = import_openenv_core().Environment

    if getattr(env_class, "get_metadata", None) is Environment.get_metadata:
        return env_class.__name__
    try:
        made = env_class()
        try:
            return str(made.get_metadata().name)
        finally:
            made.close()
    except Exception as exc:  # the environment's own code: said, with the way around it
        raise TaskConfigError(
            "openenv",
            [
                f"env: {env_class.__name__}() or its get_metadata() raised while the task read "
                f"its name ({type(exc).__name__}: {str(exc)[:200]}); fix it, or give the name "
                "(-o name=...)"
            ],
        ) from None


class OpenEnvTask(InteractiveTask):
    """An OpenEnv environment as a team task (``tasks.capabilities.SupportsOpening``,
    ``SupportsTeamCheck``, ``SupportsEpisodeLimit`` and ``SupportsClose``).

    One task plays one episode at a time (a ``TeamEnv`` holds one task): ``start`` ends the
    episode before it if that one did not end.

    Args:
        url: a server's base URL (``http://host:port``), or ``None`` with ``env``.
        env: an ``Environment`` class, ``module:Class``, run in this process.
        action: its ``Action`` class, ``module:Class`` (with ``env``).
        actor: the agent whose messages are the actions; one of the team's agents.
        name: the problems' id prefix (default: the environment's OpenEnv name, its
            ``get_metadata().name``, the class's name unless it says otherwise; served or in
            process alike).
        success: the total reward at which an episode counts as solved.
        split: the split of generated seeds.
        max_sessions: with ``url``, the most sessions the task's episodes hold at once on the
            server; the local runner plays a larger batch in blocks. Default: the server's
            capacity (it says so when it refuses a session, and the batch is played again in
            blocks that fit).
    """

    no_expert_reason = (
        "an OpenEnv environment has no scripted expert: evaluate a model team (--team CONFIG) "
        "or --policy random"
    )

    def __init__(
        self,
        url: str | None = None,
        env: str | None = None,
        action: str | None = None,
        *,
        actor: str | None = None,
        name: str | None = None,
        success: float = 1.0,
        split: str = "train",
        max_sessions: int | None = None,
    ) -> None:
        errors = _option_errors(url, env, action, actor, name, success, split, max_sessions)
        if errors:
            raise TaskConfigError("openenv", errors)
        self.url = url.rstrip("/") if url else None
        self._actor_given = actor is not None
        self.actor = actor if actor is not None else DEFAULT_ACTOR
        self.success = float(success)
        self.split = split
        self.max_sessions = max_sessions
        self._session: Session | None = None
        if env is not None:
            self._env_class, errors = _load(env, "env", ("reset", "step"))
            self._action_class, more = _load(
                action, "action", ("model_json_schema", "model_validate")
            )
            if errors or more:
                raise TaskConfigError("openenv", errors + more)
            self.schema = self._action_class.model_json_schema()
            errors = schema_errors(self.schema, f"action: {action}'s JSON schema")
            if errors:
                raise TaskConfigError("openenv", errors)
            default = name or _env_name(self._env_class)
        else:
            self._env_class = self._action_class = None
            self.schema, default = remote.read_server(str(self.url), name)
        self.name = f"openenv/{name or default}"
        self.description = f"OpenEnv environment {name or default}"

    # -- the team and the server -----------------------------------------------------------------
    def team_errors(self, agents: Sequence[str]) -> list[str]:
        """The actor must be one of the team's agents: otherwise no message is ever an action and
        every episode scores 0."""
        if self.actor in agents:
            return []
        close = difflib.get_close_matches(self.actor, list(agents), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        given = "" if self._actor_given else " (the default, the default team's last agent)"
        example = close[0] if close else (agents[-1] if agents else "NAME")
        return [
            f"actor: expected one of the team's agents {list(agents)}, got {self.actor!r}{given}; "
            f"its messages are the actions, so no episode would take a step. {hint}Set actor "
            f"to the agent that plays the environment (-o actor='\"{example}\"')"
        ]

    def episode_limit(self) -> EpisodeLimit | None:
        """``max_sessions``, when given: the sessions held at once on the server."""
        if self.max_sessions is None:
            return None
        why = f"max_sessions={self.max_sessions}, its sessions at once on the server at {self.url}"
        return EpisodeLimit(self.max_sessions, why)

    def close(self) -> None:
        """Ends the current episode's environment or server session, if it is still open."""
        if self._session is not None:
            self._session.close()
            self._session = None

    # -- problems --------------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> Problem:
        def draw(r: np.random.Generator) -> Problem:
            seed = int(r.integers(0, 2**31 - 1))
            return Problem(f"{self.name}:{seed}", {"seed": seed}, None)

        return self.draw_in_split(rng, draw, self.split)  # type: ignore[arg-type]

    def check_problem(self, problem: Problem) -> list[str]:
        seed = problem.data.get("seed")
        if isinstance(seed, int) and is_int(seed) and seed >= 0:
            return []
        return ["data['seed']: expected an integer >= 0"]

    def prompt(self, problem: Problem) -> str:
        fields = {k: v.get("type", "any") for k, v in action_fields(self.schema).items()}
        return (
            f"{self.name}, episode {problem.data['seed']}. The {self.actor}'s messages are the "
            f"actions: a JSON object with the fields {fields}."
        )

    # -- an episode ------------------------------------------------------------------------------
    def start(self, problem: Problem, rng: np.random.Generator) -> Session:
        self.close()  # an episode left before its end (a reset mid-episode) ends here
        seed = int(problem.data["seed"])
        session = Session()
        if self._env_class is not None:
            session.env = self._env_class()
            try:
                session.observation = session.env.reset(seed=seed).model_dump()
            except BaseException:
                session.close()
                raise
        else:
            client, observation, done = remote.open_session(
                str(self.url), seed, self.name, self.max_sessions
            )
            session.client, session.observation, session.done = client, observation, done
        self._session = session
        return session

    def opening(self, state: Session) -> str | None:
        return render_observation(state.observation)

    def respond(self, state: Session, speaker: str, text: str) -> str | None:
        if speaker != self.actor or state.done or state.closed:
            return None
        action, why = parse_action(text, self.schema)
        if action is None:
            state.invalid_actions += 1
            return str(why)
        try:
            observation, reward, done = self._step(state, action)
        except ActionRefused as exc:  # the environment's own validation refused it
            state.invalid_actions += 1
            return f"not an action (the environment refused it: {str(exc)[:300]})"
        state.steps += 1
        state.observation = observation
        state.rewards.append(float(reward or 0.0))
        state.done = done
        if done:
            state.close()
        return f"{render_observation(observation)}\nreward: {reward}"

    def _step(self, state: Session, action: dict[str, Any]) -> tuple[dict[str, Any], Any, bool]:
        if state.env is None:
            return remote.step(state.client, action, str(self.url), self.name)
        from pydantic import ValidationError

        try:
            typed = self._action_class.model_validate(action)
        except ValidationError as exc:
            raise ActionRefused(str(exc).split("\n    For further information")[0]) from None
        result = state.env.step(typed)
        return result.model_dump(), result.reward, bool(result.done)

    def done(self, state: Session) -> bool:
        return bool(state.done)

    def score(self, episode: Any) -> Score:
        state = episode.state
        if not isinstance(state, Session):
            return Score(0.0, False, None, {"reason": "no_episode_state"})
        state.close()  # a truncated episode's environment ends here
        total = float(sum(state.rewards))
        solved = total >= self.success
        details = {
            "rewards": state.rewards,
            "steps": state.steps,
            "invalid_actions": state.invalid_actions,
            "env_done": state.done,
            "reason": "solved" if solved else ("done" if state.done else "turn_limit"),
        }
        return Score(total, solved, f"{total:g}", details)


def _option_errors(
    url: object,
    env: object,
    action: object,
    actor: object,
    name: object,
    success: object,
    split: object,
    max_sessions: object,
) -> list[str]:
    """Every problem of the task's options, at once."""
    errors = []
    if (url is None) == (env is None):
        errors.append("give url (a server) or env (an Environment class), one of them")
    if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
        errors.append(f"url: expected a server's base URL 'http://host:port', got {url!r}")
    if env is not None and action is None:
        errors.append("env needs action: its Action class, 'module:Class'")
    if actor is not None and not (isinstance(actor, str) and actor):
        errors.append(f"actor: expected the name of one of the team's agents, got {actor!r}")
    if name is not None and not (isinstance(name, str) and name.strip()):
        errors.append(f"name: expected a non-empty string, got {name!r}")
    if not isinstance(success, int | float) or isinstance(success, bool):
        errors.append(f"success: expected a number, got {success!r}")
    if split not in ("train", "validation", "test"):
        errors.append(f"split: expected 'train', 'validation' or 'test', got {split!r}")
    if max_sessions is not None:
        if not (is_int(max_sessions) and max_sessions >= 1):  # type: ignore[operator]
            errors.append(f"max_sessions: expected an integer >= 1, got {max_sessions!r}")
        elif env is not None:
            errors.append(
                "max_sessions: caps a server's sessions (with url); an environment in process "
                "holds none, leave it unset"
            )
    return errors
