"""``textarena/<Game>-v0``: a TextArena game as a team task, one agent per player.

Each TextArena player is a seat of the team (``player0``, ``player1``, ...). The game says who
acts (``current_player_id``: a player who made an invalid move gets another try), and each agent
sees what TextArena shows that player: the game's prompt for it and every message it has been
shown since (in Hanabi, every hand but its own). The agent's message is its action, and the
team reward is the game's shared outcome, normalised to [0, 1] (each game's module says how).

A problem is a deal: ``data["seed"]`` seeds the game. TextArena draws its randomness from
Python's global ``random`` (``State(seed)`` calls ``random.seed``), so every call into a game runs
on that game's own saved random state and gives the caller's back (:class:`OwnRandom`): episodes
played in lockstep do not change each other's deals or draws, nor anyone else's ``random``.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import random
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tasks.base import (
    InteractiveTask,
    Message,
    Problem,
    Score,
    TaskConfigError,
    UnknownOptionsError,
    is_int,
)
from tasks.textarena.catalogue import GAMES, Game, unavailable_reason
from tasks.textarena.options import OptionsCheck

GAME_ID = -1
"""TextArena's sender id of the game's own messages."""


_GLOBAL_RANDOM = threading.RLock()
"""Held while a game runs on Python's global ``random``: games served to concurrent sessions
(``teamtr serve``'s threads) take turns with it."""


class OwnRandom:
    """A game's own state of Python's global ``random``: :meth:`active` runs a block on it and
    restores the caller's state after, whatever the block does to ``random`` (one thread at a
    time)."""

    def __init__(self, seed: int) -> None:
        with _GLOBAL_RANDOM:
            saved = random.getstate()
            random.seed(seed)
            self.state = random.getstate()
            random.setstate(saved)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        with _GLOBAL_RANDOM:
            saved = random.getstate()
            random.setstate(self.state)
            try:
                yield
            finally:
                self.state = random.getstate()
                random.setstate(saved)


@dataclass
class Match:
    """One episode's game: the TextArena environment, its random state, and what each player has
    been shown (the game's prompt for it and the messages since)."""

    env: Any
    rng: OwnRandom
    seats: list[str]
    prompts: dict[str, str | None] = field(default_factory=dict)
    seen: dict[str, list[Message]] = field(default_factory=dict)
    done: bool = False
    steps: int = 0
    invalid_moves: int = 0
    invalid: bool = False  # whether the move being played was invalid (see watch_invalid_moves)
    error: str | None = None  # what the game's code raised on a move (the game ends there)
    opponent_rng: Any = None  # the opponent seats' moves (a generator seeded by the deal)

    def watch_invalid_moves(self) -> None:
        """Marks every invalid move (:attr:`invalid`) as the game rules it one. TextArena tells
        its state of each (``set_invalid_move``) but sends the player a notice only while the
        player has another try left: a second invalid move in a row (Hanabi) or a third
        (PublicGoods) sends none, so counting the notices would miss them."""
        state = self.env.state
        rule = state.set_invalid_move

        def ruled_invalid(*args: Any, **kwargs: Any) -> Any:
            self.invalid = True
            return rule(*args, **kwargs)

        state.set_invalid_move = ruled_invalid

    def collect(self) -> None:
        """Moves the observations TextArena queued for each player into what it has seen."""
        queued = self.env.state.observations
        for pid, seat in enumerate(self.seats):
            for sender, text, kind in queued.get(pid, ()):
                if getattr(kind, "name", "") == "PROMPT" and self.prompts.get(seat) is None:
                    self.prompts[seat] = str(text)
                elif sender == GAME_ID:
                    self.seen[seat].append(Message("env", "game", str(text)))
                else:
                    speaker = self.seats[sender] if 0 <= sender < len(self.seats) else str(sender)
                    self.seen[seat].append(Message("agent", speaker, str(text)))
            queued[pid] = []


@dataclass(frozen=True)
class Players:
    """A game's players by TextArena id: their names, and those the task plays itself (an
    opponent team: ``opponents``, by the game's scripted player) rather than the team's agents."""

    names: list[str]
    opponents: frozenset[str] = frozenset()


Scorer = Callable[[Any, Problem], tuple[float, dict[str, Any]]]
"""A game's team outcome from its finished (or truncated) environment: ``(reward in [0, 1],
details)``."""

Expert = Callable[[str, str, np.random.Generator, bool], str]
"""A game's scripted player: ``expert(seat, context, rng, make_error) -> action``."""


def _task_errors(spec: Game, count: Any, success: Any, split: Any, history: Any) -> list[str]:
    """What is wrong with the task's own options (not the game's)."""
    errors = []
    low, high = spec.players
    if not is_int(count) or not low <= count <= high:
        errors.append(
            f"num_players: {spec.name} is played by {low} to {high} players, got {count!r}"
        )
    if not isinstance(success, int | float) or not 0.0 < float(success) <= 1.0:
        errors.append(f"success: expected a reward in (0, 1], got {success!r}")
    if split not in ("train", "validation", "test"):
        errors.append(f"split: expected 'train', 'validation' or 'test', got {split!r}")
    if history not in ("all", "last_turn"):
        errors.append(f"history: expected 'all' or 'last_turn', got {history!r}")
    return errors


class TextArenaTask(InteractiveTask):
    """A TextArena game as a team task (``tasks.capabilities.SupportsSeats``).

    Args:
        game: the catalogue's name (:data:`tasks.textarena.catalogue.GAMES`).
        scorer: the game's team outcome (:data:`Scorer`).
        expert: the game's scripted player, or ``None``.
        num_players: the players, each a seat of the team.
        success: the reward at which an episode counts as solved (pass@k, avg@k).
        split: the split of generated deals.
        history: what a player is shown besides the game's prompt: ``"all"`` (every message
            since the start, as TextArena's own wrappers show it) or ``"last_turn"`` (from its own
            last move on: a game that restates its board every turn needs no more, and a long
            game's context stays short).
        game_options: the TextArena environment's own keyword arguments.
        env_class: the TextArena environment class (default: the catalogue's ``entry``).
        players: the players' names, and the opponents the task plays itself (default:
            ``player0``, ``player1``, ... all of them the team's).
        opponent_error_rate: how often the opponents' scripted moves are wrong.
        check_options: the game's check of ``game_options``' values
            (:data:`tasks.textarena.options.OptionsCheck`), run before any game.
        metrics: the score details whose means an evaluation reports beside the team reward's
            (:meth:`aggregate_details`), e.g. Hanabi's ``fireworks_score``.

    Raises:
        TaskConfigError: every bad argument and option at once (an unknown option name:
            :class:`tasks.base.UnknownOptionsError`), or the reason the game cannot run here.
    """

    def __init__(
        self,
        game: str,
        *,
        scorer: Scorer,
        expert: Expert | None = None,
        num_players: int | None = None,
        success: float = 1.0,
        split: str = "train",
        history: str = "all",
        game_options: dict[str, Any] | None = None,
        env_class: Callable[..., Any] | None = None,
        players: Players | None = None,
        opponent_error_rate: float = 0.0,
        check_options: OptionsCheck | None = None,
        metrics: Sequence[str] = (),
    ) -> None:
        spec: Game = GAMES[game]
        count = spec.default_players if num_players is None else num_players
        errors = _task_errors(spec, count, success, split, history)
        reason = unavailable_reason(game)
        if reason is not None:
            raise TaskConfigError(f"textarena/{game}-v0", [reason, *errors])
        if not isinstance(opponent_error_rate, int | float) or not 0 <= opponent_error_rate <= 1:
            errors.append(
                f"opponent_error_rate: expected a number in [0, 1], got {opponent_error_rate!r}"
            )
        if env_class is None:
            module, _, cls = spec.entry.partition(":")
            env_class = getattr(importlib.import_module(module), cls)
        options = dict(game_options or {})
        own = [p for p in inspect.signature(env_class.__init__).parameters if p != "self"]
        own = [p for p in own if p != "num_players"]  # the task's option, passed at reset
        problems = check_options(options) if check_options is not None else {}
        errors += problems.values()  # every bad value, with the unknown names below
        unknown = [k for k in options if k not in own and k not in problems]
        if unknown:
            accepted = [*own, "num_players", "success", "split", "history"]
            accepted += ["opponent_error_rate"] if players is not None else []  # a Players
            raise UnknownOptionsError(f"textarena/{game}-v0", unknown, accepted, errors)
        if errors:
            raise TaskConfigError(f"textarena/{game}-v0", errors)
        self.game = spec
        self.name = f"textarena/{game}-v0"
        self.description = spec.description
        self.num_players = int(count)
        self.success = float(success)
        self.split = split
        self.history = history
        self.game_options = options
        self.metrics = tuple(metrics)
        self._scorer = scorer
        self._expert = expert
        self._env_class = env_class
        self.players = players or Players([f"player{i}" for i in range(self.num_players)])
        self.opponent_error_rate = float(opponent_error_rate)

    # -- problems --------------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> Problem:
        def draw(r: np.random.Generator) -> Problem:
            seed = int(r.integers(0, 2**31 - 1))
            pid = f"{self.game.name.lower()}-{self.num_players}p-{seed}"
            return Problem(pid, {"seed": seed, "num_players": self.num_players}, None)

        return self.draw_in_split(rng, draw, self.split)  # type: ignore[arg-type]

    def check_problem(self, problem: Problem) -> list[str]:
        errors = []
        if not is_int(problem.data.get("seed")):
            errors.append("data['seed']: expected an integer, the game's seed")
        players = problem.data.get("num_players", self.num_players)
        if players != self.num_players:
            errors.append(
                f"data['num_players']: the deal is for {players} players; this task seats "
                f"{self.num_players} (-o num_players={players})"
            )
        return errors

    def prompt(self, problem: Problem) -> str:
        return (
            f"TextArena {self.game.name}, {self.num_players} players, deal {problem.data['seed']}: "
            "each player sees the game's own view."
        )

    # -- the game --------------------------------------------------------------------------------
    def seats(self) -> list[str]:
        return [n for n in self.players.names if n not in self.players.opponents]

    def start(self, problem: Problem, rng: np.random.Generator) -> Match:
        seed = int(problem.data["seed"])
        names = list(self.players.names)
        match = Match(self._env_class(**self.game_options), OwnRandom(seed), names)
        match.prompts = dict.fromkeys(names)
        match.seen = {name: [] for name in names}
        match.opponent_rng = np.random.default_rng([seed, 1])
        with match.rng.active():
            match.env.reset(num_players=self.num_players, seed=seed)
        match.watch_invalid_moves()  # reset made the game's state
        match.collect()
        self._play_opponents(match)
        return match

    def _play_opponents(self, match: Match) -> None:
        """Plays the seats the task holds (the opponent team) until a team seat is to act."""
        while not match.done and self.to_act(match) in self.players.opponents:
            name = self.to_act(match)
            prompt, seen = self.view(match, name)
            context = (prompt or "") + "".join(f"### {m.speaker}\n{m.text}\n" for m in seen)
            context += f"### {name}\n"
            rng = match.opponent_rng
            error = bool(rng.random() < self.opponent_error_rate)
            assert self._expert is not None
            self._step(match, self._expert(name, context, rng, error))

    def to_act(self, state: Match) -> str:
        return state.seats[int(state.env.state.current_player_id)]

    def view(self, state: Match, agent: str) -> tuple[str | None, list[Message]]:
        seen = state.seen.get(agent, [])
        if self.history == "last_turn":  # from this player's last move on
            last = max((i for i, m in enumerate(seen) if m.speaker == agent), default=0)
            seen = seen[last:]
        return state.prompts.get(agent), list(seen)

    def respond(self, state: Match, speaker: str, text: str) -> str | None:
        if state.done:
            return None
        self._step(state, text)
        self._play_opponents(state)
        return None

    def _step(self, state: Match, text: str) -> None:
        state.invalid = False
        with state.rng.active():
            try:
                done, _ = state.env.step(text)
            except Exception as exc:  # a move the game's own code trips on ends the game, scored
                state.error = f"{type(exc).__name__}: {exc}"[:300]
                done = True
        state.invalid_moves += int(state.invalid)  # a move, however often the game said so
        state.steps += 1
        state.done = bool(done)
        state.collect()

    def done(self, state: Match) -> bool:
        return bool(state.done)

    def score(self, episode: Any) -> Score:
        state = episode.state
        if not isinstance(state, Match):
            return Score(0.0, False, None, {"reason": "no_episode_state"})
        reward, details = self._scorer(state.env, episode.problem)
        reward = min(max(float(reward), 0.0), 1.0)
        solved = reward >= self.success
        details = {
            **details,
            "team_reward": reward,
            "game_over": state.done,
            "steps": state.steps,
            "invalid_moves": state.invalid_moves,
            "reason": "solved" if solved else ("game_over" if state.done else "turn_limit"),
        }
        if state.error is not None:
            details["reason"] = "game_error"
            details["error"] = state.error
        return Score(reward, solved, f"{reward:.4f}", details)

    def aggregate_details(self, details: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        """The evaluation report's task metrics: the means over the episodes of the team reward
        (``reward_mean``: a graded game's score, which pass@k and avg@k only threshold at
        ``success``), of the game's own :attr:`metrics` (``fireworks_score_mean``, out of 25)
        and of the invalid moves (``invalid_moves_mean``)."""
        out = {}
        for key in ("team_reward", *self.metrics, "invalid_moves"):
            values = [float(d[key]) for d in details if isinstance(d.get(key), int | float)]
            if values:
                name = "reward" if key == "team_reward" else key
                out[f"{name}_mean"] = sum(values) / len(values)
        return out


class TextArenaExpertTask(TextArenaTask):
    """A TextArena game with a scripted player (``tasks.capabilities.SupportsExpert``)."""

    def expert_reply(
        self,
        context: str,
        rng: np.random.Generator,
        *,
        make_error: bool,
        problem: Problem | None = None,
    ) -> str:
        assert self._expert is not None
        seat = context.rstrip().rsplit("### ", 1)[-1].strip()
        return self._expert(seat, context, rng, make_error)
