"""The task plugin API: problems, messages, scores and the two kinds of task.

A *task* knows the problems, the rules and the verifier of one benchmark. It knows nothing of agents,
models or torch: the team environment (``teamtr_env.TeamEnv``) turns any task into a turn-taking,
shared-context multi-agent game.

Two kinds of task share one protocol (:class:`Task`):

* single-answer tasks (arithmetic, math, zebra puzzles, planning) implement ``sample``, ``prompt`` and
  ``grade``: the team talks, the final agent's message is graded. Subclass :class:`SingleAnswerTask`.
* interactive tasks (guessing games, tool use) also answer each message with environment feedback and
  decide when the episode is over. Subclass :class:`InteractiveTask`.

Everything that crosses the API (``Problem``, ``Message``, ``Score``) is a frozen dataclass of
JSON-serialisable fields so rollouts can be saved and sent to other processes. Problems are saved
and loaded in the project's JSONL format (:func:`save_problems`, :func:`load_problems`); reading
the rows of any data file, every bad line reported at once, is :mod:`tasks.data_files`.
"""

from __future__ import annotations

import abc
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from tasks.data_files import read_json_rows
from teamtr_core.errors import ConfigError

Role = Literal["agent", "env", "system"]
Split = Literal["train", "validation", "test"]
SPLITS: tuple[Split, ...] = ("train", "validation", "test")
SPLIT_FRACTIONS: tuple[tuple[Split, float], ...] = (
    ("train", 0.8),
    ("validation", 0.1),
    ("test", 0.1),
)
"""How generated problems are partitioned into splits by a hash of their id (see :func:`split_of`)."""


GRADER_FAILED = "grader_failed"
"""The ``Score.details`` key a grader sets to ``True`` when it could not grade an answer for a
reason of its own, not the team's: its deadline passed, its code raised, it could not rebuild the
problem, or the gold answer is unusable. Such an answer scores 0 like a wrong one, but it says
nothing about the team, so evaluations count these apart and say so loudly
(``EvalReport.grader_failures``). ``details["reason"]`` names the failure."""


def grader_failure(reason: str, **details: Any) -> dict[str, Any]:
    """``Score.details`` for an answer the grader failed on: ``reason`` plus
    :data:`GRADER_FAILED` and ``details``."""
    return {**details, "reason": reason, GRADER_FAILED: True}


def is_int(value: object) -> bool:
    """An ``int`` that is not a ``bool`` (task arguments and gold answers are checked with it)."""
    return isinstance(value, int) and not isinstance(value, bool)


def split_of(problem_id: str) -> Split:
    """The split a generated problem belongs to: a stable hash of its id partitions the problem
    space 80/10/10 into train/validation/test, so a generator asked for one split never yields a
    problem of another (held-out problems are disjoint from training problems by construction)."""
    digest = hashlib.blake2b(problem_id.encode("utf-8"), digest_size=8).digest()
    u = int.from_bytes(digest, "big") / 2**64
    total = 0.0
    for split, fraction in SPLIT_FRACTIONS:
        total += fraction
        if u < total:
            return split
    return SPLIT_FRACTIONS[-1][0]


class TaskConfigError(ConfigError):
    """Invalid task arguments; ``errors`` lists every one of them (a :class:`ConfigError`, the
    one config error type of every layer)."""

    def __init__(self, task: str, errors: Sequence[str]) -> None:
        super().__init__(f"{task} arguments", errors)


class UnknownOptionsError(TaskConfigError):
    """Options a task factory that takes ``**options`` does not know (its names depend on its
    arguments, as a reasoning-gym dataset's config fields do). The registry turns ``unknown``
    into its own "did you mean" lines over ``accepted`` *and* the environment's options
    (``max_turns``, ``agents``, ...), which a task cannot know; ``others`` are the rest of the
    problems, reported with them.

    Args:
        task: the task's name, for the message.
        unknown: the option names it does not know.
        accepted: every option name it does know.
        others: its other problems, one line each.
    """

    def __init__(
        self,
        task: str,
        unknown: Sequence[str],
        accepted: Sequence[str],
        others: Sequence[str] = (),
    ) -> None:
        self.unknown = list(unknown)
        self.accepted = sorted(set(accepted))
        self.others = list(others)
        lines = [
            f"{key!r} is not an option of {task}; its options: {', '.join(self.accepted)}"
            for key in self.unknown
        ]
        super().__init__(task, [*lines, *self.others])


class DrawError(TaskConfigError, RuntimeError):
    """A generator that cannot make the problems its options ask for (no problem of a split in
    many draws: the problem space is too small). A :class:`TaskConfigError`, so the CLI reports
    it as the options' problem (exit 2), and a ``RuntimeError`` as before."""


class EpisodeLimitError(TaskConfigError, RuntimeError):
    """A task refused to start another episode while others run (an OpenEnv server holds all the
    sessions it may). The local runner catches it while it starts a batch, ends the episodes it
    had started, and plays the batch again in blocks of that many (``Runner.rollout``).

    Attributes:
        capacity: the most episodes at once the task's resource holds, when it says (a server's
            ``max_concurrent_envs``); ``None`` when unknown.
        started: set by the runner: the episodes of the batch running when it was refused.
        asked: set by the runner: the episodes the batch (or its block) asked for at once.
    """

    def __init__(self, task: str, errors: Sequence[str], capacity: int | None = None) -> None:
        super().__init__(task, errors)
        self.capacity = capacity
        self.started: int | None = None
        self.asked: int | None = None


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class Message:
    """One entry of the shared context.

    Attributes:
        role: ``"agent"`` for a team member, ``"env"`` for environment feedback (tool results,
            answers to questions), ``"system"`` for protocol notes.
        speaker: the agent's name for agent messages, the task's name otherwise.
        text: the text that entered the shared context (already cleaned and length-limited).
    """

    role: Role
    speaker: str
    text: str

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "speaker": self.speaker, "text": self.text}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        return cls(role=data["role"], speaker=str(data["speaker"]), text=str(data["text"]))


@dataclass(frozen=True)
class Problem:
    """One problem instance.

    Attributes:
        id: a stable identifier (unique within a problem set).
        data: task-specific, JSON-serialisable fields (the question, the puzzle, ...).
        answer: the gold answer in whatever JSON-serialisable form the task's verifier uses.
        split: ``"train"``, ``"validation"`` or ``"test"``.
        meta: fields for per-subset breakdowns (subject, level, size bucket, ...).
    """

    id: str
    data: Mapping[str, Any] = field(default_factory=dict)
    answer: Any = None
    split: Split = "train"
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ValueError(
                f"Problem {self.id!r}: split must be one of {SPLITS}, got {self.split!r}."
            )
        object.__setattr__(self, "data", _frozen(self.data))
        object.__setattr__(self, "meta", _frozen(self.meta))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "data": dict(self.data),
            "answer": self.answer,
            "split": self.split,
            "meta": dict(self.meta),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Problem:
        return cls(
            id=str(data["id"]),
            data=data.get("data", {}),
            answer=data.get("answer"),
            split=data.get("split", "train"),
            meta=data.get("meta", {}),
        )


@dataclass(frozen=True)
class Score:
    """The verifier's verdict on one episode.

    Attributes:
        reward: the team reward (usually 1.0 for correct, 0.0 otherwise).
        correct: whether the episode counts as solved (used by pass@k / avg@k).
        answer: the normalised extracted answer, used for majority voting; ``None`` if nothing
            could be extracted.
        details: JSON-serialisable diagnostics; ``details["reason"]`` says why an episode failed,
            and ``details["grader_failed"]`` (:data:`GRADER_FAILED`) marks a failure of the
            grader's own (:func:`grader_failure`).
    """

    reward: float
    correct: bool
    answer: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "details", _frozen(self.details))

    @property
    def grader_failed(self) -> bool:
        """Whether the grader failed on this answer for a reason of its own (see
        :data:`GRADER_FAILED`)."""
        return bool(self.details.get(GRADER_FAILED))

    def to_dict(self) -> dict[str, Any]:
        return {
            "reward": self.reward,
            "correct": self.correct,
            "answer": self.answer,
            "details": dict(self.details),
        }


@dataclass(frozen=True)
class Episode:
    """What a task's ``score`` sees at the end of an episode.

    Attributes:
        problem: the problem the team worked on.
        transcript: the whole shared context after the opening prompt, in order.
        final_text: the message the team protocol designates as the final answer (the final
            agent's last message), or ``None`` if that agent never spoke.
        state: the interactive task's episode state (``None`` for single-answer tasks).
    """

    problem: Problem
    transcript: Sequence[Message]
    final_text: str | None
    state: Any = None


@runtime_checkable
class Task(Protocol):
    """The protocol every task plugin implements (see :class:`SingleAnswerTask` and
    :class:`InteractiveTask` for ready-made bases)."""

    name: str
    description: str
    interactive: bool

    def sample(self, rng: np.random.Generator) -> Problem:
        """Draws one problem from the task's generator, deterministically given ``rng``."""
        ...

    def load(self, path: str | Path) -> list[Problem]:
        """Loads problems from a file (the task's official format or the project's JSONL)."""
        ...

    def prompt(self, problem: Problem) -> str:
        """The opening text every agent sees."""
        ...

    def start(self, problem: Problem, rng: np.random.Generator) -> Any:
        """Creates the per-episode state (``None`` for single-answer tasks)."""
        ...

    def respond(self, state: Any, speaker: str, text: str) -> str | None:
        """Environment feedback to an agent's message, or ``None`` for no feedback."""
        ...

    def done(self, state: Any) -> bool:
        """Whether the task itself ended the episode (the turn limit is the env's business)."""
        ...

    def score(self, episode: Episode) -> Score:
        """Scores a finished episode. Must never raise on any model output."""
        ...


class BaseTask(abc.ABC):
    """Shared defaults: the project's JSONL loader and a no-op episode state."""

    name: str = "task"
    description: str = ""
    interactive: bool = False

    @abc.abstractmethod
    def sample(self, rng: np.random.Generator) -> Problem: ...

    @abc.abstractmethod
    def prompt(self, problem: Problem) -> str: ...

    @abc.abstractmethod
    def score(self, episode: Episode) -> Score: ...

    def load(self, path: str | Path) -> list[Problem]:
        """Loads problems saved with :func:`save_problems` (one ``Problem.to_dict`` per line),
        every row checked by :meth:`check_problem`; every bad row is reported at once."""
        return load_problems(path, check=self.check_problem)

    def check_problem(self, problem: Problem) -> list[str]:
        """What is wrong with a problem read from a file, one line per error (empty: usable).

        The project's JSONL loader calls it for every row and reports each error with its file
        and line, so a task declares here what its ``prompt``, ``grade`` and expert need (e.g. a
        string ``data["expression"]`` and an integer answer). Default: nothing is required.
        """
        return []

    def draw_in_split(
        self,
        rng: np.random.Generator,
        draw: Callable[[np.random.Generator], Problem],
        split: Split,
        max_tries: int = 10_000,
    ) -> Problem:
        """Draws problems with ``draw`` until one falls in ``split`` (:func:`split_of` of its id)
        and returns it labelled with that split. Generators call this from ``sample``.

        Raises:
            DrawError: if ``max_tries`` draws found none (the problem space is too small).
        """
        for _ in range(max_tries):
            problem = draw(rng)
            if split_of(problem.id) == split:
                if problem.split == split:
                    return problem
                return Problem(problem.id, problem.data, problem.answer, split, problem.meta)
        raise DrawError(
            self.name,
            [
                f"no problem of split {split!r} in {max_tries} draws: the generator's problem "
                "space is too small for a held-out split; use larger problems (check the splits' "
                f"sizes with teamtr tasks {self.name} --splits -o KEY=VALUE)"
            ],
        )

    def start(self, problem: Problem, rng: np.random.Generator) -> Any:
        return None

    def respond(self, state: Any, speaker: str, text: str) -> str | None:
        return None

    def done(self, state: Any) -> bool:
        return False


class SingleAnswerTask(BaseTask):
    """A task whose episode is graded on one final message; implement ``grade``."""

    @abc.abstractmethod
    def grade(self, problem: Problem, text: str) -> Score:
        """Grades the final answer text. Must never raise on any input."""

    def check_problem(self, problem: Problem) -> list[str]:
        """A single-answer problem needs a gold ``answer`` (a row without one could only score 0);
        tasks add what their ``data`` must hold."""
        if problem.answer is None:
            return ["no 'answer': a single-answer task grades against it"]
        return []

    def score(self, episode: Episode) -> Score:
        if episode.final_text is None:
            return Score(0.0, False, None, {"reason": "no_final_message"})
        return self.grade(episode.problem, episode.final_text)


class InteractiveTask(BaseTask):
    """A task that answers messages with feedback and decides when the episode is over.

    Reaching the team's turn limit before ``done`` is a *truncation* (PettingZoo's time limit)."""

    interactive = True

    @abc.abstractmethod
    def start(self, problem: Problem, rng: np.random.Generator) -> Any: ...

    @abc.abstractmethod
    def respond(self, state: Any, speaker: str, text: str) -> str | None: ...

    @abc.abstractmethod
    def done(self, state: Any) -> bool: ...


def save_problems(path: str | Path, problems: Sequence[Problem]) -> None:
    """Writes problems as JSONL in the project's own format."""
    with Path(path).open("w", encoding="utf-8") as fh:
        for problem in problems:
            fh.write(json.dumps(problem.to_dict(), ensure_ascii=False) + "\n")


ProblemCheck = Callable[[Problem], Sequence[str]]
"""What a task requires of a loaded problem: ``check(problem)`` returns one line per error
(empty: usable); see :meth:`BaseTask.check_problem`."""


def load_problems(path: str | Path, check: ProblemCheck | None = None) -> list[Problem]:
    """Reads problems written by :func:`save_problems`, checking every row.

    A row must be UTF-8 JSON of a ``Problem.to_dict`` (at least an ``id``), its id must not repeat
    an earlier row's (a repeated problem is not an independent one), and ``check(problem)`` (a
    task's :meth:`BaseTask.check_problem`) must find nothing wrong with it.

    Raises:
        ConfigError: (a ``ValueError``) listing every bad row at once, each as ``file:line: ...``.
        OSError: the file cannot be read.
    """
    expected = "a JSON object with at least an 'id' field (the format of tasks.save_problems)"
    read = read_json_rows(path, expected=expected)
    problems: list[Problem] = []
    for row in read.rows:
        try:
            problem = Problem.from_dict(row.value)
        except (KeyError, TypeError, ValueError) as exc:
            read.add(row, f"expected {expected}, got: {row.text[:80]!r} ({exc!s:.200}).")
            continue
        if read.keep(row, problem, problems):
            for issue in _checked(check, problem):
                read.add(row, f"problem {problem.id!r}: {issue}")
    if read.bad:
        raise ConfigError(f"data file {path}", read.errors())
    return problems


def _checked(check: ProblemCheck | None, problem: Problem) -> list[str]:
    if check is None:
        return []
    try:
        return [str(issue) for issue in check(problem)]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a check that trips on it
        return [f"unusable row ({type(exc).__name__}: {exc!s:.200})"]
