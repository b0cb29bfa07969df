"""Small text helpers shared by the ARBench rules: bounded tokenisation and content words.

The scripted responders compare a question with the hidden story by *content words*: lower-cased
ASCII word tokens, minus a fixed stop-word list, with a light suffix stemmer (``"killed"``,
``"kills"``, ``"killing"`` -> ``"kill"``). The rule is deliberately simple and transparent: it is a
stand-in for the LLM referee of AR-Bench, documented in ``docs/tasks/arbench.md``.
"""

from __future__ import annotations

import re

MAX_TEXT_CHARS = 4000  # longer questions are cut before tokenising
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_STOP_WORDS_TEXT = """
a an the and or but if then so of to in on at by for with from into onto about as than that this
these those there here it its it's is are was were be been being am do does did doing done have
has had having can could will would shall should may might must i me my mine you your yours he
him his she her hers we us our they them their what which who whom whose when where why how
any some all each every no not nor anything something someone anyone just very really also
q question answer please tell ok yes
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())
_SUFFIXES = ("ing", "ed", "es", "s")


def stem(word: str) -> str:
    """A light stemmer: drops a possessive ``'s``, one suffix (``ing`` when 3 letters remain,
    ``ed``/``es``/``s`` when 2 remain), then a final ``e`` (``"received"``, ``"receive"`` ->
    ``"receiv"``; ``"died"``, ``"dies"`` -> ``"di"``)."""
    if word.endswith("'s"):
        word = word[:-2]
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= (3 if suffix == "ing" else 2):
            word = word[: -len(suffix)]
            break
    if len(word) >= 3 and word.endswith("e"):
        word = word[:-1]
    return word


def words(text: str) -> list[str]:
    """Lower-case word tokens of (the first ``MAX_TEXT_CHARS`` characters of) ``text``."""
    return _WORD.findall(text[:MAX_TEXT_CHARS].lower().replace("\u2019", "'"))


def content_words(text: str) -> set[str]:
    """The stemmed non-stop words of ``text``."""
    return {stem(w) for w in words(text) if w not in STOP_WORDS and not w.endswith("n't")}
