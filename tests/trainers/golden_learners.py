"""Regenerates ``golden_learners.json``: the built-in learners' exact numbers on small tabular
teams, recorded before the learners moved out of ``TeamTrainer.run_stage`` (the registry must
not change a single result). Run from the repository root:

    .venv/bin/python tests/trainers/golden_learners.py
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from helpers_trainers import config, env_fn, tabular_team

from trainers.team_trainer import TeamTrainer

AGENTS = ("a", "b", "c")
CASES: dict[str, dict[str, Any]] = {
    "teamtr": {"schedule__method": "teamtr"},
    "teamtr_resample2": {"schedule__method": "teamtr", "schedule__resample_every": 2},
    "teamtr_random_order": {"schedule__method": "teamtr", "schedule__order": "random"},
    "naive": {"schedule__method": "naive_sequential"},
    "naive_iw": {"schedule__method": "naive_sequential", "schedule__importance_weighting": True},
    "naive_matched": {"schedule__method": "naive_sequential", "schedule__budget": "matched"},
    "naive_per_sample": {"schedule__method": "naive_sequential", "schedule__budget": "per_sample"},
    "joint": {"schedule__method": "joint"},
    "teamtr_adaptive_no_diag": {
        "schedule__method": "teamtr",
        "trust_region__delta_mode": "adaptive",
        "diagnostics": False,
    },
}


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


def record(overrides: dict[str, Any]) -> dict[str, Any]:
    """Two stages of a three-agent tabular team: every update record, the stage metrics (times
    left out) and the final logits."""
    cfg = config(**overrides)
    trainer = TeamTrainer(cfg, lambda: env_fn(AGENTS), tabular_team(AGENTS, 0))
    stages = []
    for _ in range(cfg.schedule.stages):
        report = trainer.run_stage()
        metrics = {k: _plain(v) for k, v in report.metrics.items() if not k.endswith("_s")}
        updates = [{k: _plain(v) for k, v in u.items()} for u in report.updates]
        stages.append({"metrics": metrics, "updates": updates})
    samples = [[e.stage, e.index, e.purpose, dict(e.versions), e.episodes] for e in trainer.samples]
    logits = {
        a: [float(x) for x in s.policy.state_dict()["logits"].flatten()]
        for a, s in trainer.slots.items()
    }
    return {"stages": stages, "samples": samples, "logits": logits}


def main() -> None:
    out = {name: record(overrides) for name, overrides in CASES.items()}
    path = Path(__file__).with_name("golden_learners.json")
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
