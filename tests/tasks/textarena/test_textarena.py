"""TextArena's cooperative games as team tasks (``textarena/<Game>-v0``): seats and private views,
the team reward read from the game state, isolation of Python's global ``random``, scripted
players, bad moves and bad options, and the games that cannot run here listed with reasons."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pettingzoo.test import api_test, seed_test

import teamtr_env
from adapters.scripted import ScriptedExpert
from tasks import SupportsExpert, SupportsSeats
from tasks.textarena import GAMES, OwnRandom, unavailable_reason
from teamtr_core.errors import ConfigError
from teamtr_env.evaluation import evaluate
from teamtr_env.runners import Runner

ADVISORY = (
    "Observation space for each agent probably",
    "Action space for each agent probably",
    "We recommend agents to be named",
    "Observation is not a NumPy array",
)
pytestmark = [pytest.mark.filterwarnings(f"ignore:{text}") for text in ADVISORY]


def play(env, moves: dict[str, list[str]] | None = None, seed: int = 0, expert=None):
    """Plays one episode: the scripted ``expert``'s moves, or each seat's scripted ``moves`` in
    turn; returns the env after the last step."""
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    turns: dict[str, int] = {}
    for agent in env.agent_iter():
        _, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        if expert is not None:
            text = env.observe(agent)["text"]
            action = expert.expert_reply(text, rng, make_error=False, problem=env.problem)
        else:
            said = moves[agent]
            action = said[turns.get(agent, 0) % len(said)]
            turns[agent] = turns.get(agent, 0) + 1
        env.step(action)
    return env


def test_a_game_seats_its_players_and_shows_each_its_own_view() -> None:
    env = teamtr_env.make("textarena/Hanabi-v0", num_players=3)
    assert isinstance(env.task, SupportsSeats) and isinstance(env.task, SupportsExpert)
    assert env.possible_agents == ["player0", "player1", "player2"]
    env.reset(seed=1)
    assert env.agent_selection == "player0"
    hands = env.task.start(env.problem, np.random.default_rng(0)).env.state.game_state
    hands = hands["player_hands"]
    views = {a: env.observe(a)["text"] for a in env.possible_agents}
    for agent, text in views.items():  # the acting player sees its teammates' cards, not its own
        assert text.endswith(f"### {agent}\n")
    first = views["player0"]
    assert "- Player 1 has cards:" in first and "- Player 0 has cards:" not in first
    assert f"card 0: {hands[1][0]}" in first
    assert "You are Player 1 in an 3-player Hanabi game" in views["player1"]


def test_two_and_three_player_hanabi_pass_pettingzoos_tests() -> None:
    for players in (2, 3):
        make = lambda p=players: teamtr_env.make(  # noqa: E731
            "textarena/Hanabi-v0", num_players=p, max_message_chars=300
        )
        api_test(make(), num_cycles=30)
        seed_test(make, num_cycles=20)


def test_the_hanabi_reward_is_the_fireworks_score() -> None:
    env = play(teamtr_env.make("textarena/Hanabi-v0", num_players=2), expert=_expert("Hanabi"))
    details = env.score.details
    assert details["game_over"] and details["reason"] in ("solved", "game_over")
    assert details["fireworks_score"] == sum(details["fireworks"].values())
    assert env.score.reward == pytest.approx(details["fireworks_score"] / 25)
    assert env.score.reward >= 0.4  # the convention plays well enough to count as solved


def test_public_goods_rewards_the_team_payoff() -> None:
    env = play(teamtr_env.make("textarena/PublicGoods-v0"), expert=_expert("PublicGoods"))
    assert env.score.reward == pytest.approx(1.0) and env.score.correct
    free_riders = {a: ["{hello}", "[0]"] for a in ["player0", "player1", "player2", "player3"]}
    moves = {a: ["{hello}"] * 3 + ["[0]"] for a in free_riders}
    env = play(teamtr_env.make("textarena/PublicGoods-v0", num_rounds=1), moves)
    assert env.score.reward == pytest.approx(1 / 1.5)  # everyone kept everything
    assert env.score.details["team_payoff"] == pytest.approx(4 * 20)


def _expert(game: str):
    return teamtr_env.make(f"textarena/{game}-v0").task


def test_games_do_not_touch_anyone_elses_random_state() -> None:
    """TextArena seeds and draws from Python's global random; a game runs on its own state, so
    the caller's draws are unchanged, and episodes played in lockstep end as each ends alone."""
    random.seed(7)
    expected = [random.random() for _ in range(3)]
    random.seed(7)
    play(teamtr_env.make("textarena/Hanabi-v0", num_players=2), expert=_expert("Hanabi"))
    assert [random.random() for _ in range(3)] == expected

    env_fn = lambda: teamtr_env.make("textarena/Hanabi-v0", num_players=2)  # noqa: E731
    runner = Runner(env_fn, ScriptedExpert(env_fn().task, seed=0), progress=False)
    problems = runner.sample_problems(4, seed=0)
    batch = runner.rollout(problems, group_size=1, seed=0)
    for problem, episode in zip(problems, batch.episodes):
        alone = env_fn()
        alone.reset(seed=0, options={"problem": problem})
        rng = np.random.default_rng(0)
        for agent in alone.agent_iter():
            _, _, terminated, truncated, _ = alone.last()
            if terminated or truncated:
                alone.step(None)
                continue
            text = alone.observe(agent)["text"]
            alone.step(alone.task.expert_reply(text, rng, make_error=False, problem=problem))
        assert episode.details["fireworks"] == alone.score.details["fireworks"]

    own = OwnRandom(1)
    with own.active():
        first = random.random()
    random.seed(1)
    assert first == random.random()  # a game's own random is seeded by its deal


def test_a_bad_move_is_an_outcome_and_a_crashing_game_ends_scored() -> None:
    env = teamtr_env.make("textarena/Hanabi-v0", num_players=2)
    garbage = {"player0": ["nonsense", "[Play] 9", "x" * 1900], "player1": ["[Discard] 7"]}
    play(env, garbage)
    assert env.score is not None and 0.0 <= env.score.reward <= 1.0
    assert env.score.details["invalid_moves"] > 0
    env = teamtr_env.make("textarena/Hanabi-v0", num_players=2)
    env.reset(seed=0)
    match = env._state

    def broken(action: str):
        raise KeyError("the game's own bug")

    match.env.step = broken
    env.step("[Play] 0")
    assert env.score is not None and env.score.details["reason"] == "game_error"
    assert "the game's own bug" in env.score.details["error"]


def test_bad_options_are_named_with_suggestions() -> None:
    with pytest.raises(ConfigError) as err:
        teamtr_env.make("textarena/Hanabi-v0", num_players=7, info_token=3, success=2)
    text = str(err.value)
    assert "2 to 5 players, got 7" in text and "success" in text
    assert "Did you mean 'info_tokens'?" in text
    with pytest.raises(ConfigError, match="seats the agents"):
        teamtr_env.make("textarena/Hanabi-v0", agents=["a", "b"])
    with pytest.raises(ConfigError, match="the game decides who acts"):
        teamtr_env.make("textarena/Hanabi-v0", router=["player0", "player1", "player2"])


def test_games_that_cannot_run_here_are_listed_with_their_reasons() -> None:
    assert unavailable_reason("Hanabi") is None and unavailable_reason("PublicGoods") is None
    stag = unavailable_reason("StagHunt")
    if sys.version_info < (3, 12):
        assert "Python 3.12 syntax" in stag
    assert "nltk" in unavailable_reason("Taboo") and unavailable_reason("Codenames") is None
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "teamtr"), "tasks", "textarena"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "250"},
    )
    assert proc.returncode == 0, proc.stderr
    for name in GAMES:
        assert f"textarena/{name}-v0" in proc.stdout
    assert "unavailable" in proc.stdout and "nltk" in proc.stdout
    with pytest.raises(ConfigError, match="nltk"):
        teamtr_env.make("textarena/Taboo-v0")


@pytest.mark.slow  # an evaluation of several games; each game's rules in this file's other tests
def test_the_scripted_evaluation_of_the_issue_runs(tmp_path: Path) -> None:
    """``teamtr eval textarena/Hanabi-v0 -o num_players=3 --policy scripted --error-rate 0.2
    --k 4``, as the docs give it; then the same team in Python, against the error-free one."""
    line = "eval textarena/Hanabi-v0 -o num_players=3 --policy scripted --error-rate 0.2 --k 4"
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "teamtr"), *line.split(), "--out", "r.json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "textarena/Hanabi-v0: policy=scripted, K=4, 100 distinct problems" in " ".join(
        proc.stdout.split()
    )
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["held_out"] and report["options"]["num_players"] == 3
    env_fn = lambda: teamtr_env.make("textarena/Hanabi-v0", num_players=3)  # noqa: E731
    runner = Runner(env_fn, ScriptedExpert(env_fn().task, error_rate=0.2, seed=0), progress=False)
    report = evaluate(runner, runner.sample_problems(40, seed=0), k=4)
    assert 0.1 < report.metrics["avg@4"].mean < 0.9
    perfect = Runner(env_fn, ScriptedExpert(env_fn().task, seed=0), progress=False)
    assert evaluate(perfect, perfect.sample_problems(40, seed=0), k=1).metrics["avg@1"].mean > (
        report.metrics["avg@4"].mean
    )


def test_codenames_runs_offline_with_its_own_word_list() -> None:
    """TextArena's Codenames calls nltk.download at import; the task imports it with downloads
    switched off and draws the board from teamtr's word list."""
    code = (
        "import nltk\n"
        "calls = []\n"
        "nltk.download = lambda *a, **k: calls.append(a)\n"
        "import teamtr_env\n"
        "env = teamtr_env.make('textarena/Codenames-v0')\n"
        "env.reset(seed=1)\n"
        "print(len(calls), env.possible_agents)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[0] == "0 ['spymaster', 'operative']"


def test_codenames_red_is_the_team_and_blue_a_scripted_opponent() -> None:
    from tasks.textarena.codenames import categories

    env = teamtr_env.make("textarena/Codenames-v0")
    env.reset(seed=2)
    words = {w for ws in categories().values() for w in ws}
    spymaster = env.observe("spymaster")["text"]
    board = [line.split() for line in spymaster.split("Codenames Words:\n")[-1].splitlines()[:25]]
    assert len(board) == 25 and all(row[0] in words and row[1] in "RBNA" for row in board)
    env.step("[fruit 1]")
    operative = env.observe("operative")["text"]
    assert "submitted [fruit 1]" in operative
    unlabelled = operative.split("Codenames Words:\n")[-1].splitlines()[:25]
    assert all(len(line.split()) == 1 for line in unlabelled)  # nothing revealed yet
    for error, opponent in ((0.0, 0.3), (0.3, 0.0)):
        env_fn = lambda o=opponent: teamtr_env.make(  # noqa: E731
            "textarena/Codenames-v0", opponent_error_rate=o
        )
        runner = Runner(
            env_fn, ScriptedExpert(env_fn().task, error_rate=error, seed=0), progress=False
        )
        mean = evaluate(runner, runner.sample_problems(20, seed=0), k=2).metrics["avg@2"].mean
        if error == 0.0:
            strong = mean
        else:
            assert mean < strong  # the noisier side loses more often
    # PettingZoo's api_test and seed_test: test_conformance.py, as for every registered id.
