"""``teamtr eval``: a team's pass@k / avg@k / maj@k table, its JSON report and transcripts, and
inference-time protocols compared at matched budgets."""

from __future__ import annotations

import argparse
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape

from tasks.base import Problem
from teamtr_cli.common import (
    add_env_args,
    error_rate,
    make_env,
    parse_option,
    policy_name,
    positive_int,
    team_flag_errors,
    team_runner,
)
from teamtr_cli.eval_tables import (
    breakdown_table,
    comparison_table,
    coordination_line,
    report_table,
)
from teamtr_core.errors import ConfigError
from teamtr_core.paths import unwritable_file
from teamtr_env.baselines import PROTOCOL_PARAMS, PROTOCOLS, InferenceProtocol, build_protocol
from teamtr_env.evaluation import (
    CLIPPED_WARN_RATIO,
    MAX_EVAL_EPISODES,
    MAX_EVAL_MESSAGES,
    EvalReport,
    evaluate,
    report_schema,
)
from teamtr_env.registration import registry
from teamtr_env.runners import ProblemDraw, Runner

DEFAULT_PROBLEMS = 100
"""``teamtr eval`` evaluates this many distinct generated problems unless ``--problems`` says."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Adds ``teamtr eval`` and its options to the CLI's subcommands."""
    ev = sub.add_parser("eval", help="evaluate a team: pass@k / avg@k / maj@k table")
    add_env_args(ev)
    ev.add_argument(
        "--run-dir",
        type=Path,
        metavar="RUN_DIR",
        help="evaluate this teamtr train run's team (its config.yaml and a checkpoint's "
        "weights) instead of --team / --policy",
    )
    ev.add_argument(
        "--checkpoint",
        default="latest",
        metavar="latest|best|stage_N",
        help="with --run-dir: the newest intact stage (default), the best validation stage's "
        "team (best.pt), or stage N",
    )
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
    _add_protocol_args(ev)
    ev.add_argument(
        "--split",
        choices=("test", "validation", "train"),
        default=None,
        help="split of generated problems, for tasks with a split option (default test); a task "
        "without one has no held-out split and is evaluated on its generator as it is",
    )
    ev.add_argument(
        "--max-episodes",
        type=positive_int,
        default=MAX_EVAL_EPISODES,
        metavar="N",
        help=f"refuse to start more than N episodes (problems x K; default {MAX_EVAL_EPISODES})",
    )
    ev.add_argument(
        "--max-messages",
        type=positive_int,
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


def _add_protocol_args(ev: argparse.ArgumentParser) -> None:
    """``--protocol``, ``--protocol-option`` and ``--budget``: protocols at matched budgets."""
    ev.add_argument(
        "--protocol",
        help="inference-time protocol(s), comma-separated: "
        + ", ".join(PROTOCOLS)
        + " (default: the task's registered team); several print a comparison",
    )
    ev.add_argument(
        "--protocol-option",
        type=parse_option,
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


def _protocols(args: argparse.Namespace) -> tuple[list[InferenceProtocol | None], dict | None]:
    """The protocols to evaluate (``[None]`` = the registered team) and the budget."""
    budget = None
    errors = []
    if args.budget:
        kind, _, size = args.budget.partition(":")
        if kind not in ("samples", "tokens") or not size.isdigit() or int(size) < 1:
            errors.append(f"--budget: expected samples:N or tokens:N, got {args.budget!r}")
        else:
            budget = {"kind": kind, "size": int(size)}
    if args.protocol is None:
        if args.budget or args.protocol_option:
            errors.append("--budget and --protocol-option need --protocol")
        if errors:
            raise ConfigError("eval", errors)
        return [None], None
    names = [n.strip() for n in args.protocol.split(",") if n.strip()]
    unknown = [n for n in names if n not in PROTOCOLS]
    if unknown or not names:
        errors.append(f"--protocol: unknown {unknown}; choose from {list(PROTOCOLS)}")
    if errors:
        raise ConfigError("eval", errors)
    params = dict(args.protocol_option)
    built: list[InferenceProtocol | None] = []
    known = set().union(*PROTOCOL_PARAMS.values())
    stray = sorted(set(params) - known)
    if stray:
        errors.append(f"--protocol-option: unknown keys {stray}; known: {sorted(known)}")
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
            errors += [f"--protocol {name} (--protocol-option, --budget): {e}" for e in exc.errors]
    if errors:
        raise ConfigError("eval", errors)
    return built, budget


def cmd_eval(args: argparse.Namespace, console: Console) -> int:
    if args.schema:
        console.print_json(json.dumps(report_schema()))
        return 0
    errors = []
    if args.k < 1 or (args.problems is not None and args.problems < 1):
        errors.append(f"--k and --problems must be >= 1, got {args.k} and {args.problems}")
    errors += _split_errors(args)
    errors += team_flag_errors(args)
    errors += _output_errors(args)
    if args.checkpoint != "latest" and args.run_dir is None:
        errors.append("--checkpoint needs --run-dir")
    if args.workers is not None and (args.ray is None or args.workers < 1):
        errors.append("--workers needs --ray and must be >= 1")
    if errors:
        raise ConfigError("eval", errors)
    if args.run_dir is not None:
        _with_run_options(args)
    elif args.team is not None and (args.team.parent / "manifest.json").is_file():
        _with_export_options(args, console)
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


def _with_run_options(args: argparse.Namespace) -> None:
    """``--run-dir`` on the run's own task: its ``task_options`` (the agents, prompts and sizes
    it trained with) come first, ``-o`` overrides them; on another task only ``-o`` applies."""
    from trainers.tools.export import run_config

    config = run_config(args.run_dir)
    _prepend_run_options(args, config.task, config.task_options)


def _with_export_options(args: argparse.Namespace, console: Console) -> None:
    """``--team`` of a ``teamtr export``: the exported run's task options, as with
    ``--run-dir``, said on the console."""
    from trainers.tools.export import export_manifest

    manifest = export_manifest(args.team.parent)
    if manifest is None:
        return
    options = manifest.get("task_options") or {}
    if _prepend_run_options(args, manifest.get("task"), options) and options:
        console.print(
            f"the exported run's task options: {json.dumps(options)} (-o overrides them)",
            highlight=False,
            soft_wrap=True,
        )


def _prepend_run_options(args: argparse.Namespace, task: Any, options: dict[str, Any]) -> bool:
    """On the run's own task (``task``), its ``options`` go before ``-o``'s, which override
    them; returns whether they applied."""
    if args.task_id != task:
        return False
    args.option = [*options.items(), *args.option]
    return True


def _split_errors(args: argparse.Namespace) -> list[str]:
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


def _output_errors(args: argparse.Namespace) -> list[str]:
    """Why ``--out`` or ``--transcripts`` could not be written at the end (checked before any
    rollout, so a long evaluation does not fail at its last step)."""
    errors = []
    outputs = [
        (flag, path)
        for flag, path in (("--out", args.out), ("--transcripts", args.transcripts))
        if path
    ]
    for flag, path in outputs:
        error = unwritable_file(path)
        if error:
            errors.append(f"{flag} {path}: {error}")
    if len(outputs) == 2 and outputs[0][1].resolve() == outputs[1][1].resolve():
        errors.append("--out and --transcripts name the same file: give two")
    return errors


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
        env = make_env(args, protocol)
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
    errors = []
    if episodes > args.max_episodes:
        errors.append(
            f"{episodes} episodes ({how}) is over the limit of {args.max_episodes} per "
            "evaluation: ask for fewer --problems or a smaller --k, or raise --max-episodes (each "
            "episode holds an environment and its records in memory)"
        )
    if messages > args.max_messages:
        errors.append(
            f"{messages} messages ({how}) is over the limit of {args.max_messages} per "
            "evaluation: ask for fewer --problems, a smaller --k or a smaller protocol "
            "(--protocol-option, --budget, -o max_turns), or raise --max-messages (each message "
            "is kept with the context its agent saw)"
        )
    if errors:
        raise ConfigError("eval", errors)


def _eval_one(
    args: argparse.Namespace,
    console: Console,
    protocol: InferenceProtocol | None,
    budget: dict | None,
) -> tuple[dict[str, Any], EvalReport]:
    runner = team_runner(args, progress=not args.no_progress, protocol=protocol)
    for note in getattr(args, "run_notes", []):
        console.print(f"[yellow]warning:[/] {escape(note)}", highlight=False)
    problems, draw, held_out = _eval_problems(args, console, runner)
    report = evaluate(
        runner,
        problems,
        args.k,
        seed=args.seed,
        include_pass_hat=args.pass_hat,
        breakdown_keys=args.breakdown,
    )
    if args.run_dir is not None:
        used = args.run_checkpoint
        team = f"run={args.run_dir} ({args.checkpoint}: {used.path.name})"
    else:
        team = f"team={args.team}" if args.team else f"policy={policy_name(args)}"
    how = f", protocol={protocol.name}" if protocol is not None else ""
    asked = f" (asked for {draw.requested})" if draw.shortfall else ""
    title = f"{args.task_id}: {team}{how}, K={args.k}, {len(problems)} distinct problems{asked}"
    _print_report(console, report, title, runner)
    payload = {
        "task": args.task_id,
        "policy": None if args.team or args.run_dir else policy_name(args),
        "run_dir": str(args.run_dir) if args.run_dir else None,
        "checkpoint": args.checkpoint if args.run_dir else None,
        **_checkpoint_used(args),
        "run_config_changes": getattr(args, "run_config_changes", None),
        "team": str(args.team) if args.team else None,
        "team_overrides": list(args.team_set),
        "error_rate": error_rate(args),
        "seed": args.seed,
        "options": dict(args.option),
        "protocol": protocol.to_dict() if protocol is not None else None,
        "budget": budget,
        "sampling": draw.to_dict(),
        "held_out": held_out,
        **report.to_dict(),
    }
    return payload, report


def _checkpoint_used(args: argparse.Namespace) -> dict[str, Any]:
    """The checkpoint file ``--run-dir`` evaluated and the stage it was saved after (``None``
    for ``best.pt``), so that a report never leaves ``latest`` to be guessed."""
    used = getattr(args, "run_checkpoint", None)
    if used is None:
        return {}
    return {"checkpoint_file": used.path.name, "checkpoint_stage": used.stage}


def _eval_problems(
    args: argparse.Namespace, console: Console, runner: Runner
) -> tuple[list[Problem], ProblemDraw, bool]:
    """The problems to evaluate, how they were drawn, and whether they are held out.

    A data file's distinct problems come in file order, each once; generated ones are drawn
    distinct. A task without a split is evaluated with a note.

    Raises:
        ConfigError: some problems are labelled ``train`` and ``--allow-train`` is not given.
    """
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
    return list(problems), draw, not splitless and not train


def _print_report(console: Console, report: EvalReport, title: str, runner: Runner) -> None:
    """The report's tables, breakdowns, coordination and task metrics, its costs, and warnings
    about cut contexts and messages cut off at the token limit."""
    stats = report.batch.stats
    console.print(report_table(report, title))
    for key, groups in report.breakdowns.items():
        console.print(breakdown_table(report, key, groups))
    if report.coordination is not None:
        console.print(coordination_line(report.coordination))
    if report.local_rewards:
        shares = ", ".join(f"{a} {v:.3f}" for a, v in report.local_rewards.items())
        console.print(f"local rewards (each agent's own part, mean): {shares}", highlight=False)
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
    failures = report.grader_failures
    failed_line = failures.message()
    if failed_line:
        loud = "[bold red]WARNING:[/]" if failures.alarming else "[yellow]warning:[/]"
        console.print(f"{loud} {escape(failed_line)}", highlight=False)


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
