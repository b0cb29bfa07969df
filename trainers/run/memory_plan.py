"""A run's memory plan: the bytes every agent holds on every device, computed from the
configuration before anything is loaded or written (``teamtr plan``, and the check ``teamtr
train`` runs before its first write).

Per agent and device (a gang's rank holds its shard): weights, gradients, AdamW's two moments,
the trust region's snapshot (on the device unless ``trust_region.snapshot_device: cpu``), the
frozen reference (``optim.ref_kl_coef > 0``), the activations of one micro-batch, a gang's
gathered layer and a vLLM engine's share; an update's peak is the larger of its backward pass
and its optimizer step (:mod:`trainers.run.memory_model`). A device holds every agent placed on
it between updates (updates run one agent at a time) plus the largest update's excess, and a
process's own overhead (:data:`PROCESS_OVERHEAD`).

Placement: with ``runner.agents: local`` each agent lives on its team config's ``device`` (the
tiny model on the CPU); with agent actors each rank of each agent takes ``runner.agent_gpus``
of the next GPU (the host with ``runner.agent_gpus: 0``). Devices are this machine's (CUDA
devices, the host's RAM), or given (``--devices 8x80GiB``) to plan for a machine you are not on
(:mod:`trainers.run.plan_devices`). An agent actor left without a GPU, or an agent on a CUDA
device the plan does not have, is refused (:attr:`MemoryPlan.refused`), as the run would be: it
never counts as fitting on the host. A model folder without a ``config.json`` is not counted
(:attr:`MemoryPlan.unplanned`); an invalid one is refused, naming the file and field. ``teamtr
plan`` plans a model that is not on this machine from the ``config.json`` teamtr keeps of the
model its path names (``Qwen/Qwen3-8B``, ``/models/Qwen3-8B``: :attr:`MemoryPlan.bundled`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from adapters.codec import prompt_token_counter
from teamtr_core.errors import ConfigError
from trainers.config import Gang, TrainConfig
from trainers.run.memory_model import DTYPE_BYTES, UpdateBytes, update_peak
from trainers.run.plan_agents import PlannedAgent, plan_agents
from trainers.run.plan_devices import (
    Device,
    actor_devices,
    gpu_shortage,
    local_devices,
    missing_device,
    no_gpu_asked,
)

__all__ = [
    "PROCESS_OVERHEAD",
    "MemoryPlan",
    "Placed",
    "check_memory",
    "plan_memory",
]

GIB = 2**30
PROCESS_OVERHEAD = GIB
"""What a process holds besides its agents (Python, torch, a CUDA context and the allocator's
slack), counted once per process on each device it uses."""

CHARS_PER_TOKEN = 3.5
"""How many characters a token of a subword tokenizer covers, to turn a context's characters
into tokens (a character-level model, such as the tiny one: 1)."""


@dataclass(frozen=True)
class Placed:
    """One agent (one rank of a gang) on one device, and what it holds there."""

    agent: str
    rank: int | None
    device: str
    bytes: UpdateBytes
    epochs: int
    trains: bool = True

    @property
    def peak(self) -> int:
        return self.bytes.peak(self.epochs) if self.trains else self.held

    @property
    def held(self) -> int:
        """What it holds between updates."""
        b = self.bytes
        return b.weights + b.reference + b.optimizer + b.gradients + b.engine

    @property
    def label(self) -> str:
        return self.agent if self.rank is None else f"{self.agent} (rank {self.rank})"


@dataclass
class MemoryPlan:
    """Every agent's bytes on its device (see the module docstring)."""

    placed: list[Placed]
    devices: dict[str, Device]
    tokens: dict[str, int] = field(default_factory=dict)
    processes: dict[str, int] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    """Why agents have no device here (an agent actor left without a GPU, a CUDA device the
    plan does not have), one line each: the run would be refused, so the plan does not fit."""
    unplanned: dict[str, str] = field(default_factory=dict)
    """Agents whose model's size is not known (no ``config.json`` in its folder), and why: their
    memory is not counted."""
    bundled: dict[str, str] = field(default_factory=dict)
    """Agents planned from teamtr's bundled ``config.json`` of a model (its hub id), their
    model's folder not being on this machine (:mod:`trainers.run.bundled_models`)."""

    def on(self, device: str) -> list[Placed]:
        return [p for p in self.placed if p.device == device]

    def used(self, device: str) -> int:
        """The device's peak: what every agent on it holds, the largest update's excess, and
        each process's overhead."""
        here = self.on(device)
        if not here:
            return 0
        excess = max(p.peak - p.held for p in here)
        return sum(p.held for p in here) + excess + self.processes.get(device, 1) * PROCESS_OVERHEAD

    def fits(self, device: str) -> bool | None:
        """Whether the device holds its plan (``None``: its capacity is unknown, not checked)."""
        capacity = self.devices[device].capacity
        return None if capacity is None else self.used(device) <= capacity

    def errors(self) -> list[str]:
        """The agents without a device (:attr:`refused`), then one line per device the plan
        does not fit, naming its agents and the shortfall."""
        lines = list(self.refused)
        for name, device in self.devices.items():
            used = self.used(name)
            if device.capacity is None or used <= device.capacity:
                continue
            agents = ", ".join(f"{p.label} {_gib(p.peak)}" for p in self.on(name))
            lines.append(
                f"{name}: the plan needs {_gib(used)} but it holds {_gib(device.capacity)}, "
                f"{_gib(used - device.capacity)} short ({agents}); shard the agents "
                "(runner.agent_shards with runner.agents: ray), train LoRA adapters, load bfloat16, "
                "keep the snapshot on the host (trust_region.snapshot_device: cpu), or lower "
                "optim.micro_batch_size / turn on optim.gradient_checkpointing"
            )
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "devices": {
                name: {
                    "capacity": d.capacity,
                    "used": self.used(name),
                    "fits": self.fits(name),
                    "agents": [
                        {"agent": p.agent, "rank": p.rank, "peak": p.peak, **p.bytes.parts()}
                        for p in self.on(name)
                    ],
                }
                for name, d in self.devices.items()
            },
            "tokens_per_micro_batch": dict(self.tokens),
            "refused": list(self.refused),
            "unplanned": dict(self.unplanned),
            "bundled": dict(self.bundled),
        }


def _gib(n: int) -> str:
    return f"{n / GIB:,.2f} GiB"


def plan_memory(
    config: TrainConfig,
    env: Any,
    devices: dict[str, Device] | None = None,
    prompt_tokens: int | None = None,
    *,
    bundled: bool = False,
) -> MemoryPlan:
    """The memory plan of ``config``'s run (``env``: its training environment, for the team and
    the contexts' lengths) on ``devices`` (default: this machine's). ``prompt_tokens``: the
    longest context in tokens (default: measured on a few of the task's problems).
    ``bundled``: a model path that is not on this machine is planned from teamtr's
    ``config.json`` of the model it names (``teamtr plan``; a run's check leaves it off: a run
    needs the model's folder).

    Raises:
        ConfigError: a model's ``config.json`` that is not valid, or a model path the plan
            cannot read (every problem at once).
    """
    given = devices is not None
    devices = dict(local_devices() if devices is None else devices)
    agents, unplanned = plan_agents(config, tuple(env.possible_agents), bundled=bundled)
    gang = Gang.of(config)
    local, shards = not gang.actors, gang.ranks
    where, refused = _placement(config, agents, devices, shards, given=given)
    placed: list[Placed] = []
    tokens: dict[str, int] = {}
    processes: dict[str, int] = {}
    for agent in agents:
        tokens[agent.name] = _micro_batch_tokens(config, env, agent, shards, prompt_tokens)
        for rank in range(shards):
            device = where[agent.name, rank]
            if device is None:  # refused: the run would not start, and nothing is counted
                continue
            devices.setdefault(device, Device(device, None))
            if not local:
                processes[device] = processes.get(device, 0) + 1
            held = _bytes(config, agent, shards, tokens[agent.name], devices[device])
            label = rank if shards > 1 else None
            placed.append(
                Placed(agent.name, label, device, held, config.optim.epochs, trains=agent.trains)
            )
            if agent.trains and _snapshot_on_host(config):  # one update's copy, on the host
                width = DTYPE_BYTES[agent.dtype]
                copy = math.ceil(3 * agent.trainable * width / shards)
                on_host = UpdateBytes(0, 0, 0, copy, 0, 0, 0, 0)
                placed.append(Placed(f"{agent.name} snapshot", label, "cpu", on_host, 1))
    if local:
        for device in {p.device for p in placed}:
            processes[device] = 1
    processes.setdefault("cpu", 1)  # the driver
    placed = _shared(placed, agents)
    from_bundled = {a.name: a.bundled for a in agents if a.bundled}
    return MemoryPlan(placed, devices, tokens, processes, refused, unplanned, from_bundled)


def _placement(
    config: TrainConfig,
    agents: list[PlannedAgent],
    devices: dict[str, Device],
    shards: int,
    *,
    given: bool,
) -> tuple[dict[tuple[str, int], str | None], list[str]]:
    """Each agent's (rank's) device (``None``: none it could run on), and why those without
    one are refused. Agent actors take GPUs as Ray gives them (:func:`actor_devices`); other
    agents stay on their team config's device, which must be one of ``devices`` when it is a
    CUDA device (an unknown capacity would count anything as fitting)."""
    runner = config.runner
    ray = runner.agents == "ray"
    actors = [(a.name, rank) for a in agents if ray and a.trains for rank in range(shards)]
    where = dict(zip(actors, actor_devices(devices, runner.agent_gpus, len(actors))))
    refused = []
    unplaced = [f"{a} (rank {r})" if shards > 1 else a for (a, r), d in where.items() if d is None]
    if unplaced:
        count = len({name for name, _ in actors})
        refused.append(
            gpu_shortage(devices, runner.agent_gpus, count, shards, unplaced, given=given)
        )
    on_cuda = [a.name for a in agents if a.trains and a.device.startswith("cuda")]
    if ray and runner.agent_gpus <= 0 and on_cuda:  # placed on the host, refused by train
        refused.append(no_gpu_asked(on_cuda))
    missing: dict[str, list[str]] = {}
    for agent in agents:
        if (agent.name, 0) in where:
            continue
        known = not agent.device.startswith("cuda") or agent.device in devices
        if not known:
            missing.setdefault(agent.device, []).append(agent.name)
        for rank in range(shards):
            where[agent.name, rank] = agent.device if known else None
    refused += [missing_device(devices, names, d, given=given) for d, names in missing.items()]
    return where, refused


def _snapshot_on_host(config: TrainConfig) -> bool:
    region = config.trust_region
    return region.delta_mode != "none" and region.snapshot_device == "cpu"


def _micro_batch_tokens(
    config: TrainConfig, env: Any, agent: PlannedAgent, shards: int, prompt_tokens: int | None
) -> int:
    """The tokens of one gradient pass: a micro-batch's messages, each a context and a
    completion; a group's samples share their context when the agent's policy would (one pass
    for the prompt when that lowers the peak; never on a gang)."""
    schedule, optim = config.schedule, config.optim
    messages = min(optim.micro_batch_size, schedule.problems_per_batch * schedule.group_size)
    new = config.sampling.max_new_tokens
    prompt = prompt_tokens if prompt_tokens is not None else _prompt_tokens(env, agent, new)
    plain = messages * (prompt + new)
    if shards > 1:
        return plain
    shared = math.ceil(messages / schedule.group_size) * prompt + messages * new
    per_token = agent.shape.activation_bytes(1, agent.dtype) - 3 * agent.shape.vocab * 4
    lowers = per_token * (plain - shared) > agent.trainable * 4
    return shared if lowers else plain


def _prompt_tokens(env: Any, agent: PlannedAgent, new_tokens: int) -> int:
    """The longest context the agent scores, in tokens: the longest opening context of a few
    of the task's problems, plus every earlier turn's message, within the model's window.

    With the agent's tokenizer on disk (``PlannedAgent.tokenizer``) a context is counted as its
    policy renders it (``adapters.codec.prompt_token_counter``: the chat template and its
    default system prompt included, which double a short context's tokens on an instruct
    model); otherwise it is estimated from its characters (:data:`CHARS_PER_TOKEN`; one a
    token for a character-level model)."""
    contexts = []
    for seed in range(4):
        try:
            env.reset(seed=seed)
            contexts.append(env.context(env.agent_selection))
        except Exception:  # a task that cannot draw here (files the plan does not need)
            break
    if agent.tokenizer is not None:
        count = prompt_token_counter(agent.tokenizer, agent.chat_template)
        longest = max((count(c) for c in contexts), default=0)
    else:
        per_token = 1.0 if agent.shape.vocab < 1000 else CHARS_PER_TOKEN
        longest = math.ceil(max((len(c) for c in contexts), default=0) / per_token)
    turns = int(getattr(getattr(env, "protocol", None), "turn_limit", 1) or 1)
    tokens = longest + (turns - 1) * new_tokens
    return max(1, min(tokens, agent.shape.max_positions - new_tokens))


def _bytes(
    config: TrainConfig, agent: PlannedAgent, shards: int, tokens: int, device: Device
) -> UpdateBytes:
    """One agent's (rank's) bytes on ``device``."""
    region = config.trust_region
    engine = 0
    if config.rollout.engine == "vllm" and agent.trains:
        if device.name.startswith("cuda") and device.capacity:
            engine = int(config.rollout.gpu_memory_utilization * device.capacity)
        else:
            engine = int(config.rollout.kv_cache_gib * GIB)
    if not agent.trains:
        width = {"float32": 4, "bfloat16": 2, "float16": 2}[agent.dtype]
        return UpdateBytes(agent.shape.parameters * width, 0, 0, 0, 0, 0, 0, engine)
    return update_peak(
        agent.shape,
        dtype=agent.dtype,
        trainable=agent.trainable,
        tokens=tokens,
        shards=shards,
        snapshot=region.delta_mode != "none" and region.snapshot_device == "same",
        reference=config.optim.ref_kl_coef > 0,
        lora=agent.lora,
        checkpointing=config.optim.gradient_checkpointing,
        engine=engine,
    )


def _shared(placed: list[Placed], agents: list[PlannedAgent]) -> list[Placed]:
    """A shared-base LoRA team's base weights counted once per device (its agents' adapters
    each)."""
    shared = {a.name for a in agents if a.shared_base and a.lora}
    seen: set[str] = set()
    out = []
    for p in placed:
        if p.agent in shared and p.device in seen:
            b = p.bytes
            p = Placed(p.agent, p.rank, p.device, _without_weights(b), p.epochs, p.trains)
        elif p.agent in shared:
            seen.add(p.device)
        out.append(p)
    return out


def _without_weights(b: UpdateBytes) -> UpdateBytes:
    return dataclasses.replace(b, weights=0)


def check_memory(config: TrainConfig, env: Any) -> MemoryPlan | None:
    """Refuses a run whose plan does not fit this machine's devices, before anything is written
    (``runner.check_memory``; not with agent actors on a remote cluster, whose devices are not
    this machine's).

    Raises:
        ConfigError: one line per agent the run could not place (:attr:`MemoryPlan.refused`)
            and per device that does not fit; or a model's invalid ``config.json``.
    """
    if not config.runner.check_memory:
        return None
    if config.runner.agents == "ray" and config.runner.address:
        return None
    plan = plan_memory(config, env)
    errors = plan.errors()
    if errors:
        errors.append(
            "see the whole plan with teamtr plan --config FILE; runner.check_memory: false runs "
            "anyway"
        )
        raise ConfigError("memory plan", errors)
    return plan
