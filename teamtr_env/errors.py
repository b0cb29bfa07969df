"""The error hierarchy, re-exported from the shared floor (:mod:`teamtr_core.errors`) so that
``from teamtr_env.errors import ConfigError`` keeps working."""

from teamtr_core.errors import (
    ConfigError,
    DuplicateTaskError,
    EpisodeOverError,
    InvalidKwargsError,
    InvalidTaskIdError,
    PluginLoadError,
    PolicyError,
    RegistryError,
    TeamTRError,
    UnknownTaskError,
    VersionNotFoundError,
)

__all__ = [
    "ConfigError",
    "DuplicateTaskError",
    "EpisodeOverError",
    "InvalidKwargsError",
    "InvalidTaskIdError",
    "PluginLoadError",
    "PolicyError",
    "RegistryError",
    "TeamTRError",
    "UnknownTaskError",
    "VersionNotFoundError",
]
