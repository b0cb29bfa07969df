"""The devices a memory plan (:mod:`trainers.run.memory_plan`) places agents on, and which of
them each agent gets: this machine's (the host's RAM and every CUDA device torch sees) or given
on the command line (``--devices 8x80GiB``, ``--host 512GiB``, checked: at most
:data:`MAX_DEVICES` GPUs, sizes above 0 and at most :data:`MAX_SIZE`).

An agent actor (``runner.agents: ray``) that asks for ``runner.agent_gpus`` of a GPU gets the
next GPU with that much left, as Ray places it; when the GPUs run out it gets none
(:func:`actor_devices`), and the plan refuses it as Ray would never place it: it does not fall
back to the host, whose capacity may be unknown.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from dataclasses import dataclass
from decimal import Decimal

from teamtr_core.errors import ConfigError

__all__ = [
    "MAX_DEVICES",
    "MAX_SIZE",
    "Device",
    "actor_devices",
    "gpu_shortage",
    "local_devices",
    "missing_device",
    "no_gpu_asked",
    "parse_devices",
    "parse_size",
]

MAX_DEVICES = 4096
"""The most GPUs ``--devices`` plans for (a node, or a few hundred of them; a count beyond this
is a typo, and each device is a row of the plan)."""

MAX_SIZE = 2**50
"""The largest device or host size ``--devices`` and ``--host`` take: 1 PiB (``1024TiB``)."""


@dataclass(frozen=True)
class Device:
    """A device the plan places agents on: ``cpu`` (the host) or ``cuda:N``; its capacity in
    bytes (``None``: unknown, not checked)."""

    name: str
    capacity: int | None


_SCALE = {"GiB": 2**30, "GB": 10**9, "MiB": 2**20, "MB": 10**6, "TiB": 2**40, "TB": 10**12}
_SIZE = r"(\d+(?:\.\d+)?)\s*(GiB|GB|MiB|MB|TiB|TB)"
_UNITS = "a number and GiB, GB, MiB, MB, TiB or TB"


def _shown(text: str) -> str:
    """``text`` quoted, cut to 60 characters (a size of 400 digits is not echoed whole)."""
    return repr(text) if len(text) <= 60 else f"{text[:60]!r}... ({len(text):,} characters)"


def _size_errors(number: str, unit: str, flag: str, text: str) -> tuple[int, list[str]]:
    """``number`` ``unit`` in bytes, and why it is not a size a plan takes (empty: it is).
    Decimal, not float: a number of 400 digits is compared, not overflowed."""
    whole = number.partition(".")[0].lstrip("0")
    size = Decimal(number) * _SCALE[unit] if len(whole) <= 20 else Decimal(MAX_SIZE + 1)
    if size < 1 or size > MAX_SIZE:
        return 0, [
            f"{flag}: expected a size of at least 1 byte and at most 1024TiB, got {_shown(text)}; "
            "give the memory, e.g. 80GiB"
        ]
    return int(size), []


def parse_size(text: str, flag: str = "--host") -> int:
    """``256GiB`` (``GB`` is 10^9 bytes) in bytes.

    Raises:
        ConfigError: text that is not a size (a number and a unit), or one that is 0 or above
            :data:`MAX_SIZE`; the message names ``flag``.
    """
    match = re.fullmatch(rf"\s*{_SIZE}\s*", text or "")
    if match is None:
        raise ConfigError(
            flag, [f"{flag}: expected a size such as 256GiB ({_UNITS}), got {_shown(text)}"]
        )
    size, errors = _size_errors(match[1], match[2], flag, text)
    if errors:
        raise ConfigError(flag, errors)
    return size


def parse_devices(text: str, host: int | None = None) -> dict[str, Device]:
    """``8x80GiB`` (eight GPUs of 80 GiB; ``GB`` is 10^9 bytes) as ``cuda:0`` ... ``cuda:7``,
    and the host (``host`` bytes: unknown when ``None``). ``0x80GiB``: no GPU.

    Raises:
        ConfigError: text that is not ``NxSIZE``, more than :data:`MAX_DEVICES` GPUs, or a
            size that is 0 or above :data:`MAX_SIZE` (every problem at once).
    """
    match = re.fullmatch(rf"\s*(\d+)\s*x\s*{_SIZE}\s*", text or "")
    if match is None:
        raise ConfigError(
            "--devices",
            [
                f"--devices: expected NxSIZE such as 8x80GiB (N GPUs of SIZE each, SIZE {_UNITS}), "
                f"got {_shown(text)}"
            ],
        )
    digits = match[1].lstrip("0") or "0"
    count = int(digits) if len(digits) <= len(str(MAX_DEVICES)) else MAX_DEVICES + 1
    errors = []
    if count > MAX_DEVICES:
        seen = digits if len(digits) <= 20 else f"a number of {len(digits):,} digits"
        errors.append(
            f"--devices: expected at most {MAX_DEVICES} GPUs, got {seen} in {_shown(text)}; plan "
            "for the GPUs the run will have, e.g. 8x80GiB for a node of eight"
        )
    size, size_errors = _size_errors(match[2], match[3], "--devices", text)
    if errors or size_errors:
        raise ConfigError("--devices", errors + size_errors)
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


def _gpus(devices: dict[str, Device]) -> list[str]:
    return [name for name in devices if name.startswith("cuda")]


def actor_devices(devices: dict[str, Device], share: float, count: int) -> list[str | None]:
    """The device of each of ``count`` agent actors asking ``share`` of a GPU each
    (``runner.agent_gpus``), in order: the host with no share; else the GPUs in order, as many
    to a GPU as fit whole (Ray does not split an actor's share over two GPUs; a share above 1
    takes whole GPUs and the actor's model is on the first); ``None`` once the GPUs run out."""
    if share <= 0:
        return ["cpu"] * count
    gpus = _gpus(devices)
    if share <= 1:
        per = max(1, min(count, int((1 + 1e-9) // share)))
        slots = [gpu for gpu in gpus for _ in range(per)]
    else:
        width = math.ceil(share - 1e-9)
        slots = gpus[: len(gpus) - len(gpus) % width : width]
    placed: list[str | None] = list(slots[:count])
    return placed + [None] * (count - len(placed))


def _gpus_seen(devices: dict[str, Device], given: bool) -> str:
    """``only 1 GPU is given (--devices: cuda:0)``, ``this machine has no GPU``..."""
    gpus = _gpus(devices)
    names = ", ".join(gpus[:8]) + (", ..." if len(gpus) > 8 else "")
    count = f"only {len(gpus)} GPU{'' if len(gpus) == 1 else 's'}"
    if given:
        is_are = "is" if len(gpus) == 1 else "are"
        return (
            f"{count} {is_are} given (--devices: {names})"
            if gpus
            else "no GPU is given (--devices)"
        )
    return (
        f"this machine has {count} ({names})"
        if gpus
        else "this machine has no GPU (torch sees none)"
    )


def gpu_shortage(
    devices: dict[str, Device],
    share: float,
    agents: int,
    shards: int,
    unplaced: list[str],
    *,
    given: bool,
) -> str:
    """The reason agent actors get no GPU (:func:`actor_devices`): how many ask for what, what
    there is, which get none, and the fixes. ``given``: the devices came from ``--devices``."""
    what = f"{agents} agent{'s' if agents != 1 else ''}"
    if shards > 1:
        what += f" x {shards} ranks (runner.agent_shards)"
    to_one = int((1 + 1e-9) // share) if share <= 1 else 0
    packing = f", {to_one} to a GPU" if to_one > 1 else ""
    return (
        f"runner.agent_gpus: {what} need runner.agent_gpus={share:g} each (an agent actor each, "
        f"runner.agents: ray{packing}), but {_gpus_seen(devices, given)}: no GPU for "
        f"{', '.join(unplaced)}. Give more GPUs (--devices NxSIZE plans for another machine), "
        "fewer agents or ranks, or a smaller runner.agent_gpus (0.5 puts two agent actors on a "
        "GPU); Ray would never place those agent actors, so the run could not start"
    )


def missing_device(
    devices: dict[str, Device], agents: list[str], device: str, *, given: bool
) -> str:
    """The reason ``agents`` on ``device`` (a CUDA device the plan does not have) are refused."""
    who = f"agent {agents[0]} is" if len(agents) == 1 else f"agents {', '.join(agents)} are"
    return (
        f"team: {who} on {device} (the team config's device), but {_gpus_seen(devices, given)}; "
        "plan for the GPUs the run will have (--devices NxSIZE), or give a device there is "
        "(team.default.device, team.agents.NAME.device)"
    )


def no_gpu_asked(agents: list[str]) -> str:
    """The reason agents whose team config puts them on CUDA are refused when their agent actors
    ask Ray for no GPU (``runner.agent_gpus: 0``): Ray hides every GPU from such an actor, and
    ``teamtr train`` refuses the run."""
    who = f"agent {agents[0]} is" if len(agents) == 1 else f"agents {', '.join(agents)} are"
    return (
        f"runner.agent_gpus: {who} on cuda (the team config's device), but runner.agent_gpus is "
        "0: an agent actor that asks Ray for no GPU sees none. Set runner.agent_gpus (e.g. --set "
        "runner.agent_gpus=1), or device: cpu"
    )
