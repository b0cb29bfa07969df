"""How far each learner's updates moved the team in a finished ``teamtr compare``, per learner
over seeds: read from every run's ``metrics.jsonl`` (no model is loaded).

    .venv/bin/python benchmarks/update_moves.py runs/compare-convention-noclip --json runs/moves.json

Per learner (mean ± std over seeds of each run's mean):

- ``kl_tok``: the token-level KL of an accepted update from its behaviour policy (the size of a
  step inside the trust region), and ``kl_raw``: the KL of the full step before backtracking;
- ``backtracks``: backtracking halvings per update, and ``accepted``: the share accepted;
- ``d_occ`` / floor: the occupancy change the updates caused in the contexts later agents see
  (paper D_occ: how far a predecessor's messages moved), against its noise floor;
- ``stale`` / floor: the stale gap of an update trained on stage-start rollouts (paper
  Delta_stale), against its noise floor;
- ``reward gain / stage``: the stage-start team's training reward, last stage minus first, per
  stage.

A learner without an entry (independent GRPO has no trust region and no stale gap) shows ``-``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import markdown_table, write_outputs

AGENT_KEYS = ("kl_tok", "kl_raw", "backtracks", "accepted")
STAGE_KEYS = (
    ("d_occ", "diag/d_occ"),
    ("d_occ_floor", "diag/d_occ_noise_floor"),
    ("stale", "stage/delta_stale"),
    ("stale_floor", "stage/delta_stale_noise_floor"),
)


def run_moves(metrics: Path) -> dict[str, float]:
    """One run's means over its updates and stages (NaN where it logged nothing)."""
    per_update: dict[str, list[float]] = defaultdict(list)
    per_stage: dict[str, list[float]] = defaultdict(list)
    rewards = []
    for line in metrics.read_text().splitlines():
        row = json.loads(line)
        for key, value in row.items():
            parts = key.split("/")
            if len(parts) == 3 and parts[0] == "agent" and parts[2] in AGENT_KEYS:
                if parts[2] == "kl_tok" and not row.get(f"agent/{parts[1]}/accepted", 1):
                    continue  # a reverted update did not move the agent
                per_update[parts[2]].append(float(value))
        for name, key in STAGE_KEYS:
            if key in row:
                per_stage[name].append(float(row[key]))
        if "stage/reward_start" in row:
            rewards.append(float(row["stage/reward_start"]))
    out = {k: _mean(per_update[k]) for k in AGENT_KEYS}
    out.update({name: _mean(per_stage[name]) for name, _ in STAGE_KEYS})
    gain = (rewards[-1] - rewards[0]) / (len(rewards) - 1) if len(rewards) > 1 else math.nan
    out["reward_gain_per_stage"] = gain
    return out


def _mean(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return statistics.fmean(finite) if finite else math.nan


def comparison_moves(out: Path) -> dict[str, dict[str, dict[str, float]]]:
    """``learner -> seed -> run means`` for every run of the comparison in ``out``."""
    found: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    for run in sorted((out / "runs").iterdir()):
        metrics = run / "metrics.jsonl"
        if not metrics.is_file() or not (run / "summary.json").is_file():
            continue  # an unfinished run
        learner, _, seed = run.name.rpartition("-seed")
        found[learner.replace("_", "/", 1)][seed] = run_moves(metrics)
    return dict(found)


def _cell(values: list[float]) -> str:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return "-"
    spread = statistics.stdev(finite) if len(finite) > 1 else 0.0
    return f"{statistics.fmean(finite):.3f} ± {spread:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="a teamtr compare --out folder")
    parser.add_argument("--json", type=Path, help="write the per-run numbers here")
    args = parser.parse_args()
    moves = comparison_moves(args.out)
    if not moves:
        raise SystemExit(f"{args.out}/runs holds no finished run")
    columns = [*AGENT_KEYS, "d_occ", "d_occ_floor", "stale", "stale_floor", "reward_gain_per_stage"]
    rows = []
    for learner, seeds in moves.items():
        rows.append(
            [learner, len(seeds), *(_cell([r[c] for r in seeds.values()]) for c in columns)]
        )
    print(markdown_table(f"update moves in {args.out}", ["learner", "seeds", *columns], rows))
    write_outputs(args.json, {"comparison": str(args.out), "runs": moves})


if __name__ == "__main__":
    main()
