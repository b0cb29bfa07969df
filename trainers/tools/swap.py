"""Plug-and-play replacement of one agent (paper Sec. 3.5, 5.8, App. D, G.7).

``swap_agent(SwapConfig(run_dir, agent, model, ...))`` is what ``teamtr swap`` calls:

1. reads ``run_dir``'s ``config.yaml`` and its newest intact checkpoint (stage ``s``) and rebuilds
   the team with its weights; ``run_dir`` is only read, never written;
2. loads ``model`` for ``agent`` and checks that it fits the seat: the same tokenizer (vocabulary
   and special tokens) and the same protocol (system prompt, reasoning tags, tool-call format,
   chat template: App. G.7); every problem at once, as a ``ConfigError``;
3. evaluates the team right before the swap (held-out ``eval/`` and, per stage, ``val/``);
4. with ``align``: Stage-0 alignment (:mod:`trainers.tools.align`) on probe contexts from the current
   team's occupancy at ``agent``'s turns, until the held-out monitored KL is at most
   ``delta_align``;
5. evaluates right after the swap, then writes a NEW run directory: ``config.yaml`` (the run's
   config with a team config that seats ``model`` for ``agent``), a stage-``s`` checkpoint (the
   other agents' weights, optimizer and trust-region state exactly as in ``run_dir``; the new
   agent with a fresh optimizer) and ``swap.json``;
6. resumes TeamTR there for ``stages`` more stages with ``run_training(..., resume=True)``:
   ``metrics.jsonl``, checkpoints and ``summary.json`` as in any run (its ``before`` is the team
   right after the swap), validated after every stage (``eval.every=1``); ``swap.json`` gets the
   accuracy per stage and at the end.

The new directory is an ordinary run: ``teamtr train --resume --run-dir NEW`` continues it.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from rich.console import Console

from adapters.team import AgentPolicyConfig, TeamConfig, build_agent
from teamtr_core.config import dump_config, to_dict
from teamtr_core.errors import ConfigError
from teamtr_core.seeds import PROBE_STREAM, derive_seed
from teamtr_env.runners import Runner
from trainers.config import TrainConfig
from trainers.run import rundir
from trainers.run.config_file import load_train_config
from trainers.run.logger import JsonlLogger, read_jsonl
from trainers.run.recipe import env_factory, run_training
from trainers.run.report import json_finite
from trainers.run.state import RunState
from trainers.run.team_eval import agent_sampling, build_policies, evaluate_team
from trainers.tools.align import AlignConfig, AlignResult, align_policy, split_probes

PROTOCOL_FILE = "teamtr_protocol.json"
"""A file beside a model naming the protocol it was trained for (keys of :data:`PROTOCOL_KEYS`);
a swap checks it against the team's protocol."""

PROTOCOL_KEYS: tuple[str, ...] = (
    "system_prompt",
    "system_prompts",
    "reasoning",
    "tool_calls",
    "header",
)
"""Protocol settings a new model may bring along; each must equal the team's (App. G.7)."""


@dataclass(frozen=True)
class SwapConfig:
    """A swap of one agent's model in a trained run.

    Attributes:
        run_dir: the trained run (only read).
        agent: the agent whose model is replaced.
        model: the new model's directory (``HFPolicy.from_pretrained``; nothing is downloaded).
        out: the new run directory (must be new or empty and not inside ``run_dir``); default
            ``<run_dir>-swap-<agent>``.
        stages: K, TeamTR stages after the swap.
        align: Stage-0 alignment settings; ``None`` is a direct swap.
        protocol: protocol settings the new model expects (keys of :data:`PROTOCOL_KEYS`),
            e.g. from the command line; checked beside its ``teamtr_protocol.json``.
        eval_every: the new run's ``eval.every`` (1: the recovery curve after every stage).
        progress: progress bars in the resumed run.
    """

    run_dir: str
    agent: str
    model: str
    out: str | None = None
    stages: int = 4
    align: AlignConfig | None = None
    protocol: Mapping[str, Any] = field(default_factory=dict)
    eval_every: int = 1
    progress: bool = False

    @property
    def out_dir(self) -> Path:
        return Path(self.out) if self.out else Path(f"{self.run_dir}-swap-{self.agent}")


# -- the checks of a swap -------------------------------------------------------------------------


def tokenizer_errors(old: Any, new: Any) -> list[str]:
    """Differences between the tokenizers of the old and the new agent (every one): the
    vocabularies (token -> id) and the special tokens. KL to the old agent, the trust region and
    Stage-0 alignment need one action space (paper App. D.1)."""
    fix = "a swap keeps the tokenizer (App. D.1): pick a model with the old agent's tokenizer"
    a, b = getattr(old, "tokenizer", None), getattr(new, "tokenizer", None)
    if a is None or b is None:
        which = "the old agent's policy" if a is None else "the new model"
        return [f"tokenizer: {which} has no tokenizer to compare; {fix}"]
    errors = []
    va, vb = a.get_vocab(), b.get_vocab()
    if va != vb:
        only_old = sorted(set(va) - set(vb))
        only_new = sorted(set(vb) - set(va))
        moved = sorted(t for t in set(va) & set(vb) if va[t] != vb[t])
        detail = [
            f"{len(only_old)} only in the old (e.g. {only_old[:3]})" if only_old else "",
            f"{len(only_new)} only in the new (e.g. {only_new[:3]})" if only_new else "",
            f"{len(moved)} with other ids (e.g. {moved[:3]})" if moved else "",
        ]
        errors.append(
            f"tokenizer: the vocabularies differ ({len(va)} vs {len(vb)} tokens; "
            f"{', '.join(d for d in detail if d)}); {fix}"
        )
    for name in ("bos_token", "eos_token", "pad_token", "unk_token"):
        x, y = getattr(a, name, None), getattr(b, name, None)
        if x != y:
            errors.append(f"tokenizer: {name} is {x!r} in the old agent's, {y!r} in the new's")
    extra_a, extra_b = _other_special_tokens(a), _other_special_tokens(b)
    if extra_a != extra_b:
        errors.append(
            f"tokenizer: other special tokens differ (old {sorted(map(str, extra_a))}, new "
            f"{sorted(map(str, extra_b))})"
        )
    return errors


def _other_special_tokens(tokenizer: Any) -> set[str]:
    """A tokenizer's special tokens besides BOS, EOS, padding and unknown."""
    named = {tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token, tokenizer.unk_token}
    return set(getattr(tokenizer, "all_special_tokens", ())) - named


def protocol_errors(
    team_protocol: Any,
    agent: str,
    old: Any,
    new: Any,
    expected: Sequence[tuple[str, Mapping[str, Any]]],
) -> list[str]:
    """What would change the team protocol (every difference): the chat template that renders
    the context, and each setting a source (``(where, settings)``: the model's
    ``teamtr_protocol.json``, the caller's options) gives that differs from the team's.

    The protocol is part of the state every agent conditions on, so it stays fixed across a
    swap (App. G.7); a model trained for another protocol has to be aligned to this one, or the
    team retrained under the new protocol."""
    fix = "the protocol stays fixed across a swap (App. G.7)"
    errors = []
    if getattr(old, "use_chat_template", None) != getattr(new, "use_chat_template", None) or (
        getattr(old, "use_chat_template", False)
        and getattr(old.tokenizer, "chat_template", None)
        != getattr(new.tokenizer, "chat_template", None)
    ):
        errors.append(
            "protocol: the new model renders the context with another chat template "
            f"(old agent: {'its template' if getattr(old, 'use_chat_template', False) else 'plain text'}, "
            f"new: {'a template' if getattr(new, 'use_chat_template', False) else 'plain text'}"
            f"{', a different one' if getattr(old, 'use_chat_template', False) and getattr(new, 'use_chat_template', False) else ''}); "
            f"{fix}: set chat_template in the team config so that both render alike"
        )
    current = {
        "system_prompt": team_protocol.system_prompt(agent),
        "system_prompts": {a: team_protocol.system_prompt(a) for a in team_protocol.agents},
        "reasoning": team_protocol.reasoning,
        "tool_calls": team_protocol.tool_calls,
        "header": team_protocol.header,
    }
    for where, settings in expected:
        for key, value in settings.items():
            if key not in PROTOCOL_KEYS:
                near = difflib.get_close_matches(key, PROTOCOL_KEYS, n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                errors.append(
                    f"protocol: {where} sets unknown key {key!r}{hint}; known: "
                    f"{', '.join(PROTOCOL_KEYS)}"
                )
                continue
            if key == "system_prompts" and isinstance(value, Mapping):
                pairs = [
                    (f"system_prompts.{a}", v, current["system_prompts"].get(a))
                    for a, v in value.items()
                ]
            else:
                pairs = [(key, value, current[key])]
            for name, want, have in pairs:
                if want != have:
                    errors.append(
                        f"protocol: {where} sets {name}={_short(want)} but the team's is "
                        f"{_short(have)}; {fix}: drop the setting, or retrain the team under "
                        "the new protocol"
                    )
    return errors


def model_protocol(model: str | Path) -> dict[str, Any]:
    """The settings of ``teamtr_protocol.json`` beside a model (``{}``: there is none).

    Raises:
        ConfigError: the file is not a JSON object.
    """
    path = Path(model) / PROTOCOL_FILE
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError("swap", [f"protocol: {path} cannot be read ({exc})"]) from exc
    if not isinstance(data, dict):
        raise ConfigError("swap", [f"protocol: {path} must hold a JSON object"])
    return data


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 70 else text[:67] + "..."


# -- the swap ------------------------------------------------------------------------------------


@dataclass
class _Loaded:
    """The trained run as it was at its newest checkpoint."""

    config: TrainConfig
    checkpoint: rundir.LoadedCheckpoint
    env: Any
    policies: dict[str, Any]


def _check_dirs(config: SwapConfig) -> list[str]:
    errors = []
    run_dir, out = Path(config.run_dir).resolve(), config.out_dir.resolve()
    if not (run_dir / "config.yaml").is_file():
        errors.append(f"run_dir: {config.run_dir} holds no config.yaml (a teamtr training run)")
    if out == run_dir or run_dir in out.parents:
        errors.append(
            f"out: {config.out_dir} is {'the run directory' if out == run_dir else 'inside the run directory'} "
            f"{config.run_dir}; a swap never writes into the run it starts from: give --out NEW_RUN_DIR"
        )
    elif out.exists() and (not out.is_dir() or any(out.iterdir())):
        errors.append(
            f"out: {config.out_dir} already exists and is not empty; a swap starts a new run: "
            "give an empty or new --out"
        )
    if not (Path(config.model) / "config.json").is_file():
        errors.append(
            f"model: {config.model} is not a model directory (no config.json); nothing is "
            "downloaded: pass a local checkpoint"
        )
    if config.stages < 1:
        errors.append(f"stages: must be >= 1, got {config.stages}")
    if config.eval_every < 0:
        errors.append(f"eval_every: must be >= 0, got {config.eval_every}")
    return errors


def _load_run(config: SwapConfig) -> _Loaded:
    run_dir = Path(config.run_dir)
    train = load_train_config(run_dir / "config.yaml")
    found = rundir.load(run_dir / "checkpoints")
    if found is None:
        raise ConfigError(
            "swap", [f"run_dir: {run_dir} has no checkpoint yet: train it first (teamtr train)"]
        )
    env = env_factory(train, "train")()
    errors = []
    slots = found.state["trainer"]["slots"]
    if config.agent not in slots:
        near = difflib.get_close_matches(config.agent, list(slots), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        errors.append(
            f"agent: {config.agent!r} is not a trained agent of {run_dir}{hint}; trained agents: "
            f"{', '.join(slots)}"
        )
    if train.team is None and not (run_dir / "models" / "tiny" / "config.json").is_file():
        errors.append(f"run_dir: {run_dir}/models/tiny (the run's model) is missing")
    if errors:
        raise ConfigError("swap", errors)
    policies = dict(build_policies(train, env, run_dir))  # one agent is swapped below
    for agent, slot in slots.items():
        policies[agent].load_state_dict(slot["policy"])
    return _Loaded(train, found, env, policies)


def _seat(train: TrainConfig, run_dir: Path, out: Path, agent: str, model: str) -> TeamConfig:
    """The new run's team config: ``model`` in ``agent``'s seat (its other settings kept), the
    others as they were (the run's tiny model is copied into ``out/models/tiny``)."""
    model_path = str(Path(model).resolve())
    if train.team is None:
        tiny = str((out / "models" / "tiny").resolve())
        return TeamConfig(
            agents={agent: AgentPolicyConfig(path=model_path)},
            default=AgentPolicyConfig(path=tiny),
        )
    team = train.team
    seat = team.agents.get(agent, team.default) or AgentPolicyConfig()
    seat = dataclasses.replace(seat, backend="hf", path=model_path, adapter_path=None)
    return dataclasses.replace(team, agents={**team.agents, agent: seat})


def swap_agent(config: SwapConfig, *, console: Console | None = None) -> dict[str, Any]:
    """Swaps ``config.agent``'s model in a trained run and resumes TeamTR in a new run directory
    (see the module docstring).

    Returns:
        The swap record (also written as ``swap.json`` in the new run directory).

    Raises:
        ConfigError: every problem with the directories, the agent, the new model's tokenizer or
            protocol, listed before the new directory is written.
    """
    console = console or Console()
    errors = _check_dirs(config)
    if errors:
        raise ConfigError("swap", errors)
    loaded = _load_run(config)
    train, env, policies = loaded.config, loaded.env, loaded.policies
    if train.torch_threads > 0:
        torch.set_num_threads(train.torch_threads)
    out, run_dir = config.out_dir, Path(config.run_dir)
    stage = int(loaded.checkpoint.state["trainer"]["stage"])
    team = _seat(train, run_dir, out, config.agent, config.model)
    old = policies[config.agent]
    new = _checked_model(config, team, env, old)
    new_train = dataclasses.replace(
        train,
        team=team,
        sft=None,  # the resumed run starts from the checkpoint: nothing to clone
        run_dir=str(out),
        progress=config.progress,
        schedule=dataclasses.replace(train.schedule, stages=stage + config.stages),
        eval=dataclasses.replace(train.eval, every=config.eval_every),
    )
    # The old run's settings (its team config's paths exist) with the new run's evaluations.
    judge = dataclasses.replace(train, eval=new_train.eval)
    eval_fn, val_fn = env_factory(judge, train.eval.split), env_factory(judge, "validation")
    t0 = time.perf_counter()
    console.print(f"swap: {run_dir} after stage {stage}; evaluating the team before the swap")
    before = _evaluate(judge, eval_fn, val_fn, policies)
    console.print(_line("before the swap", before, train.eval.k))

    alignment: AlignResult | None = None
    if config.align is not None:
        alignment = _align(config.align, train, policies, old, new, config.agent, console)
    policies[config.agent] = new
    after = _evaluate(judge, eval_fn, val_fn, policies)
    console.print(_line("right after the swap", after, train.eval.k))

    record: dict[str, Any] = {
        "agent": config.agent,
        "model": str(Path(config.model).resolve()),
        "from_run": str(run_dir.resolve()),
        "from_checkpoint": loaded.checkpoint.path.name,
        "stage": stage,
        "stages_after": config.stages,
        "aligned": alignment is not None,
        "align_config": dataclasses.asdict(config.align) if config.align else None,
        "alignment": alignment.as_dict() if alignment else None,
        "before_swap": before,
        "after_swap": after,
        "per_stage": [],
        "final": None,
    }
    with rundir.DirectoryLock(out).acquire("swap --out"):  # run_training shares it
        _write_new_run(new_train, loaded, out, run_dir, config.agent, new, stage, after)
        _write_record(out, record)
        summary = run_training(new_train, resume=True, console=console)
        record["per_stage"] = _validations_after(out, stage, new_train.eval.k)
        record["final"] = summary["after"]
        record["wall_s"] = time.perf_counter() - t0
        _write_record(out, record)
    return record


def _checked_model(config: SwapConfig, team: TeamConfig, env: Any, old: Any) -> Any:
    """The new model in ``config.agent``'s seat of ``team``, checked against ``old`` (the
    model it replaces): the tokenizer and the protocol.

    Raises:
        ConfigError: every problem with the tokenizer or the protocol.
    """
    new = build_agent(team, config.agent, team.agents[config.agent], env.task)
    expected = [(f"{Path(config.model) / PROTOCOL_FILE}", model_protocol(config.model))]
    expected.append(("the swap's protocol options", dict(config.protocol)))
    errors = tokenizer_errors(old, new)
    errors += protocol_errors(env.protocol, config.agent, old, new, expected)
    if errors:
        raise ConfigError(f"swap of {config.agent!r}", errors)
    return new


def _validations_after(out: Path, stage: int, k: int) -> list[dict[str, Any]]:
    """The resumed run's validations (``val/`` metrics) after ``stage``, one row per stage."""
    return [
        {"stage": int(r["step"]), **{key: v for key, v in r.items() if key.startswith("val/")}}
        for r in read_jsonl(out / "metrics.jsonl")
        if r["step"] > stage and f"val/avg@{k}" in r
    ]


def _evaluate(
    train: TrainConfig, eval_fn: Any, val_fn: Any, policies: dict[str, Any]
) -> dict[str, float]:
    """The held-out evaluation (``eval/``) and, when the run validates, the validation one
    (``val/``: the split of the per-stage curve)."""
    out = evaluate_team(train, eval_fn, policies)
    if train.eval.every:
        out.update(evaluate_team(train, val_fn, policies, prefix="val"))
    return out


def _align(
    settings: AlignConfig,
    train: TrainConfig,
    policies: dict[str, Any],
    old: Any,
    new: Any,
    agent: str,
    console: Console,
) -> AlignResult:
    """Stage-0 alignment: probe contexts at ``agent``'s turns under the current team (training
    split), split into train/held-out, then :func:`trainers.tools.align.align_policy`."""
    sampling = agent_sampling(train, list(policies))
    runner = Runner(env_factory(train, "train"), policies, sampling, progress=False)
    seed = derive_seed(train.seed, PROBE_STREAM, settings.seed)
    contexts: list[str] = []
    tries = 0
    while len(contexts) < settings.probes and tries < 5:  # an agent may not speak every episode
        batch = runner.rollout(
            runner.sample_problems(settings.probes, seed=seed + tries, distinct=False),
            seed=seed + tries,
        )
        contexts += [m.context for m in batch.messages if m.agent == agent]
        tries += 1
    if not contexts:
        raise ConfigError("swap", [f"align: {agent!r} never spoke in {tries} probe rollouts"])
    train_probes, held = split_probes(contexts[: settings.probes], settings.heldout, settings.seed)
    console.print(
        f"stage-0 alignment of {agent}: {len(train_probes)} probe contexts, {len(held)} held out, "
        f"KL({'new || old' if settings.direction == 'new_old' else 'old || new'}) until <= "
        f"{settings.delta_align} (at most {settings.max_steps} steps)"
    )

    def show(row: dict[str, float]) -> None:
        loss = row.get("train_loss", math.nan)
        console.print(
            f"  align step {int(row['step'])}: held-out KL {row['kl']:.4f} "
            f"(sampled Eq. 18 monitor {row['kl_tok']:.4f})"
            + (f", train loss {loss:.4f}" if math.isfinite(loss) else ""),
            markup=False,
            highlight=False,
        )

    result = align_policy(new, old, train_probes, held, sampling[agent], settings, on_check=show)
    verdict = "reached" if result.reached else "did NOT reach"
    console.print(
        f"alignment {verdict} delta_align={settings.delta_align} after {result.steps} steps "
        f"({result.initial_kl:.4f} -> {result.final_kl:.4f}, {result.seconds:.1f} s)"
    )
    return result


def _write_new_run(
    train: TrainConfig,
    loaded: _Loaded,
    out: Path,
    run_dir: Path,
    agent: str,
    new: Any,
    stage: int,
    after: dict[str, float],
) -> None:
    """``out``: config.yaml, the run's tiny model (when it has no team config), metrics.jsonl
    with the evaluation right after the swap, and a stage-``stage`` checkpoint: every other
    agent's slot as in the run's checkpoint, the new agent's weights with a fresh optimizer and
    the configured beta and delta (no frozen reference: the first stage freezes the new one)."""
    out.mkdir(parents=True, exist_ok=True)
    if train.team is not None and loaded.config.team is None:
        shutil.copytree(run_dir / "models" / "tiny", out / "models" / "tiny")
    dump_config(train, out / "config.yaml")
    logger = JsonlLogger(out / "metrics.jsonl")
    logger.log(after, step=stage)
    logger.close()
    state = dict(loaded.checkpoint.state["trainer"])
    optimizer = torch.optim.AdamW(
        new.parameters(), lr=train.optim.lr, weight_decay=train.optim.weight_decay
    )
    state["slots"] = {
        **state["slots"],
        agent: {
            "policy": new.state_dict(),
            "optimizer": optimizer.state_dict(),
            "beta": train.trust_region.beta,
            "delta": train.trust_region.delta,
            "version": 0,
        },
    }
    extra = RunState(before=after).to_checkpoint()
    config = rundir.result_config(to_dict(train))
    rundir.save(out / "checkpoints", stage, {"trainer": state, "extra": extra, "config": config})


def _write_record(out: Path, record: dict[str, Any]) -> None:
    (out / "swap.json").write_text(json.dumps(json_finite(record), indent=2, default=str))


def _line(label: str, metrics: Mapping[str, float], k: int) -> str:
    line = f"{label}: held-out avg@{k} {metrics.get(f'eval/avg@{k}', math.nan):.3f}"
    if f"val/avg@{k}" in metrics:
        line += f", validation avg@{k} {metrics[f'val/avg@{k}']:.3f}"
    return line
