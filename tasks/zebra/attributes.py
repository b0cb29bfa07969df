"""The attribute pool puzzles are drawn from: a CamelCase column header, the line that introduces the
attribute in the puzzle text, the phrase that names a person by a value, and the values.

Modelled on the official ZebraLogic attributes (Name, Color, Nationality, Pet, Drink, CarModel, ...)
with our own wording. Two invariants the text parser relies on (tested): every value appears
verbatim in its phrase, and no value is a whole-word part of another attribute's phrase or of a clue
template, so the mentions in a clue identify its entities unambiguously.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AttributeSpec:
    """One attribute of the pool.

    Attributes:
        header: the solution column name, CamelCase (``"CarModel"``).
        intro: the puzzle line introducing it, before the values (``"People own unique car models"``).
        phrase: how a clue names the person with value ``v``: ``{v}`` is the value as listed,
            ``{V}`` the value with a capital first letter, ``{a}`` the article ``a``/``an`` for it.
        values: at least six values (a puzzle has up to six houses), distinct across the pool.
    """

    header: str
    intro: str
    phrase: str
    values: tuple[str, ...]

    def describe(self, value: str) -> str:
        """The noun phrase naming the person whose attribute is ``value`` (lower-case start)."""
        low = value.lower()
        article = "an" if low[:1] in "aeiou" and not low.startswith(("one", "uni", "use")) else "a"
        return self.phrase.format(v=value, V=value[:1].upper() + value[1:], a=article)


NAME = AttributeSpec(
    "Name",
    "Each person has a unique name",
    "{v}",
    ("Arnold", "Eric", "Peter", "Alice", "Bob", "Carol", "Daniel", "Frank"),
)

POOL: tuple[AttributeSpec, ...] = (
    AttributeSpec(
        "Color",
        "Each person has a favorite color",
        "the person whose favorite color is {v}",
        ("red", "green", "blue", "yellow", "white", "purple"),
    ),
    AttributeSpec(
        "Nationality",
        "Each person has a unique nationality",
        "the {V} person",
        ("german", "norwegian", "brazilian", "japanese", "mexican", "danish"),
    ),
    AttributeSpec(
        "Pet",
        "Each person keeps a different pet",
        "the person who keeps {a} {v}",
        ("cat", "dog", "bird", "fish", "horse", "rabbit", "hamster", "turtle"),
    ),
    AttributeSpec(
        "Drink",
        "Each person has a unique favorite drink",
        "the person who drinks {v}",
        ("tea", "coffee", "milk", "water", "lemonade", "root beer"),
    ),
    AttributeSpec(
        "Food",
        "Everyone has a different favorite food",
        "the {v} lover",
        ("pizza", "pasta", "sushi", "tacos", "curry", "stew", "salad", "soup"),
    ),
    AttributeSpec(
        "Hobby",
        "Each person has a unique hobby",
        "the person who enjoys {v}",
        ("painting", "gardening", "cooking", "photography", "knitting", "hiking", "chess"),
    ),
    AttributeSpec(
        "Occupation",
        "Each person has a unique occupation",
        "the person who works as {a} {v}",
        ("doctor", "teacher", "engineer", "lawyer", "nurse", "artist", "chef", "pilot"),
    ),
    AttributeSpec(
        "Sport",
        "Each person plays a different sport",
        "the person who plays {v}",
        ("soccer", "tennis", "basketball", "baseball", "golf", "hockey", "volleyball"),
    ),
    AttributeSpec(
        "MusicGenre",
        "People have unique favorite music genres",
        "the person who loves {v} music",
        ("jazz", "rock", "pop", "classical", "hip hop", "country", "reggae"),
    ),
    AttributeSpec(
        "BookGenre",
        "People have unique favorite book genres",
        "the person who reads {v} books",
        ("mystery", "fantasy", "romance", "biography", "science fiction", "poetry", "horror"),
    ),
    AttributeSpec(
        "CarModel",
        "People own unique car models",
        "the person who drives {a} {v}",
        ("tesla model 3", "honda civic", "ford f150", "toyota camry", "bmw 3 series", "audi a4"),
    ),
    AttributeSpec(
        "PhoneModel",
        "People use unique phone models",
        "the person who uses {a} {v}",
        (
            "iphone 13",
            "samsung galaxy s21",
            "google pixel 6",
            "oneplus 9",
            "huawei p50",
            "xiaomi mi 11",
        ),
    ),
    AttributeSpec(
        "Flower",
        "Each person has a favorite flower",
        "the person who grows {v}",
        ("roses", "tulips", "lilies", "daisies", "orchids", "carnations", "sunflowers"),
    ),
    AttributeSpec(
        "Smoothie",
        "Everyone has a favorite smoothie",
        "the person who likes {v} smoothies",
        ("cherry", "mango", "lime", "watermelon", "blueberry", "strawberry"),
    ),
    AttributeSpec(
        "Vacation",
        "Each person prefers a unique type of vacation",
        "the person who prefers {v} vacations",
        ("beach", "mountain", "city", "camping", "cruise", "cultural"),
    ),
    AttributeSpec(
        "HairColor",
        "Each person has a different hair color",
        "the person who has {v} hair",
        ("black", "brown", "blonde", "gray", "auburn", "silver"),
    ),
    AttributeSpec(
        "Birthday",
        "Each person has a unique birthday month",
        "the person whose birthday is in {V}",
        ("january", "february", "march", "april", "may", "june", "september"),
    ),
)
"""Attributes other than ``Name`` (which every puzzle has, as its first column, like the official
data)."""
