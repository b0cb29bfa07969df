"""Update speed: seconds per training step of teamtr, beside TRL's GRPOTrainer when it is installed.

Usage::

    .venv/bin/python benchmarks/update_speed.py [--steps 10] [--json OUT]

One step = sample 16 prompts x 4 generations (12 new tokens, temperature 0.8, top-k off) with the
tiny char-level Llama (0.55M parameters) on one-digit sums (``teamtr/Arith-v0``, ``digits=1``, a
one-agent team, no system prompt), score them, and make one update at lr 1e-4. teamtr runs one
``TeamTrainer`` stage per step (one agent: one update per stage); rows:

- ``trust region on, 1 epoch``: the shipped update (clipped surrogate, KL penalty, the token-KL
  check after the step) with ``optim.epochs=1``;
- ``no trust region, 1 epoch``: ``delta_mode: none`` (the post-update check is skipped);
- ``as shipped (4 epochs)``: the default ``optim.epochs``.

With ``trl`` importable (the ``peers`` extra, which ``make test`` installs, adds it and ``datasets``
to the virtual environment), TRL's ``GRPOTrainer`` runs the same model, prompts (the contexts the
solver sees), reward (the task's grader) and settings (``num_iterations=1``, ``beta=0``: no
reference model, one optimizer step per generation batch) for the same number of steps, and the
ratios teamtr / TRL are reported (``ratio_vs_trl``: trust region on; ``ratio_vs_trl_no_tr``).
Every figure is the median over ``--steps`` steps after one warm-up step, with one torch thread
(``--threads``).

``--model DIR`` runs every row on a real model instead (e.g. ``models/smollm2-135m-instruct``,
which ``teamtr models get smollm2-135m-instruct`` writes); a model with a chat template gets it
on both sides (TRL's conversational prompts render the context as the user turn, as teamtr
does). On 2 cores a real model's step takes tens of seconds, so
``benchmarks/real_model_perf.py`` runs it with ``--steps 2 --prompts 8 --threads 2
--no-shipped`` and the other sections off.

With ``comlrl`` importable (the ``peers`` extra), CoMLRL's MAGRPO and teamtr train the
same two-agent team at the same settings (:func:`two_agent_peers`, ``benchmarks/peer_comlrl.py``),
and ``ratio_vs_comlrl`` is teamtr's seconds per stage over MAGRPO's per step.

Two more sections: multi-turn scoring on ARBench-GN (shared-prefix scoring against one pass per
message, :func:`multi_turn_scoring`) and the KL check's decision flip rate under token and
message subsampling (:func:`flip_rates`). Quote the figures only from an idle machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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
from peer_comlrl import comlrl_stages, teamtr_two_agent_stages
from rich.console import Console
from rich.table import Table

import teamtr_env
from adapters.hf import HFPolicy
from adapters.tiny import build_tiny_model
from teamtr_core.config import from_dict
from trainers.config import TrainConfig
from trainers.learners.stage import batch_advantages, message_advantages
from trainers.learners.team_trainer import TeamTrainer
from trainers.placement.agents import LocalAgent

OPTIONS: dict[str, Any] = {
    "digits": 1,
    "agents": ["solver"],
    "max_turns": 1,
    "system_prompts": {"solver": ""},
}
PROMPTS, GENERATIONS = COMLRL_PROMPTS, COMLRL_GENERATIONS  # --prompts / --generations change them


def set_batch(prompts: int, generations: int) -> None:
    """Sets the prompts and generations of a step for every row of this process."""
    global PROMPTS, GENERATIONS
    PROMPTS, GENERATIONS = prompts, generations


def make_env() -> Any:
    return teamtr_env.make(TASK, **OPTIONS)


def teamtr_config(*, epochs: int, trust_region: bool, steps: int) -> TrainConfig:
    return from_dict(
        TrainConfig,
        {
            "task": TASK,
            "task_options": OPTIONS,
            "sampling": {"temperature": TEMPERATURE, "max_new_tokens": NEW_TOKENS},
            "sft": None,
            "diagnostics": "off",
            "progress": False,
            "schedule": {
                "stages": steps,
                "problems_per_batch": PROMPTS,
                "group_size": GENERATIONS,
            },
            "optim": {"lr": LR, "epochs": epochs},
            "trust_region": {"delta_mode": "fixed" if trust_region else "none"},
        },
        what="update_speed config",
    )


def teamtr_steps(model_dir: Path, steps: int, *, epochs: int, trust_region: bool) -> dict:
    """Median seconds per step and the median time split (sampling, update, KL check)."""
    config = teamtr_config(epochs=epochs, trust_region=trust_region, steps=steps + 1)
    trainer = TeamTrainer(config, make_env, {"solver": HFPolicy.from_pretrained(model_dir)})
    rows = []
    for _ in range(steps + 1):
        t0 = time.perf_counter()
        report = trainer.run_stage()
        wall = time.perf_counter() - t0
        m = report.metrics
        rows.append(
            {
                "step_s": wall,
                "rollout_s": m.get("stage/rollout_s", 0.0),
                # The whole rollout (environments, prompts, sampling, grading), not generate alone.
                "gen_tokens_per_s": m["stage/tokens"] / max(m.get("stage/rollout_s", 0.0), 1e-9),
                "update_s": m.get("stage/update_s", 0.0),
                "monitor_s": m.get("stage/monitor_s", 0.0),
                "reward": m["stage/reward_mean"],
                # the trust region's line search: each backtrack restores the weights, halves
                # the step and measures the KL again (KL check seconds grow with them)
                "backtracks": m.get("agent/solver/backtracks", 0.0),
                "kl_tok": m.get("agent/solver/kl_tok", float("nan")),
            }
        )
    rows = rows[1:]  # the first step warms up
    return {key: statistics.median(r[key] for r in rows) for key in rows[0]}


def flip_rates(model_dir: Path, updates: int, fractions: tuple[float, ...] = (0.25, 0.5)) -> dict:
    """How often a subsampled KL check would decide differently from the full one (App. G.4).

    ``updates`` shipped updates (4 epochs) of the one-agent team; after each, the full check's
    estimate KL_hat and, for token and message subsampling at each fraction, the flip rate at a
    radius in the band the paper conditions on (delta = KL_hat x 0.8, 0.9, 1.1, 1.2: the updates
    whose decision is close), averaged over the band and the updates.
    """
    from trainers.optim.kl import monitor_flip_rate, token_kl_monitor
    from trainers.optim.scoring import concat_logprobs, score
    from trainers.optim.update import update_agent

    config = teamtr_config(epochs=4, trust_region=True, steps=updates)
    trainer = TeamTrainer(config, make_env, {"solver": HFPolicy.from_pretrained(model_dir)})
    slot, temperature = trainer.slots["solver"], trainer.temperatures["solver"]
    assert isinstance(slot, LocalAgent)  # trained in this process: its optimizer is here
    # The KL after every update is measured, with or without a region.
    region = dataclasses.replace(config.trust_region, monitor_without_region=True)
    mb = config.optim.micro_batch_size
    generator = torch.Generator().manual_seed(0)
    rates: dict[str, list[float]] = {
        f"{unit} {q:.0%}": [] for unit in ("token", "message") for q in fractions
    }
    kls = []
    for i in range(updates):
        batch, _ = trainer.sample(i, 0, PROMPTS)
        msgs, adv = message_advantages(batch, "solver", batch_advantages(batch, config))
        old = score(slot.policy, msgs, mb, temperature)
        update_agent(
            slot.policy,
            slot.optimizer,
            msgs,
            adv,
            beta=slot.region.beta,
            delta=None,
            optim=config.optim,
            region=region,
            temperature=temperature,
        )
        new = score(slot.policy, msgs, mb, temperature)
        cur_lp, mask = concat_logprobs(old)
        new_lp, _ = concat_logprobs(new)
        kl = token_kl_monitor(cur_lp, new_lp, mask).value
        kls.append(kl)
        if kl <= 0:  # a sampled estimate can be negative for a tiny step: no band to test
            continue
        for unit in ("token", "message"):
            for q in fractions:
                band = [
                    monitor_flip_rate(
                        cur_lp,
                        new_lp,
                        mask,
                        delta=kl * factor,
                        fraction=q,
                        n_trials=200,
                        generator=generator,
                        unit=unit,
                    )
                    for factor in (0.8, 0.9, 1.1, 1.2)
                ]
                rates[f"{unit} {q:.0%}"].append(statistics.mean(band))
    return {
        "updates": updates,
        "kl_hat_median": statistics.median(kls),
        "updates_in_band": len(next(iter(rates.values()))),
        "flip_rate_in_band": {k: statistics.mean(v) if v else None for k, v in rates.items()},
    }


def multi_turn_scoring(problems: int) -> dict:
    """One agent's update passes on ARBench-GN (multi-turn: an agent speaks again and again in an
    episode that everyone sees): forward + backward over its messages with shared-prefix scoring
    (one pass per episode) against one pass per message, and the largest log-prob difference.

    The messages are the scripted expert's at error rate 0.9 (long games, as an untrained team
    plays them; text a model would write, so the transcript repeats each message's tokens), scored
    by a tiny model whose 8192-token window holds whole episodes.
    """
    from adapters.scripted import ScriptedExpert
    from adapters.tiny import TinyModelSpec
    from teamtr_core.policy import SamplingParams
    from teamtr_env.runners import Runner
    from trainers.optim.scoring import score

    def env_fn() -> Any:
        return teamtr_env.make("teamtr/ARBench-GN-v0")

    runner = Runner(
        env_fn,
        ScriptedExpert(env_fn().task, error_rate=0.9, seed=0),
        SamplingParams(),
        progress=False,
    )
    batch = runner.rollout(runner.sample_problems(problems, seed=0), group_size=2, seed=0)
    messages = batch.messages_of("solver")
    model_dir = build_tiny_model(
        Path(tempfile.mkdtemp()) / "tiny-8k", TinyModelSpec(max_positions=8192)
    )
    out: dict[str, Any] = {"messages": len(messages), "episodes": len(batch.episodes)}
    logprobs = {}
    for shared in (True, False):
        policy = HFPolicy.from_pretrained(model_dir, shared_prefix=shared)
        t0 = time.perf_counter()
        parts = score(policy, messages, 64, grad=True)
        sum((p.logprobs * p.mask).sum() for p in parts).backward()
        out["shared_s" if shared else "per_message_s"] = time.perf_counter() - t0
        logprobs[shared] = torch.cat([p.logprobs.detach() for p in parts])
    out["speedup"] = out["per_message_s"] / out["shared_s"]
    out["max_abs_logprob_diff"] = float((logprobs[True] - logprobs[False]).abs().max())
    return out


def trl_prompts(contexts: list[str], tokenizer: Any) -> list[Any]:
    """The contexts as TRL prompts, rendered as teamtr renders them: when the tokenizer has a chat
    template (a real instruct model), each context is the user turn of TRL's conversational
    format, which TRL renders with the template and the generation prompt as
    ``adapters.codec.PromptCodec`` does; otherwise the plain text."""
    if getattr(tokenizer, "chat_template", None) is None:
        return list(contexts)
    return [[{"role": "user", "content": c}] for c in contexts]


def trl_text(value: Any) -> str:
    """A TRL prompt or completion as text (a conversational one: its last message's content)."""
    return str(value[-1]["content"]) if isinstance(value, list) else str(value)


TRL_SETTINGS: dict[str, Any] = {
    # Every GRPOConfig option whose default differs from teamtr's update, set to teamtr's:
    "bf16": False,  # TRL's default autocasts to bf16 (slow on CPUs without fast bf16)
    "fp16": False,
    "gradient_checkpointing": False,  # TRL's default recomputes activations
    "optim": "adamw_torch",  # teamtr: torch.optim.AdamW (TRL's default is the fused kernel)
    "lr_scheduler_type": "constant",  # TRL's default decays linearly
    "disable_dropout": True,
    "num_iterations": 1,  # one optimizer step per generation batch (optim.epochs=1)
    "beta": 0.0,  # no reference model (teamtr's ref_kl_coef=0)
    "epsilon": 0.2,  # the ratio clip (optim.ratio_clip)
    "scale_rewards": "group",  # group-standardised advantages
    "weight_decay": 0.0,
    "max_grad_norm": 1.0,
    "top_k": 0,
    "top_p": 1.0,
    "torch_compile": False,
    "use_liger_kernel": False,
}
"""GRPOConfig options set for equal settings; the JSON records the trainer's effective values."""

TRL_REPORTED = (
    *TRL_SETTINGS,
    "loss_type",
    "learning_rate",
    "per_device_train_batch_size",
    "num_generations",
    "steps_per_generation",
    "gradient_accumulation_steps",
    "max_completion_length",
    "temperature",
    "use_cpu",
    "use_vllm",
)


def _effective(args: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    """``args``' values of ``keys`` as plain JSON data (enums by value)."""
    out = {}
    for key in keys:
        value = getattr(args, key, None)
        out[key] = getattr(value, "value", value)
    return out


def trl_steps(model_dir: Path, steps: int) -> dict | None:
    """TRL's GRPOTrainer on the same model, prompts, reward and settings (None: not installed).

    Every option whose default differs from teamtr's is set (:data:`TRL_SETTINGS`), and the
    returned ``settings`` are the trainer's effective values. ``gen_tokens_per_s`` times the
    model's ``generate`` calls alone (teamtr's figure includes its whole rollout)."""
    try:
        from datasets import Dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
        from trl import GRPOConfig, GRPOTrainer
    except ImportError:
        return None
    env = make_env()
    task = env.task
    problems = []
    rng = __import__("numpy").random.default_rng(0)
    for _ in range(PROMPTS * (steps + 1)):
        problems.append(task.sample(rng))
    prompts = []
    for problem in problems:
        env.reset(seed=0, options={"problem": problem})
        prompts.append(env.context("solver"))
    by_prompt = {p: problem for p, problem in zip(prompts, problems)}

    def reward(prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
        return [
            task.grade(by_prompt[trl_text(p)], trl_text(c)).reward
            for p, c in zip(prompts, completions)
        ]

    times: list[float] = []

    class Clock(TrainerCallback):  # type: ignore[misc]
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.t0 = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            times.append(time.perf_counter() - self.t0)

    out = tempfile.mkdtemp(prefix="trl-")
    config = GRPOConfig(
        **TRL_SETTINGS,
        output_dir=out,
        per_device_train_batch_size=PROMPTS * GENERATIONS,
        num_generations=GENERATIONS,
        steps_per_generation=1,
        max_completion_length=NEW_TOKENS,
        temperature=TEMPERATURE,
        learning_rate=LR,
        max_steps=steps + 1,
        use_cpu=True,
        report_to="none",
        logging_steps=10_000,
        save_strategy="no",
        shuffle_dataset=False,
        seed=0,
    )
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
    clock = GenerateClock(tokenizer.eos_token_id)
    clock.wrap(model)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=config,
        train_dataset=Dataset.from_dict({"prompt": trl_prompts(prompts, tokenizer)}),
        processing_class=tokenizer,
        callbacks=[Clock()],
    )
    warm: list[tuple[float, int]] = []

    class WarmUp(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if not warm:  # the first step warms up: its generation is not counted
                warm.append((clock.seconds, clock.tokens))

    trainer.add_callback(WarmUp())
    try:
        trainer.train()
    finally:
        clock.unwrap()
    seconds = clock.seconds - (warm[0][0] if warm else 0.0)
    tokens = clock.tokens - (warm[0][1] if warm else 0)
    return {
        "step_s": statistics.median(times[1:]),
        "gen_tokens_per_s": tokens / seconds if seconds > 0 else None,
        "generate_calls": clock.calls,
        "settings": _effective(trainer.args, TRL_REPORTED),
    }


def two_agent_peers(model_dir: Path, args: argparse.Namespace, console: Console) -> dict | None:
    """teamtr and CoMLRL's MAGRPO on the same two-agent team and settings
    (``benchmarks/peer_comlrl.py``); ``None`` when skipped or comlrl is not installed. The
    ratio is teamtr's seconds per stage over MAGRPO's per step (each updates both agents once;
    teamtr samples a fresh batch before each update, so it also samples twice the episodes)."""
    steps = args.steps if args.comlrl_steps is None else args.comlrl_steps
    if steps <= 0:
        return None
    comlrl = comlrl_stages(model_dir, steps, args.digits)
    if comlrl is None:
        console.print('CoMLRL arm skipped: comlrl is not installed (pip install -e ".[peers]")')
        return None
    teamtr = teamtr_two_agent_stages(model_dir, steps, args.digits)
    ratio = teamtr["stage_s"] / comlrl["stage_s"]
    console.print(
        f"two agents: teamtr {teamtr['stage_s']:.3f} s/stage, CoMLRL MAGRPO "
        f"{comlrl['stage_s']:.3f} s/step: teamtr / CoMLRL {ratio:.2f} (ratio_vs_comlrl); "
        f"generation {teamtr.get('gen_tokens_per_s', 0):.0f} vs "
        f"{comlrl.get('gen_tokens_per_s') or 0:.0f} tokens/s"
    )
    return {
        "steps": steps,
        "teamtr": teamtr,
        "magrpo": comlrl,
        "settings": comlrl.get("settings"),
        "ratio_per_stage": ratio,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="timed steps (after one warm-up)")
    parser.add_argument(
        "--model",
        type=Path,
        default=None,
        help="a Hugging Face model directory (default: the tiny model, built here), e.g. "
        "models/smollm2-135m-instruct from teamtr models get",
    )
    parser.add_argument(
        "--prompts", type=int, default=PROMPTS, help="prompts per step (CoMLRL's section: 16)"
    )
    parser.add_argument(
        "--generations", type=int, default=GENERATIONS, help="generations per prompt (CoMLRL: 4)"
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads of every row (TRL's included)"
    )
    parser.add_argument(
        "--shipped",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the 'as shipped (4 epochs)' row (--no-shipped skips it: 4 updates a step)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument(
        "--multi-turn-problems",
        type=int,
        default=2,
        help="ARBench-GN problems (x2 episodes) for the multi-turn scoring section (0 = skip)",
    )
    parser.add_argument(
        "--flip-updates",
        type=int,
        default=10,
        help="shipped updates over which the KL-check flip rates are measured (0 = skip)",
    )
    parser.add_argument(
        "--digits", type=int, default=1, help="operand digits of the sums (1: one-digit sums)"
    )
    parser.add_argument(
        "--comlrl-steps",
        type=int,
        default=None,
        help="steps of the two-agent comparison with CoMLRL's MAGRPO (default --steps; 0 = skip; "
        "skipped with a message when comlrl is not installed)",
    )
    args = parser.parse_args()
    if (args.prompts, args.generations) != (PROMPTS, GENERATIONS) and args.comlrl_steps != 0:
        parser.error(
            f"--prompts/--generations other than {PROMPTS}/{GENERATIONS} need --comlrl-steps 0 "
            "(the CoMLRL section runs at its own batch)"
        )
    set_batch(args.prompts, args.generations)
    OPTIONS["digits"] = args.digits
    torch.set_num_threads(args.threads)
    console = Console()
    model_dir = args.model or build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    rows = {
        "trust region on, 1 epoch": teamtr_steps(
            model_dir, args.steps, epochs=1, trust_region=True
        ),
        "no trust region, 1 epoch": teamtr_steps(
            model_dir, args.steps, epochs=1, trust_region=False
        ),
    }
    if args.shipped:
        rows["as shipped (4 epochs)"] = teamtr_steps(
            model_dir, args.steps, epochs=4, trust_region=True
        )
    trl = trl_steps(model_dir, args.steps)
    if trl is None:
        console.print('TRL arm skipped: trl is not installed (pip install -e ".[peers]")')
    sums = "one-digit" if args.digits == 1 else f"{args.digits}-digit"
    table = Table(
        title=f"s/step: {PROMPTS} prompts x {GENERATIONS} generations, {NEW_TOKENS} new tokens, "
        f"{sums} sums, median of {args.steps}; TRL at equal settings (fp32, no checkpointing)"
    )
    for column in (
        "teamtr setting",
        "s/step",
        "sampling s",
        "gen tok/s",
        "update s",
        "KL check s",
        "TRL s/step",
        "teamtr / TRL",
    ):
        table.add_column(column, justify="left" if column == "teamtr setting" else "right")
    for name, r in rows.items():
        ratio = f"{r['step_s'] / trl['step_s']:.2f}" if trl else "-"
        table.add_row(
            name,
            f"{r['step_s']:.3f}",
            f"{r['rollout_s']:.3f}",
            f"{r['gen_tokens_per_s']:.0f}",
            f"{r['update_s']:.3f}",
            f"{r['monitor_s']:.3f}",
            f"{trl['step_s']:.3f}" if trl else "not installed",
            ratio,
        )
    console.print(table)
    if trl:
        console.print(
            f"generation: teamtr {rows['trust region on, 1 epoch']['gen_tokens_per_s']:.0f} "
            f"tokens/s (its whole rollout), TRL {trl['gen_tokens_per_s'] or 0:.0f} tokens/s "
            f"(generate alone)"
        )
    peers = two_agent_peers(model_dir, args, console)
    multi = multi_turn_scoring(args.multi_turn_problems) if args.multi_turn_problems else None
    if multi:
        console.print(
            f"multi-turn scoring (ARBench-GN, {multi['messages']} solver messages in "
            f"{multi['episodes']} episodes): forward + backward {multi['shared_s']:.1f} s with "
            f"shared prefixes, {multi['per_message_s']:.1f} s one pass per message: "
            f"{multi['speedup']:.1f}x; largest log-prob difference {multi['max_abs_logprob_diff']:.1e}"
        )
    flips = flip_rates(model_dir, args.flip_updates) if args.flip_updates else None
    if flips:
        band = Table(
            title=f"KL-check decision flip rate for KL_hat in [0.8, 1.2] x delta "
            f"({flips['updates']} shipped updates, median KL_hat {flips['kl_hat_median']:.4f})"
        )
        band.add_column("subsampling")
        band.add_column("flip rate", justify="right")
        for name, rate in flips["flip_rate_in_band"].items():
            band.add_row(name, "-" if rate is None else f"{rate:.3f}")
        console.print(band)
    result: dict[str, Any] = {
        "command": shlex.join([sys.executable, *sys.argv]),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "torch_threads": args.threads,
        },
        "model": str(args.model) if args.model else "tiny (0.55M, built here)",
        "settings": {
            "prompts": PROMPTS,
            "generations": GENERATIONS,
            "new_tokens": NEW_TOKENS,
            "temperature": TEMPERATURE,
            "lr": LR,
            "steps": args.steps,
            "digits": args.digits,
        },
        "teamtr": rows,
        "trl": trl,
        "kl_check_flip_rates": flips,
        "multi_turn_scoring": multi,
        "ratio_vs_trl": rows["trust region on, 1 epoch"]["step_s"] / trl["step_s"] if trl else None,
        "gen_tokens_per_s": {
            "teamtr": rows["trust region on, 1 epoch"]["gen_tokens_per_s"],
            "trl": trl["gen_tokens_per_s"] if trl else None,
        },
        "comlrl": peers,
        "ratio_vs_comlrl": peers["ratio_per_stage"] if peers else None,
        "ratio_vs_trl_no_tr": (
            rows["no trust region, 1 epoch"]["step_s"] / trl["step_s"] if trl else None
        ),
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
