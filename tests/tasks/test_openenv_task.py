"""``openenv/Env-v0``: an OpenEnv environment as a team task, in process and served by OpenEnv's
own ``create_app`` on 127.0.0.1 (started here): the actor's messages parsed against the action
schema, observations and rewards back as environment messages, the episodes the same both ways."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers_openenv import FIXTURES, IN_PROCESS, TEAM, Bisect, guess_server
from pettingzoo.test import api_test, seed_test

import teamtr_env
from tasks.openenv import parse_action
from teamtr_core.errors import ConfigError
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


@pytest.fixture
def server() -> Iterator[str]:
    """The guess environment served by OpenEnv's create_app under uvicorn on 127.0.0.1."""
    with guess_server(16) as url:
        yield url


def rewards(env_options: dict, policy: Bisect, seed: int = 0) -> list[float]:
    make = lambda: teamtr_env.make("openenv/Env-v0", **env_options, **TEAM)  # noqa: E731
    runner = Runner(make, policy, progress=False)
    batch = runner.rollout(runner.sample_problems(6, seed=seed), group_size=2, seed=seed)
    return [episode.reward for episode in batch.episodes]


def test_an_in_process_environment_is_a_team_task() -> None:
    env = teamtr_env.make("openenv/Env-v0", **IN_PROCESS, **TEAM)
    env.reset(seed=1)
    first = env.observe("player")["text"]
    assert "Guess a digit from 0 to 9." in first and "'guess': 'integer'" in first
    assert rewards(IN_PROCESS, Bisect()) == [1.0] * 12  # bisection finds any digit in 4 tries
    assert rewards(IN_PROCESS, Bisect(plain=True)) == [1.0] * 12  # a one-number action
    api_test(teamtr_env.make("openenv/Env-v0", **IN_PROCESS, **TEAM), num_cycles=20)
    seed_test(lambda: teamtr_env.make("openenv/Env-v0", **IN_PROCESS, **TEAM), num_cycles=10)


def test_a_server_made_by_openenvs_create_app_is_a_team_task(server: str) -> None:
    remote = {"url": server}
    env = teamtr_env.make("openenv/Env-v0", **remote, **TEAM)
    assert env.task.name == "openenv/GuessEnv"  # the in-process name: one naming rule (I3)
    assert rewards(remote, Bisect(), seed=3) == rewards(IN_PROCESS, Bisect(), seed=3) == [1.0] * 12
    env.reset(seed=4)
    env.step('{"guess": 12}')  # outside the schema's 0-9: answered, not stepped
    env.step("I think it is a high digit")  # a number-less message: the plain form has none
    context = env.observe("player")["text"]
    assert "not an action" in context and "maximum" in context
    assert env.problem is not None
    env.step(f'{{"guess": {env.problem.data["seed"] % 10}}}')  # the seed's last digit
    assert "right" in env.observe("player")["text"]
    assert env.episode_over and env.score is not None and env.score.reward == 1.0
    assert env.score.details["invalid_actions"] == 2 and env.score.details["steps"] == 1


def test_actions_are_parsed_against_the_schema() -> None:
    schema = {
        "properties": {"guess": {"type": "integer", "maximum": 9}, "metadata": {}},
        "required": ["guess"],
        "additionalProperties": False,
    }
    assert parse_action('I say ```json\n{"guess": 3}\n```', schema) == ({"guess": 3}, None)
    assert parse_action("probably 7", schema) == ({"guess": 7}, None)
    none, why = parse_action('{"guess": "x"}', schema)
    assert (
        none is None
        and why is not None
        and "does not fit the action" in why
        and "'guess': 'integer'" in why
    )
    assert parse_action("{not json", schema)[0] is None
    text_schema = {"properties": {"message": {"type": "string"}}, "required": ["message"]}
    assert parse_action("  hello there ", text_schema) == ({"message": "hello there"}, None)


def test_bad_options_are_clear() -> None:
    with pytest.raises(ConfigError, match="give url .* or env"):
        teamtr_env.make("openenv/Env-v0")
    with pytest.raises(ConfigError, match="env needs action"):
        teamtr_env.make("openenv/Env-v0", env="guess_env:GuessEnv")
    with pytest.raises(ConfigError, match="cannot import"):
        teamtr_env.make("openenv/Env-v0", env="nowhere:Env", action="nowhere:Action")
    with pytest.raises(ConfigError, match="cannot read the action schema"):
        teamtr_env.make("openenv/Env-v0", url="http://127.0.0.1:9")


@pytest.mark.slow
def test_the_command_line_evaluates_it(tmp_path: Path) -> None:
    """``teamtr eval openenv/Env-v0 ...`` with a random team (whose text holds a digit now and
    then: a plain-number action); the scripted default is refused with the reason."""
    import json
    import os
    import subprocess
    import sys

    teamtr = str(Path(sys.executable).parent / "teamtr")
    options = [
        "-o", 'env="guess_env:GuessEnv"', "-o", 'action="guess_env:GuessAction"',
        "-o", 'agents=["player"]', "-o", 'actor="player"',
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(FIXTURES), "COLUMNS": "200"}
    run = lambda *more: subprocess.run(  # noqa: E731
        [teamtr, "eval", "openenv/Env-v0", *options, *more],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env,
    )  # fmt: skip
    proc = run("--policy", "random", "--k", "2", "--problems", "5", "--out", "r.json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["n_problems"] == 5 and 0.0 <= report["metrics"]["avg@2"]["mean"] <= 1.0
    proc = run("--k", "2")
    assert proc.returncode == 2 and "has no scripted expert" in proc.stderr


def test_openenv_is_imported_without_its_gradio_web_interface() -> None:
    """``import_openenv_core`` (what teamtr's OpenEnv code imports through): OpenEnv without
    Gradio, 6 s of its 8 s import; Gradio stays importable afterwards, and an OpenEnv that is
    missing for another reason is reported, not hidden (below). In a new interpreter: this one
    may have imported OpenEnv already."""
    import subprocess
    import sys

    script = (
        "import importlib.util, sys\n"
        "from tasks.openenv.importing import import_openenv_core\n"
        "core = import_openenv_core()\n"
        "assert core is sys.modules['openenv.core'] and callable(core.create_app)\n"
        "assert core.create_web_interface_app is None and 'gradio' not in sys.modules\n"
        "assert importlib.util.find_spec('gradio') is not None\n"
        "assert import_openenv_core() is core\n"
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


def test_an_openenv_import_error_that_is_not_gradio_is_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys
    from types import SimpleNamespace

    from tasks.openenv import importing

    def missing(name: str) -> object:
        raise ModuleNotFoundError("No module named 'fastapi'", name="fastapi")

    monkeypatch.delitem(sys.modules, "openenv.core", raising=False)
    monkeypatch.delitem(sys.modules, "gradio", raising=False)
    monkeypatch.setattr(importing, "importlib", SimpleNamespace(import_module=missing))
    with pytest.raises(ModuleNotFoundError, match="fastapi"):
        importing.import_openenv_core()
    assert "gradio" not in sys.modules  # the stand-in is gone
