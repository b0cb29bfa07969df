"""``reasoning_gym/<dataset>-v0``: every reasoning-gym dataset as a team task.

Problems are reasoning-gym items, generated in worker processes (the same items in every process
and run); the final agent's answer is extracted (``<answer>...</answer>``
or the text after the last ``Answer:``) and scored by the dataset's own ``score_answer`` in a
worker process with a deadline (:mod:`tasks.reasoning_gym.scoring`). The reward is the raw score
(reasoning-gym gives partial credit on some datasets); ``correct`` is ``score >= threshold``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import re
from typing import Any

import numpy as np

from tasks.base import (
    DrawError,
    Problem,
    Score,
    SingleAnswerTask,
    Split,
    TaskConfigError,
    UnknownOptionsError,
    grader_failure,
    is_int,
)
from tasks.reasoning_gym import build
from tasks.reasoning_gym.catalogue import CATALOGUE, DEFAULT_SIZE, INSTALL, SIZES
from tasks.reasoning_gym.scoring import GymPool, ItemError, default_pool
from tasks.workers import deadline_errors
from teamtr_core.choices import choice_errors

SPLIT_RANGES: dict[str, tuple[float, float]] = {
    "train": (0.0, 0.8),
    "validation": (0.8, 0.9),
    "test": (0.9, 1.0),
}
"""The share of a dataset's item indices each split draws from: disjoint seed ranges (item ``i``
is reasoning-gym's ``Random(seed + i)`` draw). On top, a problem belongs to a split only if the
hash of its question text says so (:func:`tasks.base.split_of`), so a generator that repeats a
question under two seeds still never puts it in two splits."""

MIN_SIZE = 1000
"""The smallest ``size``: validation and test each draw from a tenth of the indices, and keep the
items whose question hashes into their split (a tenth again), about ``size / 100`` items each; at
1000 that is about 10, and a split found empty is then a chance of about 3e-5 (0.9**100)."""

MAX_FAILED_ITEMS = 100
"""Indices in a row a generator may fail on before sampling gives up (see :class:`ItemError`)."""

TASK_OPTIONS = ("split", "threshold", "timeout_s", "curriculum_level", "size")
"""The options of every reasoning-gym task; the rest are the dataset's config fields."""

log = logging.getLogger(__name__)

_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_LINE = re.compile(r"answer\s*:", re.IGNORECASE)
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def extract_answer(text: str) -> tuple[str | None, str]:
    """The final answer in a message and how it was found: the last ``<answer>...</answer>``
    (``"answer_tag"``), else everything after the last ``Answer:`` (``"answer_line"``; it may span
    lines), stripped; ``(None, "none")`` when neither is there or it is empty."""
    tags = _TAG.findall(text)
    if tags:
        answer = tags[-1].strip()
        return (answer or None), "answer_tag"
    lines = list(_LINE.finditer(text))
    if lines:
        answer = text[lines[-1].end() :].strip()
        return (answer or None), "answer_line"
    return None, "none"


def _named(keys: list[str]) -> tuple[str, ...]:
    """How the builder's line about each unknown option starts (``'max_turn' is not ...``)."""
    return tuple(f"{key!r} is not an option of" for key in keys)


def _question_id(dataset: str, question: str) -> str:
    digest = hashlib.blake2b(question.encode("utf-8"), digest_size=10).hexdigest()
    return f"{dataset}:{digest}"


class ReasoningGymTask(SingleAnswerTask):
    """One reasoning-gym dataset as a single-answer team task.

    Args:
        dataset: the reasoning-gym dataset name (``reasoning_gym.factory.DATASETS``).
        split: the split generated problems come from.
        threshold: the score at which an episode counts as solved (``correct``); the reward is
            the raw score.
        timeout_s: the deadline of one ``score_answer`` call (the dataset's code on the answer).
        curriculum_level: a global level of the dataset's curriculum (0 is the easiest), or
            ``None`` for the config's defaults.
        size: how many item indices the splits are cut from (default: 100000; acre 10000,
            word_ladder 20000).
        **config: the dataset's config fields (``-o min_terms=2``), checked against its config.

    Raises:
        TaskConfigError: listing every invalid argument at once.
    """

    description = "A reasoning-gym dataset, graded by its own score_answer."

    def __init__(
        self,
        dataset: str,
        split: str = "train",
        threshold: float = 1.0,
        timeout_s: float = 10.0,
        curriculum_level: int | None = None,
        size: int | None = None,
        **config: Any,
    ) -> None:
        errors = list(choice_errors("split", split, Split))
        if dataset not in CATALOGUE:
            raise TaskConfigError("reasoning-gym task", [f"unknown dataset {dataset!r}"])
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            errors.append(f"threshold must be a number in (0, 1], got {threshold!r}")
        elif not 0 < threshold <= 1:
            errors.append(f"threshold must be in (0, 1], got {threshold!r}")
        errors += deadline_errors("timeout_s", timeout_s)
        if curriculum_level is not None and (not is_int(curriculum_level) or curriculum_level < 0):
            errors.append(f"curriculum_level must be an integer >= 0, got {curriculum_level!r}")
        size = SIZES.get(dataset, DEFAULT_SIZE) if size is None else size
        if not is_int(size) or size < MIN_SIZE:
            errors.append(
                f"size must be an integer >= {MIN_SIZE}, got {size!r:.40}: a held-out split "
                f"draws from a tenth of the indices, and keeps about a tenth of those (the "
                f"question-hash partition), so a smaller size leaves it empty"
            )
        self.dataset = dataset
        self.curriculum_level = curriculum_level
        self.size = size
        self.config = dict(config)
        self.pool: GymPool | None = None  # None: the process-wide pool
        self.dataset_config: dict[str, Any] = {}
        if importlib.util.find_spec("reasoning_gym") is None:
            errors.append(f"reasoning-gym is not installed: {INSTALL}")
        elif (
            is_int(size)
            and size >= MIN_SIZE
            and (curriculum_level is None or is_int(curriculum_level))
        ):
            try:
                self.dataset_config = self._pool().build(self.spec())
            except build.BuildError as exc:
                if exc.unknown:  # the registry suggests over these and the environment's
                    others = [e for e in exc.errors if not e.startswith(_named(exc.unknown))]
                    raise UnknownOptionsError(
                        f"reasoning_gym/{dataset}",
                        exc.unknown,
                        [*exc.fields, *TASK_OPTIONS],
                        [*errors, *others],
                    ) from None
                errors += exc.errors
        if errors:
            raise TaskConfigError(f"reasoning_gym/{dataset}", errors)
        self.name = f"reasoning_gym/{dataset}"
        self.category, self.levels, self.has_answer = CATALOGUE[dataset]
        self.split = split
        self.threshold = float(threshold)
        self.timeout_s = float(timeout_s)

    @property
    def no_expert_reason(self) -> str:
        """Why this dataset has no scripted expert (only datasets without a reference answer
        lack one: :class:`ReasoningGymExpertTask` has it)."""
        return (
            f"reasoning-gym's {self.dataset} has no reference answer (many answers are right, and "
            "its score_answer checks each one), so there is no scripted expert to play it"
        )

    def _pool(self) -> GymPool:
        return self.pool or default_pool()

    def spec(self) -> dict[str, Any]:
        """What a worker needs to build this task's dataset."""
        return {
            "dataset": self.dataset,
            "options": self.config,
            "level": self.curriculum_level,
            "size": self.size,
        }

    # -- problems ---------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> Problem:
        """An item of this task's split: its index from the split's range, its question text
        in the split's hash partition (so the splits never share a question)."""
        return self.draw_in_split(rng, self._draw, self.split)  # type: ignore[arg-type]

    def _draw(self, rng: np.random.Generator) -> Problem:
        low, high = SPLIT_RANGES[self.split]
        start, stop = int(low * self.size), max(int(high * self.size), int(low * self.size) + 1)
        failed: list[str] = []
        for _ in range(MAX_FAILED_ITEMS):
            index = int(rng.integers(start, stop))
            try:
                return self.item(index)
            except ItemError as exc:  # the generator gave up on this index: draw another
                failed.append(str(exc))
                log.debug("%s: %s", self.name, exc)
        raise DrawError(
            self.name,
            [
                f"the generator failed on {len(failed)} indices in a row (last: {failed[-1]}); "
                "its options may ask for problems it cannot make"
            ],
        )

    def item(self, index: int) -> Problem:
        """Item ``index`` of the dataset as a problem (labelled with this task's split)."""
        question, answer = self._pool().item(self.spec(), index)
        return Problem(
            id=_question_id(self.dataset, question),
            data={"question": question, "index": index},
            answer=answer,
            split=self.split,  # type: ignore[arg-type]
            meta={"dataset": self.dataset, "category": self.category},
        )

    def prompt(self, problem: Problem) -> str:
        return f"{problem.data['question']}\nEnd with: Answer: <your answer>"

    def check_problem(self, problem: Problem) -> list[str]:
        """A loaded row needs ``data.question`` and ``data.index``, the item it is under this
        task's options (grading rebuilds the item from them)."""
        issues = []
        if not isinstance(problem.data.get("question"), str):
            issues.append("data.question: expected the item's question text")
        if not is_int(problem.data.get("index")):
            issues.append("data.index: expected the item's integer index")
        return issues

    # -- grading ----------------------------------------------------------------------------
    def request(self, problem: Problem, answer: str) -> dict[str, Any]:
        """What the scoring worker needs to rebuild the item and score ``answer``."""
        return {
            **self.spec(),
            "index": problem.data.get("index"),
            "question": problem.data.get("question"),
            "answer": answer,
        }

    def grade(self, problem: Problem, text: str) -> Score:
        answer, how = extract_answer(text)
        if answer is None:
            return Score(0.0, False, None, {"reason": "no_answer_found", "extraction": how})
        scored = self._pool().score(self.request(problem, answer), self.timeout_s)
        details: dict[str, Any] = {
            "extraction": how,
            "extracted": answer[:200],
            "score": scored.score,
        }
        if scored.status != "ok":
            reason = {"timeout": "scorer_timeout", "mismatch": "problem_mismatch"}.get(
                scored.status, "scorer_error"
            )
            return Score(0.0, False, answer, grader_failure(reason, **details, error=scored.error))
        score = min(max(scored.score, 0.0), 1.0)
        correct = score >= self.threshold
        reason = "correct" if correct else ("partial_credit" if score > 0 else "wrong_answer")
        return Score(score, correct, answer, {**details, "reason": reason})


class ReasoningGymExpertTask(ReasoningGymTask):
    """A reasoning-gym task whose items carry a reference answer: it has a scripted expert."""

    def expert_reply(
        self,
        context: str,
        rng: np.random.Generator,
        *,
        make_error: bool,
        problem: Problem | None = None,
    ) -> str:
        """The item's reference answer (``Answer: <gold>``, or ``<answer>`` tags around a gold
        that spans lines or says "answer"); with ``make_error`` a wrong one: a number moved by
        1-10, or the text with one character changed. (A dataset that accepts many answers may
        still give a changed text credit.)"""
        if problem is None or problem.answer is None:
            return "I cannot see the problem."
        gold = str(problem.answer)
        if make_error:
            gold = _wrong(gold, rng)
        if "\n" in gold or "answer" in gold.lower():
            return f"<answer>\n{gold}\n</answer>"
        return f"Answer: {gold}"


def _wrong(gold: str, rng: np.random.Generator) -> str:
    offset = int(rng.choice([-1, 1])) * int(rng.integers(1, 11))
    if _NUMBER.match(gold.strip()):
        value = gold.strip()
        if "." in value:
            return str(round(float(value) + offset, len(value.split(".")[1])))
        return str(int(value) + offset)
    if not gold:
        return "?"
    i = int(rng.integers(len(gold)))
    swap = "x" if gold[i] != "x" else "y"
    return gold[:i] + swap + gold[i + 1 :]


def make_task(dataset: str, **options: Any) -> ReasoningGymTask:
    """The task of reasoning-gym dataset ``dataset`` (the registry's entry point): with a scripted
    expert where its items carry a reference answer."""
    entry = CATALOGUE.get(dataset)
    cls = ReasoningGymExpertTask if entry is None or entry[2] else ReasoningGymTask
    return cls(dataset, **options)
