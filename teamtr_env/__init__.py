"""teamtr_env: turn-taking, shared-context LLM teams as PettingZoo environments.

Quick start::

    import teamtr_env
    env = teamtr_env.make("teamtr/Arith-v0")
    env.reset(seed=0)
    for agent in env.agent_iter():
        obs, reward, terminated, truncated, info = env.last()
        env.step(None if terminated or truncated else "Answer: 42")
"""

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
from teamtr_core.registry import PluginLoadWarning
from teamtr_env.builtin import register_builtin
from teamtr_env.env import TeamEnv
from teamtr_env.protocol import TeamProtocol
from teamtr_env.registration import (
    ENTRY_POINT_GROUP,
    Registry,
    TaskSpec,
    make,
    register,
    registry,
    spec,
)
from teamtr_env.router import CallableRouter, FixedOrder, RoundRobin, RouterState

register_builtin(registry)

__version__ = "0.1.0"

__all__ = [
    "ENTRY_POINT_GROUP",
    "CallableRouter",
    "ConfigError",
    "DuplicateTaskError",
    "EpisodeOverError",
    "FixedOrder",
    "InvalidKwargsError",
    "InvalidTaskIdError",
    "PluginLoadError",
    "PluginLoadWarning",
    "PolicyError",
    "Registry",
    "RegistryError",
    "RoundRobin",
    "RouterState",
    "TaskSpec",
    "TeamEnv",
    "TeamProtocol",
    "TeamTRError",
    "UnknownTaskError",
    "VersionNotFoundError",
    "make",
    "register",
    "registry",
    "spec",
]
