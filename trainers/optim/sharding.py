"""An agent's model sharded over the ranks of a gang with torch's FSDP2, and its state gathered
back into the form one process keeps (checkpoints, weight syncs and exports are the same for a
sharded agent and an unsharded one).

Sharding: :func:`shard_policy` applies ``fully_shard`` to every decoder layer and then to the
whole model, on a one-dimensional :class:`~torch.distributed.device_mesh.DeviceMesh` of the
gang's ranks (gloo on CPU, NCCL on GPUs): each rank keeps 1/N of every weight, of its gradient
and of its optimizer state, and a layer's full weights exist only while it runs.

Gathering and loading go one tensor at a time (``DTensor.full_tensor`` / ``distribute_tensor``),
so no rank ever holds two full copies of the model.

Every piece of code that looks inside a sharded (DTensor) value does it here: a tensor's local
shard (:func:`local_part`), its whole value (:func:`whole`), and a snapshot's copy of a sharded
optimizer state (:class:`SavedShard`). The update's maths never does.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeGuard

import torch

if TYPE_CHECKING:
    from torch.distributed.tensor import DTensor

from teamtr_core.errors import ConfigError

__all__ = [
    "SavedShard",
    "decoder_layers",
    "full_optimizer_state",
    "full_state",
    "is_sharded",
    "load_full_optimizer_state",
    "load_full_state",
    "local_part",
    "restored",
    "saved_copy",
    "shard_policy",
    "whole",
]


def is_sharded(value: Any) -> TypeGuard[DTensor]:
    """Whether ``value`` is a sharded (DTensor) tensor. Nothing is before
    ``torch.distributed.tensor`` has been imported (``fully_shard`` imports it), so this module
    does not import it (1 s of every process's start)."""
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(value, module.DTensor)


def local_part(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor's own elements: a sharded (DTensor) tensor's local shard, else itself."""
    return tensor.to_local() if is_sharded(tensor) else tensor


def whole(value: Any) -> Any:
    """A sharded (DTensor) value gathered whole (every rank takes part), else the value."""
    return value.full_tensor() if is_sharded(value) else value


class SavedShard:
    """A copy of a sharded tensor's local shard (``local``), and what makes it a DTensor like
    the original again (:meth:`tensor`)."""

    def __init__(self, local: torch.Tensor, like: DTensor) -> None:
        self.local, self.mesh, self.placements = local, like.device_mesh, like.placements
        self.shape, self.stride, self.device = like.shape, like.stride(), local_part(like).device

    def tensor(self) -> DTensor:
        from torch.distributed.tensor import DTensor

        return DTensor.from_local(
            self.local.to(self.device),  # the copy's own memory: dropped after the restore
            self.mesh,
            self.placements,
            shape=self.shape,
            stride=self.stride,
        )


def saved_copy(copy: torch.Tensor, value: torch.Tensor) -> torch.Tensor | SavedShard:
    """``copy`` (of ``value``'s local part) as a snapshot keeps it: a sharded value's with how
    to make it whole again (:meth:`SavedShard.tensor`)."""
    return SavedShard(copy, value) if is_sharded(value) else copy


def restored(value: Any) -> Any:
    """What :func:`saved_copy` kept, as the optimizer takes it back."""
    return value.tensor() if isinstance(value, SavedShard) else value


def decoder_layers(model: Any) -> list[torch.nn.Module]:
    """The model's repeated transformer blocks (``LlamaDecoderLayer``, ``Qwen3DecoderLayer``,
    ...): the units FSDP shards one by one."""
    return [m for m in model.modules() if type(m).__name__.endswith("DecoderLayer")]


def shard_policy(policy: Any, mesh: Any) -> None:
    """Shards ``policy.model`` in place over ``mesh``: ``fully_shard`` on each decoder layer,
    then on the model (its embeddings, final norm and head). Its scoring then takes one plain
    forward pass per micro-batch (``HFPolicy.shared_prefix`` off), so that every rank runs the
    same passes whichever messages it holds.

    Raises:
        ConfigError: a model with no decoder layers to shard. (What a gang refuses to train, LoRA
            agents included, is :meth:`trainers.config.Gang.refusals`, checked before it starts.)
    """
    from torch.distributed.fsdp import fully_shard

    model = policy.model
    layers = decoder_layers(model)
    if not layers:
        raise ConfigError(
            "runner.agent_shards",
            [f"{type(model).__name__} has no decoder layers (…DecoderLayer) to shard"],
        )
    for layer in layers:
        fully_shard(layer, mesh=mesh)
    # The root too frees its gathered weights after every forward pass (FSDP2 keeps them by
    # default): a backtrack changes the shards between passes without a backward in between.
    fully_shard(model, mesh=mesh, reshard_after_forward=True)
    # Every rank must run the same forward passes (each one gathers every layer's weights):
    # one plain pass per micro-batch, whatever prompts its messages share.
    policy.shared_prefix = False


def full_state(state: Mapping[str, Any], keep: bool) -> dict[str, Any] | None:
    """A sharded state dict made whole, tensor by tensor, on the CPU; every rank takes part in
    the gathers, and only the rank with ``keep`` keeps the result (``None`` elsewhere)."""
    out: dict[str, Any] | None = {} if keep else None
    for name, value in state.items():
        whole_value = whole(value)
        if out is not None:
            out[name] = (
                whole_value.detach().to("cpu", copy=True)
                if torch.is_tensor(whole_value)
                else whole_value
            )
    return out


def load_full_state(module_state: Mapping[str, Any], full: Mapping[str, Any]) -> None:
    """Loads a whole state dict (``full``, the unsharded form) into a sharded module's state
    (``module.state_dict()``: its DTensors are views of the parameters), each rank taking its own
    shard of every tensor."""
    missing = sorted(set(module_state) - set(full))
    if missing:
        raise KeyError(f"the state has no {missing[:5]}")
    with torch.no_grad():
        for name, target in module_state.items():
            source = full[name]
            if is_sharded(target):
                from torch.distributed.tensor import distribute_tensor

                shard = distribute_tensor(
                    source.to(target.dtype), target.device_mesh, target.placements
                )
                target.to_local().copy_(shard.to_local())
            elif torch.is_tensor(target):
                target.copy_(source)


def full_optimizer_state(optimizer: torch.optim.Optimizer, keep: bool) -> dict[str, Any] | None:
    """The optimizer's state made whole, in the form an unsharded optimizer's ``state_dict``
    has (states by parameter index), on the CPU; only the rank with ``keep`` keeps it."""
    state = optimizer.state_dict()
    whole = {k: full_state(s, keep) for k, s in state["state"].items()}
    if not keep:
        return None
    return {"state": whole, "param_groups": state["param_groups"]}


def load_full_optimizer_state(optimizer: torch.optim.Optimizer, full: Mapping[str, Any]) -> None:
    """Loads an unsharded optimizer state into the optimizer of sharded parameters: each
    parameter's states are cut into its shard."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    state: dict[Any, Any] = {}
    for index, saved in full["state"].items():
        param = params[int(index)]
        state[int(index)] = {
            name: _shard_like(value, param) if _sharded_state(value, param) else value
            for name, value in saved.items()
        }
    optimizer.load_state_dict({"state": state, "param_groups": full["param_groups"]})


def _sharded_state(value: Any, param: Any) -> bool:
    return torch.is_tensor(value) and is_sharded(param) and tuple(value.shape) == tuple(param.shape)


def _shard_like(value: torch.Tensor, param: DTensor) -> DTensor:
    from torch.distributed.tensor import distribute_tensor

    return distribute_tensor(
        value.to(local_part(param).device, param.dtype), param.device_mesh, param.placements
    )
