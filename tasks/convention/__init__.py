"""``teamtr/Convention-v0``: a secret word passed along a relay in a code the team must agree on."""

from tasks.convention.rules import (
    TRANSFORMS,
    apply,
    composite,
    invert,
    is_coordinated,
    observed_word,
    parse_message,
    render_prompt,
)
from tasks.convention.task import ConventionTask

__all__ = [
    "TRANSFORMS",
    "ConventionTask",
    "apply",
    "composite",
    "invert",
    "is_coordinated",
    "observed_word",
    "parse_message",
    "render_prompt",
]
