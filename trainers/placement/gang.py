"""An agent bigger than one device: a gang of N Ray actors (one placement group) that form a
``torch.distributed`` process group (gloo on CPU, NCCL on GPUs) and shard the agent's model with
FSDP2 (:mod:`trainers.optim.sharding`).

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

import dataclasses
import datetime
import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import torch

from teamtr_core.errors import ConfigError
from teamtr_core.policy import (
    Completion,
    Generation,
    SamplingParams,
    TokenLogprobs,
    TrainablePolicy,
    engine_syncs,
)
from teamtr_core.seeds import GANG_STREAM, derive_seed
from trainers.config import Gang, TrainConfig
from trainers.optim.collective import TorchGroup
from trainers.optim.scoring import scored
from trainers.optim.sharding import (
    full_optimizer_state,
    full_state,
    load_full_optimizer_state,
    load_full_state,
    local_part,
    shard_policy,
    whole,
)
from trainers.placement.updaters import LocalUpdater, RayUpdater, prepared

__all__ = ["GangUpdater", "actor_updater"]

COLLECTIVE_TIMEOUT = datetime.timedelta(minutes=30)
"""How long a rank waits in a collective for the others (a dead rank is seen sooner: the driver
stops the gang as soon as one of its actors dies)."""


class _GangRank(LocalUpdater):
    """One rank of a gang (a Ray actor): it joins the gang's process group at ``address``,
    builds the agent's policy, shards it, and answers the updater's calls on its shards (see the
    module docstring)."""

    def __init__(
        self,
        build: Callable[[], TrainablePolicy],
        config: TrainConfig,
        device: str | None,
        rank: int,
        address: str,
        world: int,
    ) -> None:
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh

        if config.torch_threads > 0:
            torch.set_num_threads(config.torch_threads)
        self._build, self._config, self.rank = build, config, rank
        cuda = device is not None and torch.cuda.is_available()
        dist.init_process_group(
            "nccl" if cuda else "gloo",
            init_method=address,
            rank=rank,
            world_size=world,
            timeout=COLLECTIVE_TIMEOUT,
        )
        self._device_type = "cuda" if cuda else "cpu"
        self._draws = 0  # generate calls without a seed: every rank derives the same one
        policy = self._policy(self._device_type)
        # With rollout.engine: vllm the first rank talks to the engine; every rank trains.
        self._engine_mode = hasattr(policy, "engine_factory")
        self._rollouts = policy if self._engine_mode and rank == 0 else None
        self._stale = True  # the engine gets the weights before its first sampling
        policy = getattr(policy, "trainable", policy)
        shard_policy(policy, init_device_mesh(self._device_type, (world,)))
        mb = config.optim.micro_batch_size  # one forward pass per micro-batch, everywhere
        policy.micro_batch_size = max(getattr(policy, "micro_batch_size", mb), mb)
        super().__init__(policy, config)
        self.group = TorchGroup(self._device_type)

    def ready(self) -> bool:
        """Answers once the rank is built (its construction's error, if any, surfaces here)."""
        return True

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
        return prepared(policy, self._config)

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
                local_part(mine).copy_(local_part(theirs))
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
        if sampling.seed is None:  # every rank must draw alike: a seed they all derive
            self._draws += 1
            sampling = dataclasses.replace(sampling, seed=derive_seed(0, GANG_STREAM, self._draws))
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
        gathered = (whole(value) for value in state.values())
        if self._rollouts is not None:
            self._rollouts.engine.sync_stream(specs, gathered)
        else:
            for _ in gathered:
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
        (joined,) = scored(self.policy, self.share(messages), mb, temperature)
        return joined


def _meeting_address() -> str:
    """This node's address and a free port (a Ray task on the first rank's node)."""
    import ray

    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    return f"tcp://{ray.util.get_node_ip_address()}:{port}"


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

        def bundle_of(rank: int) -> Any:
            return PlacementGroupSchedulingStrategy(
                placement_group=self._group, placement_group_bundle_index=rank
            )

        # where the process group meets: a free port on the first rank's node
        meeting = self.ray.remote(num_cpus=0)(_meeting_address)
        address = self.ray.get(meeting.options(scheduling_strategy=bundle_of(0)).remote())
        cls = self.ray.remote(max_restarts=0)(_GangRank)
        self.ranks = [
            cls.options(
                num_cpus=runner.agent_cpus,
                num_gpus=runner.agent_gpus,
                scheduling_strategy=bundle_of(rank),
            ).remote(self._build, self.config, self._device(), rank, address, world)
            for rank in range(world)
        ]
        self._get([rank.ready.remote() for rank in self.ranks])
        return self.ranks

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
    or one actor.

    Raises:
        ConfigError: what the gang cannot train (:meth:`~trainers.config.Gang.refusals`; a LoRA
            policy given as an object).
    """
    gang = Gang.of(config)
    if not gang.sharded:
        return RayUpdater(agent, source, config)
    refused = gang.refusals(lora=bool(getattr(source, "is_lora", False)))
    if refused:
        raise ConfigError(f"agent {agent!r}", refused)
    return GangUpdater(agent, source, config)
