"""``teamtr serve ID``: a teamtr environment served as an OpenEnv environment
(``teamtr_env.openenv_server``), for TRL's ``GRPOTrainer``, SkyRL or OpenEnv's own client."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

from rich.console import Console

from teamtr_cli.common import add_option_arg
from teamtr_core.errors import ConfigError

INSTALL = 'pip install -e ".[openenv]"'


def add_parser(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser(
        "serve",
        help="serve a team environment as an OpenEnv environment (HTTP and WebSocket)",
        description="Serves ID with OpenEnv's create_app under uvicorn: every WebSocket session "
        "gets its own environment. By default the caller plays every agent in turn (each "
        "observation names the agent to act); with --seat NAME --team CONFIG it plays one agent "
        "and the team config's policies play the others (docs/openenv.md).",
    )
    serve.add_argument("task_id", metavar="ID", help="a registered task id (teamtr tasks)")
    add_option_arg(serve)
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    serve.add_argument("--port", type=int, default=8000, help="the port (default 8000)")
    serve.add_argument("--seat", help="the one agent the caller plays (with --team)")
    serve.add_argument(
        "--team", type=Path, metavar="CONFIG", help="with --seat: the policies of the other agents"
    )
    serve.add_argument(
        "--max-sessions", type=int, default=64, help="concurrent WebSocket sessions (default 64)"
    )


def cmd_serve(args: argparse.Namespace, console: Console) -> int:
    errors = []
    if not 0 < args.port < 65536:
        errors.append(f"--port: expected 1-65535, got {args.port}")
    if args.max_sessions < 1:
        errors.append(f"--max-sessions: expected >= 1, got {args.max_sessions}")
    if (args.seat is None) != (args.team is None):
        errors.append("--seat and --team go together: the team config plays the other seats")
    try:
        import uvicorn

        from teamtr_env.openenv_guard import WS_MAX_MESSAGE_BYTES
        from teamtr_env.openenv_server import create_team_app
    except ImportError as exc:
        errors.append(f"serving needs OpenEnv ({exc.name} is missing): {INSTALL}")
    if errors:
        raise ConfigError("teamtr serve", errors)
    from teamtr_env.env import TeamEnv
    from teamtr_env.registration import registry

    options = dict(args.option)

    def make_env() -> TeamEnv:
        return registry.make(args.task_id, **options)

    env = make_env()
    policies, sampling = None, None
    if args.team is not None:
        from adapters.team import build_team, load_team_config

        config = load_team_config(args.team)
        others = [a for a in env.possible_agents if a != args.seat]
        policies, sampling = build_team(config, env.possible_agents, env.task, only=others)
    app = create_team_app(
        make_env,
        name=args.task_id,
        seat=args.seat,
        policies=policies,
        sampling=sampling,
        max_sessions=args.max_sessions,
    )
    _check_port(args.host, args.port)
    mode = f"the caller plays {args.seat}" if args.seat else "the caller plays every agent"
    console.print(
        f"serving {registry.spec(args.task_id).id} ({', '.join(env.possible_agents)}; {mode}) "
        f"at http://{args.host}:{args.port} (WebSocket /ws, /schema, /health); Ctrl-C stops"
    )
    # A WebSocket message over 1 MB is refused in the session by the app (the episode goes on);
    # past WS_MAX_MESSAGE_BYTES uvicorn closes the connection instead of holding it (1009).
    uvicorn.run(
        app, host=args.host, port=args.port, log_level="warning", ws_max_size=WS_MAX_MESSAGE_BYTES
    )
    return 0


def _check_port(host: str, port: int) -> None:
    """A clear error for a port that is taken, before uvicorn's own."""
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ConfigError(
                "teamtr serve", [f"--port {port}: cannot listen on {host}:{port} ({exc.strerror})"]
            ) from None
