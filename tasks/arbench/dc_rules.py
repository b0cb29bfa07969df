"""Pure rules of ARBench Detective Cases (DC): interrogation messages, the scripted suspect and the
final answer.

Each turn the team names one suspect and asks one question (``Suspect: <whole name>`` then
``Question: ...``); the named suspect answers. The final answer is read as AR-Bench does:
``re.search(r"Answer:\\s*(.*)")`` (the first ``Answer:``, to the end of its line), then the last of
the capital letters ``A``-``E`` in it.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tasks.arbench.text import content_words

LETTERS = "ABCDE"
MAX_SCAN_CHARS = 20_000
# AR-Bench's correction when the selected suspect is not a suspect's whole name
# (reasoner/dc/prompt.py refine_select_suspect_prompt).
REFINE_SELECT = (
    "Your response does not follow the instruction: just answer the whole name of a suspect, "
    "do not give any extra explanations"
)
# AR-Bench's prompt for the final answer (select_murderer_template), with the choices filled in.
SELECT_MURDERER = (
    "Now, based on your obtained information, you should tell me who is more likely to be the "
    "true murderer, {choice}\nYou should only output the index of the candidate suspect like: "
    "A , B, C, D or E.\nyou should strictly follow this answer format:\n"
    "Reason: [Your inference step by step]\nAnswer: [A, B, C, D or E]"
)
NO_QUESTION = (
    "Your response does not follow the instruction: after the suspect's whole name, propose one "
    "single question (Question: ...)"
)
NOTHING_TO_SAY = "I have nothing to say about that."

_ANSWER = re.compile(r"Answer:\s*(.*)")
_LETTER = re.compile(r"A|B|C|D|E")
_SUSPECT_TAG = re.compile(
    r"^[ \t*#>-]{0,8}suspect[ \t*]{0,3}[:：][ \t*]{0,8}([^\n]{0,300})$",
    re.IGNORECASE | re.MULTILINE,
)
_QUESTION_TAG = re.compile(
    r"^[ \t*#>-]{0,8}(?:q|question)[ \t*]{0,3}[:：]\*{0,2}", re.IGNORECASE | re.MULTILINE
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# Words that make the murderer deflect instead of answering (with the weapon's own words).
SENSITIVE_WORDS = frozenset(
    {"kill", "murder", "weapon", "strike", "struck", "hit", "blood", "fingerprint", "motive"}
    | {"alibi", "guilty", "attack", "poison", "stab", "shot", "shoot", "argue", "argument"}
)


def is_final(text: str) -> bool:
    """Whether a message is the final answer (it contains ``Answer:``, case-sensitive)."""
    return "Answer:" in text[:MAX_SCAN_CHARS]


def extract_choice(text: str) -> str:
    """AR-Bench's ``extract_answer_choice``: the last of ``A``-``E`` on the line after the first
    ``Answer:``; ``""`` when there is none.

    >>> extract_choice("Reason: ...\\nAnswer: C")
    'C'
    """
    match = _ANSWER.search(text[:MAX_SCAN_CHARS])
    if match is None:
        return ""
    letters = _LETTER.findall(match.group(1))
    return letters[-1] if letters else ""


def remove_punctuation_at_ends(text: str) -> str:
    """AR-Bench's clean-up of a selected name: one punctuation character off each end."""
    if text and text[0] in string.punctuation:
        text = text[1:]
    if text and text[-1] in string.punctuation:
        text = text[:-1]
    return text


@dataclass(frozen=True)
class Interrogation:
    """One parsed turn: the suspect as written (cleaned), whether it is a suspect, the question."""

    suspect: str
    valid: bool
    question: str


def parse_interrogation(text: str, names: Sequence[str]) -> Interrogation:
    """Reads the suspect and the question of a turn.

    The suspect is the value of a ``Suspect:`` line, else the message's first non-empty line; it
    must equal one suspect's whole name after ``strip`` and :func:`remove_punctuation_at_ends`
    (AR-Bench's rule). The question is the text after a ``Question:``/``Q:`` tag, else the lines
    after the suspect's line.
    """
    text = text[:MAX_SCAN_CHARS]
    tag = _SUSPECT_TAG.search(text)
    if tag is not None:
        raw, rest = tag.group(1), text[tag.end() :]
    else:
        first, _, rest = text.strip().partition("\n")
        raw = first
    suspect = remove_punctuation_at_ends(raw.strip().strip("*")).strip()
    question_tag = _QUESTION_TAG.search(text)
    question = text[question_tag.end() :] if question_tag is not None else rest
    return Interrogation(suspect, suspect in names, question.strip())


def choices_line(names: Sequence[str]) -> str:
    """``"A. name, B. name, ..."`` as AR-Bench writes the choices."""
    return ", ".join(f"{letter}. {name}" for letter, name in zip(LETTERS, names))


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def _best(question_words: set[str], candidates: Sequence[str]) -> str | None:
    """The candidate sharing the most content words with the question (earliest on ties)."""
    best, best_overlap = None, 0
    for candidate in candidates:
        overlap = len(question_words & content_words(candidate))
        if overlap > best_overlap:
            best, best_overlap = candidate, overlap
    return best


def suspect_answer(case: Mapping[str, Any], suspect: Mapping[str, Any], question: str) -> str:
    """The scripted suspect's one-sentence reply (a transparent stand-in for the LLM suspect).

    Candidate sentences: the suspect's ``testimony``, ``timeline`` entries
    (``"<time>: <activity>"``) and, for innocents, the sentences of their ``story``. The reply is the candidate sharing the
    most content words with the question (earliest on ties); with no overlap, the first testimony
    or :data:`NOTHING_TO_SAY`.

    The murderer (``is_murderer``) follows its deceptive task: it never uses its story, drops every
    candidate that mentions the weapon, the victim or a :data:`SENSITIVE_WORDS` word, and a question
    touching those deflects: ``"I had nothing to do with <victim>'s death; <its testimony>"``.
    """
    asked = content_words(question)
    testimony = [str(t) for t in suspect.get("testimony") or []]
    timeline = [
        f"{entry.get('time', '')}: {entry.get('activity', '')}"
        for entry in suspect.get("timeline") or []
        if isinstance(entry, Mapping)
    ]
    victim = case.get("victim") or {}
    if suspect.get("is_murderer"):
        danger = content_words(str(victim.get("murder_weapon", ""))) | content_words(
            str(victim.get("name", ""))
        )
        danger |= SENSITIVE_WORDS
        if asked & danger:
            alibi = f"; {testimony[0]}" if testimony else ""
            return f"I had nothing to do with {victim.get('name', 'the victim')}'s death{alibi}"
        safe = [c for c in testimony + timeline if not content_words(c) & danger]
        return _best(asked, safe) or (testimony[0] if testimony else NOTHING_TO_SAY)
    story = str(suspect.get("story", ""))
    story_sentences = _sentences(story) if story and story != suspect.get("task") else []
    reply = _best(asked, testimony + timeline + story_sentences)
    return reply or (testimony[0] if testimony else NOTHING_TO_SAY)
