"""``TeamEnv``: a PettingZoo AEC environment of a turn-taking team sharing one textual context.

At each turn a router picks the single active agent; its action is a message (any text). The
message is cleaned and appended to the shared context; an interactive task may answer it with an
environment message. When the task says the episode is over, or the turn limit is reached, the task
scores the episode and the team reward goes to every agent.

Observations are ``{"observation": int64[3], "text": str}``: ``observation`` holds
``[turn, index of the observing agent, turns left]`` and ``text`` is the rendered context the agent
would see (system prompt, problem, messages so far, a cue line with its name).

A game whose players see different things (``tasks.capabilities.SupportsSeats``: a TextArena card game)
picks the active agent itself and gives each agent its own view in place of the shared context.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

from tasks.base import Episode, Message, Problem, Score, Task
from tasks.capabilities import (
    SupportsClose,
    SupportsLocalRewards,
    SupportsOpening,
    SupportsSeats,
    SupportsTeamCheck,
)
from teamtr_core.errors import ConfigError, EpisodeOverError
from teamtr_env.context import ContextHistory
from teamtr_env.protocol import TeamProtocol
from teamtr_env.router import FixedOrder, RouterLike, RouterState, TranscriptView, make_router
from teamtr_env.spaces import SAMPLE_CHARSET, UnicodeText


class TeamEnv(AECEnv):
    """A turn-taking, shared-context team over a task plugin.

    Args:
        task: the task plugin (see ``tasks.Task``).
        protocol: the team protocol (agents, system prompts, limits); default three agents.
        router: ``None`` (round robin), a list of agent names (fixed order), a callable
            ``fn(RouterState) -> name`` or a ``Router``.
        problems: optional fixed problem set; ``reset(seed=s)`` then draws from it instead of the
            task's generator. ``reset(options={"problem": p})`` always plays ``p``.
        render_mode: ``"human"`` (print) or ``"ansi"`` (return the transcript) or ``None``.

    Raises:
        ConfigError: listing every invalid argument at once.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "teamtr_team_v0",
        "render_modes": ["human", "ansi"],
        "is_parallelizable": False,
    }

    def __init__(
        self,
        task: Task,
        protocol: TeamProtocol | None = None,
        router: RouterLike = None,
        problems: Sequence[Problem] | None = None,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        self.task = task
        self.protocol = protocol if protocol is not None else TeamProtocol()
        self.router = make_router(router)
        problems_list = list(problems) if problems is not None else None
        errors = []
        if isinstance(self.router, FixedOrder):
            errors += self.router.check(self.protocol.agents)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            errors.append(
                f"render_mode: expected one of {self.metadata['render_modes']} or None, got {render_mode!r}"
            )
        if self.protocol.final_answer == "majority" and (
            getattr(task, "interactive", False) or not callable(getattr(task, "grade", None))
        ):
            errors.append(
                "final_answer: 'majority' needs a single-answer task with grade(problem, text); "
                f"{getattr(task, 'name', task)!r} is not one"
            )
        if problems_list is not None and not problems_list:
            errors.append("problems: expected a non-empty problem set or None, got an empty one")
        self._seated = isinstance(task, SupportsSeats)
        if isinstance(task, SupportsSeats):
            errors += _seat_errors(task, self.protocol, router)
        if isinstance(task, SupportsTeamCheck):  # e.g. an OpenEnv task's actor among the agents
            errors += task.team_errors(list(self.protocol.agents))
        if errors:
            raise ConfigError("TeamEnv", errors)
        self.render_mode = render_mode
        self.spec: Any = None  # the TaskSpec when built by teamtr_env.make
        self.problems = problems_list
        self.possible_agents = list(self.protocol.agents)
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        self._spaces: tuple[dict[str, spaces.Space], dict[str, spaces.Space]] | None = None
        self._rng = np.random.default_rng()
        self.problem: Problem | None = None
        self.transcript: list[Message] = []
        self.score: Score | None = None
        self.local_rewards: dict[str, float] = {}
        self.turn = 0
        self.agents: list[str] = []

    # -- PettingZoo API -----------------------------------------------------------------------
    @property
    def observation_spaces(self) -> dict[str, spaces.Space]:
        """Each agent's observation space (built on first use: a runner builds hundreds of
        environments and never reads them)."""
        return self._agent_spaces()[0]

    @property
    def action_spaces(self) -> dict[str, spaces.Space]:
        """Each agent's action space: a message of at most ``max_message_chars`` characters."""
        return self._agent_spaces()[1]

    def _agent_spaces(self) -> tuple[dict[str, spaces.Space], dict[str, spaces.Space]]:
        if self._spaces is None:
            limit = self.protocol.turn_limit
            obs_space = spaces.Dict(
                {
                    "observation": spaces.Box(
                        0, max(limit, len(self.possible_agents)), (3,), np.int64
                    ),
                    "text": UnicodeText(
                        self.protocol.max_context_chars, min_length=0, charset=SAMPLE_CHARSET
                    ),
                }
            )
            act_space = UnicodeText(
                self.protocol.max_message_chars, min_length=0, charset=SAMPLE_CHARSET
            )
            # One cached object per agent: seeding a space must stick (PettingZoo api_test).
            self._spaces = (
                {a: obs_space for a in self.possible_agents},
                {a: act_space for a in self.possible_agents},
            )
        return self._spaces

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: Mapping[str, Any] | None = None) -> None:
        """Starts an episode. ``options={"problem": Problem | dict}`` plays that problem."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.problem = self._choose_problem(options or {})
        self._prompt = self.task.prompt(self.problem)
        self._state = self.task.start(self.problem, self._rng)
        self.transcript = []
        self._origin: list[tuple[str, int]] = []  # per message: (the turn's agent, turn)
        self._history = ContextHistory(self.protocol)
        self.score = None
        self.local_rewards = {}
        self.turn = 0
        self._notes: list[dict[str, Any]] = []
        self._context_truncated = False
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: self._step_info() for a in self.agents}
        if isinstance(self.task, SupportsOpening):  # e.g. an external environment's first view
            opening = self.task.opening(self._state)
            if opening is not None:
                cleaned = self.protocol.clean(opening)
                self._record(Message("env", self.task.name, cleaned.text), self.possible_agents[0])
        self.agent_selection = self._route()

    def observe(self, agent: str) -> dict[str, Any]:
        turns_left = self.protocol.turn_limit - self.turn
        numeric = np.array([self.turn, self._index[agent], turns_left], dtype=np.int64)
        return {"observation": numeric, "text": self.context(agent)}

    def step(self, action: Any) -> None:
        """Plays the active agent's message. Any text is accepted; see ``TeamProtocol.clean``."""
        if not self.agents:
            raise EpisodeOverError(
                "step() called with no live agents: the episode is over (or reset() was never "
                "called). Call reset() to start a new episode."
            )
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        cleaned = self.protocol.clean(action)
        self._record(Message("agent", agent, cleaned.text), agent)
        if cleaned.notes:
            self._notes.append({"turn": self.turn, "speaker": agent, "notes": list(cleaned.notes)})
        feedback = self.task.respond(self._state, agent, cleaned.text)
        if feedback is not None:
            env_msg = self.protocol.clean(feedback)
            self._record(Message("env", self.task.name, env_msg.text), agent)
            if env_msg.notes:
                self._notes.append(
                    {"turn": self.turn, "speaker": "env", "notes": list(env_msg.notes)}
                )
        self.turn += 1
        task_done = bool(self.task.done(self._state))
        if task_done or self.turn >= self.protocol.turn_limit:
            # Hitting the turn limit is a truncation for interactive tasks (they were not done) and the
            # natural end for single-answer tasks.
            interactive = bool(getattr(self.task, "interactive", False))
            self._finish(truncated=interactive and not task_done)
        else:
            self.agent_selection = self._route()
            for a in self.agents:
                self.infos[a] = self._step_info()
        self._accumulate_rewards()
        if self.render_mode == "human":
            self.render()

    def render(self) -> str | None:
        text = self.transcript_text()
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        """Releases what the task holds for the current episode (``tasks.SupportsClose``: an
        OpenEnv environment or server session); the next ``reset`` starts afresh."""
        if isinstance(self.task, SupportsClose):
            self.task.close()

    # -- helpers ------------------------------------------------------------------------------
    def context(self, agent: str) -> str:
        """The rendered shared context as ``agent`` sees it (the observation's ``text``).

        Each message is rendered once, when it is played, so a context costs the same at turn 5
        and at turn 5000; the text is exactly ``protocol.render(prompt, <the messages agent
        sees>, agent)``, which is called instead when a protocol subclass overrides ``render`` or
        ``sees``, or when messages were added to or removed from ``transcript`` other than by
        ``step``.
        """
        if self.problem is None:
            raise EpisodeOverError("No episode yet: call reset() before observing.")
        if self._seated:  # the game's own view of this player
            own_prompt, seen = self.task.view(self._state, agent)  # type: ignore[attr-defined]
            text, truncated = self.protocol.render(own_prompt, seen, agent)
            self._context_truncated |= truncated
            return text
        prompt = self._prompt if self.protocol.shows_prompt(agent, self.turn) else None
        if self._incremental():
            text, truncated = self._history.render(prompt, agent, self.turn)
        else:
            shown: Sequence[Message] = self.transcript
            if self.protocol.visibility != "all":
                shown = [
                    m
                    for m, (owner, turn) in zip(self.transcript, self._origin)
                    if self.protocol.sees(agent, self.turn, owner, turn)
                ]
            text, truncated = self.protocol.render(prompt, shown, agent)
        self._context_truncated |= truncated
        return text

    @property
    def context_truncated(self) -> bool:
        """Whether an agent's context was cut to ``max_context_chars`` in this episode so far."""
        return bool(getattr(self, "_context_truncated", False))

    @property
    def episode_over(self) -> bool:
        """True once the episode has been scored (before the agents' dead steps)."""
        return self.score is not None

    def transcript_text(self) -> str:
        """A readable transcript: the prompt, then every message with its speaker."""
        lines = [f"[{self.protocol.header.lower()}] {self._prompt}"] if self.problem else []
        lines += [f"[{m.speaker}] {m.text}" for m in self.transcript]
        if self.score is not None:
            lines.append(
                f"[score] reward={self.score.reward} correct={self.score.correct} answer={self.score.answer!r}"
            )
        return "\n".join(lines)

    def final_text(self) -> str | None:
        """The final agent's last message, or ``None`` if it never spoke."""
        for message in reversed(self.transcript):
            if message.role == "agent" and message.speaker == self.protocol.final_agent:
                return message.text
        return None

    def _majority_vote(self) -> tuple[str | None, Score]:
        """Grades each voter's last message and keeps the most common extracted answer."""
        assert self.problem is not None
        last: dict[str, str] = {}
        for message in self.transcript:
            if message.role == "agent" and message.speaker not in self.protocol.full_view:
                last.pop(message.speaker, None)  # re-insert: order by each agent's last message
                last[message.speaker] = message.text
        grade = self.task.grade  # type: ignore[attr-defined]
        graded = [(text, grade(self.problem, text)) for text in last.values()]
        if not graded:
            return None, Score(0.0, False, None, {"reason": "no_final_message", "votes": {}})
        votes: dict[str, int] = {}
        for _, score in graded:
            if score.answer is not None:
                votes[str(score.answer)] = votes.get(str(score.answer), 0) + 1
        if not votes:
            text, score = graded[-1]
        else:
            best = max(votes.values())
            winner = next(a for a, c in votes.items() if c == best)  # ties: the earliest
            text, score = next((t, s) for t, s in graded if str(s.answer) == winner)
        details = {**dict(score.details), "aggregation": "majority", "votes": votes}
        return text, Score(score.reward, score.correct, score.answer, details)

    def _record(self, message: Message, owner: str) -> None:
        """Appends a message of this turn (owned by the turn's agent) to the transcript."""
        self.transcript.append(message)
        self._origin.append((owner, self.turn))
        self._history.append(message, owner, self.turn)

    def _incremental(self) -> bool:
        """Whether ``context`` may use the incremental history: the protocol renders and filters
        as ``TeamProtocol`` does, and the transcript holds exactly the messages ``step`` played."""
        kind = type(self.protocol)
        return (
            kind.render is TeamProtocol.render
            and kind.sees is TeamProtocol.sees
            and len(self._history) == len(self.transcript) == len(self._origin)
        )

    def _choose_problem(self, options: Mapping[str, Any]) -> Problem:
        problem = options.get("problem")
        if isinstance(problem, Problem):
            return problem
        if isinstance(problem, Mapping):
            return Problem.from_dict(problem)
        if problem is not None:
            raise ConfigError(
                "reset options",
                [f"problem: expected a Problem or a dict, got {type(problem).__name__}"],
            )
        if self.problems is not None:
            return self.problems[int(self._rng.integers(len(self.problems)))]
        return self.task.sample(self._rng)

    def _route(self) -> str:
        if self._seated:
            agent = self.task.to_act(self._state)  # type: ignore[attr-defined]
            who = "the game"
        else:
            transcript = TranscriptView(self.transcript)  # not a copy: routing stays O(1)
            state = RouterState(self.turn, tuple(self.possible_agents), transcript, self._rng)
            agent = self.router.select(state)
            who = "router"
        if agent not in self._index:
            raise ConfigError(
                who, [f"selected {agent!r}, which is not one of the agents {self.possible_agents}"]
            )
        return agent

    def _step_info(self) -> dict[str, Any]:
        assert self.problem is not None
        return {"problem_id": self.problem.id, "turn": self.turn}

    def _score_locally(self, final_text: str | None) -> str | None:
        """Each agent's local reward from a task that gives them (:class:`SupportsLocalRewards`)
        into ``self.local_rewards``; what went wrong, if anything: a task error or a value that is
        not a finite number for a known agent gives no local rewards for the episode."""
        if not isinstance(self.task, SupportsLocalRewards):
            return None
        assert self.problem is not None
        episode = Episode(self.problem, tuple(self.transcript), final_text, self._state)
        try:
            given = dict(self.task.local_rewards(episode))
        except Exception as exc:  # like a verifier bug: logged in the info, never fatal
            return f"local_rewards raised {exc!r:.300}"
        bad = [
            f"{agent!r}: {value!r:.40}"
            for agent, value in given.items()
            if agent not in self._index
            or isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ]
        if bad:
            return "local_rewards: not a finite number for an agent of the team: " + ", ".join(bad)
        self.local_rewards = {agent: float(value) for agent, value in given.items()}
        return None

    def _finish(self, truncated: bool) -> None:
        assert self.problem is not None
        final_text = self.final_text()
        try:
            if self.protocol.final_answer == "majority":
                final_text, self.score = self._majority_vote()
            else:
                episode = Episode(self.problem, tuple(self.transcript), final_text, self._state)
                self.score = self.task.score(episode)
        except Exception as exc:  # a verifier bug must not kill a long rollout; it scores 0, logged
            self.score = Score(
                0.0, False, None, {"reason": "verifier_error", "error": repr(exc)[:500]}
            )
        local_error = self._score_locally(final_text)
        reward = float(self.score.reward)
        info = {
            "problem_id": self.problem.id,
            "turn": self.turn,
            "transcript": [m.to_dict() for m in self.transcript],
            "score": self.score.to_dict(),
            "final_text": final_text,
            "message_notes": list(self._notes),
            "context_truncated": self._context_truncated,
            "turn_limit_reached": self.turn >= self.protocol.turn_limit,
        }
        if isinstance(self.task, SupportsLocalRewards):
            info["local_rewards"] = dict(self.local_rewards)
            if local_error:
                info["local_rewards_error"] = local_error
        for a in self.agents:
            self.rewards[a] = reward
            self.terminations[a] = not truncated
            self.truncations[a] = truncated
            self.infos[a] = dict(info)
        self._deads_step_first()


def _seat_errors(task: SupportsSeats, protocol: TeamProtocol, router: RouterLike) -> list[str]:
    """What a game with seats (``SupportsSeats``) refuses: agents other than its seats, and a
    router (the game says who acts)."""
    errors = []
    seats = list(task.seats())
    if list(protocol.agents) != seats:
        errors.append(
            f"agents: {getattr(task, 'name', 'this game')} seats the agents {seats} (in that "
            f"order); got {list(protocol.agents)}. Leave agents unset, or change the game's "
            "options (e.g. num_players)"
        )
    if router is not None:
        errors.append("router: the game decides who acts; leave router unset")
    return errors
