"""Where each agent's training state lives and its updates run: this process, or a Ray actor.

An agent's *updater* holds what training needs beyond the policy that plays: the trainable
copy of the policy, its optimizer and its frozen reference (``optim.ref_kl_coef > 0``). The stage
hands it the agent's messages and advantages; the updater scores the reference, takes the policy
step and enforces the trust region (backtracking included) where it lives, and returns the
update's :class:`~trainers.update.UpdateResult`.

* :class:`LocalUpdater` (``trainer.backend: local``, the default): in this process, on the
  policy the team plays (nothing is copied).
* :class:`RayUpdater` (``trainer.backend: ray``): a Ray actor per trainable agent that asks for
  its own resources (``trainer.num_cpus``, ``trainer.num_gpus``) and holds the agent's trainable
  model and optimizer state. The driver keeps the orchestration and an inference copy of every
  policy (rollouts on the local runner, evaluations, diagnostics), which it reloads from the
  actor after every accepted update; a Ray rollout runner receives the actor's weights through
  the object store without the driver in between. A dead actor raises :class:`LearnerLost`; the
  recipe restores the last checkpoint into fresh actors and replays the stage.

The update math is the same function in both places (:func:`trainers.update.update_agent`,
which draws no global randomness), so a run's numbers do not depend on where its updates run
(tested within tolerance on a local Ray).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import torch

from teamtr_core.errors import TeamTRError
from teamtr_core.policy import TokenLogprobs, TrainablePolicy
from teamtr_env.rollout import MessageRecord
from trainers.config import TrainConfig
from trainers.update import UpdateResult, score, update_agent


class LearnerLost(TeamTRError):
    """An agent's learner actor died (its process, node or GPU was lost) during a stage."""


class Updater(Protocol):
    """One trainable agent's training state and updates (see the module docstring)."""

    def set_lr(self, lr: float) -> None: ...

    def freeze_reference(self) -> None: ...

    @property
    def has_reference(self) -> bool: ...

    def update(
        self,
        messages: Sequence[MessageRecord],
        advantages: torch.Tensor,
        *,
        beta: float,
        delta: float | None,
        temperature: float,
        flip_trials: int,
        weights: torch.Tensor | None,
    ) -> tuple[UpdateResult, float]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


class LocalUpdater:
    """An agent's optimizer and reference in this process, updating ``policy`` in place."""

    def __init__(self, policy: TrainablePolicy, config: TrainConfig) -> None:
        self.policy, self.config = policy, config
        opt = config.optim
        self.optimizer: torch.optim.Optimizer = torch.optim.AdamW(
            policy.parameters(), lr=opt.lr, weight_decay=opt.weight_decay
        )
        self.reference: TrainablePolicy | None = None

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def freeze_reference(self) -> None:
        """Freezes the policy as it is now as the reference (once: the team as training
        starts)."""
        if self.reference is None:
            self.reference = frozen_copy(self.policy)

    @property
    def has_reference(self) -> bool:
        return self.reference is not None

    def update(
        self,
        messages: Sequence[MessageRecord],
        advantages: torch.Tensor,
        *,
        beta: float,
        delta: float | None,
        temperature: float,
        flip_trials: int,
        weights: torch.Tensor | None,
    ) -> tuple[UpdateResult, float]:
        """The policy step and the trust region on ``messages``; returns the result and the
        seconds spent scoring the reference."""
        cfg = self.config
        reference: list[TokenLogprobs] | None = None
        t0 = time.perf_counter()
        if self.reference is not None:
            reference = score(self.reference, messages, cfg.optim.micro_batch_size, temperature)
        reference_s = time.perf_counter() - t0
        result = update_agent(
            self.policy,
            self.optimizer,
            messages,
            advantages,
            beta=beta,
            delta=delta,
            optim=cfg.optim,
            region=cfg.trust_region,
            temperature=temperature,
            flip_trials=flip_trials,
            weights=weights,
            reference=reference,
        )
        return result, reference_s

    def state_dict(self) -> dict[str, Any]:
        """The checkpoint's ``policy``, ``optimizer`` and (if frozen) ``reference``."""
        state = {"policy": self.policy.state_dict(), "optimizer": self.optimizer.state_dict()}
        if self.reference is not None:
            state["reference"] = self.reference.state_dict()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        if "reference" in state:
            self.reference = frozen_copy(self.policy)
            self.reference.load_state_dict(state["reference"])

    def weights(self) -> Mapping[str, Any]:
        """The policy's weights on the CPU (what a weight sync sends)."""
        return {k: v.detach().to("cpu") for k, v in self.policy.state_dict().items()}


def frozen_copy(policy: TrainablePolicy) -> TrainablePolicy:
    """A copy of ``policy`` whose parameters take no gradient (the reference policy); a policy
    with a ``frozen_copy`` method makes its own (a shared-base LoRA agent: a frozen adapter on
    the same base instead of a copy of the whole model)."""
    own = getattr(policy, "frozen_copy", None)
    if callable(own):
        return own()
    reference = copy.deepcopy(policy)
    for p in reference.parameters():
        p.requires_grad_(False)
    return reference


class _LearnerActor:
    """The Ray actor behind a :class:`RayUpdater`: a :class:`LocalUpdater` on the actor's own
    copy of the policy."""

    def __init__(self, policy: TrainablePolicy, config: TrainConfig, device: str | None) -> None:
        if config.torch_threads > 0:
            torch.set_num_threads(config.torch_threads)
        if device is not None and hasattr(policy, "model"):
            policy.model.to(device)
        self.local = LocalUpdater(policy, config)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.local, method)(*args, **kwargs)


class RayUpdater:
    """An agent's updater in a Ray actor (see the module docstring).

    Args:
        agent: the agent's name (for messages).
        policy: the policy to train; the actor gets a copy of it as it is now.
        config: the run's configuration (``trainer`` places the actor).
    """

    def __init__(self, agent: str, policy: TrainablePolicy, config: TrainConfig) -> None:
        from teamtr_env.runners.ray import init_ray

        placement = config.trainer
        self.agent = agent
        self.ray = init_ray(placement.address)
        actor_class = self.ray.remote(
            num_cpus=placement.num_cpus, num_gpus=placement.num_gpus, max_restarts=0
        )(_LearnerActor)
        device = "cuda" if placement.num_gpus > 0 else None
        self.actor = actor_class.remote(policy, config, device)
        self._reference = False
        self._weights: Any = None  # the object-store copy of the current weights, once asked for

    def _get(self, ref: Any) -> Any:
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayActorError as exc:
            raise LearnerLost(f"the learner actor of agent {self.agent!r} died: {exc}") from exc

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._get(self.actor.call.remote(method, *args, **kwargs))

    def set_lr(self, lr: float) -> None:
        self._call("set_lr", lr)

    def freeze_reference(self) -> None:
        self._call("freeze_reference")
        self._reference = True

    @property
    def has_reference(self) -> bool:
        return self._reference

    def update(
        self, messages: Sequence[MessageRecord], advantages: torch.Tensor, **settings: Any
    ) -> tuple[UpdateResult, float]:
        """:meth:`LocalUpdater.update` in the actor (one remote call with the messages)."""
        self._weights = None
        result: tuple[UpdateResult, float] = self._call(
            "update", list(messages), advantages, **settings
        )
        return result

    def weights_ref(self) -> Any:
        """The actor's current weights as an object-store reference (the driver does not
        receive them unless it asks); put there once per version of the weights, however many
        readers (the driver's copy, the rollout workers) ask."""
        if self._weights is None:
            self._weights = self.actor.call.remote("weights")
        return self._weights

    def weights(self) -> Mapping[str, Any]:
        state: Mapping[str, Any] = self._get(self.weights_ref())
        return state

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = self._call("state_dict")
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._weights = None
        self._call("load_state_dict", dict(state))
        self._reference = "reference" in state

    def shutdown(self) -> None:
        """Stops the actor."""
        self.ray.kill(self.actor, no_restart=True)
