"""Training with vLLM rollouts on the real CPU engine: a TeamTR run on the demo's task whose
rollouts come from in-process engines (the engines serve every accepted update and no reverted
one, and the engine-trainer log-prob gap stays at float32 rounding, which a missed sync would
break), and docs/vllm-rollouts.md's example, run verbatim."""

from __future__ import annotations

import io
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from adapters.rollout_engine import EngineRollouts
from teamtr_core.config import from_dict
from teamtr_core.policy import SamplingParams
from trainers.config import TrainConfig
from trainers.run.recipe import TrainingRecipe

ROOT = Path(__file__).resolve().parents[2]


def test_a_teamtr_run_with_vllm_rollouts_serves_each_accepted_update(tmp_path: Path) -> None:
    """The recipe with ``rollout.engine: vllm`` (in-process engines) on the demo's task, from a
    short behaviour clone, with a radius that reverts some updates."""
    config = from_dict(
        TrainConfig,
        {
            "rollout": {"engine": "vllm", "in_process": True, "importance_correction": "tis"},
            "sft": {"steps": 60},
            "diagnostics": "off",
            "schedule": {"stages": 2, "problems_per_batch": 8, "group_size": 4},
            "optim": {"lr": 1e-2},
            # a radius that keeps some steps and reverts others (no backtracking)
            "trust_region": {"delta": 0.01, "max_backtracks": 0, "adapt_beta": False},
            "eval": {"problems": 8, "k": 2, "train_distribution": False},
            "loggers": [],
            "plot": False,
            "progress": False,
            "run_dir": str(tmp_path / "run"),
        },
    )
    recipe = TrainingRecipe(config, console=Console(file=io.StringIO()))
    summary = recipe.run()
    updates = summary["updates"]
    assert any(u["accepted"] for u in updates) and any(not u["accepted"] for u in updates)
    for u in updates:
        # the engine sampled with exactly the weights the trainer scored: float32 rounding only
        # (a missed sync shows as a gap of an update's size)
        assert u["logprob_gap"] < 1e-3 and abs(u["engine_kl"]) < 1e-5, u
        # and the importance correction's weights are 1 (the engine's numbers are the trainer's)
        assert abs(u["tis_mean"] - 1.0) < 1e-3, u
    policies = recipe.policies
    assert all(isinstance(p, EngineRollouts) for p in policies.values())
    for agent, policy in policies.items():
        accepted = sum(u["accepted"] for u in updates if u["agent"] == agent)
        stats = policy.sync_stats()
        # one sync after the behaviour clone, then at most one per accepted update
        assert 1 <= stats["count"] <= 1 + accepted, (agent, stats, accepted)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    synced = sum(r.get("rollout/sync_count", 0) for r in rows)
    assert 0 < synced <= sum(u["accepted"] for u in updates)
    # after the run the engines serve the trainer's weights, reverted steps nowhere
    greedy = SamplingParams(temperature=0.0, max_new_tokens=8, seed=0)
    prompts = ["Start: 3\nStep: +2\n### step1\n", "Start: 7\n"]
    for agent, policy in policies.items():
        served = [g.token_ids for g in policy.generate(prompts, greedy)]
        trained = [g.token_ids for g in policy.trainable.generate(prompts, greedy)]
        assert served == trained, agent
    assert all(math.isfinite(u["logprob_gap"]) for u in updates)
    # closing the run's engines frees them; the policies still train, and would restart one
    engines = [p._engine for p in policies.values()]
    recipe.close()
    assert all(e.closed for e in engines) and not any(p.started for p in policies.values())
    with pytest.raises(RuntimeError, match="closed"):
        engines[0].generate(prompts, greedy)


def test_the_docs_page_runs(tmp_path: Path) -> None:
    """docs/vllm-rollouts.md's python example, verbatim, in a fresh interpreter."""
    text = (ROOT / "docs" / "vllm-rollouts.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    script = tmp_path / "example.py"
    script.write_text(block, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_CPU_KVCACHE_SPACE": "1"}
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert re.search(r"syncs \d+(\.0)? accepted updates \d+", done.stdout), done.stdout


def test_the_docs_page_cli_check_runs(tmp_path: Path) -> None:
    """The page's one-stage ``teamtr train`` line, verbatim but for the venv's path, trains with
    vLLM rollouts and logs the syncs."""
    text = (ROOT / "docs" / "vllm-rollouts.md").read_text(encoding="utf-8")
    line = re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL)[1].strip()
    assert "--set rollout.engine=vllm" in line
    teamtr = str(Path(sys.executable).parent / "teamtr")
    command = line.replace(".venv-vllm/bin/teamtr", teamtr, 1).split()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [json.loads(x) for x in (tmp_path / "runs/vllm-check/metrics.jsonl").open()]
    assert any(r.get("rollout/sync_count", 0) > 0 for r in rows)
    assert all(r["rollout/logprob_gap"] < 1e-3 for r in rows if "rollout/logprob_gap" in r)


def run_on_ray(tmp_path: Path, placement: dict) -> list[dict]:
    """A three-stage run of the demo's task with vLLM rollouts and ``placement`` (a ``runner``
    or ``runner.agents`` placement on Ray); returns its update records."""
    config = from_dict(
        TrainConfig,
        {
            "rollout": {"engine": "vllm", "in_process": True},
            **placement,
            "sft": {"steps": 60},
            "diagnostics": "off",
            "schedule": {"stages": 3, "problems_per_batch": 8, "group_size": 4},
            "optim": {"lr": 1e-2},
            # a generous radius keeps every step
            "trust_region": {"delta": 1.0, "adapt_beta": False},
            "eval": {"problems": 8, "k": 2, "train_distribution": False},
            "loggers": [],
            "plot": False,
            "progress": False,
            "run_dir": str(tmp_path / "run"),
        },
    )
    recipe = TrainingRecipe(config, console=Console(file=io.StringIO()))
    try:
        updates: list[dict] = recipe.run()["updates"]
    finally:
        import ray

        ray.shutdown()
    # the gap check has teeth only for an update that follows an accepted update of the same
    # agent (its batch was sampled after a sync)
    later = [
        u
        for i, u in enumerate(updates)
        if any(v["agent"] == u["agent"] and v["accepted"] for v in updates[:i])
    ]
    assert len(later) >= 3
    for u in updates:
        assert u["logprob_gap"] < 1e-3 and abs(u["engine_kl"]) < 1e-5, u
    assert not any(p.started for p in recipe.policies.values() if hasattr(p, "started"))
    # the syncs made where the engines live come back to the stage records
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    synced = sum(r.get("rollout/sync_count", 0) for r in rows)
    agents = {u["agent"] for u in updates}
    assert 0 < synced <= len(agents) + sum(u["accepted"] for u in updates), synced
    assert all(r["rollout/sync_bytes"] > 0 for r in rows if r.get("rollout/sync_count", 0) > 0)
    return updates


def test_ray_rollout_workers_sample_through_their_own_engines(tmp_path: Path) -> None:
    """``runner.backend: ray`` with ``rollout.engine: vllm``: each Ray rollout worker holds the
    team's engines (started there at its first sampling), loads every accepted update from the
    object store and syncs it into them; the engine-trainer gap of every update stays at
    float32 rounding, which a worker serving stale weights would break. The driver samples
    nothing itself: its engines never start."""
    run_on_ray(tmp_path, {"runner": {"backend": "ray", "workers": 1, "num_cpus": 1}})


def test_agent_actors_sample_through_their_own_engines(tmp_path: Path) -> None:
    """``runner.agents: ray`` with ``rollout.engine: vllm``: each agent actor builds its
    agent with its engine, its own accepted updates mark the engine stale, and the driver's
    samplings (local runner) run there; the gap stays at float32 rounding."""
    run_on_ray(tmp_path, {"runner": {"agents": "ray", "agent_cpus": 0.5}})


def test_sharded_agents_sync_their_gathered_weights_into_their_engines(tmp_path: Path) -> None:
    """``runner.agent_shards: 2``: each agent is a gang of two agent actors (FSDP2 over gloo),
    and its first rank's multiprocess engine samples; after every accepted update the ranks
    gather the whole weights a tensor at a time and the first writes each into the engine's
    hand-off file. The engine-trainer gap of every update stays at float32 rounding, which a
    missed or partial sync would break."""
    placement = {
        "runner": {"agents": "ray", "agent_shards": 2, "agent_cpus": 0.25},
        "rollout": {"engine": "vllm", "in_process": False},
    }
    run_on_ray(tmp_path, placement)
