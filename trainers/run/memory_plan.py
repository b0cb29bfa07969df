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
of the next GPU (or the host with none). Devices are this machine's (CUDA devices, the host's
RAM), or given (``--devices 8x80GiB``) to plan for a machine you are not on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from teamtr_core.errors import ConfigError
from trainers.config import TrainConfig
from trainers.run.memory_model import DTYPE_BYTES, ModelShape, UpdateBytes, update_peak

__all__ = [
    "PROCESS_OVERHEAD",
    "Device",
    "MemoryPlan",
    "Placed",
    "check_memory",
    "local_devices",
    "parse_devices",
    "parse_size",
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
class Device:
    """A device the plan places agents on: ``cpu`` (the host) or ``cuda:N``; its capacity in
    bytes (``None``: unknown, not checked)."""

    name: str
    capacity: int | None


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

    def errors(self) -> list[str]:
        """One line per device the plan does not fit, naming its agents and the shortfall."""
        lines = []
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
                    "fits": d.capacity is None or self.used(name) <= d.capacity,
                    "agents": [
                        {"agent": p.agent, "rank": p.rank, "peak": p.peak, **p.bytes.parts()}
                        for p in self.on(name)
                    ],
                }
                for name, d in self.devices.items()
            },
            "tokens_per_micro_batch": dict(self.tokens),
        }


def _gib(n: int) -> str:
    return f"{n / GIB:,.2f} GiB"


_SCALE = {"GiB": GIB, "GB": 10**9, "MiB": 2**20, "MB": 10**6, "TiB": 2**40, "TB": 10**12}
_SIZE = r"([\d.]+)\s*(GiB|GB|MiB|MB|TiB|TB)"


def parse_size(text: str, what: str = "--host") -> int:
    """``256GiB`` (``GB`` is 10^9 bytes) in bytes.

    Raises:
        ConfigError: text that is not a size.
    """
    match = re.fullmatch(rf"\s*{_SIZE}\s*", text or "")
    if match is None:
        raise ConfigError(what, [f"expected a size such as 256GiB, got {text!r}"])
    return int(float(match.group(1)) * _SCALE[match.group(2)])


def parse_devices(text: str, host: int | None = None) -> dict[str, Device]:
    """``8x80GiB`` (eight GPUs of 80 GiB; ``GB`` is 10^9 bytes) as ``cuda:0`` ... ``cuda:7``,
    and the host (``host`` bytes: unknown when ``None``).

    Raises:
        ConfigError: text that is not ``NxSIZE``.
    """
    match = re.fullmatch(rf"\s*(\d+)\s*x\s*{_SIZE}\s*", text or "")
    if match is None:
        raise ConfigError("--devices", [f"expected NxSIZE such as 8x80GiB, got {text!r}"])
    count = int(match.group(1))
    size = parse_size(f"{match.group(2)}{match.group(3)}", "--devices")
    devices = {f"cuda:{i}": Device(f"cuda:{i}", size) for i in range(count)}
    return {"cpu": Device("cpu", host), **devices}


def local_devices() -> dict[str, Device]:
    """This machine's devices: the host's RAM and every CUDA device torch sees."""
    host = None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    devices = {"cpu": Device("cpu", host)}
    try:
        import torch

        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                total = torch.cuda.get_device_properties(i).total_memory
                devices[f"cuda:{i}"] = Device(f"cuda:{i}", int(total))
    except ImportError:
        pass
    return devices


@dataclass(frozen=True)
class _Agent:
    """What the plan needs of one agent: its model's shape and how it trains."""

    name: str
    shape: ModelShape
    dtype: str
    trainable: int
    lora: bool
    device: str
    trains: bool
    shared_base: bool = False


def plan_memory(
    config: TrainConfig,
    env: Any,
    devices: dict[str, Device] | None = None,
    prompt_tokens: int | None = None,
) -> MemoryPlan:
    """The memory plan of ``config``'s run (``env``: its training environment, for the team and
    the contexts' lengths) on ``devices`` (default: this machine's). ``prompt_tokens``: the
    longest context in tokens (default: measured on a few of the task's problems)."""
    devices = dict(devices or local_devices())
    agents = _agents(config, tuple(env.possible_agents))
    placed: list[Placed] = []
    tokens: dict[str, int] = {}
    processes: dict[str, int] = {}
    gpus = _gpu_slots(devices, config.runner.agent_gpus)
    local = config.runner.agents != "ray"
    for agent in agents:
        shards = 1 if local else config.runner.agent_shards
        tokens[agent.name] = _micro_batch_tokens(config, env, agent, shards, prompt_tokens)
        for rank in range(shards):
            device = agent.device if local or not agent.trains else next(gpus, "cpu")
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
    return MemoryPlan(_shared(placed, agents), devices, tokens, processes)


def _snapshot_on_host(config: TrainConfig) -> bool:
    region = config.trust_region
    return region.delta_mode != "none" and region.snapshot_device == "cpu"


def _gpu_slots(devices: dict[str, Device], share: float) -> Any:
    """The device of each next agent actor: ``share`` of a GPU each, GPUs in order, then the
    host when they are used up (or with no GPU share)."""
    gpus = [name for name in devices if name.startswith("cuda")]
    if share <= 0 or not gpus:
        while True:
            yield "cpu"
    used = 0.0
    for name in gpus:
        while used + share <= 1 + 1e-9:
            used += share
            yield name
        used = 0.0
    while True:
        yield "cpu"


def _agents(config: TrainConfig, names: Sequence[str]) -> list[_Agent]:
    """Each agent's shape and training (a team config's models; else the tiny model); a shared
    policy (``team.shared_policy``) is one entry, named by its agents (``a+b+c``)."""
    if config.team is None:
        from adapters.tiny import TinyModelSpec

        shape = _tiny_shape(config.tiny_model or TinyModelSpec())
        return [_Agent(a, shape, "float32", shape.parameters, False, "cpu", True) for a in names]
    from adapters.team import check_team

    out = []
    chosen = check_team(config.team, list(names))
    for name, agent in chosen.items():
        if agent.backend not in ("hf", "vllm") or not agent.path:
            continue  # model-free agents hold nothing worth planning
        try:
            shape = ModelShape.from_folder(agent.path)
        except (OSError, ValueError, KeyError, TypeError):  # no readable config.json: not planned
            continue
        dtype = shape.dtype if agent.dtype == "auto" else agent.dtype
        lora = agent.lora is not None or agent.adapter_path is not None
        trainable = (
            shape.lora_parameters(agent.lora.r, agent.lora.target_modules)
            if agent.lora is not None
            else shape.parameters
        )
        device = "cuda:0" if agent.device == "cuda" else agent.device
        trains = agent.backend == "hf"
        out.append(
            _Agent(name, shape, dtype, trainable, lora, device, trains, config.team.shared_base)
        )
    if config.team.shared_policy and out:  # role-sharing: one model and optimizer for them all
        return [dataclasses.replace(out[0], name="+".join(a.name for a in out))]
    return out


def _tiny_shape(spec: Any) -> ModelShape:
    from adapters.tiny import SPECIAL_TOKENS

    vocab = len(spec.charset) + len(SPECIAL_TOKENS)
    return ModelShape(
        hidden=spec.hidden_size,
        layers=spec.num_layers,
        intermediate=spec.intermediate_size,
        vocab=vocab,
        heads=spec.num_heads,
        kv_heads=spec.num_heads,
        head_dim=spec.hidden_size // spec.num_heads,
        max_positions=spec.max_positions,
    )


def _micro_batch_tokens(
    config: TrainConfig, env: Any, agent: _Agent, shards: int, prompt_tokens: int | None
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


def _prompt_tokens(env: Any, agent: _Agent, new_tokens: int) -> int:
    """The longest context the agent scores, in tokens: the longest opening context of a few
    of the task's problems, plus every earlier turn's message, within the model's window."""
    chars = 0
    for seed in range(4):
        try:
            env.reset(seed=seed)
            chars = max(chars, len(env.context(env.agent_selection)))
        except Exception:  # a task that cannot draw here (files the plan does not need)
            break
    per_token = 1.0 if agent.shape.vocab < 1000 else CHARS_PER_TOKEN  # a character-level model
    turns = int(getattr(getattr(env, "protocol", None), "turn_limit", 1) or 1)
    tokens = math.ceil(chars / per_token) + (turns - 1) * new_tokens
    return max(1, min(tokens, agent.shape.max_positions - new_tokens))


def _bytes(
    config: TrainConfig, agent: _Agent, shards: int, tokens: int, device: Device
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


def _shared(placed: list[Placed], agents: list[_Agent]) -> list[Placed]:
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
        ConfigError: one line per device that does not fit.
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
