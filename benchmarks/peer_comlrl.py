"""Seconds per training step of teamtr beside CoMLRL's MAGRPO on the same two-agent team.

Usage::

    PYTHONPATH=. .venv/bin/python benchmarks/peer_comlrl.py [--steps 3] [--digits 1] [--json OUT]

The peer is CoMLRL's ``MAGRPOTrainer`` (multi-agent GRPO, https://github.com/OpenMLRL/CoMLRL,
the ``peers`` extra, ``pip install -e ".[peers]"``, which ``make test`` installs; not a
dependency of teamtr: without it :func:`comlrl_stages` returns
``None`` and only teamtr is measured). Both sides train the same two-agent team on the settings
of ``update_speed.py``: a solver and an aggregator, each its own copy of the tiny char-level Llama
(built offline), on ``teamtr/Arith-v0`` sums (``--digits``), 16 prompts x 4 samples per update,
12 new tokens, temperature 0.8, top-k off, top-p 1, lr 1e-4, fp32, no gradient checkpointing, one
update per agent per batch, one torch thread, the median over ``--steps`` steps after a warm-up.

- teamtr (:func:`teamtr_two_agent_stages`): one ``TeamTrainer`` stage of ``schedule.learner:
  teamtr`` per step. A stage updates each agent once, sampling 16 x 4 fresh episodes (the solver
  speaks, then the aggregator reads it and answers; the aggregator's answer is graded) before
  each of the two updates: 128 episodes per stage. ``optim.epochs=1``, the trust region on
  (``delta_mode: fixed``: the post-update token-KL check, backtracking when it fails).
- CoMLRL (:func:`comlrl_stages`): one MAGRPO step = 16 prompts; for each, both agents sample 4
  completions of their own prompt, the 4 aligned pairs are rewarded, and when the 16 groups are
  buffered each agent makes one optimizer step on them. MAGRPO agents act simultaneously within a
  turn (a later turn needs CoMLRL's ``external_transition`` and expands a tree: with 4 samples,
  1 + 4 groups of 4 per agent and prompt), and an agent's 4 samples share one prompt, so the
  aggregator cannot read the solver's 4 different messages. The solver gets its teamtr context
  (the problem and its ``### solver`` header), the aggregator the context teamtr's env renders
  for it before anyone has spoken (the problem and its ``### aggregator`` header), and the joint
  reward is the task's grader on the aggregator's completion (the last agent's message, as in
  teamtr). 64 joint samples per step, half of teamtr's 128 episodes.

Generation is timed by wrapping each model's ``generate`` (seconds inside it and the completion
tokens it produced, up to and including the first end-of-sequence token), the same way on both
sides. Quote the figures only from an idle machine.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _speed import (
    COMLRL_GENERATIONS,
    COMLRL_PROMPTS,
    LR,
    NEW_TOKENS,
    TASK,
    TEMPERATURE,
    GenerateClock,
)

import teamtr_env
from adapters.hf import HFPolicy
from adapters.tiny import build_tiny_model
from teamtr_core.config import from_dict
from trainers.config import TrainConfig
from trainers.learners.team_trainer import TeamTrainer
from trainers.placement.agents import LocalAgent

AGENTS = ("solver", "aggregator")
PROMPTS, GENERATIONS = COMLRL_PROMPTS, COMLRL_GENERATIONS


def team_options(digits: int) -> dict[str, Any]:
    """The two-agent Arith team: the solver speaks, then the aggregator (graded) answers."""
    return {
        "digits": digits,
        "agents": list(AGENTS),
        "max_turns": 2,
        "system_prompts": {agent: "" for agent in AGENTS},
    }


def make_team_env(digits: int) -> Any:
    return teamtr_env.make(TASK, **team_options(digits))


def teamtr_two_agent_config(steps: int, digits: int) -> TrainConfig:
    return from_dict(
        TrainConfig,
        {
            "task": TASK,
            "task_options": team_options(digits),
            "sampling": {"temperature": TEMPERATURE, "max_new_tokens": NEW_TOKENS},
            "sft": None,
            "diagnostics": "off",
            "progress": False,
            "schedule": {
                "learner": "teamtr",
                "stages": steps,
                "problems_per_batch": PROMPTS,
                "group_size": GENERATIONS,
            },
            "optim": {"lr": LR, "epochs": 1},
            "trust_region": {"delta_mode": "fixed"},
        },
        what="peer_comlrl teamtr config",
    )


def teamtr_two_agent_stages(model_dir: Path, steps: int, digits: int) -> dict:
    """teamtr on the two-agent team: the median over ``steps`` stages after one warm-up stage.

    Returns:
        ``stage_s`` (seconds per stage: each agent updated once), the stage metrics' split
        ``rollout_s`` (sampling, both sampling events), ``update_s`` and ``monitor_s`` (the
        post-update KL check), ``gen_s`` (inside ``generate``), ``gen_tokens`` (completion tokens
        per stage), ``rollouts`` (episodes per stage), ``reward`` (medians over the timed stages),
        ``gen_tokens_per_s`` (over all timed stages) and ``settings``.
    """
    torch.manual_seed(0)
    config = teamtr_two_agent_config(steps + 1, digits)
    policies = {agent: HFPolicy.from_pretrained(model_dir) for agent in AGENTS}
    trainer = TeamTrainer(config, lambda: make_team_env(digits), policies)
    clock = GenerateClock(policies[AGENTS[0]].eos_id)
    for policy in policies.values():
        clock.wrap(policy.model)
    rows = []
    try:
        for _ in range(steps + 1):
            seconds, tokens = clock.seconds, clock.tokens
            t0 = time.perf_counter()
            report = trainer.run_stage()
            wall = time.perf_counter() - t0
            m = report.metrics
            rows.append(
                {
                    "stage_s": wall,
                    "rollout_s": m.get("stage/rollout_s", 0.0),
                    "update_s": m.get("stage/update_s", 0.0),
                    "monitor_s": m.get("stage/monitor_s", 0.0),
                    "gen_s": clock.seconds - seconds,
                    "gen_tokens": clock.tokens - tokens,
                    "rollouts": m["stage/rollouts"],
                    "reward": m["stage/reward_mean"],
                }
            )
    finally:
        clock.unwrap()
    rows = rows[1:]  # the first stage warms up
    # What a stage sampled for training (every stage samples alike: TeamTR's batch per update).
    sampling_events = [e for e in report.samples if e.purpose == "train"]
    out: dict[str, Any] = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
    out["gen_tokens_per_s"] = sum(r["gen_tokens"] for r in rows) / sum(r["gen_s"] for r in rows)
    slot = trainer.slots[AGENTS[0]]
    assert isinstance(slot, LocalAgent)  # trained in this process: its optimizer is here
    model = slot.policy.model
    optimizer = slot.optimizer
    out["settings"] = {
        "method": config.schedule.learner,
        "problems_per_batch": config.schedule.problems_per_batch,
        "group_size": config.schedule.group_size,
        "budget": config.schedule.budget,
        "sampling_events_per_stage": len(sampling_events),
        **{
            k: getattr(config.sampling, k)
            for k in ("max_new_tokens", "temperature", "top_k", "top_p")
        },
        **{
            k: getattr(config.optim, k)
            for k in (
                "lr",
                "epochs",
                "micro_batch_size",
                "ratio_clip",
                "a_clip",
                "normalize_advantages",
                "max_grad_norm",
                "weight_decay",
                "autocast",
                "gradient_checkpointing",
                "ref_kl_coef",
            )
        },
        "delta_mode": config.trust_region.delta_mode,
        "delta": config.trust_region.delta,
        "trust_region_beta": config.trust_region.beta,
        "dtype": str(next(model.parameters()).dtype),
        "attn_implementation": model.config._attn_implementation,
        "optimizer": type(optimizer).__name__,
        "torch_threads": torch.get_num_threads(),
    }
    return out


@contextlib.contextmanager
def _offline_sandbox() -> Iterator[str]:
    """wandb disabled and silent, Hugging Face offline, their files in a temporary directory;
    the environment is restored and the directory removed on exit."""
    with tempfile.TemporaryDirectory(prefix="comlrl-") as tmp:
        settings = {
            "WANDB_MODE": "disabled",
            "WANDB_SILENT": "true",
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_CACHE": os.path.join(tmp, "hf-datasets"),
            **{
                f"WANDB_{name}": os.path.join(tmp, "wandb")
                for name in ("DIR", "CACHE_DIR", "CONFIG_DIR", "DATA_DIR", "ARTIFACT_DIR")
            },
        }
        saved = {key: os.environ.get(key) for key in settings}
        os.environ.update(settings)
        try:
            yield tmp
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _import_magrpo() -> tuple[Any, Any] | None:
    try:
        from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
    except ImportError:
        return None
    return MAGRPOConfig, MAGRPOTrainer


def comlrl_config(config_cls: Any) -> Any:
    """MAGRPO on the benchmark's settings; every option whose default differs is set, and the
    ones that decide the update's shape are set even where the default agrees."""
    return config_cls(
        num_train_epochs=1,  # one pass over the dataset, which holds exactly steps + 1 batches
        agent_learning_rate=LR,  # default 5e-6
        num_agents=len(AGENTS),
        parallel_training="none",  # both agents on one device, one after the other
        agent_devices="cpu",  # default: CUDA when available
        num_generations=GENERATIONS,
        max_new_tokens=NEW_TOKENS,  # default 256
        temperature=TEMPERATURE,  # default 0.6
        top_p=1.0,  # default 0.6
        top_k=0,  # default 50 (None would fall back to generate's own default of 50)
        num_turns=1,  # one turn: both agents answer once, no external transition
        joint_mode="aligned",  # completion j of every agent forms joint action j (4, not 4 x 4)
        early_termination_threshold=None,  # only prunes later turns; off for clarity
        eval_interval=0,  # default 16: an evaluation every 16 prompts would be timed too
        rollout_buffer_size=PROMPTS,  # default 2: update after 16 buffered prompt groups
        train_batch_size=PROMPTS,  # all 16 groups in one optimizer step (one update per batch)
        advantage_normalization=True,  # group mean and std, as teamtr and GRPO
        advantage_mode="mean",
        reference_kl_enabled=False,  # no reference model, no KL penalty (beta 0)
        logging_steps=10_000,  # no logging (and no wandb run at all: wandb_config=None)
    )


def comlrl_stages(model_dir: Path, steps: int, digits: int) -> dict | None:
    """CoMLRL's MAGRPO on the two-agent team (None, printing nothing, when comlrl cannot be
    imported): the median over ``steps`` steps after one warm-up step; a step is 16 prompts
    sampled by both agents and one optimizer step of each agent.

    Returns:
        ``stage_s`` (seconds per step), ``gen_s`` (inside ``generate``), ``update_s`` (both
        agents' updates), ``other_s`` (the rest: tokenising, rewards, buffering), ``gen_tokens``
        (completion tokens per step), ``rollouts`` (joint samples per step), ``reward`` (medians
        over the timed steps), ``gen_tokens_per_s`` (over all timed steps) and ``settings``:
        the effective settings, read back from the trainer's config, models and optimizers.

    Raises:
        RuntimeError: a step did not update each agent exactly once.
    """
    with _offline_sandbox():
        magrpo = _import_magrpo()
        if magrpo is None:
            return None
        config_cls, trainer_cls = magrpo
        return _run_magrpo(config_cls, trainer_cls, model_dir, steps, digits)


def _run_magrpo(
    config_cls: Any, trainer_cls: Any, model_dir: Path, steps: int, digits: int
) -> dict:
    import random

    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    random.seed(0)
    torch.manual_seed(0)
    env = make_team_env(digits)
    task = env.task
    rng = np.random.default_rng(0)
    problems = [task.sample(rng) for _ in range(PROMPTS * (steps + 1))]
    rows = []
    for index, problem in enumerate(problems):
        env.reset(seed=0, options={"problem": problem})
        rows.append({"index": index, **{agent: env.context(agent) for agent in AGENTS}})

    rewards: list[float] = []

    def reward(solver: list[str], aggregator: list[str], *, batch_items: list[dict]) -> list[float]:
        """The task's grader on the aggregator's completion (one joint sample per call)."""
        problem = problems[batch_items[0]["index"]]
        out = [task.grade(problem, text).reward for text in aggregator]
        rewards.extend(out)
        return out

    formatters: list[Callable[[dict], str]] = [
        lambda item, agent=agent: item[agent] for agent in AGENTS
    ]
    drains: list[tuple[list[int], float, float]] = []

    class TimedMAGRPO(trainer_cls):  # type: ignore[misc, valid-type]
        """Times each drain of the rollout buffers (the agents' updates)."""

        def _drain_ready_buffers(self, ready_agents: list[int]) -> None:
            if not ready_agents:
                return super()._drain_ready_buffers(ready_agents)
            t0 = time.perf_counter()
            super()._drain_ready_buffers(ready_agents)
            drains.append((sorted(set(ready_agents)), t0, time.perf_counter()))
            marks.append((clock.seconds, clock.tokens, len(rewards), list(optimizer_steps)))

    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    agents = [
        AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, local_files_only=True)
        for _ in AGENTS
    ]
    trainer = TimedMAGRPO(
        agents=agents,
        num_agents=len(AGENTS),
        tokenizer=tokenizer,
        train_dataset=Dataset.from_list(rows),
        reward_func=reward,
        formatters=formatters,
        args=comlrl_config(config_cls),
        wandb_config=None,
    )
    trainer.verbose = False  # no tqdm bar
    optimizer_steps = [0] * len(AGENTS)
    for i, optimizer in enumerate(trainer.optimizers):
        optimizer.register_step_post_hook(
            lambda *_, i=i: optimizer_steps.__setitem__(i, optimizer_steps[i] + 1)
        )
    clock = GenerateClock(tokenizer.eos_token_id)
    for agent in trainer.agents:
        clock.wrap(agent)
    marks: list[tuple[float, int, int, list[int]]] = []
    try:
        t_start = time.perf_counter()
        trainer.train()
    finally:
        clock.unwrap()

    if len(drains) != steps + 1 or any(
        agents_ != list(range(len(AGENTS))) for agents_, _, _ in drains
    ):
        raise RuntimeError(f"expected {steps + 1} updates of both agents, got {drains}")
    per_step = []
    previous_end, previous_mark = t_start, (0.0, 0, 0, [0] * len(AGENTS))
    for (_, t0, t1), mark in zip(drains, marks):
        steps_taken = [b - a for a, b in zip(previous_mark[3], mark[3])]
        if steps_taken != [1] * len(AGENTS):
            raise RuntimeError(f"a step made {steps_taken} optimizer steps per agent, not one")
        gen_s = mark[0] - previous_mark[0]
        per_step.append(
            {
                "stage_s": t1 - previous_end,
                "gen_s": gen_s,
                "update_s": t1 - t0,
                "other_s": (t1 - previous_end) - gen_s - (t1 - t0),
                "gen_tokens": mark[1] - previous_mark[1],
                "rollouts": mark[2] - previous_mark[2],
                "reward": statistics.mean(rewards[previous_mark[2] : mark[2]]),
            }
        )
        previous_end, previous_mark = t1, mark
    per_step = per_step[1:]  # the first step warms up
    out: dict[str, Any] = {key: statistics.median(r[key] for r in per_step) for key in per_step[0]}
    out["gen_tokens_per_s"] = sum(r["gen_tokens"] for r in per_step) / sum(
        r["gen_s"] for r in per_step
    )
    out["settings"] = _magrpo_settings(trainer)
    return out


def _checkpointing(model: Any) -> bool:
    """Whether activation (gradient) checkpointing is on (transformers 5 renamed the flag)."""
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(model), name):
            return bool(getattr(model, name))
    return False


def _magrpo_settings(trainer: Any) -> dict[str, Any]:
    """The settings MAGRPO ran with: its config (``trainer.args``) and what it fixes in code or
    takes from the models and optimizers it built."""
    args = trainer.args
    settings: dict[str, Any] = dataclasses.asdict(args)
    models = trainer.agents
    dtypes = sorted({str(next(m.parameters()).dtype) for m in models})
    optimizer = trainer.optimizers[0]
    defaults = optimizer.defaults
    settings.update(
        {
            "prompts_per_update": args.rollout_buffer_size,
            "optimizer_steps_per_update": math.ceil(
                args.rollout_buffer_size / args.train_batch_size
            ),
            # MAGRPO uses every buffered sample in exactly one backward pass (no epochs option)
            "epochs_per_batch": 1,
            # the train dataloader's batch size is fixed at 1: one prompt per generate call
            "prompts_per_generate_call": trainer.get_train_dataloader().batch_size,
            "dtype": dtypes[0] if len(dtypes) == 1 else dtypes,
            "bf16": any(d == str(torch.bfloat16) for d in dtypes),
            "fp16": any(d == str(torch.float16) for d in dtypes),
            "gradient_checkpointing": any(_checkpointing(m) for m in models),
            "attn_implementation": models[0].config._attn_implementation,
            "optimizer": type(optimizer).__name__,
            "optimizer_lr": defaults["lr"],
            "optimizer_betas": list(defaults["betas"]),
            "optimizer_eps": defaults["eps"],
            "optimizer_weight_decay": defaults["weight_decay"],
            "max_grad_norm": None,  # MAGRPO's update does not clip gradients
            "loss": "-(sum of completion-token log-probs) x group-normalised advantage, "
            "one forward pass per completion (no ratio, no clipping)",
            "reference_models": len(trainer.reference_models),
            "device": str(trainer.device),
            "wandb_initialized": bool(trainer.wandb_initialized),
            "torch_threads": torch.get_num_threads(),
        }
    )
    return settings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="timed steps (after one warm-up)")
    parser.add_argument("--digits", type=int, default=1, help="digits of the sums' operands")
    parser.add_argument("--model", type=Path, default=None, help="a tiny model directory")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    from rich.console import Console
    from rich.table import Table

    console = Console()
    model_dir = args.model or build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    teamtr = teamtr_two_agent_stages(model_dir, args.steps, args.digits)
    comlrl = comlrl_stages(model_dir, args.steps, args.digits)
    table = Table(
        title=f"seconds per step, two agents: {PROMPTS} prompts x {GENERATIONS} samples, "
        f"{NEW_TOKENS} new tokens, {args.digits}-digit sums, median of {args.steps} after a warm-up",
        caption="teamtr: method teamtr, 1 epoch, trust region on (fixed delta). sample: teamtr's "
        "rollout time, MAGRPO's step less its update; generate: inside generate; n: episodes "
        "(teamtr) or joint samples (MAGRPO) per step; tokens: completion tokens per step",
    )
    columns = ("step", "sample", "generate", "update", "KL chk", "n", "tokens", "tok/s")
    table.add_column("trainer", no_wrap=True)
    for column in columns:
        table.add_column(column, justify="right")
    for name, r in (("teamtr", teamtr), ("MAGRPO", comlrl)):
        if r is None:
            table.add_row(name, *["-"] * 8)
            continue
        table.add_row(
            name,
            f"{r['stage_s']:.3f}",
            f"{r.get('rollout_s', r['stage_s'] - r['update_s']):.3f}",
            f"{r['gen_s']:.3f}",
            f"{r['update_s']:.3f}",
            f"{r['monitor_s']:.3f}" if "monitor_s" in r else "-",
            f"{r['rollouts']:.0f}",
            f"{r['gen_tokens']:.0f}",
            f"{r['gen_tokens_per_s']:.0f}",
        )
    console.print(table)
    ratio = teamtr["stage_s"] / comlrl["stage_s"] if comlrl else None
    per_sample = (
        (teamtr["stage_s"] / teamtr["rollouts"]) / (comlrl["stage_s"] / comlrl["rollouts"])
        if comlrl
        else None
    )
    if comlrl is None:
        console.print(
            'comlrl is not installed (pip install -e ".[peers]"): MAGRPO was not measured'
        )
    if ratio is not None and per_sample is not None:
        console.print(
            f"teamtr / CoMLRL: {ratio:.2f} per step (each updates both agents once), "
            f"{per_sample:.2f} per sample (teamtr samples {teamtr['rollouts']:.0f} episodes a "
            f"step, MAGRPO {comlrl['rollouts']:.0f} joint samples)"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        result = {
            "command": shlex.join([sys.executable, *sys.argv]),
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
            "steps": args.steps,
            "digits": args.digits,
            "teamtr": teamtr,
            "comlrl": comlrl,
            "ratio_teamtr_over_comlrl": ratio,
            "ratio_per_sample": per_sample,
        }
        args.json.write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
