"""Where a real pretrained model starts: the pretrained team on candidate tasks, held out.

Usage::

    teamtr models get smollm2-135m-instruct          # once
    .venv/bin/python benchmarks/real_model_start.py [--model models/smollm2-135m-instruct]
        [--problems 200] [--k 1] [--json docs/img/real_model_start.json]

Each candidate is a two-agent team of the same checkpoint (no training, no warm start) with role
prompts written for an instruct model, evaluated by ``teamtr eval`` (one process per candidate,
the command a user types; the JSON keeps each command) on ``--problems`` distinct problems of
the task's held-out ``test`` split at temperature 0.8. With ``--warm-run RUN_DIR``, a run of
``examples/real_smollm2.yaml``, the table adds its behaviour-cloned start: the run's held-out
evaluation before its first update.

The table answers the first question of a real-model experiment: on which task does the
pretrained team start neither at 0 nor near 1, so that training has something to show? The
issue's band is 0.05-0.7 of held-out avg@K; a candidate is ``usable`` when it starts in the band
on at least 200 distinct held-out problems. ``cut off``: the largest share of an agent's
messages cut at the token limit. Quote timings from an idle machine only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from trainers.run.config_file import load_train_config

ROOT = Path(__file__).resolve().parents[1]
TEAMTR = str(Path(sys.executable).with_name("teamtr"))
BAND = (0.05, 0.7)
MIN_PROBLEMS = 200  # distinct held-out problems a learning claim needs

_SOLVER = "You are the solver. Reply with one line: Answer: <integer>"
_CHECKER = (
    "You are the checker. Check the solver's answer and reply with one line: Answer: <integer>"
)


@dataclass(frozen=True)
class Candidate:
    """One task setting the pretrained team is measured on."""

    name: str
    task: str
    options: dict[str, Any]
    note: str
    max_new_tokens: int = 32

    def args(self) -> list[str]:
        out = [self.task]
        for key, value in self.options.items():
            out += ["-o", f"{key}={json.dumps(value)}"]
        return out


def _arith(name: str, note: str, **options: Any) -> Candidate:
    """An Arith-v0 candidate: a solver and a checker who answer ``Answer: <integer>``."""
    team = {
        "agents": ["solver", "checker"],
        "system_prompts": {"solver": _SOLVER, "checker": _CHECKER},
    }
    return Candidate(name, "teamtr/Arith-v0", {**options, **team}, note)


CANDIDATES: tuple[Candidate, ...] = (
    _arith("arith 2-digit a+b", "Arith-v0's default: two 2-digit numbers", digits=2),
    _arith(
        "arith 1-digit a+b",
        "only 100 expressions exist, about 10 in the test split: below the 200 a claim needs",
        digits=1,
    ),
    _arith(
        "arith 1-digit a±b±c",
        "three 1-digit numbers, + and -",
        digits=1,
        operands=3,
        operators="+-",
    ),
    Candidate(
        "needle in a haystack",
        "reasoning_gym/needle_haystack-v0",
        {
            "min_num_statements": 5,
            "max_num_statements": 5,
            "agents": ["solver", "checker"],
            "system_prompts": {
                "solver": "You are the solver. Find the name that answers the question. Reply "
                "with one line: Answer: <name>",
                "checker": "You are the checker. Check the solver's name against the text and "
                "reply with one line: Answer: <name>",
            },
        },
        "reasoning-gym, 5 statements: copy one name out of the text",
    ),
    Candidate(
        "convention relay",
        "teamtr/Convention-v0",
        # the task options of the config that trains this team (its role prompts included)
        dict(load_train_config(ROOT / "examples/real_smollm2.yaml").task_options),
        "pass a 3-letter word along a relay of two (the receiver sees only the sender's message)",
    ),
)


def usable(avg: float, problems: int) -> bool:
    """A start in the band, on enough distinct held-out problems to show a gain."""
    return BAND[0] <= avg <= BAND[1] and problems >= MIN_PROBLEMS


def evaluate(
    candidate: Candidate, team: list[str], problems: int, k: int, seed: int
) -> dict[str, Any]:
    """One ``teamtr eval`` of ``candidate``; its report's figures and the command."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        command = [
            TEAMTR,
            "eval",
            *candidate.args(),
            *team,
            "--max-new-tokens",
            str(candidate.max_new_tokens),
            "--k",
            str(k),
            "--problems",
            str(problems),
            "--seed",
            str(seed),
            "--no-progress",
            "--out",
            str(out),
        ]
        start = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{candidate.name}: teamtr eval failed:\n{done.stderr[-2000:]}")
        report = json.loads(out.read_text())
    avg = report["metrics"][f"avg@{k}"]
    return {
        "name": candidate.name,
        "note": candidate.note,
        "task": candidate.task,
        "options": candidate.options,
        "k": k,
        "problems": report["n_problems_distinct"],
        "avg": avg["mean"],
        "ci": [avg["ci_low"], avg["ci_high"]],
        "in_band": usable(avg["mean"], report["n_problems_distinct"]),
        "clipped": report.get("clipped_ratio"),
        "tokens_per_episode": report["tokens"]["per_episode"],
        "wall_s": round(wall, 1),
        "command": shlex.join(["teamtr", *(_stable(arg) for arg in command[1:-2])]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="models/smollm2-135m-instruct")
    parser.add_argument("--problems", type=int, default=200)
    parser.add_argument("--k", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="*", help="candidate names to run (default: all)")
    parser.add_argument(
        "--warm-run",
        type=Path,
        help="a run of examples/real_smollm2.yaml: add its behaviour-cloned start",
    )
    parser.add_argument("--json", type=Path, default=ROOT / "docs/img/real_model_start.json")
    args = parser.parse_args(argv)
    model = Path(args.model).resolve()
    if not (model / "config.json").is_file():
        raise SystemExit(
            f"no model folder at {model}: run `teamtr models get smollm2-135m-instruct` first"
        )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        team_file = Path(tmp) / "team.yaml"
        team_file.write_text(json.dumps({"default": {"backend": "hf", "path": str(model)}}))
        for candidate in CANDIDATES:
            if args.only and candidate.name not in args.only:
                continue
            rows.append(
                evaluate(candidate, ["--team", str(team_file)], args.problems, args.k, args.seed)
            )
            print(f"{candidate.name}: avg@{args.k} {rows[-1]['avg']:.3f}", flush=True)
    if args.warm_run is not None:
        rows.append(warm_start_row(args.warm_run))
    table = Table(title=f"The pretrained team on held-out problems ({model.name}, T=0.8)")
    columns = ("candidate", "problems", f"avg@{args.k}", "95% CI", "cut off", "usable")
    for column in columns:
        table.add_column(column)
    for row in rows:
        clipped = row["clipped"] or {}
        cut = max(clipped.values()) if clipped else 0.0
        table.add_row(
            row["name"],
            str(row["problems"]),
            f"{row['avg']:.3f}",
            f"[{row['ci'][0]:.3f}, {row['ci'][1]:.3f}]",
            f"{cut:.0%}",
            "yes" if row["in_band"] else "no",
        )
    Console().print(table)
    shown = str(model.relative_to(ROOT) if model.is_relative_to(ROOT) else model)
    result = {
        "model": shown,
        "source": _source(model),
        "team_yaml": {"default": {"backend": "hf", "path": shown}},
        "band": BAND,
        "min_problems": MIN_PROBLEMS,
        "temperature": 0.8,
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "rows": rows,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.json}")
    return 0


def warm_start_row(run_dir: Path) -> dict[str, Any]:
    """The behaviour-cloned start of a run of ``examples/real_smollm2.yaml``: its held-out
    evaluation before the first update (``summary.json``'s ``before``)."""
    summary = json.loads((run_dir / "summary.json").read_text())
    config = summary["config"]
    k = int(config["eval"]["k"])
    low, high = summary["before_ci"][f"eval/avg@{k}"]
    avg = summary["before"][f"eval/avg@{k}"]
    return {
        "name": "convention relay, warm start",
        "note": f"after {config['sft']['steps']} behaviour-cloning steps (the run's start)",
        "task": summary["task"],
        "options": config["task_options"],
        "k": k,
        "problems": summary["eval_problems_distinct"],
        "avg": avg,
        "ci": [low, high],
        "in_band": usable(avg, summary["eval_problems_distinct"]),
        "clipped": {},
        "run_dir": str(run_dir),
    }


def _stable(arg: str) -> str:
    """A command argument as the JSON keeps it: the temporary team file is ``team.yaml``."""
    return "team.yaml" if arg.endswith("team.yaml") else arg


def _source(model: Path) -> dict[str, Any] | None:
    path = model / "teamtr_source.json"
    return json.loads(path.read_text()) if path.is_file() else None


if __name__ == "__main__":
    raise SystemExit(main())
