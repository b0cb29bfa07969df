"""A trained team outside its run: the run's policies with one checkpoint's weights, and
the export of that team as Hugging Face model and adapter folders (``teamtr export``).

``teamtr eval --run-dir RUN_DIR [--checkpoint latest|best|stage_N]`` evaluates it without
exporting anything (docs/trainers.md, "Using the trained team").

A run directory holds its ``config.yaml`` (the configuration it trained with) and
``checkpoints/``: ``stage_XXXX.pt`` files (each trainable agent's weights under
``trainer.slots.<agent>.policy``, beside the optimiser and the run state), ``latest`` (the
newest one's name) and, with ``eval.select: best_validation``, ``best.pt`` (the best validation
stage's weights, agent by agent). Nothing is written to the run directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import teamtr_env
from adapters.team import AgentPolicyConfig, TeamConfig
from teamtr_core.config import dump_config, to_dict
from teamtr_core.errors import ConfigError
from teamtr_core.paths import unwritable_folder
from teamtr_core.policy import SamplingParams
from teamtr_core.team import Team
from trainers.config import TrainConfig
from trainers.run import rundir
from trainers.run.checks import normalised_config
from trainers.run.config_file import load_train_config
from trainers.run.team_eval import agent_sampling, build_policies, tiny_model_dir

CHECKPOINTS = ("latest", "best", "stage_N")
"""What ``--checkpoint`` names: the newest intact stage, the best validation stage's team, or
stage N (``stage_3``, ``stage_0003`` or ``3``)."""

_STAGE = re.compile(r"^(?:stage_)?(\d+)$")


@dataclass(frozen=True)
class CheckpointWeights:
    """One checkpoint's trained weights: ``weights`` maps each trainable agent to its policy's
    state dict; ``stage`` is the stage it was saved after and ``config`` the configuration it
    was trained with (both ``None`` for ``best.pt``, which records neither)."""

    path: Path
    stage: int | None
    weights: dict[str, Mapping[str, Any]]
    config: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class RunTeam:
    """A run's team with a checkpoint's weights: its configuration, every agent's policy and
    sampling settings, and where the weights came from."""

    config: TrainConfig
    policies: Mapping[str, Any]  # a Team: its slots say which agents play one policy
    sampling: dict[str, SamplingParams]
    checkpoint: CheckpointWeights
    notes: tuple[str, ...] = ()
    config_changes: tuple[str, ...] = ()


def checkpoint_weights(run_dir: str | Path, checkpoint: str = "latest") -> CheckpointWeights:
    """The trained weights of ``run_dir``'s checkpoint ``checkpoint`` (see :data:`CHECKPOINTS`).

    ``latest`` is the newest stage file, which must be intact: where a newer one is damaged
    (truncated, altered, unreadable) it is refused with the reason and the intact stage to name
    instead, never replaced silently (``--resume`` falls back by itself, saying so); a named
    stage or ``best`` must itself be intact.

    Raises:
        ConfigError: no such run, checkpoint or stage (the stages that exist are listed), or a
            file that cannot be read or is not a teamtr checkpoint.
    """
    folder = Path(run_dir) / "checkpoints"
    started = (Path(run_dir) / "config.yaml").is_file()
    if not folder.is_dir() and not started:
        raise ConfigError(
            "--run-dir", [f"{run_dir} has no checkpoints/ folder: is it a teamtr train run?"]
        )
    if checkpoint == "latest":
        found = rundir.load(folder) if folder.is_dir() else None
        if found is None:
            raise ConfigError("--run-dir", [_no_checkpoint_yet(Path(run_dir))])
        if found.skipped:  # never another stage than the newest under the name "latest"
            raise ConfigError("--checkpoint", _damaged_latest(found.path, found.skipped))
        return _from_stage_file(found.path, found.state)
    if checkpoint == "best":
        path = folder / "best.pt"
        if not path.is_file():
            raise ConfigError(
                "--checkpoint",
                [f"{folder} has no best.pt (it is written only with eval.select: best_validation)"],
            )
        try:
            state = rundir.read_file(path)
        except ValueError as exc:
            raise ConfigError("--checkpoint", [f"{exc} (in {folder})"]) from exc
        if not isinstance(state, dict) or not all(isinstance(v, dict) for v in state.values()):
            raise ConfigError("--checkpoint", [f"{path} is not a teamtr best-team file"])
        return CheckpointWeights(path, None, state)
    match = _STAGE.match(checkpoint)
    if match is None:
        raise ConfigError("--checkpoint", [f"expected latest, best or stage_N, got {checkpoint!r}"])
    path = rundir.stage_path(folder, int(match.group(1)))
    if not path.is_file():
        kept = ", ".join(rundir.stage_names(folder)) or "no stage files"
        raise ConfigError("--checkpoint", [f"{path.name} is not in {folder} (it keeps: {kept})"])
    try:
        state = rundir.read_checkpoint(path)
    except ValueError as exc:
        raise ConfigError("--checkpoint", [f"{exc} (in {folder})"]) from exc
    return _from_stage_file(path, state)


def _damaged_latest(intact: Path, skipped: tuple[str, ...]) -> list[str]:
    """Why ``latest`` is refused when a newer checkpoint than the newest intact one is damaged:
    each reason, then the stage that can be named instead."""
    match = re.match(r"^stage_(\d+)\.pt$", intact.name)
    stage = f"stage_{int(match.group(1))}" if match else intact.name
    return [
        *(f"the newest checkpoint cannot be used: {reason}" for reason in skipped),
        "'latest' would silently be an older stage, so it is refused: the newest intact "
        f"checkpoint is {intact.name}; name it with --checkpoint {stage}, or restore the damaged "
        "file (teamtr train --resume falls back to it by itself)",
    ]


def _no_checkpoint_yet(run_dir: Path) -> str:
    """What a run with a ``config.yaml`` but no stage checkpoint is: started, never through a
    stage (killed, failed, or still in its first)."""
    resume = shlex.join(["teamtr", "train", "--resume", "--run-dir", str(run_dir)])
    return (
        f"{run_dir} has no checkpoint yet: the run stopped (or is still running) before its first "
        f"stage ended, so there are no trained weights to evaluate. Continue it with {resume}, "
        "or evaluate it once a stage has ended"
    )


def _from_stage_file(path: Path, state: Any) -> CheckpointWeights:
    try:
        slots = state["trainer"]["slots"]
        weights = {agent: slot["policy"] for agent, slot in slots.items()}
        stage = int(state["trainer"]["stage"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError("--checkpoint", [f"{path} is not a teamtr checkpoint"]) from exc
    saved = state.get("config")
    return CheckpointWeights(path, stage, weights, saved if isinstance(saved, Mapping) else None)


def run_config(run_dir: str | Path) -> TrainConfig:
    """The configuration ``run_dir`` trained with (its ``config.yaml``, ``run_dir`` set to where
    it is now).

    Raises:
        ConfigError: no ``config.yaml`` there, or one that no longer loads.
    """
    config_file = Path(run_dir) / "config.yaml"
    if not config_file.is_file():
        raise ConfigError(
            "--run-dir", [f"{run_dir} has no config.yaml: is it a teamtr train run directory?"]
        )
    return load_train_config(config_file, [f"run_dir={run_dir}"])


def load_run_team(run_dir: str | Path, checkpoint: str = "latest") -> RunTeam:
    """``run_dir``'s team as it trained (its ``config.yaml``) with ``checkpoint``'s weights.

    The team is built as the run built it (the tiny model of ``models/tiny``, or the team
    config's models and adapters), on this process: a run trained with agent actors
    (``runner.agents: ray``) loads without Ray. Rollouts use the run's ``rollout.engine``.
    Nothing is written in the run: a missing ``models/tiny`` is rebuilt from ``config.yaml``'s
    ``tiny_model`` in a temporary folder (every weight then comes from the checkpoint). A
    ``config.yaml`` edited since the checkpoint was saved is reported in ``config_changes``.

    Raises:
        ConfigError: no ``config.yaml``, a bad checkpoint (:func:`checkpoint_weights`), weights
            for agents the configuration does not have, or weights that do not fit the models
            the configuration builds (an edited ``config.yaml``: its changes are listed).
    """
    run_dir = Path(run_dir)
    config = run_config(run_dir)
    found = checkpoint_weights(run_dir, checkpoint)
    changes = tuple(config_changes(config, found))
    env = teamtr_env.make(config.task, **config.task_options)
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="teamtr-tiny-") as scratch:
        tiny = _tiny_model(config, run_dir, Path(scratch), notes)
        policies = build_policies(config, env, run_dir, tiny_path=tiny)
    unknown = sorted(set(found.weights) - set(policies))
    if unknown:
        raise ConfigError(
            "--checkpoint",
            [
                f"{found.path.name} has weights for {unknown}, which the run's config has no agent for"
            ],
        )
    for agent, state in found.weights.items():
        try:
            policies[agent].load_state_dict(state)
        except (RuntimeError, KeyError, ValueError) as exc:  # shapes or names that do not fit
            raise ConfigError(
                "--run-dir",
                [
                    f"{found.path.name}'s weights of {agent!r} do not fit the model {run_dir}/"
                    f"config.yaml builds ({_first_mismatch(exc)})",
                    *_changed_lines(run_dir, found, changes),
                ],
            ) from None
    if changes:
        notes.append(" ".join(_changed_lines(run_dir, found, changes)))
    sampling = agent_sampling(config, list(policies))
    return RunTeam(config, policies, sampling, found, tuple(notes), changes)


def _first_mismatch(exc: BaseException) -> str:
    """The telling line of torch's ``load_state_dict`` error (a size mismatch, a missing key)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    telling = [line for line in lines if "mismatch" in line or "key" in line.lower()]
    return (telling or lines or [type(exc).__name__])[0][:300]


def config_changes(config: TrainConfig, found: CheckpointWeights) -> list[str]:
    """``"key: old -> new"`` for each setting of ``config`` (the run's ``config.yaml`` now) that
    differs from the configuration ``found`` was trained with (none for ``best.pt``, which does
    not record it); the settings a resume may change are left out."""
    if found.config is None:
        return []
    return rundir.config_differences(normalised_config(found.config), to_dict(config))


def _changed_lines(run_dir: Path, found: CheckpointWeights, changes: tuple[str, ...]) -> list[str]:
    if not changes:
        return []
    shown = "; ".join(changes[:10]) + (
        f"; and {len(changes) - 10} more" if len(changes) > 10 else ""
    )
    return [
        f"{run_dir}/config.yaml has changed since {found.path.name} was saved ({shown}): the team "
        "is built and evaluated with config.yaml as it is now, not as it trained (restore it, "
        "or give other task options with -o)"
    ]


def _tiny_model(config: TrainConfig, run_dir: Path, scratch: Path, notes: list[str]) -> Path | None:
    """The run's tiny model folder (``None``: the run has a team config); a missing one is
    rebuilt in ``scratch`` (a note says so), never in the run."""
    if config.team is not None:
        return None
    path = run_dir / "models" / "tiny"
    if (path / "config.json").exists():
        return path
    if config.rollout.engine == "vllm":
        raise ConfigError(
            "--run-dir",
            [
                f"{path} is missing, and the run's vLLM rollouts (rollout.engine: vllm) load "
                "their engines from that folder: restore it (evaluating a run writes nothing in "
                "it, so it is not rebuilt there)"
            ],
        )
    notes.append(
        f"{path} is missing: the tiny model was rebuilt from config.yaml's tiny_model in a "
        "temporary folder (nothing is written in the run; every weight comes from the checkpoint)"
    )
    return tiny_model_dir(config, scratch)


# -- teamtr export: each agent as what from_pretrained loads -----------------------------------

EXPORT_FORMAT = "teamtr-export/1"
"""The ``format`` of an export's ``manifest.json``."""

AgentKind = Literal["model", "adapter", "merged", "config"]


@dataclass(frozen=True)
class ExportedAgent:
    """One agent of an export.

    ``kind``: ``model`` (a transformers model folder with its tokenizer), ``adapter`` (a peft
    adapter folder over ``base``), ``merged`` (a LoRA agent's adapter folded into a full model
    folder, ``--merge``) or ``config`` (a model-free agent, written to ``team.yaml`` alone).
    ``folder`` is relative to the export; ``parameters`` counts the tensors written there.
    """

    kind: AgentKind
    folder: str | None
    base: str | None
    parameters: int


def export_run(
    run_dir: str | Path,
    out: str | Path,
    checkpoint: str = "latest",
    *,
    merge: bool = False,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Writes ``run_dir``'s team with ``checkpoint``'s weights to ``out``, each agent as what
    ``from_pretrained`` loads, with a ``team.yaml`` and a ``manifest.json``; returns the manifest.

    Every trainable ``hf`` agent gets a folder named after it: a full-weight agent a
    transformers model folder (and its tokenizer), a LoRA agent a peft adapter folder over its
    base (a shared-base team: one adapter per agent over the one base), or with ``merge`` a full
    model folder with the adapter folded in; a role-sharing run's one policy (``shared_policy``)
    one folder, ``policy``, for every agent. ``team.yaml`` points each agent at its folder, with
    its sampling settings, so ``teamtr eval TASK --team OUT/team.yaml`` evaluates the trained
    team; ``team-vllm.yaml`` serves the same agents from vLLM engines (an adapter team from one
    multi-LoRA engine). The export is written beside ``out`` and renamed into place at the end: an
    interrupted export leaves nothing that looks complete.

    Raises:
        ConfigError: ``out`` is not empty (``overwrite`` replaces an earlier export only, never
            another folder) or holds the run, a bad run or checkpoint (:func:`load_run_team`),
            or a trainable agent with no Hugging Face form (a ``tabular`` one).
    """
    run_dir, out = Path(run_dir), Path(out)
    _check_out(run_dir, out, overwrite)
    team = load_run_team(run_dir, checkpoint)
    slots = Team.of(team.policies).slots  # each with the agent config it was built from
    policies = {name: getattr(p, "trainable", p) for name, p in team.policies.items()}
    tabular = sorted(n for slot in slots if slot.config.backend == "tabular" for n in slot.agents)
    if tabular:
        raise ConfigError(
            "teamtr export",
            [
                f"agents {tabular} are not transformers models (tabular): they have no Hugging "
                "Face form; evaluate the run with "
                + shlex.join(["teamtr", "eval", team.config.task, "--run-dir", str(run_dir)])
            ],
        )
    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    one = any(slot.shared for slot in slots)  # a role-sharing team: one slot, one folder
    try:
        exported: dict[str, ExportedAgent] = {}
        entries: dict[str, AgentPolicyConfig] = {}
        for slot in slots:  # a slot's policy is written once and plays each of its agents
            first = slot.agents[0]
            folder = SHARED_FOLDER if slot.shared else first
            done = _export_agent(folder, policies[first], slot.config, staging, merge)
            for name in slot.agents:
                exported[name], entries[name] = done
        exported = {n: exported[n] for n in policies}  # the team's order
        entries = {n: replace(entries[n], sampling=team.sampling[n]) for n in policies}
        shared = bool(team.config.team and team.config.team.shared_base) and not merge
        dump_config(
            TeamConfig(agents=entries, shared_base=shared, shared_policy=one),
            staging / "team.yaml",
        )
        dump_config(_vllm_team(entries, one), staging / VLLM_TEAM)
        manifest = _manifest(run_dir, out, checkpoint, team, exported, merge)
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        _move_into_place(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


VLLM_TEAM = "team-vllm.yaml"
"""The export's team config that serves every exported agent from vLLM engines."""
SHARED_FOLDER = "policy"
"""The folder of a role-sharing run's one policy (``team.shared_policy``), beside team.yaml."""


def _vllm_team(entries: dict[str, AgentPolicyConfig], one: bool = False) -> TeamConfig:
    """The exported team on vLLM: each model folder an engine of its own, and the adapters of
    one base served by one multi-LoRA engine (``shared_base``); model-free agents as they are.
    A shared policy (``one``) is one engine: of its model folder, or of its base with its one
    adapter."""
    agents = {
        name: replace(entry, backend="vllm") if entry.backend == "hf" else entry
        for name, entry in entries.items()
    }
    adapters = any(entry.adapter_path for entry in agents.values())
    return TeamConfig(agents=agents, shared_base=adapters, shared_policy=one and not adapters)


def _check_out(run_dir: Path, out: Path, overwrite: bool) -> None:
    """Refuses, before anything is loaded or written, an ``out`` that is not empty (unless it
    is an earlier export and ``overwrite`` is given) or that holds the run directory."""
    resolved, run = out.resolve(), run_dir.resolve()
    if resolved == run or resolved in run.parents:
        raise ConfigError("--out", [f"{out} holds the run {run_dir}: export to another folder"])
    if run in resolved.parents and (run / "config.yaml").is_file():
        raise ConfigError(
            "--out",
            [
                f"{out} is inside the run {run_dir}, which an export only reads: give a folder outside it"
            ],
        )
    problem = unwritable_folder(out)
    if problem:
        raise ConfigError("--out", [f"{out}: {problem}"])
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not overwrite:
        raise ConfigError(
            "--out", [f"{out} is not empty: give a new folder, or --overwrite to replace an export"]
        )
    if export_manifest(out) is None:
        raise ConfigError(
            "--out",
            [f"{out} is not a teamtr export (no manifest.json): --overwrite replaces exports only"],
        )


def _move_into_place(staging: Path, out: Path) -> None:
    """``staging`` becomes ``out``; an earlier export there is removed only once the new one is
    complete."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        out.rename(old)
    staging.rename(out)
    if old is not None:
        shutil.rmtree(old)


def _export_agent(
    name: str, policy: Any, agent: Any, staging: Path, merge: bool
) -> tuple[ExportedAgent, Any]:
    """Writes one agent into ``staging/name``; returns what was written and its ``team.yaml``
    entry (a model-free agent keeps its config, with no folder)."""
    if agent.backend != "hf":  # the run trained only its hf (and tabular, refused) agents
        return ExportedAgent("config", None, None, 0), agent
    folder = staging / name
    keep = {k: getattr(agent, k) for k in _KEPT_FIELDS}
    base = str(Path(agent.path).resolve())
    if not policy.is_lora:
        policy.save_pretrained(folder)
        entry = AgentPolicyConfig(backend="hf", path=name, **keep)
        return ExportedAgent("model", name, None, _tensor_count(policy.state_dict())), entry
    adapter = _tensor_count(policy.state_dict())
    if not merge:
        policy.save_pretrained(folder)
        entry = AgentPolicyConfig(backend="hf", path=base, adapter_path=name, **keep)
        return ExportedAgent("adapter", name, base, adapter), entry
    from adapters.hf import HFPolicy

    adapter_folder = staging / f".{name}-adapter"
    policy.save_pretrained(adapter_folder)
    merged = HFPolicy.from_pretrained(base, dtype=agent.dtype, adapter_path=adapter_folder)
    merged.merge_lora()
    merged.save_pretrained(folder)
    shutil.rmtree(adapter_folder)
    entry = AgentPolicyConfig(backend="hf", path=name, **keep)
    return ExportedAgent("merged", name, base, _tensor_count(merged.state_dict())), entry


#: The settings of an ``hf`` agent that its exported entry keeps (how it runs, not what it is).
_KEPT_FIELDS = ("device", "dtype", "micro_batch_size", "max_prompt_tokens", "chat_template")


def _tensor_count(state: Mapping[str, Any]) -> int:
    return sum(int(v.numel()) for v in state.values() if hasattr(v, "numel"))


def _manifest(
    run_dir: Path,
    out: Path,
    checkpoint: str,
    team: RunTeam,
    exported: dict[str, ExportedAgent],
    merge: bool,
) -> dict[str, Any]:
    config_file = run_dir / "config.yaml"
    team_file, k = str(out / "team.yaml"), str(team.config.eval.k)
    command = shlex.join(["teamtr", "eval", team.config.task, "--team", team_file, "--k", k])
    return {
        "format": EXPORT_FORMAT,
        "run_dir": str(run_dir.resolve()),
        "checkpoint": checkpoint,
        "checkpoint_file": team.checkpoint.path.name,
        "stage": team.checkpoint.stage,
        "config_sha256": hashlib.sha256(config_file.read_bytes()).hexdigest(),
        "task": team.config.task,
        "task_options": team.config.task_options,
        "merged": merge,
        "agents": {name: asdict(agent) for name, agent in exported.items()},
        "teams": {"hf": "team.yaml", "vllm": VLLM_TEAM},
        "eval_command": command,
        "notes": list(team.notes),
        "config_changes": list(team.config_changes),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def export_manifest(folder: str | Path) -> dict[str, Any] | None:
    """The ``manifest.json`` of a teamtr export in ``folder`` (``None``: not an export)."""
    path = Path(folder) / "manifest.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == EXPORT_FORMAT else None
