"""Pure rules of ARBench Situation Puzzles (SP): messages, the scripted referee and F1 scoring.

A message is a *question* (``Q: ...``), a *final answer* (``A: ...``) or neither. The referee
answers a question with exactly one of AR-Bench's four replies (:data:`REPLIES`). The final answer
is scored against the hidden story (``bottom``) by AR-Bench's ``f1_score`` at character level
(``f1(pred, gold)`` over the strings' characters, spaces included) and word level
(``f1(pred.split(), gold.split())``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from tasks.arbench.text import content_words

YES, NO, UNKNOWN = "Yes", "No", "Unknown"
NOT_A_QUESTION = "This is not a question, please propose your next question."
REPLIES = (YES, NO, UNKNOWN, NOT_A_QUESTION)
# AR-Bench's prompt for the final answer (reasoner/sp/prompt.py get_answer_prompt), on one line.
FINAL_ANSWER = (
    "Now, based on previous information, give your answer of this puzzle directly: "
    "your answer format: A: [Your answer]"
)
MAX_ANSWER_CHARS = 4000  # longer final answers are cut before scoring

_TAG = re.compile(
    r"^[ \t*#>-]{0,8}(q|a|question|answer)[ \t*]{0,3}[:：]\*{0,2}", re.IGNORECASE | re.MULTILINE
)
# Questions that ask for the solution instead of probing it (the referee must refuse them).
_ASKS_FOR_ANSWER = re.compile(
    r"\b(what (is|was) the (answer|solution|truth|bottom)|what happened|tell me (the )?"
    r"(answer|solution|truth|story)|give me (the )?(answer|solution)|what is going on)\b",
    re.IGNORECASE,
)
_QUESTION_START = re.compile(
    r"^(is|are|was|were|do|does|did|has|have|had|can|could|will|would|should|shall|may|might|"
    r"must|isn't|aren't|wasn't|weren't|didn't|doesn't|don't|hasn't|haven't)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Parsed:
    """A classified message: ``kind`` and the text after its tag (stripped)."""

    kind: Literal["question", "answer", "none"]
    text: str


def parse_message(text: str) -> Parsed:
    """Classifies a message.

    * a ``Q:``/``Question:`` tag at a line start makes it a question (the text after the first such
      tag, up to the next tag);
    * else an ``A:``/``Answer:`` tag makes it the final answer (the text after the first such tag);
    * else an untagged message that ends with ``?`` or starts like a yes/no question is a
      question; anything else is ``"none"`` (the referee says it is not a question).
    """
    tags = list(_TAG.finditer(text))
    for i, tag in enumerate(tags):
        if tag.group(1).lower() in ("q", "question"):
            end = tags[i + 1].start() if i + 1 < len(tags) else len(text)
            return Parsed("question", text[tag.end() : end].strip())
    if tags:  # no question tag above, so the first tag is an answer tag
        return Parsed("answer", text[tags[0].end() :].strip())
    body = text.strip()
    if body and (body.endswith("?") or _QUESTION_START.match(body)):
        return Parsed("question", body)
    return Parsed("none", body)


def final_answer_text(text: str) -> str:
    """The answer in a final message: the text after its first ``A:`` tag, else the whole text."""
    for tag in _TAG.finditer(text):
        if tag.group(1).lower() in ("a", "answer"):
            return text[tag.end() :].strip()
    return text.strip()


def f1(prediction: Sequence[str], gold: Sequence[str]) -> float:
    """AR-Bench's ``f1_score``: multiset overlap, precision = common/len(prediction), recall =
    common/len(gold); 0 when nothing is in common.

    >>> round(f1("abc", "abd"), 4)
    0.6667
    """
    common = sum((Counter(prediction) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision = common / len(prediction)
    recall = common / len(gold)
    return 2 * precision * recall / (precision + recall)


def f1_scores(prediction: str, bottom: str) -> tuple[float, float]:
    """``(char_f1, word_f1)`` of a final answer against the hidden story, as AR-Bench logs them
    (``f1_score_char``, ``f1_score_word``)."""
    prediction = prediction[:MAX_ANSWER_CHARS]
    return f1(prediction, bottom), f1(prediction.split(), bottom.split())


@dataclass(frozen=True)
class RefereeRule:
    """The scripted referee's thresholds (see :func:`referee_answer`)."""

    key_jaccard: float = 0.5
    yes_coverage: float = 0.75
    no_coverage: float = 0.4


def referee_answer(
    question: str,
    surface: str,
    bottom: str,
    key_questions: Sequence[str],
    rule: RefereeRule = RefereeRule(),
) -> str:
    """The scripted referee: a transparent word-overlap stand-in for AR-Bench's LLM referee.

    With ``Q`` = the question's content words (:func:`tasks.arbench.text.content_words`):

    1. no content words, or a request for the solution ("what happened?") -> ``NOT_A_QUESTION``;
    2. Jaccard(``Q``, a key question's content words) >= ``key_jaccard`` -> ``"Yes"`` (the key
       questions are the puzzle's yes-answered key points);
    3. coverage = share of ``Q`` found in the surface, the bottom and the key questions:
       >= ``yes_coverage`` -> ``"Yes"``, >= ``no_coverage`` -> ``"No"`` (the question is about the
       story but adds what the story does not say), else ``"Unknown"``.
    """
    if _ASKS_FOR_ANSWER.search(question[:1000]):
        return NOT_A_QUESTION
    asked = content_words(question)
    if not asked:
        return NOT_A_QUESTION
    keys, story = _story_words(surface, bottom, tuple(key_questions))
    for key_words in keys:
        if key_words and len(asked & key_words) / len(asked | key_words) >= rule.key_jaccard:
            return YES
    coverage = len(asked & story) / len(asked)
    if coverage >= rule.yes_coverage:
        return YES
    if coverage >= rule.no_coverage:
        return NO
    return UNKNOWN


@lru_cache(maxsize=256)
def _story_words(
    surface: str, bottom: str, key_questions: tuple[str, ...]
) -> tuple[list[frozenset[str]], frozenset[str]]:
    keys = [frozenset(content_words(k)) for k in key_questions]
    story = set(content_words(surface)) | content_words(bottom)
    for key_words in keys:
        story |= key_words
    return keys, frozenset(story)


def normalize_reply(text: str) -> str:
    """AR-Bench's clean-up of the referee's reply: ``.strip().strip(".")``; the not-a-question
    sentence is kept whole."""
    reply = text.strip()
    if reply.rstrip(".") == NOT_A_QUESTION.rstrip("."):
        return NOT_A_QUESTION
    return reply.strip(".")
