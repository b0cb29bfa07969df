"""The ``teamtr/Convention-v0`` task plugin: pass a secret word along a relay in a code the team
must agree on."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tasks.base import (
    Problem,
    Score,
    SingleAnswerTask,
    Split,
    TaskConfigError,
    is_int,
)
from tasks.capabilities import NO_STATE
from tasks.convention import rules
from teamtr_core.choices import choice_errors

NO_WORD_REPLY = "I cannot find the word."
"""The scripted expert's reply when its context shows no word to pass on (always malformed)."""


class ConventionTask(SingleAnswerTask):
    """A secret word relayed through a team in a code of the team's choosing: the exact relay game
    of ``docs/exact-games.md`` for language models (``docs/tasks/convention.md``).

    The problem is a secret word of ``length`` lowercase letters (prompt ``"secret kqz"``). Played
    with ``visibility="previous"`` (as registered), the agent of turn 0 sees the secret and every
    later agent only the message of the turn before its own. Every message should be one word of
    ``length`` lowercase letters; the last message is the team's guess, reward 1 iff it is the
    secret. The encoding is not fixed: any chain of bijections whose composition is the identity
    wins, so a later agent's best reply depends on what its predecessors do now (the team must
    share a convention). For ``R`` rounds with ``n`` agents pass ``max_turns=n*R``.

    The scripted expert of agent ``a`` applies the transform ``expert_transforms[a]`` (default
    ``identity``) to the word it observes; when asked to err it applies another of the first
    ``conventions`` transforms, chosen uniformly (so behaviour cloning at an error rate gives a
    mixture of conventions, a partly coordinated team).

    Args:
        length: letters per word (2-8); ``length >= 3`` gives a test split of at least 200
            distinct secrets (1778 for 3 letters, 68 for 2).
        conventions: ``C``, how many transforms of :data:`rules.TRANSFORMS` the task uses (2-8).
        split: the split generated problems are labelled with (secrets are partitioned 80/10/10
            by a hash of their id).
        expert_transforms: agent name -> the transform its scripted expert applies (each among
            the first ``conventions``); agents not listed use ``identity``.

    Raises:
        TaskConfigError: listing every invalid argument at once.
    """

    name = "convention"
    description = (
        "A secret word passed along a relay in a code the team chooses; each later agent sees only "
        "the previous message."
    )

    def __init__(
        self,
        length: int = 3,
        conventions: int = 4,
        split: str = "train",
        expert_transforms: Mapping[str, str] | None = None,
    ) -> None:
        errors = []
        if not is_int(length) or not rules.MIN_LENGTH <= length <= rules.MAX_LENGTH:
            errors.append(
                f"length must be an integer in {rules.MIN_LENGTH}..{rules.MAX_LENGTH}, "
                f"got {length!r}"
            )
        count = len(rules.TRANSFORMS)
        if not is_int(conventions) or not 2 <= conventions <= count:
            errors.append(f"conventions must be an integer in 2..{count}, got {conventions!r}")
            allowed = rules.TRANSFORMS  # still name every unknown transform below
        else:
            allowed = rules.TRANSFORMS[:conventions]
        errors += choice_errors("split", split, Split)
        errors += _transform_errors(expert_transforms, allowed)
        if errors:
            raise TaskConfigError("ConventionTask", errors)
        self.length = length
        self.conventions = conventions
        self.split = split
        self.transforms: tuple[str, ...] = allowed
        self.expert_transforms: dict[str, str] = dict(expert_transforms or {})

    def sample(self, rng: np.random.Generator) -> Problem:
        """A uniform secret word of this task's split (the splits partition the secrets by a hash
        of their id)."""
        return self.draw_in_split(rng, self._draw, self.split)  # type: ignore[arg-type]

    def _draw(self, rng: np.random.Generator) -> Problem:
        secret = "".join(rules.ALPHABET[int(i)] for i in rng.integers(26, size=self.length))
        return Problem(
            id=f"convention:L{self.length}:{secret}",
            data={"secret": secret, "length": self.length},
            answer=secret,
            split=self.split,  # type: ignore[arg-type]
            meta={"length": self.length},
        )

    def prompt(self, problem: Problem) -> str:
        """``"secret kqz"``: the opening prompt (only the first agent sees it in a relay)."""
        return rules.render_prompt(str(problem.data["secret"]))

    def check_problem(self, problem: Problem) -> list[str]:
        """A loaded row needs a word of ``length`` lowercase letters ``data["secret"]`` and the
        same ``answer``."""
        secret = problem.data.get("secret")
        if not rules.is_word(secret, self.length):
            return [
                f"data.secret: expected a word of {self.length} lowercase letters a-z, "
                f"got {secret!r:.80}"
            ]
        if problem.answer != secret:
            return [f"answer: expected the secret {secret!r}, got {problem.answer!r:.80}"]
        return []

    def grade(self, problem: Problem, text: str) -> Score:
        """The team's guess (the last message): ``correct`` iff it is the secret,
        ``wrong_answer`` for another word of ``length`` letters, ``malformed`` otherwise."""
        word = rules.parse_message(text, self.length)
        if word is None:
            return Score(0.0, False, None, {"reason": "malformed"})
        correct = word == problem.answer
        return Score(
            float(correct), correct, word, {"reason": "correct" if correct else "wrong_answer"}
        )

    def state_key(self, context: str) -> str | None:
        """The relay's exact agent state: the observed word (the secret for the first agent, the
        previous message for the others); ``None`` when the context shows neither."""
        return rules.observed_word(context, self.length)

    # -- a team of tabular policies (backend: tabular) --------------------------------------
    def tabular_states(self) -> list[str]:
        """Every word of ``length`` letters an agent can observe (26**length), and ``"none"``.
        A tabular team needs ``length`` <= 2 (the table of 3 letters would hold 17,576**2
        entries)."""
        return [*rules.all_words(self.length), NO_STATE]

    def tabular_messages(self) -> list[str]:
        """Every word of ``length`` letters."""
        return rules.all_words(self.length)

    def tabular_state(self, context: str) -> str:
        """The observed word (``"none"`` when there is none)."""
        return rules.observed_word(context, self.length) or NO_STATE

    def expert_reply(
        self,
        context: str,
        rng: np.random.Generator,
        *,
        make_error: bool,
        problem: Problem | None = None,
    ) -> str:
        """Applies this agent's transform (``expert_transforms`` of the name on the context's last
        ``### name`` line, default ``identity``) to the word it observes; when ``make_error``,
        another of the first ``conventions`` transforms, chosen uniformly. Reads only the
        context, never ``problem``, so a policy cloned from it learns the mapping from its input.
        With no word in the context: a fixed malformed reply."""
        word = rules.observed_word(context, self.length)
        if word is None:
            return NO_WORD_REPLY
        transform = self.expert_transforms.get(rules.agent_name(context) or "", "identity")
        if make_error:
            others = [t for t in self.transforms if t != transform]
            transform = others[int(rng.integers(len(others)))]
        return rules.apply(transform, word)


def _transform_errors(value: object, allowed: tuple[str, ...]) -> list[str]:
    """What is wrong with an ``expert_transforms`` option (a mapping agent name -> transform)."""
    if value is None:
        return []
    if not isinstance(value, Mapping):
        return [
            "expert_transforms: expected a mapping of agent names to transform names, "
            f"got {value!r:.80}"
        ]
    errors = []
    for agent, transform in value.items():
        if not isinstance(agent, str) or rules.agent_name(f"### {agent}") != agent:
            errors.append(
                f"expert_transforms: {agent!r:.80} is not an agent name (letters, digits and "
                "'_', starting with a letter)"
            )
        if transform not in allowed:
            errors.append(
                f"expert_transforms[{agent!r:.40}]: expected one of {list(allowed)} (the first "
                f"conventions transforms), got {transform!r:.80}"
            )
    return errors
