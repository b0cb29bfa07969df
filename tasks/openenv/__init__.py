"""``openenv/Env-v0``: any OpenEnv environment, in process or on a server, as a team task
(:mod:`tasks.openenv.task`). OpenEnv is an optional dependency (``pip install -e '.[openenv]'``),
imported only when a server is reached. docs/openenv.md."""

from tasks.openenv.task import OpenEnvTask, Session, parse_action, render_observation

__all__ = ["OpenEnvTask", "Session", "parse_action", "render_observation"]
