"""``openenv/Env-v0``: any OpenEnv environment as a team task.

The environment is either an ``Environment`` class run in this process (``env`` and ``action``,
``module:Class`` each) or a server (``url``) reached through OpenEnv's WebSocket client, one
session per episode. An episode resets it with the problem's seed; its first observation opens
the team's context. The team talks as any team does, and every message of the ``actor`` agent is
an action: parsed against the action's JSON schema (the server's ``/schema``, or the class's) and
stepped; the resulting observation and reward come back as an environment message. The episode
ends when the environment says ``done`` (or at the team's turn limit, a truncation), and the
team reward is the sum of the rewards the environment gave.

A message that is not an action (:func:`parse_action`) is answered with what was expected and not
stepped; it is counted in the score's ``invalid_actions``. No message reaches ``eval``: a JSON
object is read with ``json.loads`` and checked by ``jsonschema`` and by pydantic.
"""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tasks.base import InteractiveTask, Problem, Score, TaskConfigError, is_int

MAX_JSON_CHARS = 100_000
"""The longest JSON object an action is read from."""

_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_RESERVED = ("metadata",)  # OpenEnv's own fields of every action and observation


def action_fields(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The action's own fields (OpenEnv's ``metadata`` left out), name -> JSON schema."""
    return {k: v for k, v in schema.get("properties", {}).items() if k not in _RESERVED}


def parse_action(text: str, schema: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The action a message states, as ``(action, None)``, or ``(None, why it is not one)``.

    In order: a JSON object (in a fenced block, else from the first ``{`` to the last ``}``)
    valid against ``schema``; the whole message, for an action with one string field; the last
    number in the message, for an action with one numeric field.
    """
    import jsonschema

    fields = action_fields(schema)
    candidate = _FENCE.search(text)
    raw = candidate[1] if candidate else text[text.find("{") : text.rfind("}") + 1]
    problem = None
    if raw and len(raw) <= MAX_JSON_CHARS:
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            problem = f"its JSON does not parse ({exc.msg})"
        else:
            if not isinstance(data, dict):
                problem = "its JSON is not an object"
            else:
                try:
                    jsonschema.validate(data, schema)
                    return data, None
                except jsonschema.ValidationError as exc:
                    problem = f"its JSON does not fit the action: {exc.message[:300]}"
    elif raw:
        problem = f"its JSON is over {MAX_JSON_CHARS} characters"
    if len(fields) == 1:
        ((name, spec),) = fields.items()
        kind = spec.get("type")
        if kind == "string" and problem is None:
            return {name: text.strip()}, None
        if kind in ("integer", "number") and problem is None:
            numbers = _NUMBER.findall(text)
            if numbers:
                value = numbers[-1]
                return {name: int(float(value)) if kind == "integer" else float(value)}, None
    shape = {k: v.get("type", "any") for k, v in fields.items()}
    why = problem or "no action found"
    return None, f"not an action ({why}); expected a JSON object with the fields {shape}"


def render_observation(observation: dict[str, Any]) -> str:
    """An observation as context text: its one text field as it is, else its fields as JSON."""
    shown = {k: v for k, v in observation.items() if k not in ("done", "reward", *_RESERVED)}
    if len(shown) == 1 and isinstance(next(iter(shown.values())), str):
        return str(next(iter(shown.values())))
    return json.dumps(shown, sort_keys=True, default=str)


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

    def close(self) -> None:
        if self.client is not None:
            try:
                self.client.close()
            finally:
                self.client = None


def _load(path: str, what: str) -> Any:
    module, _, name = path.partition(":")
    if not module or not name:
        raise TaskConfigError("openenv", [f"{what}: expected 'module:Class', got {path!r}"])
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise TaskConfigError("openenv", [f"{what}: cannot import {path!r} ({exc})"]) from None


class OpenEnvTask(InteractiveTask):
    """An OpenEnv environment as a team task (``tasks.base.SupportsOpening``).

    Args:
        url: a server's base URL (``http://host:port``), or ``None`` with ``env``.
        env: an ``Environment`` class, ``module:Class``, run in this process.
        action: its ``Action`` class, ``module:Class`` (with ``env``).
        actor: the agent whose messages are the actions.
        name: the problems' id prefix (default: the class's or server's name).
        success: the total reward at which an episode counts as solved.
        split: the split of generated seeds.
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
        actor: str = "aggregator",
        name: str | None = None,
        success: float = 1.0,
        split: str = "train",
    ) -> None:
        errors = []
        if (url is None) == (env is None):
            errors.append("give url (a server) or env (an Environment class), one of them")
        if env is not None and action is None:
            errors.append("env needs action: its Action class, 'module:Class'")
        if not isinstance(success, int | float):
            errors.append(f"success: expected a number, got {success!r}")
        if split not in ("train", "validation", "test"):
            errors.append(f"split: expected 'train', 'validation' or 'test', got {split!r}")
        if errors:
            raise TaskConfigError("openenv", errors)
        self.url = url.rstrip("/") if url else None
        self.actor = actor
        self.success = float(success)
        self.split = split
        if env is not None:
            self._env_class = _load(env, "env")
            self._action_class = _load(str(action), "action")
            self.schema = self._action_class.model_json_schema()
            default = self._env_class.__name__
        else:
            self._env_class = self._action_class = None
            self.schema = self._server_schema()
            default = str(self.schema.get("title", "server"))
        self.name = f"openenv/{name or default}"
        self.description = f"OpenEnv environment {name or default}"

    def _server_schema(self) -> dict[str, Any]:
        import httpx

        try:
            reply = httpx.get(f"{self.url}/schema", timeout=10)
            reply.raise_for_status()
            return dict(reply.json()["action"])
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            raise TaskConfigError(
                "openenv", [f"url: cannot read the action schema at {self.url}/schema ({exc})"]
            ) from None

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
        seed = int(problem.data["seed"])
        session = Session()
        if self._env_class is not None:
            session.env = self._env_class()
            observation = session.env.reset(seed=seed)
            session.observation = observation.model_dump()
        else:
            from openenv.core import GenericEnvClient

            session.client = GenericEnvClient(base_url=self.url).sync()
            try:
                result = session.client.reset(seed=seed)
            except Exception as exc:  # capacity, a dead server: the run cannot go on
                session.close()
                raise RuntimeError(
                    f"{self.name}: the server at {self.url} did not start an episode ({exc}); a "
                    "batch holds one session per episode, so the server's max_concurrent_envs "
                    "must be at least problems x group size"
                ) from exc
            session.observation = dict(result.observation)
            session.done = bool(result.done)
        return session

    def opening(self, state: Session) -> str | None:
        return render_observation(state.observation)

    def respond(self, state: Session, speaker: str, text: str) -> str | None:
        if speaker != self.actor or state.done:
            return None
        action, why = parse_action(text, self.schema)
        if action is None:
            state.invalid_actions += 1
            return str(why)
        try:
            observation, reward, done = self._step(state, action)
        except ValueError as exc:  # the environment's own validation refused it
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
        if state.env is not None:
            from pydantic import ValidationError

            try:
                typed = self._action_class.model_validate(action)
            except ValidationError as exc:
                raise ValueError(str(exc)) from None
            result = state.env.step(typed)
            return result.model_dump(), result.reward, bool(result.done)
        try:
            result = state.client.step(action)
        except RuntimeError as exc:
            raise ValueError(str(exc)) from None
        return dict(result.observation), result.reward, bool(result.done)

    def done(self, state: Session) -> bool:
        return bool(state.done)

    def score(self, episode: Any) -> Score:
        state = episode.state
        if not isinstance(state, Session):
            return Score(0.0, False, None, {"reason": "no_episode_state"})
        state.close()  # a truncated episode's session ends here
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
