"""``openenv/Env-v0``: any OpenEnv environment, in process or on a server, as a team task
(:mod:`tasks.openenv.task`; actions read from messages in :mod:`tasks.openenv.actions`, the
server's side in :mod:`tasks.openenv.remote`). OpenEnv is an optional dependency
(``pip install -e '.[openenv]'``), imported only when an environment is made or a server
reached. docs/openenv.md."""

from tasks.openenv.actions import parse_action, render_observation
from tasks.openenv.task import OpenEnvTask, Session

__all__ = ["OpenEnvTask", "Session", "parse_action", "render_observation"]
