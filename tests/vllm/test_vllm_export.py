"""An exported team served by vLLM on the real CPU engine: ``teamtr export`` of a shared-base
LoRA run, then its ``team-vllm.yaml`` (one multi-LoRA engine, an adapter per agent) samples
what the exported transformers team scores, and docs/vllm-rollouts.md's lines run verbatim."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from rich.console import Console

import teamtr_env
from adapters.team import build_team, load_team_config
from teamtr_core.config import from_dict
from teamtr_core.policy import SamplingParams
from trainers.config import TrainConfig
from trainers.run.recipe import run_training

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = ["Start: 3\nStep: +2\n", "Start: 7\nStep: -4\nStep: +1\n"]


def _lora_run(run_dir: Path, model: Path) -> None:
    """A short behaviour clone and one TeamTR stage of a shared-base LoRA team on the demo's
    task: every adapter moves away from the base (a fresh adapter is the base)."""
    team = {"shared_base": True, "default": {"backend": "hf", "path": str(model), "lora": {"r": 4}}}
    config = from_dict(
        TrainConfig,
        {
            "team": team,
            "sft": {"steps": 60},
            "schedule": {"stages": 1, "problems_per_batch": 4, "group_size": 2},
            "optim": {"lr": 0.05},
            "trust_region": {"delta": 1.0, "beta": 0.0, "adapt_beta": False},
            "eval": {"problems": 4, "k": 2, "train_distribution": False},
            "loggers": [],
            "plot": False,
            "progress": False,
            "run_dir": str(run_dir),
        },
    )
    run_training(config, console=Console(file=io.StringIO()))


@pytest.fixture(scope="module")
def exported(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """docs/vllm-rollouts.md's lines, verbatim but for the venv's path, after a LoRA run in
    ``runs/lora-team``; returns the working folder."""
    work = tmp_path_factory.mktemp("export")
    _lora_run(work / "runs/lora-team", tiny_model_dir)
    text = (ROOT / "docs" / "vllm-rollouts.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```bash\n(.*?)```", text, re.DOTALL) if "export" in b]
    teamtr = str(Path(sys.executable).parent / "teamtr")
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "COLUMNS": "200"}
    for line in block.strip().splitlines():
        command = line.replace(".venv-vllm/bin/teamtr", teamtr, 1).split()
        done = subprocess.run(
            command, capture_output=True, text=True, cwd=work, env=env, timeout=600
        )
        assert done.returncode == 0, line + done.stdout[-3000:] + done.stderr[-3000:]
    assert "avg@4" in done.stdout
    return work


def test_the_vllm_team_serves_each_exported_adapter(exported: Path) -> None:
    """Each agent's engine samples are scored by the exported transformers agent as the engine
    scored them (float32 rounding), and not as the base alone scores them."""
    out = exported / "runs/lora-export"
    env = teamtr_env.make("teamtr/Pipeline-v0")
    agents = env.possible_agents
    served, _ = build_team(load_team_config(out / "team-vllm.yaml"), agents, env.task)
    scored, _ = build_team(load_team_config(out / "team.yaml"), agents, env.task)
    base = scored[agents[0]].base  # type: ignore[attr-defined]
    from adapters.hf import HFPolicy

    alone = HFPolicy(base.model, base.tokenizer)  # scored with its adapters disabled
    sampling = SamplingParams(temperature=1.0, max_new_tokens=8, seed=0)
    moved = 0.0
    try:
        for agent in agents:
            messages = served[agent].generate(PROMPTS, sampling)
            ids = [m.token_ids for m in messages]
            engine = [torch.tensor(m.logprobs, dtype=torch.float32) for m in messages]
            with torch.no_grad():
                ours = scored[agent].logprobs(PROMPTS, ids)
                with base.model.disable_adapter():
                    theirs = alone.logprobs(PROMPTS, ids)
            for row, logprobs in enumerate(engine):
                n = len(logprobs)
                torch.testing.assert_close(ours.logprobs[row, :n], logprobs, rtol=0, atol=1e-3)
                gap = (theirs.logprobs[row, :n] - logprobs).abs().max()
                moved = max(moved, float(gap))
    finally:
        served[agents[0]].close()  # type: ignore[attr-defined]
    assert moved > 1e-2, "the adapters did not move: the test cannot tell them from the base"
