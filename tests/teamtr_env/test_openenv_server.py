"""``teamtr serve``: a teamtr environment served as an OpenEnv environment, played by OpenEnv's own
client (``GenericEnvClient``) over WebSocket on 127.0.0.1: every seat by the caller, one seat with
the team config's policies on the others, concurrent sessions, malformed and oversized requests."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from _served import served

import teamtr_env
from adapters.scripted import ScriptedExpert
from teamtr_core.policy import SamplingParams

TEAMTR = str(Path(sys.executable).parent / "teamtr")
pytestmark = pytest.mark.xdist_group("openenv")


def _client(url: str) -> Any:
    """OpenEnv's own client of ``url`` (imported when a test first needs it: see
    ``pytestmark``)."""
    from tasks.openenv.importing import import_openenv_core

    return import_openenv_core().GenericEnvClient(base_url=url)


@contextlib.contextmanager
def serving(*args: str, cwd: Path | None = None) -> Iterator[str]:
    """``teamtr serve ARGS`` on a free port; yields its base URL, and checks that it is still
    healthy after the test's requests."""
    with served(args, timeout=60, cwd=cwd, env={**os.environ, "COLUMNS": "200"}) as url:
        yield url
        assert httpx.get(f"{url}/health", timeout=5).json()["status"] == "healthy"


def answer(text: str) -> str:
    """A correct answer to the ``Compute: a + b`` an Arith context shows."""
    a, b = re.search(r"Compute: (\d+) \+ (\d+)", text).groups()  # type: ignore[union-attr]
    return f"Answer: {int(a) + int(b)}"


def play_remote(url: str, seed: int, moves: list[str] | None = None) -> tuple[float, list[str]]:
    """One episode through OpenEnv's client, every seat played by the caller: ``moves`` in turn,
    else a correct answer. Returns the reward and the agents that were asked to act."""
    asked = []
    with _client(url).sync() as client:
        result = client.reset(seed=seed)
        turn = 0
        while not result.done:
            asked.append(result.observation["agent"])
            text = moves[turn] if moves else answer(result.observation["text"])
            result = client.step({"text": text})
            turn += 1
        assert result.observation["metadata"]["score"]["reward"] == result.reward
        return float(result.reward), asked


def play_local(seed: int, moves: list[str] | None = None) -> float:
    env = teamtr_env.make("teamtr/Arith-v0")
    env.reset(seed=seed)
    turn = 0
    while not env.episode_over:
        text = moves[turn] if moves else answer(env.observe(env.agent_selection)["text"])
        env.step(text)
        turn += 1
    assert env.score is not None
    return float(env.score.reward)


@pytest.fixture(scope="module")
def arith_server() -> Iterator[str]:
    """One ``teamtr serve teamtr/Arith-v0`` for the module's tests (each uses sessions of its
    own); its URL."""
    with serving("teamtr/Arith-v0") as url:
        yield url


@pytest.fixture
def arith(arith_server: str) -> Iterator[str]:
    """The shared Arith server's URL, checked healthy after the test's requests."""
    yield arith_server
    assert httpx.get(f"{arith_server}/health", timeout=5).json()["status"] == "healthy"


def test_a_served_team_is_played_by_openenvs_client_as_in_process(arith: str) -> None:
    wrong = ["Answer: 1", "Answer: 2", "Answer: 3"]
    reward, asked = play_remote(arith, seed=3)
    assert asked == ["solver", "critic", "aggregator"] and reward == 1.0 == play_local(3)
    assert play_remote(arith, seed=3, moves=wrong)[0] == play_local(3, wrong) == 0.0
    schema = httpx.get(f"{arith}/schema", timeout=5).json()
    assert schema["action"]["required"] == ["text"]

    # Concurrent sessions are isolated: each ends as the same episode does in process.
    seeds = list(range(10, 18))
    with ThreadPoolExecutor(8) as pool:
        remote = list(pool.map(lambda s: play_remote(arith, s, wrong[:1] * 3)[0], seeds))
    assert remote == [play_local(s, wrong[:1] * 3) for s in seeds]


def test_malformed_and_oversized_requests_get_clear_errors_and_the_server_lives_on(
    arith: str,
) -> None:
    with _client(arith).sync() as client:
        result = client.reset(seed=1)
        for bad in ({"text": 5}, {"message": "x"}, {"text": "x" * 100_001}):
            with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
                client.step(bad)
        result = client.step({"text": answer(result.observation["text"])})
        assert result.observation["agent"] == "critic"  # the session went on
    big = httpx.post(f"{arith}/step", content=b"{" + b" " * 2_000_000 + b"}", timeout=10)
    assert big.status_code == 413 and "request body over" in big.text
    bad_json = httpx.post(
        f"{arith}/step", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert bad_json.status_code == 422


@pytest.mark.slow  # a second served team; serving in test_a_served_team_is_played_by_openenvs_client_as_in_process
def test_one_seat_with_the_team_config_on_the_others(tmp_path: Path) -> None:
    """The caller plays the aggregator; the scripted experts of the team config play the solver
    and the critic between its turns, as they do in process."""
    (tmp_path / "team.yaml").write_text("default: {backend: scripted}\n", encoding="utf-8")
    with (
        serving(
            "teamtr/Arith-v0", "--seat", "aggregator", "--team", "team.yaml", cwd=tmp_path
        ) as url,
        _client(url).sync() as client,
    ):
        result = client.reset(seed=5)
        assert result.observation["agent"] == "aggregator"
        context = result.observation["text"]
        assert "### solver\n" in context and "### critic\n" in context
        result = client.step({"text": answer(context)})
        assert result.done and result.reward == 1.0
    env = teamtr_env.make("teamtr/Arith-v0")
    env.reset(seed=5)
    expert = ScriptedExpert(env.task, seed=0)
    for _ in range(2):
        text = env.observe(env.agent_selection)["text"]
        generated = expert.generate_privileged([text], [env.problem], SamplingParams())
        env.step(generated[0].text)
    assert env.observe("aggregator")["text"] == context


def test_a_served_seat_episode_is_a_function_of_its_seed() -> None:
    """The seats the server plays draw their messages from the episode's seed, not from a
    generator shared across sessions: ``reset(seed=s)`` shows the caller the same context every
    time (what a TRL reward function replaying a prompt's seed relies on, docs/openenv-trl.md)."""
    from teamtr_env.openenv_server import TeamAction, TeamEnvironment

    def make() -> teamtr_env.TeamEnv:
        return teamtr_env.make("teamtr/Arith-v0")

    env = make()
    expert = ScriptedExpert(env.task, error_rate=0.5, seed=0)
    policies = {"solver": expert, "critic": expert}
    first, second = (TeamEnvironment(make, seat="aggregator", policies=policies) for _ in range(2))
    contexts = [first.reset(seed=s).text for s in range(12)]
    for s in reversed(range(12)):  # another session, other episodes in between
        assert second.reset(seed=s).text == contexts[s]
        second.step(TeamAction(text="Answer: 0"))
    solver_right = [
        answer(c).removeprefix("Answer: ") == c.split("### solver\n")[1].split("\n")[0].split()[-1]
        for c in contexts
    ]
    assert any(solver_right) and not all(solver_right)  # the error rate is at work


@pytest.mark.slow
def test_serve_refuses_bad_flags_before_listening(tmp_path: Path) -> None:
    cases = [
        (
            ["teamtr/Arith-v0", "--seat", "judge", "--team", "t.yaml"],
            "not one of the team's agents",
        ),
        (["teamtr/Arith-v0", "--seat", "critic"], "--seat and --team go together"),
        (["teamtr/Arith-v0", "--port", "0"], "expected 1-65535"),
        (["teamtr/Nope-v0"], "Nope"),
    ]
    (tmp_path / "t.yaml").write_text("default: {backend: scripted}\n", encoding="utf-8")
    for argv, message in cases:
        proc = subprocess.run(
            [TEAMTR, "serve", *argv], capture_output=True, text=True, timeout=60, cwd=tmp_path
        )
        assert proc.returncode == 2 and message in proc.stderr, (argv, proc.stderr)
