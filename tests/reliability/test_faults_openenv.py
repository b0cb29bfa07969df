"""Faults on OpenEnv environments as team tasks (issue #57, "Bad input on the newest surfaces",
rows S7, E4, I1, I2 and I3), tried as a new user would: ``openenv/Env-v0`` over the guess
environment of ``tests/fixtures/openenv_guess``, in process and served by OpenEnv's own
``create_app`` on 127.0.0.1 (started here with a few sessions and stopped when its test ends).

- S7: an ``actor`` that is not one of the team's agents (the default ``aggregator`` with
  ``agents=["player"]``, a typo) is refused before the first episode, not scored 0 silently.
- E4: a server with fewer sessions than a batch plays it in blocks (the server's capacity by
  default, the task's ``max_sessions`` when set); what cannot fit, an unreachable server, one
  that answers garbage and one that dies mid-episode end in a clear error (exit 2, no traceback).
- I1: the environment of every in-process episode is closed, as OpenEnv's server closes a
  session's; a served session ends with its episode, or when it is left by a reset.
- I2: an action outside the schema (a number above its maximum) gets the same reason served and
  in process, and is not stepped.
- I3: one naming rule (the environment's OpenEnv name) served and in process, so the problem ids
  and splits agree; a plugin entry gives an environment a task id of its own.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from typing import Any

import pytest
from _served import free_port
from helpers_openenv import FIXTURES, IN_PROCESS, TEAM, Bisect, guess_server

import teamtr_env
from teamtr_cli import main
from teamtr_core.errors import ConfigError
from teamtr_env.registration import Registry
from teamtr_env.runners import Runner

pytestmark = [
    pytest.mark.xdist_group("openenv"),
    pytest.mark.filterwarnings("ignore:.*(space|named|NumPy).*"),
]


@pytest.fixture(autouse=True)
def _guess_env_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """``guess_env`` on the path, and OpenEnv imported as teamtr imports it (without Gradio)
    before ``guess_env`` imports it."""
    from tasks.openenv.importing import import_openenv_core

    import_openenv_core()
    monkeypatch.syspath_prepend(str(FIXTURES))


@contextlib.contextmanager
def garbage_server(pages: dict[str, str]) -> Iterator[str]:
    """A plain HTTP server on 127.0.0.1 that answers ``pages[path]`` (404 elsewhere): a URL that
    is not an OpenEnv server's."""

    class Pages(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write((body or "not found").encode())

        def log_message(self, *args: Any) -> None:  # quiet
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    # shutdown() waits for the loop's next poll: 10 ms, not the default half second.
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def play(
    options: dict[str, Any], problems: int, k: int, runner: Runner | None = None
) -> tuple[Runner, list[float]]:
    """``problems`` x ``k`` episodes of the guess environment under bisection: the runner and
    the rewards."""
    if runner is None:
        make = lambda: teamtr_env.make("openenv/Env-v0", **options, **TEAM)  # noqa: E731
        runner = Runner(make, Bisect(), progress=False)
    batch = runner.rollout(runner.sample_problems(problems, seed=0), group_size=k, seed=0)
    return runner, [episode.reward for episode in batch.episodes]


def count_made(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The guess environments made from now on (``GuessEnv.__init__`` records each)."""
    import guess_env

    made: list[object] = []
    original = guess_env.GuessEnv.__init__

    def recording(self: Any) -> None:
        made.append(self)
        original(self)

    monkeypatch.setattr(guess_env.GuessEnv, "__init__", recording)
    return made


def _cli(options: dict[str, Any], *more: str) -> list[str]:
    argv = ["eval", "openenv/Env-v0"]
    for key, value in options.items():
        argv += ["-o", f"{key}={json.dumps(value)}"]
    return [*argv, "--policy", "random", "--no-progress", *more]


# -- S7: the actor must be one of the agents ------------------------------------------------------


@pytest.mark.parametrize(
    ("actor", "said"),
    [
        (None, "got 'aggregator' (the default, the default team's last agent)"),
        ("playr", "got 'playr'; its messages are the actions"),
    ],
)
def test_an_actor_that_is_not_one_of_the_agents_is_refused_before_the_first_episode(
    actor: str | None,
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """S7: ``agents=["player"]`` with the default actor (or a typo) ran 30 turns per episode
    and reported avg@1 0.000 with ``steps: 0``; now the environment is not made, and no
    episode starts."""
    made = count_made(monkeypatch)
    options: dict[str, Any] = {
        **IN_PROCESS,
        "agents": ["player"],
        **({"actor": actor} if actor else {}),
    }
    with pytest.raises(ConfigError) as refused:
        teamtr_env.make("openenv/Env-v0", **options)
    message = str(refused.value)
    assert "actor: expected one of the team's agents ['player']" in message and said in message
    assert "-o actor='\"player\"'" in message
    if actor == "playr":
        assert "did you mean 'player'?" in message
    assert main(_cli(options, "--k", "1", "--problems", "2")) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert said in err and "Traceback" not in err
    assert made == []  # no episode started: no environment was made
    assert main(_cli({**options, "actor": "player"}, "--k", "1", "--problems", "2")) == 0


# -- E4: a server's capacity in a client run -------------------------------------------------------


def _full_by_default(caplog: pytest.LogCaptureFixture) -> None:
    """5 problems x k=2 against 4 sessions: refused at the fifth, played in blocks of 4."""
    with guess_server(4) as url, caplog.at_level(logging.WARNING):
        runner, rewards = play({"url": url}, 5, 2)
        assert rewards == [1.0] * 10
        warned = " ".join(caplog.text.split())
        assert "holds at most 4 sessions at once (its max_concurrent_envs" in warned
        assert "asked for 10 episodes at once" in warned and "-o max_sessions=4" in warned
        caplog.clear()
        assert play({"url": url}, 5, 2, runner)[1] == [1.0] * 10
        assert caplog.text == ""  # the runner keeps what it learned: no second refusal


def _max_sessions(caplog: pytest.LogCaptureFixture) -> None:
    """``max_sessions`` plans the blocks up front; the command line takes it too."""
    with guess_server(4) as url, caplog.at_level(logging.WARNING):
        assert play({"url": url, "max_sessions": 4}, 5, 2)[1] == [1.0] * 10
        assert caplog.text == ""
        options = {"url": url, "agents": ["player"], "actor": "player", "max_sessions": 2}
        assert main(_cli(options, "--k", "2", "--problems", "3")) == 0


def _groups_larger_than_the_server(caplog: pytest.LogCaptureFixture) -> None:
    """A template-built server (``max_concurrent_envs=1``) and groups of 2: said, not a
    53-line traceback; groups of 1 play one episode at a time."""
    with guess_server(1) as url:
        with pytest.raises(ConfigError) as refused:
            play({"url": url}, 3, 2)
        message = " ".join(str(refused.value).split())
        assert "holds at most 1 session at once (its max_concurrent_envs; 1 in use)" in message
        assert "asked for 6 episodes at once" in message and "max_sessions" in message
        assert "ask for a group size (--k) of at most 1" in message
        with pytest.raises(ConfigError, match=r"plays at most 1 episode\(s\) at once"):
            play({"url": url, "max_sessions": 1}, 3, 2)
        assert play({"url": url}, 3, 1)[1] == [1.0] * 3
    with pytest.raises(ConfigError, match="max_sessions: expected an integer >= 1, got 0"):
        teamtr_env.make("openenv/Env-v0", url="http://127.0.0.1:9", max_sessions=0, **TEAM)
    with pytest.raises(ConfigError, match="max_sessions: caps a server's sessions"):
        teamtr_env.make("openenv/Env-v0", **IN_PROCESS, max_sessions=4, **TEAM)


def _unreachable_or_garbage(caplog: pytest.LogCaptureFixture) -> None:
    """No server, a page that is not JSON, JSON without a schema, a schema that is not one, and
    a server with a schema but no sessions: each named, with no ``Errno`` text."""
    nobody = f"http://127.0.0.1:{free_port()}"
    cases = {
        nobody: "cannot read the action schema at",
        "html": "it answered '<html>hello</html>', not JSON; is it an OpenEnv server?",
        "no action": "with no 'action'; is it an OpenEnv server?",
        "bad schema": "not a valid JSON schema",
    }
    pages = {
        "html": {"/schema": "<html>hello</html>"},
        "no action": {"/schema": "[1, 2]"},
        "bad schema": {"/schema": '{"action": {"type": 12}}'},
    }
    for case, said in cases.items():
        with garbage_server(pages.get(case, {})) as url:
            with pytest.raises(ConfigError) as refused:
                teamtr_env.make("openenv/Env-v0", url=url if case in pages else case, **TEAM)
            assert said in str(refused.value) and "Errno" not in str(refused.value)
    schema = json.dumps({"action": {"properties": {"guess": {"type": "integer"}}}})
    with garbage_server({"/schema": schema, "/metadata": '{"name": "Fake"}'}) as url:
        env = teamtr_env.make("openenv/Env-v0", url=url, **TEAM)
        with pytest.raises(ConfigError, match=f"the server at {url} did not start an episode"):
            env.reset(seed=0)


def _dies_mid_episode(caplog: pytest.LogCaptureFixture) -> None:
    """The server stops while an episode runs: the next action says so (exit 2 in the CLI)."""
    with guess_server(2) as url:
        env = teamtr_env.make("openenv/Env-v0", url=url, **TEAM)
        env.reset(seed=0)
    with pytest.raises(ConfigError) as refused:
        env.step('{"guess": 3}')
    message = str(refused.value)
    assert f"the server at {url} failed in an episode" in message and "still running?" in message
    assert "Errno" not in message


@pytest.mark.parametrize(
    "fault",
    [_full_by_default, _max_sessions, _groups_larger_than_the_server, _unreachable_or_garbage,
     _dies_mid_episode],
    ids=lambda f: f.__name__.strip("_"),
)  # fmt: skip
def test_a_server_with_fewer_sessions_than_a_batch_plays_it_in_blocks_or_says_why_not(
    fault: Callable[[pytest.LogCaptureFixture], None], caplog: pytest.LogCaptureFixture
) -> None:
    """E4: 40 problems x k=2 against a server with 64 sessions ended in a 53-line traceback
    (``CAPACITY_REACHED``). Now the batch is played in blocks that fit (the server's capacity by
    default, learned from its refusal before any policy call; ``max_sessions`` when set), and
    what cannot fit says the capacity, the sessions asked for and the option to set."""
    fault(caplog)


# -- I1: in-process environments are closed -------------------------------------------------------


def test_every_episode_closes_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """I1: ``Environment.close()`` was called 0 times in 6 episodes. Now once per episode, at
    its end (done or truncated), on a reset mid-episode and on ``TeamEnv.close()``; a served
    session is ended the same way, so a one-session server serves episode after episode."""
    import guess_env

    made = count_made(monkeypatch)
    closed: list[object] = []
    monkeypatch.setattr(guess_env.GuessEnv, "close", lambda self: closed.append(self))
    play(IN_PROCESS, 3, 2)  # solved: done
    play({**IN_PROCESS}, 2, 1, Runner(_truncating, Bisect(), progress=False))  # turn limit
    assert len(made) == 8 and sorted(map(id, closed)) == sorted(map(id, made))  # once each
    env = teamtr_env.make("openenv/Env-v0", **IN_PROCESS, **TEAM)
    env.reset(seed=0)
    env.reset(seed=1)  # the first episode is left: its environment is closed
    env.close()
    assert len(made) == 10 and sorted(map(id, closed)) == sorted(map(id, made))
    with guess_server(1) as url:
        env = teamtr_env.make("openenv/Env-v0", url=url, **TEAM)
        for seed in range(3):  # each reset ends the session before it
            env.reset(seed=seed)
            env.step('{"guess": 5}')
        env.close()
        assert play({"url": url}, 2, 1)[1] == [1.0, 1.0]


def _truncating() -> Any:
    return teamtr_env.make("openenv/Env-v0", **IN_PROCESS, **{**TEAM, "max_turns": 1})


# -- I2: an invalid action gets the same reason served and in process ------------------------------


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("probably 12", "12 as guess does not fit the action: 12 is greater than the maximum of 9"),
        ("-3", "-3 as guess does not fit the action: -3 is less than the minimum of 0"),
        ("3.5", "guess is an integer, and the message's last number is 3.5"),
        ("9" * 5000, "its number has over 30 digits"),
        ('{"guess": ' + "9" * 5000 + "}", "its JSON does not parse"),
    ],
    ids=["number-above-maximum", "below-minimum", "fraction", "5000-digits", "json-5000"],
)
def test_an_invalid_action_gets_the_same_reason_served_and_in_process(
    message: str, reason: str
) -> None:
    """I2: a served invalid action told the model only ``VALIDATION_ERROR``; in process it got
    pydantic's reason. Now every form of an action is checked against the schema's ``minimum``
    and ``maximum`` before it is stepped, so both say the same thing, and neither steps."""
    told = []
    with guess_server(2) as url:
        for options in (IN_PROCESS, {"url": url}):
            env = teamtr_env.make("openenv/Env-v0", **options, **TEAM, max_message_chars=10_000)
            env.reset(seed=3)
            env.step(message)
            told.append(env.transcript[-1].text)
            assert env.problem is not None
            env.step(f'{{"guess": {env.problem.data["seed"] % 10}}}')
            assert env.score is not None and env.score.details["invalid_actions"] == 1
            assert env.score.details["steps"] == 1 and env.score.reward == 1.0
    assert told[0] == told[1] and reason in told[0] and told[0].startswith("not an action (")


# -- I3: one naming rule; a task id of its own --------------------------------------------------------


def test_an_environment_has_one_name_served_and_in_process_and_a_plugin_gives_it_an_id() -> None:
    """I3: the same environment was ``openenv/CountAction:<seed>`` served and
    ``openenv/CountEnvironment:<seed>`` in process, so their problems and splits differed. Now
    both take the environment's OpenEnv name (``get_metadata().name``: the class's unless it
    says otherwise); a plugin entry registers it under an id of its own, and an environment
    that cannot be imported says that its module must be on PYTHONPATH."""

    def ids(options: dict[str, str]) -> list[str]:
        make = lambda: teamtr_env.make("openenv/Env-v0", **options, **TEAM)  # noqa: E731
        return [p.id for p in Runner(make, Bisect(), progress=False).sample_problems(4)]

    for env_class, name in (("GuessEnv", "GuessEnv"), ("NamedGuessEnv", "DigitGuess")):
        with guess_server(1, env_class) as url:
            served = ids({"url": url})
        in_process = ids({**IN_PROCESS, "env": f"guess_env:{env_class}"})
        assert served == in_process and served[0].startswith(f"openenv/{name}:")
    plugin = metadata.EntryPoint("mylab", "guess_env:register", "teamtr_env.tasks")
    registry = Registry(entry_points=lambda: [plugin])
    runner = Runner(lambda: registry.make("mylab/Guess-v0"), Bisect(), progress=False)
    assert play({}, 4, 1, runner)[1] == [1.0] * 4
    with pytest.raises(ConfigError) as refused:
        teamtr_env.make("openenv/Env-v0", env="mylab_envs:GuessEnv", action="mylab_envs:A")
    assert "the module must be importable where teamtr runs" in str(refused.value)
    assert "add its folder to PYTHONPATH" in str(refused.value)
