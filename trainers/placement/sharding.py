"""An agent's model sharded over the ranks of a gang with torch's FSDP2, and its state gathered
back into the form one process keeps (checkpoints, weight syncs and exports are the same for a
sharded agent and an unsharded one).

Sharding: :func:`shard_policy` applies ``fully_shard`` to every decoder layer and then to the
whole model, on a one-dimensional :class:`~torch.distributed.device_mesh.DeviceMesh` of the
gang's ranks (gloo on CPU, NCCL on GPUs): each rank keeps 1/N of every weight, of its gradient
and of its optimizer state, and a layer's full weights exist only while it runs.

Gathering and loading go one tensor at a time (``DTensor.full_tensor`` / ``distribute_tensor``),
so no rank ever holds two full copies of the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch.distributed.tensor import DTensor, distribute_tensor

from teamtr_core.errors import ConfigError

__all__ = [
    "decoder_layers",
    "full_optimizer_state",
    "full_state",
    "load_full_optimizer_state",
    "load_full_state",
    "shard_policy",
]


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
        ConfigError: a LoRA policy (its adapters are small: it fits one device), or a model with
            no decoder layers to shard.
    """
    from torch.distributed.fsdp import fully_shard

    if getattr(policy, "is_lora", False):
        raise ConfigError(
            "runner.agent_shards",
            ["a LoRA agent's trainable adapters are small: shard full-weight agents only"],
        )
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


def _full(value: Any) -> Any:
    return value.full_tensor() if isinstance(value, DTensor) else value


def full_state(state: Mapping[str, Any], keep: bool) -> dict[str, Any] | None:
    """A sharded state dict made whole, tensor by tensor, on the CPU; every rank takes part in
    the gathers, and only the rank with ``keep`` keeps the result (``None`` elsewhere)."""
    out: dict[str, Any] | None = {} if keep else None
    for name, value in state.items():
        whole = _full(value)
        if out is not None:
            out[name] = whole.detach().to("cpu", copy=True) if torch.is_tensor(whole) else whole
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
            if isinstance(target, DTensor):
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
    return (
        torch.is_tensor(value)
        and isinstance(param, DTensor)
        and tuple(value.shape) == tuple(param.shape)
    )


def _shard_like(value: torch.Tensor, param: DTensor) -> DTensor:
    return distribute_tensor(
        value.to(param.to_local().device, param.dtype), param.device_mesh, param.placements
    )
