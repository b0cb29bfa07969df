"""The one error hierarchy of teamtr, on the shared floor: every layer raises these (tasks'
``TaskConfigError`` is a ``ConfigError``). Every message says what was expected, what was seen
and how to fix it."""

from __future__ import annotations

import re
from collections.abc import Sequence


class TeamTRError(Exception):
    """Base class of every error ``teamtr_env`` raises on purpose."""


_MORE = re.compile(r"^\.\.\. and (\d+) more \(the first \d+ shown\)$")


def more_line(hidden: int, shown: int) -> str:
    """The line that stands for ``hidden`` problems left out of a list of ``shown``: a
    :class:`ConfigError` counts it as that many in its header."""
    return f"... and {hidden} more (the first {shown} shown)"


MAX_PROBLEM_CHARS = 2000
"""A problem line longer than this is cut in the message (a 10 MB value echoed by a check is not
printed whole); ``ConfigError.errors`` keeps the lines as they were."""


def shown_line(line: str, limit: int = MAX_PROBLEM_CHARS) -> str:
    """``line`` cut to ``limit`` characters, saying how much was left out."""
    if len(line) <= limit:
        return line
    return f"{line[:limit]}... ({len(line) - limit:,} more characters not shown)"


class ConfigError(TeamTRError, ValueError):
    """A configuration with one or more errors; all of them are reported at once.

    Attributes:
        errors: one human-readable line per error (each shown cut to
            :data:`MAX_PROBLEM_CHARS` in the message).
    """

    def __init__(self, what: str, errors: Sequence[str]) -> None:
        self.errors = list(errors)
        lines = "\n".join(f"  - {shown_line(e)}" for e in self.errors)
        count = sum(int(m.group(1)) if (m := _MORE.match(e)) else 1 for e in self.errors)
        super().__init__(f"Invalid {shown_line(what, 500)} ({count} problem(s)):\n{lines}")


class RegistryError(TeamTRError):
    """Base class of registry errors."""


class InvalidTaskIdError(RegistryError, ValueError):
    """An id that does not have the form ``namespace/Name-vN``."""


class UnknownTaskError(RegistryError, KeyError):
    """No task is registered under the id (the message suggests close matches)."""

    def __str__(self) -> str:  # KeyError would otherwise quote the whole message
        return str(self.args[0]) if self.args else ""


class VersionNotFoundError(UnknownTaskError):
    """The task name exists but not at the requested version."""


class DuplicateTaskError(RegistryError, ValueError):
    """An id registered twice without ``override=True``."""


class InvalidKwargsError(ConfigError, RegistryError):
    """Keyword arguments that the task or the environment does not accept."""


class PluginLoadError(RegistryError, ImportError):
    """A third-party plugin's entry point failed to import or to register its tasks."""


class PolicyError(TeamTRError, RuntimeError):
    """A policy broke the Policy protocol (e.g. returned the wrong number of generations)."""


class LearnerError(TeamTRError, RuntimeError):
    """A learner broke the Learner contract (e.g. an update ``index`` that is not the update's
    position in the stage's run order)."""


class EpisodeOverError(TeamTRError, RuntimeError):
    """``step()`` after every agent has left the episode; call ``reset()``."""
