"""A server's side of ``openenv/Env-v0``: its action schema and its environment's name (read once,
when the task is made) and one WebSocket session per episode (OpenEnv's ``GenericEnvClient``).

Every way a server fails becomes an error that names the server and says what to do, not a
traceback: unreachable or answering something that is not OpenEnv (a
:class:`~tasks.base.TaskConfigError`), full (an :class:`~tasks.base.EpisodeLimitError` with its
capacity: the runner plays the batch in blocks that fit), an action it refuses
(:class:`ActionRefused`: the model is told, as in process).
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

from tasks.base import EpisodeLimitError, TaskConfigError
from tasks.openenv.actions import schema_errors
from tasks.openenv.importing import import_openenv_core

TIMEOUT_S = 10.0
"""How long a request to the server (``/schema``, ``/metadata``) may take."""

_CODE = re.compile(r"^Server error: (.*) \(code: ([A-Z_]+)\)$", re.DOTALL)
_CAPACITY = re.compile(r"(\d+)/(\d+) sessions active")
_ERRNO = re.compile(r"\[Errno -?\d+\] ")
_REFUSALS = ("VALIDATION_ERROR", "EXECUTION_ERROR")  # the action's fault: the model is told


class ActionRefused(Exception):
    """The environment refused an action (its own validation, or its ``step`` failed on it);
    the message is what the model is told."""


def describe(exc: BaseException) -> str:
    """An exception as one short line for a user: its type and message, no ``Errno`` codes."""
    text = _ERRNO.sub("", str(exc)).strip() or "no message"
    return f"{type(exc).__name__}: {text[:300]}"


def read_server(url: str, name: str | None) -> tuple[dict[str, Any], str]:
    """The action schema (``/schema``'s ``action``) and the environment's name (``/metadata``'s
    ``name``, which OpenEnv takes from the ``Environment`` class by default; ``name`` when
    given) of the server at ``url``.

    Raises:
        TaskConfigError: unreachable, or an answer that is not an OpenEnv server's.
    """
    schema = _get(url, "schema", "action", "the action schema")  # unreachable: said here
    errors = schema_errors(schema, f"url: the action schema at {url}/schema")
    if name is None:
        try:
            served = _get(url, "metadata", "name", "the environment's name")
        except TaskConfigError as exc:  # said with the schema's problems, if any
            errors += exc.errors
            served = None
        if served is not None and not (isinstance(served, str) and served.strip()):
            errors.append(
                f"url: {url}/metadata names no environment (its 'name' is {str(served)[:100]!r});"
                " give the task's name (-o name=...)"
            )
        name = str(served)
    if errors or not isinstance(schema, dict):
        raise TaskConfigError("openenv", errors)
    return schema, name


def _get(url: str, endpoint: str, key: str, what: str) -> object:
    """``key`` of the JSON object at ``url/endpoint`` (``what`` it is, for the messages)."""
    import httpx

    where = f"{url}/{endpoint}"
    try:
        reply = httpx.get(where, timeout=TIMEOUT_S)
        reply.raise_for_status()
        body = reply.json()
    except httpx.HTTPError as exc:
        raise TaskConfigError(
            "openenv",
            [
                f"url: cannot read {what} at {where} ({describe(exc)}); expected an OpenEnv server "
                "(create_app, or teamtr serve) listening there: start it, or fix the url"
            ],
        ) from None
    except ValueError:
        raise TaskConfigError(
            "openenv",
            [
                f"url: cannot read {what} at {where}: it answered {reply.text[:100]!r}, not "
                "JSON; is it an OpenEnv server?"
            ],
        ) from None
    if not isinstance(body, dict) or key not in body:
        raise TaskConfigError(
            "openenv",
            [
                f"url: cannot read {what} at {where}: it answered {str(body)[:100]!r}, with no "
                f"{key!r}; is it an OpenEnv server?"
            ],
        )
    return body[key]


def open_session(
    url: str, seed: int, task: str, max_sessions: int | None
) -> tuple[Any, dict[str, Any], bool]:
    """A new session of the server, reset with ``seed``: ``(client, observation, done)``.

    Raises:
        EpisodeLimitError: the server holds no more sessions (its ``max_concurrent_envs``).
        TaskConfigError: it cannot be reached, or its answer is not OpenEnv's.
    """
    GenericEnvClient = import_openenv_core().GenericEnvClient

    client = None
    try:
        client = GenericEnvClient(base_url=url).sync()
        result = client.reset(seed=seed)
        return client, dict(result.observation), bool(result.done)
    except Exception as exc:  # a client error of any kind ends here, said once, not raised on
        if client is not None:
            close_client(client)
        message, code = _server_error(exc)
        if code == "CAPACITY_REACHED":
            raise _full(url, task, message, max_sessions) from None
        raise TaskConfigError(
            task, [f"url: the server at {url} did not start an episode ({message})"]
        ) from None


def _full(url: str, task: str, message: str, max_sessions: int | None) -> EpisodeLimitError:
    counts = _CAPACITY.search(message)
    capacity = int(counts[2]) if counts else None
    plural = "" if capacity == 1 else "s"
    held = f"at most {capacity} session{plural} at once" if capacity else "no more sessions"
    active = f"; {counts[1]} in use" if counts else ""
    now = f"now {max_sessions}" if max_sessions is not None else "unset: the server's capacity"
    return EpisodeLimitError(
        task,
        [
            f"url: the server at {url} holds {held} (its max_concurrent_envs{active}). A batch "
            "holds one session per episode; the task's max_sessions option "
            f"({now}) caps the sessions it holds at once: set it to at most "
            f"{capacity or 'the server capacity'} (-o max_sessions={capacity or 'N'}), or raise "
            "the server's max_concurrent_envs"
        ],
        capacity=capacity,
    )


def step(
    client: Any, action: dict[str, Any], url: str, task: str
) -> tuple[dict[str, Any], Any, bool]:
    """Steps a session: ``(observation, reward, done)``.

    Raises:
        ActionRefused: the environment refused the action (the model is told why).
        TaskConfigError: the server stopped answering, or answered something that is not
            OpenEnv's.
    """
    try:
        result = client.step(action)
        return dict(result.observation), result.reward, bool(result.done)
    except Exception as exc:  # see open_session
        message, code = _server_error(exc)
        if code in _REFUSALS:
            raise ActionRefused(f"{message} ({code})") from None
        raise TaskConfigError(
            task,
            [f"url: the server at {url} failed in an episode ({message}): is it still running?"],
        ) from None


def _server_error(exc: Exception) -> tuple[str, str | None]:
    """The message and the OpenEnv error code (``CAPACITY_REACHED``, ...) of a client error;
    ``None`` for one that did not come from the server (a dropped connection, garbage)."""
    if isinstance(exc, RuntimeError) and (match := _CODE.match(str(exc))):
        return match[1][:300], match[2]
    return describe(exc), None


def close_client(client: Any) -> None:
    """Ends a session; a server already gone has nothing left to close."""
    with contextlib.suppress(Exception):
        client.close()
