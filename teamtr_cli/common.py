"""What several commands share: argument types, the environment and team arguments of ``play``
and ``eval``, and the environment, policy and runner they build from them."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from adapters.scripted import HumanPolicy, RandomPolicy, ScriptedExpert
from tasks.capabilities import no_expert_reason
from teamtr_core.config import unreadable_value
from teamtr_core.errors import ConfigError
from teamtr_core.policy import Policy, SamplingParams
from teamtr_env.baselines import InferenceProtocol
from teamtr_env.env import TeamEnv
from teamtr_env.registration import registry
from teamtr_env.runners import Runner, make_runner

POLICIES = ("scripted", "random", "human")


def parse_option(text: str) -> tuple[str, Any]:
    """An argparse type for ``KEY=VALUE``: the value read as JSON, else kept as a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise argparse.ArgumentTypeError(f"{key.strip()}: {unreadable_value(exc, raw)}") from None
    return key.strip(), value


def int_at_least(low: int, what: str) -> Callable[[str], int]:
    """An argparse type for integers >= ``low`` (argparse names the flag in its error:
    ``argument --seed: expected a non-negative integer, got '-5'``)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return parse


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse type for integers in ``low..high``."""
    check = int_at_least(low, f"an integer in {low}..{high}")

    def parse(text: str) -> int:
        value = check(text)
        if value > high:
            raise argparse.ArgumentTypeError(f"expected an integer in {low}..{high}, got {text!r}")
        return value

    return parse


def add_config_args(p: argparse.ArgumentParser, set_dest: str, set_help: str) -> None:
    """``--config FILE`` (a training config; default the demo) and ``--set KEY=VALUE`` (its
    overrides, collected in ``set_dest``), as ``teamtr train`` takes them."""
    p.add_argument("--config", type=Path, help="training config (YAML/JSON); default: the demo")
    p.add_argument(
        "--set",
        dest=set_dest,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=set_help,
    )


non_negative_int = int_at_least(0, "a non-negative integer")
positive_int = int_at_least(1, "a positive integer")


def add_env_args(p: argparse.ArgumentParser) -> None:
    """The task, policy and team arguments of ``play`` and ``eval``."""
    p.add_argument("task_id", metavar="ID", help="a registered id, e.g. teamtr/Arith-v0")
    p.add_argument(
        "--policy", choices=POLICIES, default=None, help="every agent's policy (default scripted)"
    )
    p.add_argument(
        "--error-rate",
        type=float,
        default=None,
        help="the scripted expert's error rate, in [0, 1] (default 0; with --policy scripted)",
    )
    p.add_argument(
        "--seed", type=non_negative_int, default=0, help="seeds problems, episodes, policies"
    )
    add_option_arg(p)
    p.add_argument("--data-path", help="load problems from this file instead of generating")
    p.add_argument(
        "--team",
        type=Path,
        metavar="CONFIG",
        help="team config (YAML/JSON): each agent's backend, model, LoRA and sampling; "
        "overrides --policy (see docs/policies.md)",
    )
    p.add_argument(
        "--set",
        dest="team_set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a team config value, e.g. --set sampling.temperature=1.0",
    )
    p.add_argument("--temperature", type=float, help="sampling temperature (default 0.8)")
    p.add_argument("--max-new-tokens", type=int, help="message length in tokens (default 64)")


def make_env(args: argparse.Namespace, protocol: InferenceProtocol | None = None) -> TeamEnv:
    """The task's environment with ``-o`` options, ``--data-path`` (``eval``: the ``--split`` of a
    task with splits, default test) and ``protocol``'s settings."""
    options = dict(args.option)
    if args.data_path:
        options["data_path"] = args.data_path
    elif (
        args.command == "eval"
        and "split" not in options
        and registry.spec(args.task_id).accepts("split")
    ):
        options["split"] = args.split or "test"
    if protocol is not None:
        clash = sorted(set(protocol.env_kwargs) & set(options))
        if clash:
            raise ConfigError(
                "--protocol", [f"-o {k} conflicts with the protocol's own" for k in clash]
            )
        options.update(protocol.env_kwargs)
    return registry.make(args.task_id, **options)


def policy_name(args: argparse.Namespace) -> str:
    """``--policy``, or its default ``scripted`` when not given."""
    return str(args.policy or "scripted")


def error_rate(args: argparse.Namespace) -> float:
    """``--error-rate``, or its default 0 when not given."""
    return 0.0 if args.error_rate is None else float(args.error_rate)


def team_flag_errors(args: argparse.Namespace) -> list[str]:
    """The team flags that would be ignored, refused instead: ``--policy`` / ``--error-rate``
    beside ``--run-dir`` or ``--team`` (which bring their own team), ``--error-rate`` with a
    policy other than the scripted expert, and ``--set`` without ``--team``."""
    errors = []
    given = [
        flag
        for flag, value in (("--policy", args.policy), ("--error-rate", args.error_rate))
        if value is not None
    ]
    run_dir = getattr(args, "run_dir", None)
    team = [flag for flag, value in (("--team", args.team), ("--set", args.team_set)) if value]
    if run_dir is not None and (given or team):
        errors.append(
            "--run-dir evaluates the run's team: give no --team, --policy, --error-rate or --set "
            f"(given: {', '.join(given + team)})"
        )
    elif args.team is not None and given:
        errors.append(
            f"--team brings its own team: give no {' or '.join(given)} (a scripted agent's "
            "error rate is its error_rate in the team config)"
        )
    elif args.error_rate is not None and policy_name(args) != "scripted":
        errors.append(
            f"--error-rate is the scripted expert's: it does nothing with --policy {args.policy}"
        )
    if run_dir is None and args.team is None and args.team_set:
        errors.append("--set overrides a team config: pass --team CONFIG too")
    return errors


def make_policy(name: str, env: TeamEnv, args: argparse.Namespace) -> Policy:
    """Every agent's policy for ``--policy NAME`` (one of :data:`POLICIES`)."""
    if name == "scripted":
        missing = no_expert_reason(env.task)
        if missing:
            raise ConfigError(
                "--policy",
                [
                    f"--policy scripted (the default): {missing}. Evaluate a model team instead "
                    "(--team CONFIG, see docs/policies.md; or --run-dir RUN_DIR, a trained "
                    "run), or --policy random for a floor"
                ],
            )
        try:
            return ScriptedExpert(env.task, error_rate=error_rate(args), seed=args.seed)
        except ValueError as exc:  # e.g. --error-rate outside [0, 1]
            raise ConfigError("--error-rate", [str(exc)]) from exc
    if name == "random":
        return RandomPolicy(seed=args.seed)
    return HumanPolicy()


def team_runner(
    args: argparse.Namespace, progress: bool, protocol: InferenceProtocol | None = None
) -> Runner:
    """The runner of ``play`` and ``eval``: the task's environment (with ``protocol``'s settings)
    and the team of ``--team`` or ``--policy``, on the backend of ``--ray``."""
    flags = team_flag_errors(args)
    if flags:
        raise ConfigError("team flags", flags)
    env = make_env(args, protocol)
    max_new = args.max_new_tokens
    if protocol is not None and protocol.max_new_tokens is not None:
        if max_new is not None:
            raise ConfigError("--budget", ["a tokens budget sets --max-new-tokens: give one"])
        max_new = protocol.max_new_tokens
    overrides = {"temperature": args.temperature, "max_new_tokens": max_new}

    def env_fn() -> TeamEnv:
        return make_env(args, protocol)

    run_dir = getattr(args, "run_dir", None)
    if run_dir is not None:
        return _backend(args, env_fn, *_run_team(args, env, overrides), progress)
    if args.team is not None:
        from adapters.team import build_team, load_team_config

        config = load_team_config(args.team, args.team_set)
        policies, sampling = build_team(config, env.possible_agents, env.task, **overrides)
        return _backend(args, env_fn, policies, sampling, progress)
    policy = make_policy(policy_name(args), env, args)
    shared = SamplingParams().updated(**overrides)
    return _backend(args, env_fn, policy, shared, progress)


def _run_team(
    args: argparse.Namespace, env: TeamEnv, overrides: dict[str, Any]
) -> tuple[Mapping[str, Policy], dict[str, SamplingParams]]:
    """``--run-dir``'s team with ``--checkpoint``'s weights (``trainers.tools.export``), its sampling
    settings with ``--temperature`` / ``--max-new-tokens`` applied."""
    from trainers.tools.export import load_run_team

    team = load_run_team(args.run_dir, args.checkpoint)
    args.run_notes = list(team.notes)  # said by the command, and kept in eval's report
    args.run_config_changes = list(team.config_changes)
    args.run_checkpoint = team.checkpoint  # the file and stage evaluated, in the title and report
    if set(team.policies) != set(env.possible_agents):
        raise ConfigError(
            "--run-dir",
            [
                f"the run's team is {sorted(team.policies)}, but {args.task_id} with these "
                f"options has agents {sorted(env.possible_agents)}"
            ],
        )
    sampling = {a: s.updated(**overrides) for a, s in team.sampling.items()}
    return team.policies, sampling


def _backend(
    args: argparse.Namespace, env_fn: Any, policies: Any, sampling: Any, progress: bool
) -> Runner:
    """The local runner, or a RayRunner for ``eval --ray [ADDRESS] --workers N``."""
    address = getattr(args, "ray", None)
    return make_runner(
        env_fn,
        policies,
        sampling,
        backend="local" if address is None else "ray",
        progress=progress,
        workers=args.workers if getattr(args, "workers", None) is not None else 2,
        address=address or None,
    )


def add_option_arg(p: argparse.ArgumentParser) -> None:
    """``-o KEY=VALUE``: a task or environment option passed to ``make`` (repeatable)."""
    p.add_argument(
        "-o",
        "--option",
        type=parse_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="task or environment option passed to make() (JSON values), e.g. -o digits=3 "
        '-o agents=\'["solver","judge"]\'; repeatable',
    )
