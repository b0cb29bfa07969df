"""How one trainable agent is placed: the one description of a gang (an agent sharded over
``runner.agent_shards`` agent actors) that the run's checks, the sharding and the memory plan
read, and what a gang cannot train."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainers.config.train import TrainConfig

__all__ = ["LORA_REFUSAL", "Gang"]

LORA_REFUSAL = (
    "runner.agent_shards: a LoRA agent's adapters are small and fit one device: shard "
    "full-weight agents only (runner.agent_shards: 1 for LoRA teams)"
)


@dataclass(frozen=True)
class Gang:
    """The processes one trainable agent trains in.

    Attributes:
        ranks: how many (1: this process, or one agent actor; N > 1: a gang of N agent actors
            that shard the agent's model with FSDP2).
        cpus, gpus: what each agent actor asks Ray for (0 in this process).
        actors: whether the agent lives in agent actors (``runner.agents: ray``).
        in_process_engine: whether the rollouts' vLLM engine runs in the trainer's process.
    """

    ranks: int
    cpus: float
    gpus: float
    actors: bool
    in_process_engine: bool

    @classmethod
    def of(cls, config: TrainConfig) -> Gang:
        """The gang of every trainable agent of ``config``'s run."""
        runner, rollout = config.runner, config.rollout
        actors = runner.agents == "ray"
        return cls(
            ranks=runner.agent_shards if actors else 1,
            cpus=runner.agent_cpus if actors else 0.0,
            gpus=runner.agent_gpus if actors else 0.0,
            actors=actors,
            in_process_engine=rollout.engine == "vllm" and rollout.in_process,
        )

    @property
    def sharded(self) -> bool:
        return self.ranks > 1

    def refusals(self, *, lora: bool) -> list[str]:
        """What this gang cannot train (nothing unless sharded): an in-process vLLM engine (it
        would join the gang's process group), and LoRA agents (``lora``: their adapters fit one
        device)."""
        if not self.sharded:
            return []
        errors = []
        if self.in_process_engine:
            errors.append(
                "rollout.in_process: an in-process vLLM engine would join the gang's process "
                "group (vLLM sets up its own): with runner.agent_shards, give the engine its own "
                "process (rollout.in_process: false)"
            )
        if lora:
            errors.append(LORA_REFUSAL)
        return errors
