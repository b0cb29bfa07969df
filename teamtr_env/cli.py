"""The ``teamtr`` command line: list tasks, play one episode, evaluate a team."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table

from adapters.scripted import HumanPolicy, RandomPolicy, ScriptedExpert
from teamtr_core.errors import ConfigError, TeamTRError
from teamtr_core.policy import Policy, SamplingParams
from teamtr_env.baselines import PROTOCOL_PARAMS, PROTOCOLS, InferenceProtocol, build_protocol
from teamtr_env.env import TeamEnv
from teamtr_env.evaluation import (
    CLIPPED_WARN_RATIO,
    MAX_EVAL_EPISODES,
    MAX_EVAL_MESSAGES,
    EvalReport,
    evaluate,
    report_schema,
)
from teamtr_env.registration import registry
from teamtr_env.rollout import format_episode
from teamtr_env.runners import Runner, make_runner

POLICIES = ("scripted", "random", "human")
DEFAULT_PROBLEMS = 100
"""``teamtr eval`` evaluates this many distinct generated problems unless ``--problems`` says."""


def _parse_option(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key.strip(), value


def _int_at_least(low: int, what: str) -> Callable[[str], int]:
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


_non_negative_int = _int_at_least(0, "a non-negative integer")
_positive_int = _int_at_least(1, "a positive integer")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="teamtr", description="Trainable, measurable multi-agent LLM teams."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    sub.add_parser("tasks", help="list registered task ids with descriptions")
    sub.add_parser("trainers", help="list registered learners (teamtr train --trainer ID)")

    def add_env_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("task_id", metavar="ID", help="a registered id, e.g. teamtr/Arith-v0")
        p.add_argument(
            "--policy", choices=POLICIES, default="scripted", help="every agent's policy"
        )
        p.add_argument("--error-rate", type=float, default=0.0, help="scripted expert error rate")
        p.add_argument(
            "--seed", type=_non_negative_int, default=0, help="seeds problems, episodes, policies"
        )
        p.add_argument(
            "-o",
            "--option",
            type=_parse_option,
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="task or environment option passed to make() (JSON values), e.g. -o digits=3 "
            '-o agents=\'["solver","judge"]\'; repeatable',
        )
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

    play = sub.add_parser("play", help="play one episode and print the transcript")
    add_env_args(play)

    ev = sub.add_parser("eval", help="evaluate a team: pass@k / avg@k / maj@k table")
    add_env_args(ev)
    ev.add_argument("--k", type=int, default=4, help="samples per problem")
    ev.add_argument(
        "--problems",
        type=int,
        help=f"number of distinct problems (default: {DEFAULT_PROBLEMS} generated, or every "
        "problem of --data-path)",
    )
    ev.add_argument("--out", type=Path, help="write the JSON report here")
    ev.add_argument("--transcripts", type=Path, help="write per-episode JSONL transcripts here")
    ev.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="play the rollouts on Ray workers: a cluster address ('auto', 'ray://head:10001'), "
        "or nothing for a local Ray (needs pip install -e '.[ray]')",
    )
    ev.add_argument("--workers", type=int, help="Ray rollout workers (with --ray; default 2)")
    ev.add_argument("--pass-hat", action="store_true", help="also report pass^k")
    ev.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    ev.add_argument(
        "--protocol",
        help="inference-time protocol(s), comma-separated: "
        + ", ".join(PROTOCOLS)
        + " (default: the task's registered team); several print a comparison",
    )
    ev.add_argument(
        "--protocol-option",
        type=_parse_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="protocol size: n, rounds (debate), roles, turns (role_play); repeatable",
    )
    ev.add_argument(
        "--budget",
        metavar="KIND:N",
        help="matched budget per episode: samples:N (messages) or tokens:N (generated tokens)",
    )
    ev.add_argument(
        "--split",
        choices=("test", "validation", "train"),
        default=None,
        help="split of generated problems, for tasks with a split option (default test); a task "
        "without one has no held-out split and is evaluated on its generator as it is",
    )
    ev.add_argument(
        "--max-episodes",
        type=_positive_int,
        default=MAX_EVAL_EPISODES,
        metavar="N",
        help=f"refuse to start more than N episodes (problems x K; default {MAX_EVAL_EPISODES})",
    )
    ev.add_argument(
        "--max-messages",
        type=_positive_int,
        default=MAX_EVAL_MESSAGES,
        metavar="N",
        help="refuse to start more than N messages (episodes x messages per episode; default "
        f"{MAX_EVAL_MESSAGES})",
    )
    ev.add_argument(
        "--allow-train",
        action="store_true",
        help="evaluate even if problems are labelled 'train' (refused by default)",
    )
    ev.add_argument(
        "--breakdown",
        action="append",
        default=None,
        metavar="META_KEY",
        help="break metrics down by this problem meta key (default: every key with 2..20 values)",
    )
    ev.add_argument("--schema", action="store_true", help="print the report's JSON Schema and exit")

    train = sub.add_parser(
        "train", help="train a team (no arguments: the CPU demo, TeamTR on tiny models)"
    )
    train.add_argument("--config", type=Path, help="training config (YAML/JSON); default: the demo")
    train.add_argument(
        "--set",
        dest="train_set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set schedule.method=naive_sequential; repeatable",
    )
    train.add_argument(
        "--trainer",
        metavar="ID",
        help="the learner: a registered id (teamtr trainers) or short name; same as "
        "--set schedule.method=ID",
    )
    train.add_argument("--run-dir", help="where logs, checkpoints and the summary go")
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --run-dir after its last intact checkpoint, with its own "
        "config.yaml (a --config or --set that changes the results is refused)",
    )
    train.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run already in --run-dir (its files are deleted first); without it "
        "a non-empty run directory is refused",
    )
    train.add_argument("--schema", action="store_true", help="print the config's JSON Schema")

    swap = sub.add_parser(
        "swap",
        help="replace one agent's model in a trained run (optionally Stage-0 aligned) and resume "
        "TeamTR in a new run directory",
    )
    swap.add_argument("run_dir", type=Path, help="the trained run (only read)")
    swap.add_argument("--agent", required=True, help="the agent whose model is replaced")
    swap.add_argument("--model", required=True, type=Path, help="the new model's directory")
    swap.add_argument("--out", type=Path, help="the new run directory (default RUN_DIR-swap-AGENT)")
    swap.add_argument(
        "--stages", type=_positive_int, default=4, help="TeamTR stages after the swap"
    )
    swap.add_argument("--align", action="store_true", help="Stage-0 alignment before resuming")
    swap.add_argument("--probes", type=_positive_int, default=500, help="P probe contexts")
    swap.add_argument("--delta-align", type=float, default=0.01, help="stop at this held-out KL")
    swap.add_argument("--align-steps", type=_positive_int, default=200, help="at most this many")
    swap.add_argument("--align-lr", type=float, default=1e-3, help="alignment learning rate")
    swap.add_argument(
        "--align-direction",
        choices=["new_old", "old_new"],
        default="new_old",
        help="KL(new||old) on the new model's messages, or KL(old||new) on the old agent's",
    )
    swap.add_argument(
        "--protocol",
        type=_parse_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a protocol setting the new model expects (system_prompt, reasoning, tool_calls, "
        "header; JSON values); it must equal the team's",
    )

    diag = sub.add_parser(
        "diagnostics",
        help="a run's per-stage diagnostics (D_occ, stale gap, improvement vs certificate, ...)",
    )
    diag.add_argument("run_dir", type=Path, help="a training run (finished or in progress)")
    diag.add_argument("--json", type=Path, help="also write the per-stage values as JSON")

    models = sub.add_parser("models", help="build local models")
    models_sub = models.add_subparsers(dest="models_command", metavar="ACTION")
    tiny = models_sub.add_parser(
        "build-tiny", help="build a tiny char-level Llama + tokenizer, saved offline"
    )
    tiny.add_argument("path", type=Path, help="output directory")
    tiny.add_argument("--hidden-size", type=int, default=128)
    tiny.add_argument("--layers", type=int, default=2)
    tiny.add_argument("--heads", type=int, default=4)
    tiny.add_argument("--intermediate-size", type=int, default=512)
    tiny.add_argument("--max-positions", type=int, default=1024)
    tiny.add_argument("--seed", type=_non_negative_int, default=0)
    return parser


def _make_env(args: argparse.Namespace, protocol: InferenceProtocol | None = None) -> TeamEnv:
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


def _make_policy(name: str, env: TeamEnv, args: argparse.Namespace) -> Policy:
    if name == "scripted":
        try:
            return ScriptedExpert(env.task, error_rate=args.error_rate, seed=args.seed)
        except TypeError as exc:  # the task has no scripted expert
            raise ConfigError("--policy", [str(exc)]) from exc
        except ValueError as exc:  # e.g. --error-rate outside [0, 1]
            raise ConfigError("--error-rate", [str(exc)]) from exc
    if name == "random":
        return RandomPolicy(seed=args.seed)
    return HumanPolicy()


def _runner(
    args: argparse.Namespace, progress: bool, protocol: InferenceProtocol | None = None
) -> Runner:
    env = _make_env(args, protocol)
    max_new = args.max_new_tokens
    if protocol is not None and protocol.max_new_tokens is not None:
        if max_new is not None:
            raise ConfigError("--budget", ["a tokens budget sets --max-new-tokens: give one"])
        max_new = protocol.max_new_tokens
    overrides = {"temperature": args.temperature, "max_new_tokens": max_new}

    def env_fn() -> TeamEnv:
        return _make_env(args, protocol)

    if args.team is not None:
        from adapters.team import build_team, load_team_config

        config = load_team_config(args.team, args.team_set)
        policies, sampling = build_team(config, env.possible_agents, env.task, **overrides)
        return _backend(args, env_fn, policies, sampling, progress)
    if args.team_set:
        raise ConfigError("--set", ["--set overrides a team config: pass --team CONFIG too"])
    policy = _make_policy(args.policy, env, args)
    shared = SamplingParams().updated(**overrides)
    return _backend(args, env_fn, policy, shared, progress)


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


def _protocols(args: argparse.Namespace) -> tuple[list[InferenceProtocol | None], dict | None]:
    """The protocols to evaluate (``[None]`` = the registered team) and the budget."""
    budget = None
    problems = []
    if args.budget:
        kind, _, size = args.budget.partition(":")
        if kind not in ("samples", "tokens") or not size.isdigit() or int(size) < 1:
            problems.append(f"--budget: expected samples:N or tokens:N, got {args.budget!r}")
        else:
            budget = {"kind": kind, "size": int(size)}
    if args.protocol is None:
        if args.budget or args.protocol_option:
            problems.append("--budget and --protocol-option need --protocol")
        if problems:
            raise ConfigError("eval", problems)
        return [None], None
    names = [n.strip() for n in args.protocol.split(",") if n.strip()]
    unknown = [n for n in names if n not in PROTOCOLS]
    if unknown or not names:
        problems.append(f"--protocol: unknown {unknown}; choose from {list(PROTOCOLS)}")
    if problems:
        raise ConfigError("eval", problems)
    params = dict(args.protocol_option)
    built: list[InferenceProtocol | None] = []
    known = set().union(*PROTOCOL_PARAMS.values())
    stray = sorted(set(params) - known)
    if stray:
        problems.append(f"--protocol-option: unknown keys {stray}; known: {sorted(known)}")
    for name in names:
        allowed = PROTOCOL_PARAMS[name]
        own = {k: v for k, v in params.items() if k in allowed}
        try:
            built.append(
                build_protocol(
                    name,
                    budget_kind=budget["kind"] if budget else None,
                    budget=budget["size"] if budget else None,
                    **own,
                )
            )
        except ConfigError as exc:  # the sizes come from --protocol-option and --budget
            problems += [
                f"--protocol {name} (--protocol-option, --budget): {p}" for p in exc.problems
            ]
    if problems:
        raise ConfigError("eval", problems)
    return built, budget


def cmd_tasks(console: Console) -> int:
    table = Table(title="Registered tasks")
    table.add_column("id", style="bold")
    table.add_column("description")
    table.add_column("from")
    for task_id in registry:
        spec = registry[task_id]
        table.add_row(task_id, spec.description, spec.plugin or "built-in")
    console.print(table)
    for err in registry.plugin_errors:
        console.print(f"[yellow]warning:[/] {err}")
    return 0


def cmd_trainers(console: Console) -> int:
    from trainers.registry import ALIASES
    from trainers.registry import registry as trainers

    short = {v: k for k, v in ALIASES.items()}
    table = Table(title="Registered learners")
    table.add_column("id", style="bold")
    table.add_column("short name")
    table.add_column("description")
    table.add_column("from")
    for trainer_id in trainers:
        spec = trainers[trainer_id]
        table.add_row(
            trainer_id, short.get(trainer_id, ""), spec.description, spec.plugin or "built-in"
        )
    console.print(table)
    for err in trainers.plugin_errors:
        console.print(f"[yellow]warning:[/] {err}")
    return 0


def cmd_play(args: argparse.Namespace, console: Console) -> int:
    runner = _runner(args, progress=False)
    problem = runner.sample_problems(1, seed=args.seed)[0]
    batch = runner.rollout([problem], group_size=1, seed=args.seed)
    episode = batch.episodes[0]
    console.print(f"[bold]{args.task_id}[/] problem {episode.problem_id} (seed {args.seed})")
    console.print(format_episode(episode), markup=False, highlight=False)
    return 0


def report_table(report: EvalReport, title: str) -> Table:
    table = Table(title=title)
    for col in ("metric", "mean", "95% CI", "problems"):
        table.add_column(col, justify="right" if col != "metric" else "left")
    for name, m in report.metrics.items():
        table.add_row(
            name, f"{m.mean:.3f}", f"[{m.ci_low:.3f}, {m.ci_high:.3f}]", str(m.n_problems)
        )
    return table


def cmd_eval(args: argparse.Namespace, console: Console) -> int:
    if args.schema:
        console.print_json(json.dumps(report_schema()))
        return 0
    problems = []
    if args.k < 1 or (args.problems is not None and args.problems < 1):
        problems.append(f"--k and --problems must be >= 1, got {args.k} and {args.problems}")
    problems += _split_problems(args)
    problems += _output_problems(args)
    if args.workers is not None and (args.ray is None or args.workers < 1):
        problems.append("--workers needs --ray and must be >= 1")
    if problems:
        raise ConfigError("eval", problems)
    protocols, budget = _protocols(args)
    _check_workload(args, protocols)
    args.written = []  # what an interrupt leaves behind
    payloads, batches = [], []
    for protocol in protocols:
        payload, report = _eval_one(args, console, protocol, budget)
        payloads.append(payload)
        batches.append(report)
    if len(payloads) > 1:
        console.print(comparison_table(payloads, args))
    if args.out:
        doc = payloads[0] if len(payloads) == 1 else {"comparison": payloads, "budget": budget}
        _write_atomically(args.out, lambda fh: fh.write(json.dumps(doc, indent=2, default=str)))
        args.written.append(args.out)
        console.print(f"report written to {args.out}")
    if args.transcripts:

        def write_transcripts(fh: TextIO) -> None:
            for protocol, report in zip(protocols, batches):
                for ep in report.batch.to_dict()["episodes"]:
                    if protocol is not None:
                        ep = {"protocol": protocol.name, **ep}
                    fh.write(json.dumps(ep, ensure_ascii=False, default=str) + "\n")

        _write_atomically(args.transcripts, write_transcripts)
        args.written.append(args.transcripts)
        console.print(f"transcripts written to {args.transcripts}")
    return 0


def _split_problems(args: argparse.Namespace) -> list[str]:
    """``--split`` chooses generated problems of a task with a ``split`` option; anywhere else it
    would be ignored, so it is refused instead."""
    if args.split is None:
        return []
    if args.data_path:
        return [
            "--split chooses generated problems; the problems of --data-path keep the split "
            "they are labelled with (drop --split)"
        ]
    if "split" in dict(args.option):
        return ["--split and -o split=... both choose the split: give one"]
    if not registry.spec(args.task_id).accepts("split"):
        return [
            f"--split: {args.task_id} has no split option, so its generator has no held-out "
            "split to draw from (drop --split to evaluate its problems as they are; a task gets "
            "splits with BaseTask.draw_in_split, see docs/adding-a-task.md)"
        ]
    return []


def _output_problems(args: argparse.Namespace) -> list[str]:
    """Why ``--out`` or ``--transcripts`` could not be written at the end (checked before any
    rollout, so a long evaluation does not fail at its last step)."""
    problems = []
    outputs = [
        (flag, path)
        for flag, path in (("--out", args.out), ("--transcripts", args.transcripts))
        if path
    ]
    for flag, path in outputs:
        problem = _unwritable(path)
        if problem:
            problems.append(f"{flag} {path}: {problem}")
    if len(outputs) == 2 and outputs[0][1].resolve() == outputs[1][1].resolve():
        problems.append("--out and --transcripts name the same file: give two")
    return problems


def _unwritable(path: Path) -> str | None:
    """Why a file could not be written at ``path`` (``None``: it can). Creates nothing."""
    if path.is_dir():
        return "is a directory"
    if path.exists():
        return None if os.access(path, os.W_OK) else "is not writable"
    folder = path.parent
    while not folder.exists():
        if folder.parent == folder:
            break
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a directory"
    if folder != path.parent:  # the missing folders are created at the end
        return None if os.access(folder, os.W_OK | os.X_OK) else f"{folder} is not writable"
    try:  # a real probe where it is cheap: the folder exists
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return f"cannot create a file in {folder} ({exc.strerror or exc})"
    return None


def _write_atomically(path: Path, write: Callable[[TextIO], Any]) -> None:
    """Writes a file completely or not at all (a temporary file renamed over ``path``), so an
    interrupted command never leaves a partial report that looks complete."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as fh:  # the umask's permissions, as before
            write(fh)
        if path.exists():
            shutil.copymode(path, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _check_workload(args: argparse.Namespace, protocols: list[InferenceProtocol | None]) -> None:
    """Refuses, before any problem is drawn, an evaluation past ``--max-episodes`` or
    ``--max-messages`` (problems x K x messages per episode, summed over the protocols)."""
    episodes = messages = 0
    parts = []
    for protocol in protocols:
        env = _make_env(args, protocol)
        if env.problems is not None:
            available = len({p.id for p in env.problems})
            n = min(args.problems, available) if args.problems else available
        else:
            n = args.problems or DEFAULT_PROBLEMS
        per_episode = env.protocol.turn_limit
        episodes += n * args.k
        messages += n * args.k * per_episode
        name = protocol.name if protocol is not None else "the task's team"
        parts.append(f"{name}: {n} problems x K={args.k} x {per_episode} messages per episode")
    how = "; ".join(parts)
    problems = []
    if episodes > args.max_episodes:
        problems.append(
            f"{episodes} episodes ({how}) is over the limit of {args.max_episodes} per "
            "evaluation: ask for fewer --problems or a smaller --k, or raise --max-episodes (each "
            "episode holds an environment and its records in memory)"
        )
    if messages > args.max_messages:
        problems.append(
            f"{messages} messages ({how}) is over the limit of {args.max_messages} per "
            "evaluation: ask for fewer --problems, a smaller --k or a smaller protocol "
            "(--protocol-option, --budget, -o max_turns), or raise --max-messages (each message "
            "is kept with the context its agent saw)"
        )
    if problems:
        raise ConfigError("eval", problems)


def _eval_one(
    args: argparse.Namespace,
    console: Console,
    protocol: InferenceProtocol | None,
    budget: dict | None,
) -> tuple[dict[str, Any], EvalReport]:
    runner = _runner(args, progress=not args.no_progress, protocol=protocol)
    fixed = runner.env.problems
    if fixed is not None:  # a data file: evaluate its distinct problems in file order, each once
        wanted = args.problems or len({p.id for p in fixed})
        problems, draw = runner.sample_distinct(wanted, seed=args.seed, in_order=True)
    else:
        problems, draw = runner.sample_distinct(args.problems or DEFAULT_PROBLEMS, seed=args.seed)
    if draw.shortfall:
        console.print(
            f"[yellow]note:[/] {draw.message}; evaluating those {draw.found}", highlight=False
        )
    splitless = fixed is None and not registry.spec(args.task_id).accepts("split")
    train = [p.id for p in problems if p.split == "train"]
    if splitless:
        console.print(
            f"[yellow]note:[/] {args.task_id} has no split option, so its generated problems "
            "are not held out from training: they are evaluated as they are (a task gets a "
            "held-out split with BaseTask.draw_in_split; see docs/adding-a-task.md)",
            highlight=False,
        )
    elif train and not args.allow_train:
        fix = (
            "Use a file of held-out (validation/test) problems"
            if fixed is not None
            else "Use --split test (the default) or --split validation"
        )
        raise ConfigError(
            "eval",
            [
                f"{len(train)} of the {len(problems)} problems are labelled 'train' (e.g. "
                f"{train[0]!r}): evaluating on training data is refused. {fix}, or pass "
                "--allow-train to do it knowingly."
            ],
        )
    report = evaluate(
        runner,
        problems,
        args.k,
        seed=args.seed,
        include_pass_hat=args.pass_hat,
        breakdown_keys=args.breakdown,
    )
    stats = report.batch.stats
    team = f"team={args.team}" if args.team else f"policy={args.policy}"
    how = f", protocol={protocol.name}" if protocol is not None else ""
    asked = f" (asked for {draw.requested})" if draw.shortfall else ""
    title = f"{args.task_id}: {team}{how}, K={args.k}, {len(problems)} distinct problems{asked}"
    console.print(report_table(report, title))
    for key, groups in report.breakdowns.items():
        console.print(breakdown_table(report, key, groups))
    if report.coordination is not None:
        console.print(_coordination_line(report.coordination))
    for name, value in report.task_metrics.items():
        console.print(f"{name}: {value:.3f}" if isinstance(value, float) else f"{name}: {value}")
    console.print(
        f"{stats.envs} episodes, {stats.steps} steps, {stats.total_policy_calls} policy calls, "
        f"{stats.tokens_generated} tokens ({stats.tokens_generated / max(stats.envs, 1):.1f} per "
        f"episode), {stats.wall_s:.2f} s ({stats.overhead_s / max(stats.wall_s, 1e-9):.0%} "
        "outside the policies)"
    )
    if report.context_truncated:
        limit = runner.env.protocol.max_context_chars
        console.print(
            f"[yellow]warning:[/] in {report.context_truncated} of {stats.envs} episodes an "
            f"agent's context was cut to max_context_chars={limit} (old messages dropped or the "
            "start of the problem cut off), so it did not see everything; raise it with -o "
            "max_context_chars=N (transcripts mark these episodes context_truncated: true)",
            highlight=False,
        )
    clipped_line = _clipped_line(report.clipped_ratio, runner)
    if clipped_line:
        console.print(clipped_line, highlight=False)
    payload = {
        "task": args.task_id,
        "policy": None if args.team else args.policy,
        "team": str(args.team) if args.team else None,
        "team_overrides": list(args.team_set),
        "error_rate": args.error_rate,
        "seed": args.seed,
        "options": dict(args.option),
        "protocol": protocol.to_dict() if protocol is not None else None,
        "budget": budget,
        "sampling": draw.to_dict(),
        "held_out": not splitless and not train,
        **report.to_dict(),
    }
    return payload, report


def _clipped_line(ratios: dict[str, float], runner: Runner) -> str | None:
    """Each agent's share of messages that hit the token limit, when any did; a warning when
    one agent's share exceeds ``CLIPPED_WARN_RATIO``."""
    if not any(ratios.values()):
        return None
    shares = ", ".join(
        f"{agent} {ratio:.0%} (max_new_tokens {runner.sampling[agent].max_new_tokens})"
        for agent, ratio in ratios.items()
    )
    head = "messages cut off at the token limit (no end token): " + shares
    if max(ratios.values()) <= CLIPPED_WARN_RATIO:
        return head
    return (
        f"[yellow]warning:[/] {head}. Answers are being cut off: raise --max-new-tokens (a team "
        "config: its sampling.max_new_tokens) to the longest answer in tokens plus the end token"
    )


def breakdown_table(report: EvalReport, key: str, groups: dict[str, dict[str, Any]]) -> Table:
    """pass@1 / avg@K / pass@K per value of one ``meta`` key."""
    k = report.k
    table = Table(title=f"by {key}")
    for col in (key, "problems", "pass@1", f"avg@{k}", f"pass@{k}"):
        table.add_column(col, justify="left" if col == key else "right")
    for value, sub in groups.items():
        m = sub["metrics"]
        cells = [
            f"{m[name].mean:.3f}" if name in m else "-"
            for name in ("pass@1", f"avg@{k}", f"pass@{k}")
        ]
        table.add_row(value, str(sub["n_problems"]), *cells)
    return table


def comparison_table(payloads: list[dict[str, Any]], args: argparse.Namespace) -> Table:
    """One row per protocol: accuracy (± half the 95% bootstrap interval), consensus-on-correct and
    the budget actually used (messages and tokens per episode)."""
    k = args.k
    table = Table(title=f"{args.task_id}: protocols compared (K={k})")
    cols = ("protocol", "msgs/ep", "tokens/ep", f"avg@{k}", f"pass@{k}", f"maj@{k}", "consensus")
    for col in cols:
        table.add_column(col, justify="left" if col == "protocol" else "right")
    for p in payloads:
        m = p["metrics"]

        def cell(name: str, m: dict[str, Any] = m) -> str:
            e = m.get(name)
            return f"{e['mean']:.3f}±{(e['ci_high'] - e['ci_low']) / 2:.2f}" if e else "-"

        coord = p.get("coordination") or {}
        cons = coord.get("consensus_on_correct")
        table.add_row(
            p["protocol"]["name"] if p["protocol"] else "team",
            f"{p['tokens']['messages_per_episode']:.1f}",
            f"{p['tokens']['per_episode']:.1f}",
            cell(f"avg@{k}"),
            cell(f"pass@{k}"),
            cell(f"maj@{k}"),
            "-" if cons is None else f"{cons:.3f}",
        )
    return table


def _coordination_line(c: dict[str, Any]) -> str:
    def f(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    return (
        f"coordination: consensus-on-correct {f(c['consensus_on_correct'])}, agreement "
        f"{f(c['agreement'])}, regression rate {f(c['regression_rate'])} "
        f"({c['regressions']}/{c['transitions_from_correct']}), fix rate {f(c['fix_rate'])} "
        f"({c['fixes']}/{c['transitions_from_wrong']})"
    )


def cmd_train(args: argparse.Namespace, console: Console) -> int:
    from teamtr_core.config import json_schema
    from trainers.config import TrainConfig, load_train_config
    from trainers.run import run_training

    if args.schema:
        console.print_json(json.dumps(json_schema(TrainConfig)))
        return 0
    overrides = list(args.train_set) + ([f"run_dir={args.run_dir}"] if args.run_dir else [])
    if args.trainer:
        overrides.append(f"schedule.method={args.trainer}")
    saved = Path(args.run_dir or TrainConfig().run_dir) / "config.yaml"
    path = args.config
    if path is None and args.resume and saved.exists():  # a resume continues with its own config
        path = saved
    config = load_train_config(path, overrides)  # one rule with or without a file
    run_training(config, resume=args.resume, overwrite=args.overwrite, console=console)
    return 0


def cmd_swap(args: argparse.Namespace, console: Console) -> int:
    from trainers.align import AlignConfig
    from trainers.swap import SwapConfig, swap_agent

    try:
        align = (
            AlignConfig(
                probes=args.probes,
                delta_align=args.delta_align,
                max_steps=args.align_steps,
                lr=args.align_lr,
                direction=args.align_direction,
            )
            if args.align
            else None
        )
    except ValueError as exc:
        raise ConfigError("teamtr swap", [str(exc)]) from None
    config = SwapConfig(
        str(args.run_dir),
        args.agent,
        str(args.model),
        out=None if args.out is None else str(args.out),
        stages=args.stages,
        align=align,
        protocol=dict(args.protocol),
    )
    record = swap_agent(config, console=console)
    console.print(f"swap record: {config.out_dir / 'swap.json'} (aligned: {record['aligned']})")
    return 0


def cmd_diagnostics(args: argparse.Namespace, console: Console) -> int:
    """``teamtr diagnostics RUN_DIR``: the table of a run's per-stage diagnostics."""
    from trainers.stage_diagnostics import run_diagnostics

    stages = run_diagnostics(args.run_dir)
    if not stages:
        console.print(
            f"{args.run_dir} has no diagnostics yet (no finished stage, or diagnostics: off)"
        )
        return 0

    def num(stage: dict[str, float], key: str, fmt: str = ".3f") -> str | None:
        value = stage.get(key)
        return None if value is None else format(value, fmt)

    def col(key: str, fmt: str) -> Callable[[dict[str, float]], str | None]:
        return lambda stage: num(stage, key, fmt)

    def change(stage: dict[str, float]) -> str | None:
        x, y = num(stage, "diag/j_before", ".2f"), num(stage, "diag/j_after", ".2f")
        return None if x is None or y is None else f"{x}->{y}"

    columns: list[tuple[str, Callable[[dict[str, float]], str | None]]] = [
        ("D_occ", col("diag/d_occ", ".2f")),
        ("floor", col("diag/d_occ_noise_floor", ".2f")),
        ("Δ_stale", col("stage/delta_stale", ".3f")),
        ("floor", col("stage/delta_stale_noise_floor", ".3f")),
        ("J", change),
        ("ΔJ", col("diag/improvement", "+.3f")),
        ("bound", col("diag/certificate_lb", ".2f")),
        ("Σζ", col("diag/zeta_proxy", ".2f")),
        ("flip25", col("diag/flip_rate_25", ".2f")),
        ("flip50", col("diag/flip_rate_50", ".2f")),
        ("ESS/B", col("diag/iw_ess_over_b", ".2f")),
    ]
    shown = [(t, f) for t, f in columns if any(f(s) is not None for s in stages)]
    table = Table(
        title=f"diagnostics of {args.run_dir} (docs/diagnostics.md)",
        box=None,
        padding=(0, 1),
        collapse_padding=True,
        header_style="bold underline",
    )
    table.add_column("stage", justify="right", no_wrap=True)
    for title, _ in shown:
        table.add_column(title, justify="right", no_wrap=True)
    for stage in stages:
        table.add_row(str(stage["stage"]), *(f(stage) or "-" for _, f in shown))
    console.print(table)
    last = stages[-1]
    if "diag/violation_rate" in last:
        rho = last.get("diag/rank_corr")
        console.print(
            f"certificate over {len(stages)} stages: violation rate "
            f"{last['diag/violation_rate']:.2f}, rank correlation with the improvement "
            + ("undefined" if rho is None else f"{rho:+.2f}")
        )
    if args.json is not None:
        args.json.write_text(json.dumps(stages, indent=2))
        console.print(f"wrote {args.json}")
    return 0


def cmd_models(args: argparse.Namespace, console: Console) -> int:
    if args.models_command != "build-tiny":
        raise ConfigError("models", ["expected an action: teamtr models build-tiny PATH"])
    from adapters.tiny import TinyModelSpec, build_tiny_model

    try:
        spec = TinyModelSpec(
            hidden_size=args.hidden_size,
            num_layers=args.layers,
            num_heads=args.heads,
            intermediate_size=args.intermediate_size,
            max_positions=args.max_positions,
            seed=args.seed,
        )
    except ValueError as exc:  # the flags are the user's input
        raise ConfigError("teamtr models build-tiny", [str(exc)]) from exc
    path = build_tiny_model(args.path, spec)
    console.print(f"tiny model written to {path} (load it with HFPolicy.from_pretrained)")
    return 0


def _quiet_libraries() -> None:
    """Keeps third-party noise (per-file loading bars, a peft deprecation) off the CLI's output."""
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated")
    with contextlib.suppress(ImportError):
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``teamtr`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    console = Console()
    _quiet_libraries()
    if args.command is None:
        parser.print_help()
        return 0
    try:
        if args.command == "tasks":
            return cmd_tasks(console)
        if args.command == "trainers":
            return cmd_trainers(console)
        if args.command == "play":
            return cmd_play(args, console)
        if args.command == "models":
            return cmd_models(args, console)
        if args.command == "train":
            return cmd_train(args, console)
        if args.command == "swap":
            return cmd_swap(args, console)
        if args.command == "diagnostics":
            return cmd_diagnostics(args, console)
        return cmd_eval(args, console)
    except (TeamTRError, OSError) as exc:  # user errors; any other exception is a bug
        err = Console(stderr=True, soft_wrap=True)  # no hard wraps: messages stay greppable
        err.print(f"error: {exc}", markup=False, highlight=False, style="red")
        return 2
    except KeyboardInterrupt:  # Ctrl-C: one line, no traceback, the shell's status for SIGINT
        err = Console(stderr=True, soft_wrap=True)
        err.print(f"interrupted: {_interrupted(args)}", markup=False, highlight=False)
        return 130


def _interrupted(args: argparse.Namespace) -> str:
    """What an interrupted command leaves behind."""
    if args.command == "eval":
        done = getattr(args, "written", [])
        unwritten = [str(p) for p in (args.out, args.transcripts) if p and p not in done]
        return "the evaluation did not finish" + (
            f"; nothing was written to {' or '.join(unwritten)}" if unwritten else ""
        )
    if args.command == "train":
        return (
            "training stopped; what the run finished (logs, checkpoints) stays in its run directory"
        )
    return f"teamtr {args.command} stopped"


if __name__ == "__main__":
    sys.exit(main())
