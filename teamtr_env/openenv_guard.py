"""What a request to a served team may carry, checked before OpenEnv reads it (``teamtr serve``).

:class:`RequestGuard` is a pure ASGI middleware around OpenEnv's app:

* **HTTP**: it counts the body bytes as they arrive, whatever the framing (``Content-Length``
  or chunked), and answers 413 past :data:`MAX_REQUEST_BYTES` without reading further (and
  closes the connection, so the client stops sending). A body within the limit is handed to
  the app whole. ``POST /reset``'s ``seed`` is checked strictly (OpenEnv's ``ResetRequest``
  would take ``"7"`` or ``true`` as a seed).
* **WebSocket**: a message over the limit (and within the server's ``ws_max_size``, see
  :data:`WS_MAX_MESSAGE_BYTES`) is answered with OpenEnv's error message and dropped; the session
  and its episode go on. A validation error names its fields in ``message`` (what OpenEnv's
  client shows) and no error repeats the input it refuses.

Nothing here evaluates what it reads: bodies are counted, and ``/reset``'s is parsed by ``json``.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

MAX_REQUEST_BYTES = 1_000_000
"""The largest HTTP request body or WebSocket message the server reads."""

WS_MAX_MESSAGE_BYTES = 4_000_000
"""The WebSocket message size past which the server closes the connection (code 1009) instead of
answering an error: ``teamtr serve``'s uvicorn ``ws_max_size``. Each session may hold one message
this large in memory while it is refused."""

_ACTION_HINT = "an action's text is at most 100,000 characters"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def seed_problem(value: Any) -> str | None:
    """What is wrong with a ``reset`` seed, or ``None``: a seed is a whole number >= 0 (JSON
    ``7``, not ``"7"``, ``7.5``, ``true`` or ``[7]``) or null (a random problem)."""
    whole = isinstance(value, numbers.Integral) and not isinstance(value, bool)  # NumPy's too
    if value is None or (whole and value >= 0):
        return None
    seen = json.dumps(value, default=repr)
    if len(seen) > 40:
        seen = f"{seen[:40]}... ({type(value).__name__})"
    return f'expected a whole number >= 0 or null, got {seen}; send e.g. {{"seed": 7}}'


def seed_validation_error(value: Any) -> ValidationError:
    """The pydantic error of a bad ``seed`` (OpenEnv answers it as ``VALIDATION_ERROR``)."""
    problem = seed_problem(value) or "invalid"
    detail: InitErrorDetails = {
        "type": PydanticCustomError("seed", problem),
        "loc": ("seed",),
        "input": value,
    }
    return ValidationError.from_exception_data("reset", [detail])


def without_inputs(errors: Any) -> Any:
    """A list of pydantic error dicts without their ``input`` (the refused value, up to a whole
    request body); anything else unchanged."""
    if not isinstance(errors, list):
        return errors
    return [
        {k: v for k, v in e.items() if k != "input"} if isinstance(e, dict) else e for e in errors
    ]


class RequestGuard:
    """ASGI middleware: bounds the bytes a request makes the server read (module docstring).

    Args:
        app: the ASGI app guarded (OpenEnv's FastAPI app).
        max_bytes: the largest HTTP body or WebSocket message passed on.
    """

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_REQUEST_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self.app(scope, self._ws_receive(receive, send), _ws_send(send))
        else:
            await self.app(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length", b"")
        if length.isdigit() and int(length) > self.max_bytes:
            await self._refuse(send, f"Content-Length {int(length):,}")
            return
        chunks, read = [], 0
        while True:  # a chunked body has no length to check up front: count what arrives
            message = await receive()
            if message["type"] != "http.request":  # the client left
                return
            chunk = message.get("body", b"")
            read += len(chunk)
            if read > self.max_bytes:
                await self._refuse(send, f"{read:,} bytes read before stopping")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        path = scope["path"][len(scope.get("root_path", "")) :]
        if scope["method"] == "POST" and path == "/reset" and await _bad_seed(body, send):
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # the app waits for the client's disconnect
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send, seen: str) -> None:
        text = (
            f"request body over {self.max_bytes:,} bytes ({seen}): refused, the rest not read; "
            f"send at most {self.max_bytes:,} bytes ({_ACTION_HINT})"
        )
        # Connection: close, so the server reads no more of the body and the client stops sending.
        await _json_response(send, 413, {"detail": text}, close=True)

    def _ws_receive(self, receive: Receive, send: Send) -> Receive:
        async def bounded() -> Message:
            while True:
                message = await receive()
                if message["type"] != "websocket.receive":
                    return message
                size = _message_bytes(message, self.max_bytes)
                if size <= self.max_bytes:
                    return message
                text = (
                    f"message over {self.max_bytes:,} bytes (got {size:,}): refused, not parsed; "
                    f"the session and its episode go on; send at most {self.max_bytes:,} bytes "
                    f"({_ACTION_HINT})"
                )
                error = {"type": "error", "data": {"message": text, "code": "VALIDATION_ERROR"}}
                await send({"type": "websocket.send", "text": json.dumps(error)})

        return bounded


def _message_bytes(message: Message, limit: int) -> int:
    """A WebSocket message's size in bytes (a text over ``limit`` characters is over ``limit``
    bytes too, so it is not encoded to count)."""
    if message.get("text") is not None:
        text: str = message["text"]
        return len(text) if len(text) > limit else len(text.encode("utf-8"))
    return len(message.get("bytes") or b"")


def _ws_send(send: Send) -> Send:
    """``send`` with OpenEnv's error messages cleaned: no ``input`` in their ``errors``, and a
    validation error's ``message`` naming the fields and what was wrong with each."""

    async def cleaned(message: Message) -> None:
        text = message.get("text") if message["type"] == "websocket.send" else None
        if text is not None and text.startswith('{"type":"error"'):
            error = json.loads(text)  # the app's own JSON, not the client's
            data = error.get("data") or {}
            if isinstance(data.get("errors"), list):
                data["errors"] = without_inputs(data["errors"])
                fields = "; ".join(
                    f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}"
                    for e in data["errors"]
                    if isinstance(e, dict)
                )
                data["message"] = f"{data.get('message', 'Invalid message')}: {fields}"
            message = {**message, "text": json.dumps(error)}
        await send(message)

    return cleaned


async def _bad_seed(body: bytes, send: Send) -> bool:
    """Answers 422 for a ``/reset`` body whose ``seed`` is not a whole number >= 0; ``False``
    (nothing sent) for anything else, including a body that is not JSON or nests too deep to
    parse (FastAPI answers those: 422 or 400)."""
    try:
        request = json.loads(body) if body.strip() else {}
    except (ValueError, RecursionError):  # RecursionError: nesting past Python's stack
        return False
    if not isinstance(request, dict) or (problem := seed_problem(request.get("seed"))) is None:
        return False
    error = {"type": "seed", "loc": ["body", "seed"], "msg": f"seed: {problem}"}
    await _json_response(send, 422, {"detail": [error]})
    return True


async def _json_response(send: Send, status: int, content: Any, close: bool = False) -> None:
    body = json.dumps(content).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
