"""An agent bigger than one device: a gang of N Ray actors (one placement group) that form a
``torch.distributed`` process group (gloo on CPU, NCCL on GPUs) and shard the agent's model with
FSDP2 (:mod:`trainers.placement.sharding`).

The driver holds a :class:`GangUpdater`, a :class:`~trainers.placement.updaters.RayUpdater`
whose every call goes to all N ranks (veRL's worker groups dispatch the same way): each rank
runs the call on its shards, the collectives inside line the ranks up, and the first rank's
answer (every rank's is the same) comes back. Per call:

=====================  =====================================================================
``update``             each rank backpropagates its share of the messages; the log-probs the
                       trust region reads are gathered, so every rank accepts, backtracks or
                       reverts alike (:func:`trainers.optim.update.update_agent`, ``group``)
``score``, ``logprobs``  each rank scores its share; the rows are gathered
``generate``           every rank samples every prompt with the same seed (the same messages);
                       with ``rollout.engine: vllm`` the first rank's engine samples, synced
                       with the whole weights gathered a tensor at a time (every rank gathers,
                       the first writes each into the engine's hand-off file)
``state_dict``         whole weights, optimizer and reference, gathered tensor by tensor on
                       the first rank: the same checkpoint as an unsharded agent's, so a run
                       resumes, exports and evaluates as any other
``load_state_dict``    each rank takes its shard of every whole tensor
``weights``            the whole weights, gathered on the first rank (weight syncs, exports)
``clone_*``            behaviour cloning: every rank takes the same minibatches
=====================  =====================================================================

A rank that dies fails the call with :class:`~trainers.placement.updaters.AgentActorLost`
after the others are stopped (they would wait on it); the recipe restarts the whole gang (new
actors, a new process group), loads the last checkpoint and replays the stage.
"""

from __future__ import annotations

import datetime
import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import torch

from teamtr_core.policy import (
    Completion,
    Generation,
    SamplingParams,
    TokenLogprobs,
    TrainablePolicy,
    engine_syncs,
)
from trainers.config import TrainConfig
from trainers.optim.collective import TorchGroup
from trainers.optim.scoring import scored
from trainers.placement.sharding import (
    full_optimizer_state,
    full_state,
    load_full_optimizer_state,
    load_full_state,
    shard_policy,
)
from trainers.placement.updaters import LocalUpdater, RayUpdater

__all__ = ["GangUpdater", "actor_updater"]

COLLECTIVE_TIMEOUT = datetime.timedelta(minutes=30)
"""How long a rank waits in a collective for the others (a dead rank is seen sooner: the driver
stops the gang as soon as one of its actors dies)."""


class _GangRank(LocalUpdater):
    """One rank of a gang (a Ray actor): it joins the gang's process group, builds the agent's
    policy, shards it, and answers the updater's calls on its shards (see the module
    docstring)."""

    def __init__(
        self,
        build: Callable[[], TrainablePolicy],
        config: TrainConfig,
        device: str | None,
        rank: int,
    ) -> None:
        if config.torch_threads > 0:
            torch.set_num_threads(config.torch_threads)
        self._build, self._config, self._device_name = build, config, device
        self.rank = rank

    def address(self) -> str:
        """Where the gang's process group meets (called on the first rank): this node's address
        and a free port."""
        import ray

        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return f"tcp://{ray.util.get_node_ip_address()}:{port}"

    def join(self, address: str, world: int) -> None:
        """Joins the process group, builds and shards the policy, and makes its optimizer."""
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh

        cuda = self._device_name is not None and torch.cuda.is_available()
        dist.init_process_group(
            "nccl" if cuda else "gloo",
            init_method=address,
            rank=self.rank,
            world_size=world,
            timeout=COLLECTIVE_TIMEOUT,
        )
        torch.manual_seed(0)  # every rank draws alike (generation without a seed)
        device = "cuda" if cuda else "cpu"
        policy = self._policy(device)
        # With rollout.engine: vllm the first rank talks to the engine; every rank trains.
        self._engine_mode = hasattr(policy, "engine_factory")
        self._rollouts = policy if self._engine_mode and self.rank == 0 else None
        self._stale = True  # the engine gets the weights before its first sampling
        policy = getattr(policy, "trainable", policy)
        shard_policy(policy, init_device_mesh(device, (world,)))
        mb = self._config.optim.micro_batch_size  # one forward pass per micro-batch, everywhere
        policy.micro_batch_size = max(getattr(policy, "micro_batch_size", mb), mb)
        LocalUpdater.__init__(self, policy, self._config)
        self.group = TorchGroup(device)
        self._device_type = device

    @property
    def _model(self) -> Any:
        """The sharded model (an HFPolicy's)."""
        return cast(Any, self.policy).model

    def _policy(self, device: str) -> Any:
        policy = self._build()
        trainable = getattr(policy, "trainable", policy)  # a rollout engine's trained policy
        if device == "cuda" and hasattr(trainable, "model"):
            trainable.model.to("cuda")
            cast(Any, trainable).device = torch.device("cuda")
        if self._config.optim.gradient_checkpointing and hasattr(
            policy, "enable_gradient_checkpointing"
        ):
            policy.enable_gradient_checkpointing()
        return policy

    @property
    def _keeper(self) -> bool:
        return self.rank == 0

    def freeze_reference(self) -> None:
        """A second sharded copy of the policy as it is now, frozen (each rank copies its own
        shards into it)."""
        if self.reference is not None:
            return
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh

        reference = self._policy(self._device_type)
        shard_policy(reference, init_device_mesh(self._device_type, (dist.get_world_size(),)))
        with torch.no_grad():
            for mine, theirs in zip(
                reference.model.state_dict().values(), self._model.state_dict().values()
            ):
                _local(mine).copy_(_local(theirs))
        for p in reference.model.parameters():
            p.requires_grad_(False)
        self.reference = reference

    def state_dict(self) -> dict[str, Any]:
        """The whole state, as an unsharded agent's (on the first rank; ``{}`` elsewhere)."""
        policy = full_state(self._model.state_dict(), self._keeper)
        optimizer = full_optimizer_state(self.optimizer, self._keeper)
        reference = None
        if self.reference is not None:
            reference = full_state(cast(Any, self.reference).model.state_dict(), self._keeper)
        if not self._keeper:
            return {}
        state = {"policy": policy, "optimizer": optimizer}
        if reference is not None:
            state["reference"] = reference
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._stale = True
        load_full_state(self._model.state_dict(), state["policy"])
        load_full_optimizer_state(self.optimizer, state["optimizer"])
        if "reference" in state:
            self.reference = None
            self.freeze_reference()
            assert self.reference is not None
            load_full_state(cast(Any, self.reference).model.state_dict(), state["reference"])

    def weights(self) -> Mapping[str, Any]:
        """The whole weights on the CPU (on the first rank; ``{}`` elsewhere)."""
        return full_state(self._model.state_dict(), self._keeper) or {}

    def load_weights(self, state: Mapping[str, Any]) -> None:
        self._stale = True
        load_full_state(self._model.state_dict(), state)

    def clone_steps(
        self, agent: str, sft: Any, first: int, last: int, check: bool
    ) -> tuple[list[float], float | None]:
        self._stale = True
        return super().clone_steps(agent, sft, first, last, check)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {k: tuple(v.shape) for k, v in self._model.state_dict().items()}

    def engine_syncs(self) -> dict[str, float] | None:
        return engine_syncs([self._rollouts]) if self._rollouts is not None else None

    def update(self, messages: Any, advantages: Any, **settings: Any) -> Any:
        """:meth:`LocalUpdater.update` on this rank's share; an accepted update makes the
        rollout engine's weights stale."""
        result = super().update(messages, advantages, **settings)
        if result[0].changed_weights:
            self._stale = True
        return result

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        """Every rank samples every prompt alike; with a rollout engine, the first rank's engine
        samples (after its weights are synced if they changed: :meth:`_sync_engine`)."""
        if not self._engine_mode:
            return super().generate(prompts, sampling)
        if self._stale:
            self._sync_engine()
        if self._rollouts is None:
            return []
        return list(self._rollouts.engine.generate(prompts, sampling))

    def _sync_engine(self) -> None:
        """The whole weights into the first rank's engine, a tensor at a time: every rank takes
        part in each tensor's gather and only the first writes it (no rank holds the whole model
        at once)."""
        state = self._model.state_dict()
        specs = [(name, tuple(value.shape), value.dtype) for name, value in state.items()]
        whole = (_full(value) for value in state.values())
        if self._rollouts is not None:
            self._rollouts.engine.sync_stream(specs, whole)
        else:
            for _ in whole:
                pass
        self._stale = False

    def logprobs(
        self, prompts: Sequence[str], completions: Sequence[Completion], **kwargs: Any
    ) -> TokenLogprobs:
        """The log-probs of the completions: each rank scores its share, in as many passes as
        every rank, and the rows are gathered."""
        from teamtr_env.rollout import MessageRecord

        temperature = float(kwargs.get("temperature", 1.0))
        messages = [
            MessageRecord(i, i, 0, "", p, *((c, ()) if isinstance(c, str) else ("", tuple(c))))
            for i, (p, c) in enumerate(zip(prompts, completions))
        ]
        mb = self.config.optim.micro_batch_size
        (joined,) = scored(self.policy, messages, mb, temperature, self.group)
        return joined


def _local(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def _full(tensor: torch.Tensor) -> torch.Tensor:
    full = getattr(tensor, "full_tensor", None)
    return full() if callable(full) else tensor


class GangUpdater(RayUpdater):
    """An agent's updater on a gang of ``runner.agent_shards`` Ray actors in one placement group
    (``runner.agent_cpus`` and ``runner.agent_gpus`` each), its model sharded over them with
    FSDP2 (see the module docstring)."""

    def _start(self) -> list[Any]:
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        runner = self.config.runner
        world = runner.agent_shards
        bundle = {
            "CPU": runner.agent_cpus,
            **({"GPU": runner.agent_gpus} if runner.agent_gpus else {}),
        }
        self._group = placement_group([dict(bundle) for _ in range(world)], strategy="PACK")
        self.ray.get(self._group.ready())
        cls = self.ray.remote(max_restarts=0)(_GangRank)
        ranks = [
            cls.options(
                num_cpus=runner.agent_cpus,
                num_gpus=runner.agent_gpus,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=self._group, placement_group_bundle_index=rank
                ),
            ).remote(self._build, self.config, self._device(), rank)
            for rank in range(world)
        ]
        address = self.ray.get(ranks[0].address.remote())
        self.ranks = ranks
        self._get([rank.join.remote(address, world) for rank in ranks])
        return ranks

    def shutdown(self) -> None:
        super().shutdown()
        group = getattr(self, "_group", None)
        if group is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(group)
            self._group = None


def actor_updater(
    agent: str, source: TrainablePolicy | Callable[[], TrainablePolicy], config: TrainConfig
) -> RayUpdater:
    """The updater of an agent trained in agent actors: a gang of ``runner.agent_shards`` ranks,
    or one actor."""
    if config.runner.agent_shards > 1:
        return GangUpdater(agent, source, config)
    return RayUpdater(agent, source, config)
