"""The golden numbers of the built-in learners: ``golden_learners.json`` holds, for each case, two
stages of a three-agent tabular team (every update record, the stage metrics, the sample schedule
and the final logits), recorded before the learners moved out of ``TeamTrainer.run_stage``. The
registry, and any refactoring after it, must not change a result.

The numbers come from torch, whose CPU kernels differ between machines (AVX2 or AVX-512 change the
order of a sum), so :func:`differences` compares floats with a relative tolerance of
:data:`RTOL` and everything else (integers, booleans, names, the sample schedule and counts)
exactly. Refresh the file after a change that is meant to change the numbers, from the
repository root (it prints every difference from the old file, then writes the new one)::

    make golden        # = .venv/bin/python tests/trainers/golden_learners.py
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from helpers_trainers import config, env_fn, tabular_team

from trainers.learners.team_trainer import TeamTrainer
from trainers.optim.records import UPDATE_KEYS

AGENTS = ("a", "b", "c")
CASES: dict[str, dict[str, Any]] = {
    "teamtr": {"schedule__learner": "teamtr"},
    "teamtr_resample2": {"schedule__learner": "teamtr", "learner_options__resample_every": 2},
    "teamtr_random_order": {"schedule__learner": "teamtr", "schedule__order": "random"},
    "naive": {"schedule__learner": "naive_sequential"},
    "naive_iw": {
        "schedule__learner": "naive_sequential",
        "learner_options__importance_weighting": True,
    },
    "naive_matched": {"schedule__learner": "naive_sequential", "schedule__budget": "matched"},
    "naive_per_sample": {"schedule__learner": "naive_sequential", "schedule__budget": "per_sample"},
    "joint": {"schedule__learner": "joint"},
    "teamtr_adaptive_no_diag": {
        "schedule__learner": "teamtr",
        "trust_region__delta_mode": "adaptive",
        "diagnostics": False,
    },
}


RTOL = 1e-6
"""Relative tolerance for recorded floats: two CPUs differ in the last few bits of a sum (about
1e-15 relative per operation), far below any change a code change makes to these numbers."""
ATOL = 1e-12
"""Absolute tolerance for recorded floats near zero (a mean that cancels to 1e-17 on one CPU can be
-1e-17 on another)."""


def differences(now: Any, golden: Any, where: str = "") -> list[str]:
    """Every leaf where ``now`` and ``golden`` differ, as ``"path: now != golden"``: floats
    within ``RTOL`` (or ``ATOL``) are equal and NaN equals NaN; anything else must match exactly."""
    if isinstance(now, dict) and isinstance(golden, dict):
        out = [f"{where}: keys {sorted(set(now) ^ set(golden))} in one only"] * (
            set(now) != set(golden)
        )
        for k in sorted(set(now) & set(golden)):
            out += differences(now[k], golden[k], f"{where}.{k}")
        return out
    if isinstance(now, list) and isinstance(golden, list):
        if len(now) != len(golden):
            return [f"{where}: {len(now)} items != {len(golden)}"]
        return [
            d
            for i, (a, b) in enumerate(zip(now, golden))
            for d in differences(a, b, f"{where}[{i}]")
        ]
    floats = (float,)
    if isinstance(now, floats) and isinstance(golden, floats):
        if math.isnan(now) and math.isnan(golden):
            return []
        if math.isclose(now, golden, rel_tol=RTOL, abs_tol=ATOL):
            return []
    elif type(now) is type(golden) and now == golden:  # ints, bools, strings, None: exactly
        return []
    return [f"{where}: {now!r} != {golden!r}"]


# Logged since the numbers were recorded: the stage's start reward and lr, and the share of
# messages cut off at the token limit.
ADDED_METRICS = ("stage/reward_start", "stage/lr", "stage/clipped_ratio")
ADDED_UPDATE_KEYS = ("ref_kl", "groups", "episodes", *UPDATE_KEYS)
# The diagnostics levels (cheap/full) added metrics and, at full, the batch that measures J
# after each stage (sample index 2001): none of them may change a training number.
ADDED_AGENT_KEYS = (
    "zeta_proxy",
    "flip_rate_25",
    "flip_rate_50",
    "iw_ess_over_b",
    "d_occ_term",
    "d_occ_lr_term",
    "clipped_ratio",
)


def _added_metric(key: str) -> bool:
    return (
        key in ADDED_METRICS
        or key.startswith(("diag/", "stage/diag_"))
        or key.rsplit("/", 1)[-1] in ADDED_AGENT_KEYS
    )


def comparable(recorded: dict[str, Any]) -> dict[str, Any]:
    """``recorded`` as JSON data without what was added since the recording (diagnostics,
    which must not change a training number, are compared by their own tests)."""
    now = json.loads(json.dumps(recorded))
    for stage in now["stages"]:
        stage["metrics"] = {k: v for k, v in stage["metrics"].items() if not _added_metric(k)}
        for update in stage["updates"]:
            for key in ADDED_UPDATE_KEYS:
                update.pop(key)
    now["samples"] = [s for s in now["samples"] if s[1] < 2000]
    return now


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


def record(overrides: dict[str, Any]) -> dict[str, Any]:
    """Two stages of a three-agent tabular team: every update record, the stage metrics (times
    left out) and the final logits."""
    cfg = config(**overrides)
    trainer = TeamTrainer(cfg, lambda: env_fn(AGENTS), tabular_team(AGENTS, 0))
    stages, events = [], []
    for _ in range(cfg.schedule.stages):
        report = trainer.run_stage()
        metrics = {k: _plain(v) for k, v in report.metrics.items() if not k.endswith("_s")}
        updates = [{k: _plain(v) for k, v in u.to_dict().items()} for u in report.updates]
        stages.append({"metrics": metrics, "updates": updates})
        events += report.samples  # what the stage sampled (train and diagnostic)
    samples = [[e.stage, e.index, e.purpose, dict(e.versions), e.episodes] for e in events]
    logits = {
        a: [float(x) for x in s.policy.state_dict()["logits"].flatten()]
        for a, s in trainer.slots.items()
    }
    return {"stages": stages, "samples": samples, "logits": logits}


def main() -> None:
    """Records every case, prints its differences from the current file, writes the new file."""
    path = Path(__file__).with_name("golden_learners.json")
    old = json.loads(path.read_text()) if path.exists() else {}
    out = {name: comparable(record(overrides)) for name, overrides in CASES.items()}
    changed = differences(out, old, "golden") if old else ["(no previous file)"]
    print("\n".join(changed) if changed else f"no differences beyond rtol {RTOL}")
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
