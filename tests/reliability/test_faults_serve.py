"""Faults on ``teamtr serve`` (issue #57, "Bad input on the newest surfaces", rows S1 and E1-E3):
a served team (``create_team_app``, the app ``teamtr serve`` runs) sent what a careless or hostile
client sends, over HTTP and WebSocket on 127.0.0.1.

* S1: a chunked body past the 1 MB limit gets a 413 early, without the server reading it all,
  and no error repeats a body.
* E1: ``step`` or ``state`` before ``reset``: HTTP 409 and a WebSocket error, not a crash.
* E2: a WebSocket ``reset`` seed that is not a whole number >= 0 is refused (``VALIDATION_ERROR``,
  the field ``seed`` named), as HTTP ``/reset`` refuses it (422).
* E3: a WebSocket message over 1 MB is refused in the session and the episode goes on; past
  ``WS_MAX_MESSAGE_BYTES`` the connection closes with 1009 (both documented in docs/openenv.md).

One server per module runs in a thread under uvicorn, behind a layer that counts the body bytes
the app reads."""

from __future__ import annotations

import json
import re
import select
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from helpers_openenv import serve_app
from websockets.exceptions import ConnectionClosedError
from websockets.sync.client import ClientConnection, connect

import teamtr_env
from teamtr_env.openenv_guard import MAX_REQUEST_BYTES, WS_MAX_MESSAGE_BYTES

CHUNK = 64 * 1024
# On the test worker that runs the other OpenEnv tests: OpenEnv (and the gradio it imports) is
# imported on one worker only, when a test first needs it.
pytestmark = pytest.mark.xdist_group("openenv")


def _team_app() -> Any:
    from teamtr_env.openenv_server import create_team_app

    return create_team_app(lambda: teamtr_env.make("teamtr/Arith-v0"), name="teamtr/Arith-v0")


class CountingApp:
    """An ASGI layer that counts the HTTP body bytes the app under it pulls from the server."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.read = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def counted() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                self.read += len(message.get("body", b""))
            return message

        await self.app(scope, counted, send)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, CountingApp]]:
    """The served Arith team on a free port (as ``teamtr serve`` configures uvicorn): its base
    URL and the counting layer in front of it. Stopped at the end of the module."""
    app = CountingApp(_team_app())
    with serve_app(app, ws_max_size=WS_MAX_MESSAGE_BYTES) as url:
        yield url, app


def _ws(url: str) -> ClientConnection:
    return connect(url.replace("http://", "ws://") + "/ws", max_size=None, open_timeout=10)


def _ask(ws: ClientConnection, message: dict[str, Any]) -> dict[str, Any]:
    ws.send(json.dumps(message))
    answer: dict[str, Any] = json.loads(ws.recv(timeout=10))
    return answer


def _answer(text: str) -> str:
    a, b = re.search(r"Compute: (\d+) \+ (\d+)", text).groups()  # type: ignore[union-attr]
    return f"Answer: {int(a) + int(b)}"


def _stream_chunked(port: int, limit: int) -> tuple[int, bytes]:
    """POSTs a chunked ``/step`` body of up to ``limit`` bytes, 64 KiB at a time, and stops
    sending as soon as the server answers or drops the connection. Returns the bytes sent and
    the server's answer."""
    sent, answer = 0, b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            b"POST /step HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
            b"Content-Type: application/json\r\n\r\n"
        )
        chunk = b"%x\r\n" % CHUNK + b"a" * CHUNK + b"\r\n"
        try:
            while sent < limit and not select.select([sock], [], [], 0)[0]:
                sock.sendall(chunk)
                sent += CHUNK
        except OSError:  # the server answered and closed the connection while we sent
            pass
        try:
            while data := sock.recv(CHUNK):
                answer += data
        except OSError:  # a reset after the answer: keep what came
            pass
    return sent, answer


# -- S1: a chunked body past the limit --------------------------------------------------------


def test_a_chunked_body_over_the_limit_gets_413_early_and_no_error_echoes_a_body(
    server: tuple[str, CountingApp],
) -> None:
    url, counter = server
    before = counter.read
    sent, answer = _stream_chunked(int(url.rsplit(":", 1)[1]), limit=40_000_000)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), answer[:300]
    assert b"request body over 1,000,000 bytes" in body and b"aaaa" not in answer
    assert len(answer) < 1_000  # the answer does not send the body back
    # The server stopped reading just past the limit: the app pulled about 1 MB (uvicorn hands a
    # body over in pieces of up to a few hundred KiB: its 64 KiB high-water mark plus one socket
    # read), and the client was told before it had sent half of the 40 MB (the rest of what it
    # sent sat in the sockets' buffers, a few MB on loopback).
    assert counter.read - before <= MAX_REQUEST_BYTES + 512 * 1024
    assert sent < 20_000_000

    # A body within the limit that the action model refuses: a 422 naming the field, without
    # the 200,000 characters it refused.
    refused = httpx.post(f"{url}/step", json={"action": {"text": "x" * 200_000}}, timeout=10)
    assert refused.status_code == 422 and len(refused.text) < 1_000
    assert refused.json()["detail"][0]["loc"] == ["text"] and "xxxx" not in refused.text


# -- E1: step or state before reset -----------------------------------------------------------


@pytest.mark.parametrize("route", ["http step", "http state", "ws step", "ws state"])
def test_step_or_state_before_reset_is_a_clear_error(
    server: tuple[str, CountingApp], route: str
) -> None:
    url, _ = server
    if route.startswith("http"):
        if route == "http step":
            got = httpx.post(f"{url}/step", json={"action": {"text": "hi"}}, timeout=10)
        else:
            got = httpx.get(f"{url}/state", timeout=10)
        assert got.status_code == 409, got.text
        assert "no episode" in got.json()["detail"] and "/ws" in got.json()["detail"]
        return
    with _ws(url) as ws:
        step = {"type": "step", "data": {"text": "hi"}}
        error = _ask(ws, step if route == "ws step" else {"type": "state"})
        assert error["type"] == "error" and error["data"]["code"] == "EXECUTION_ERROR"
        assert error["data"]["message"] == "no episode yet: send reset before step or state"
        assert "attribute" not in error["data"]["message"]
        started = _ask(ws, {"type": "reset", "data": {"seed": 1}})  # the session goes on
        assert started["type"] == "observation"
        assert _ask(ws, {"type": "state"})["data"]["agent"] == "solver"


# -- E2: reset seeds, over WebSocket and HTTP --------------------------------------------------


@pytest.mark.parametrize(
    ("seed", "shown"),
    [
        ("7", '"7"'),
        (3.5, "3.5"),
        (1e30, "1e+30"),
        ({"a": 1}, '{"a": 1}'),
        (True, "true"),
        ([1], "[1]"),
        (-1, "-1"),
    ],
)
def test_a_reset_seed_must_be_a_whole_number_on_both_routes(
    server: tuple[str, CountingApp], seed: Any, shown: str
) -> None:
    url, _ = server
    expected = f"expected a whole number >= 0 or null, got {shown}"
    with _ws(url) as ws:
        error = _ask(ws, {"type": "reset", "data": {"seed": seed}})
        assert error["type"] == "error" and error["data"]["code"] == "VALIDATION_ERROR"
        assert error["data"]["message"].startswith(f"Invalid message: seed: {expected}")
        assert [e["loc"] for e in error["data"]["errors"]] == [["seed"]]
        assert "SeedSequence" not in json.dumps(error)
        # The session goes on, and a good seed plays the episode it plays in process.
        started = _ask(ws, {"type": "reset", "data": {"seed": 3}})
        env = teamtr_env.make("teamtr/Arith-v0")
        env.reset(seed=3)
        assert started["data"]["observation"]["metadata"]["problem_id"] == env.problem.id  # type: ignore[union-attr]
    refused = httpx.post(f"{url}/reset", json={"seed": seed}, timeout=10)
    assert refused.status_code == 422
    assert refused.json()["detail"] == [
        {
            "type": "seed",
            "loc": ["body", "seed"],
            "msg": f'seed: {expected}; send e.g. {{"seed": 7}}',
        }
    ]


# -- E3: a WebSocket message over 1 MB --------------------------------------------------------


def test_a_websocket_message_over_the_limit_is_refused_and_the_episode_goes_on(
    server: tuple[str, CountingApp],
) -> None:
    url, _ = server
    with _ws(url) as ws:
        context = _ask(ws, {"type": "reset", "data": {"seed": 4}})["data"]["observation"]["text"]
        error = _ask(ws, {"type": "step", "data": {"text": "x" * 2_000_000}})
        assert error["type"] == "error" and error["data"]["code"] == "VALIDATION_ERROR"
        message = error["data"]["message"]
        assert message.startswith("message over 1,000,000 bytes (got 2,000,")
        assert "episode go on" in message and len(json.dumps(error)) < 1_000
        played = _ask(ws, {"type": "step", "data": {"text": _answer(context)}})
        assert played["type"] == "observation"
        assert played["data"]["observation"]["agent"] == "critic"  # the episode went on
    with _ws(url) as ws:  # past the server's ws_max_size: the documented close
        with pytest.raises(ConnectionClosedError) as closed:  # on sending, or on the answer
            ws.send(json.dumps({"type": "step", "data": {"text": "x" * WS_MAX_MESSAGE_BYTES}}))
            ws.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
