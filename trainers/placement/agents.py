"""One owner per trainable agent: its trust region's state
(:class:`~trainers.optim.trust_region.TrustRegion`), the version of its weights, and where its
model lives and is updated.

:class:`TrainedAgent` is every method the team trainer and the stage use; the trainer never asks
where an agent lives. :func:`trained_agent` picks the owner once, from what it is given:

* :class:`LocalAgent` (``runner.agents: local``): updated in this process, on the policy the team
  plays (a :class:`~trainers.placement.updaters.LocalUpdater`).
* :class:`ActorAgent` (``runner.agents: ray``, given an
  :class:`~trainers.placement.updaters.ActorPolicy`): the model lives in its agent actor only;
  the driver holds the stand-in (what ``teamtr train`` does).
* :class:`MirroredAgent` (``runner.agents: ray``, given a policy object): an agent actor
  started from a copy of the policy at the first stage (or before a checkpoint is loaded); the
  driver's object is reloaded after every accepted update, so the caller's policy stays current.

A rollout engine (``rollout.engine: vllm``) is part of the policy wherever it lives: an accepted
update marks it stale, and it takes the new weights before its next sampling.

A role-sharing team (one policy object plays several agents: ``shared_policy: true``) gives those
agents one :class:`LocalAgent` updater between them (:meth:`LocalAgent.seat`, :func:`slot_owners`): one optimizer and one reference
for the one model, and one version, which every agent's accepted update advances. Each agent
keeps its own trust-region state. Agent actors hold a model each, so a shared policy trains in
this process (:func:`role_sharing_errors`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeGuard

import torch

from teamtr_core.errors import ConfigError
from teamtr_core.policy import SamplingParams, TokenLogprobs, TrainablePolicy
from teamtr_core.team import Slot
from teamtr_env.rollout import MessageRecord
from trainers.config import TrainConfig
from trainers.optim.trust_region import TrustRegion
from trainers.optim.update import UpdateResult
from trainers.placement.gang import actor_updater
from trainers.placement.updaters import ActorPolicy, LocalUpdater, RayUpdater

__all__ = [
    "ActorAgent",
    "LocalAgent",
    "MirroredAgent",
    "RemoteAgent",
    "TrainedAgent",
    "is_remote",
    "role_sharing_errors",
    "score_temperature",
    "slot_owners",
    "trained_agent",
]


class TrainedAgent(Protocol):
    """A trainable agent's owner: what the trainer and the stage ask of it.

    Attributes:
        name: the agent.
        policy: what the team plays (an :class:`~trainers.placement.updaters.ActorPolicy` for an
            agent whose model lives only in its agent actor).
        region: its trust region's state (``beta``, ``delta`` and their adaptation:
            :class:`~trainers.optim.trust_region.TrustRegion`), held here wherever the model
            lives, and handed to its updater with every update.
        version: accepted updates so far (which parameters produced a rollout).
        temperature: the temperature its messages are scored at (their sampling temperature).
    """

    name: str
    policy: Any
    region: TrustRegion
    version: int
    temperature: float

    @property
    def model_key(self) -> str:
        """Identifies the weights this agent trains: its slot's first agent (equal for the
        agents of a shared policy, distinct otherwise)."""
        ...

    def begin_stage(self, lr: float, *, freeze_reference: bool) -> None:
        """Sets the stage's learning rate; with ``freeze_reference``, freezes the reference
        policy (once: the team as training starts)."""
        ...

    @property
    def has_reference(self) -> bool:
        """Whether a frozen reference policy is scored in its updates."""
        ...

    def update(
        self,
        messages: Sequence[MessageRecord],
        advantages: torch.Tensor,
        *,
        delta: float | None,
        flip_trials: int,
        weights: torch.Tensor | None,
        behaviour: Sequence[TokenLogprobs] | None = None,
    ) -> tuple[UpdateResult, float]:
        """The policy step and trust region at its ``beta`` and temperature (``behaviour``: the
        sampler's log-probs, when the model moved since); the result and the seconds spent
        scoring the reference."""
        ...

    def accept(self) -> None:
        """After an accepted update: the next version plays (the driver's copy is reloaded)."""
        ...

    def score(self, messages: Sequence[MessageRecord]) -> list[TokenLogprobs]:
        """Its current log-probs of ``messages`` (no gradient), where its model lives."""
        ...

    def sync(self, runner: Any) -> None:
        """Sends its weights to a distributed runner's workers if they changed since the last
        sync (nothing to send to a local runner, whose policies are these)."""
        ...

    def unsync(self) -> None:
        """Its workers' weights are unknown now: the next :meth:`sync` sends them."""
        ...

    def load_weights(self, state: Mapping[str, Any]) -> None:
        """Loads policy weights wherever the model lives (a best-validation team)."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """The checkpoint's entry: ``policy``, ``optimizer``, ``reference`` (if frozen),
        ``beta``, ``delta`` and ``version``."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restores :meth:`state_dict`."""
        ...


class RemoteAgent(TrainedAgent, Protocol):
    """An agent trained in agent actors (one, or a gang): what its actors' lifecycle adds to
    :class:`TrainedAgent` (:class:`ActorAgent` and :class:`MirroredAgent`; :func:`is_remote`
    tells). An agent trained in this process has none of it."""

    @property
    def started(self) -> bool:
        """Whether its actors run (they are started on first use)."""
        ...

    def start(self) -> None:
        """Starts its actors."""
        ...

    def actor_engine_syncs(self) -> dict[str, float] | None:
        """The weight syncs into a rollout engine in its actor (``None`` without one)."""
        ...

    def shutdown(self) -> None:
        """Stops its actors."""
        ...

    def restart(self) -> None:
        """Starts new actors built as the first were (after one died): the caller loads a
        checkpoint."""
        ...


class _Version:
    """Accepted updates of one set of weights (shared by the agents of a shared policy)."""

    def __init__(self) -> None:
        self.count = 0


class _Owner:
    """What every owner shares: the trust-region state, the version, the sync bookkeeping, and
    the calls that go to the agent's updater wherever it lives."""

    def __init__(self, name: str, policy: Any, config: TrainConfig, temperature: float) -> None:
        self.name, self.policy, self.config = name, policy, config
        self.region = TrustRegion(config.trust_region)
        self._version = _Version()
        self.temperature = temperature
        self._synced: int | None = None  # the version last sent to a distributed runner's workers
        self._model = name  # the first agent of the slot whose weights this agent trains
        # False for the later agents of a shared policy: the first restores the updater (weights,
        # optimizer, reference) they share, once
        self._restores_updater = True

    @property
    def version(self) -> int:
        """Accepted updates of the weights this agent plays (a shared policy's: every agent's)."""
        return self._version.count

    @version.setter
    def version(self, value: int) -> None:
        self._version.count = value

    @property
    def updater(self) -> LocalUpdater | RayUpdater:
        raise NotImplementedError

    @property
    def model_key(self) -> str:
        return self._model

    def begin_stage(self, lr: float, *, freeze_reference: bool) -> None:
        self.updater.set_lr(lr)
        if freeze_reference and not self.updater.has_reference:
            self.updater.freeze_reference()

    @property
    def has_reference(self) -> bool:
        return self.updater.has_reference

    def update(
        self,
        messages: Sequence[MessageRecord],
        advantages: torch.Tensor,
        *,
        delta: float | None,
        flip_trials: int,
        weights: torch.Tensor | None,
        behaviour: Sequence[TokenLogprobs] | None = None,
    ) -> tuple[UpdateResult, float]:
        settings: dict[str, Any] = {}
        if behaviour is not None:  # only a role-sharing team's, which trains in this process
            settings["behaviour"] = list(behaviour)
        return self.updater.update(
            messages,
            advantages,
            beta=self.region.beta,
            delta=delta,
            temperature=self.temperature,
            flip_trials=flip_trials,
            weights=weights,
            **settings,
        )

    def score(self, messages: Sequence[MessageRecord]) -> list[TokenLogprobs]:
        return self.updater.score(messages, self.temperature)

    def unsync(self) -> None:
        self._synced = None

    def load_weights(self, state: Mapping[str, Any]) -> None:
        self.updater.load_weights(state)
        self._synced = None

    def state_dict(self) -> dict[str, Any]:
        return {**self.updater.state_dict(), **self.region.state_dict(), "version": self.version}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if self._restores_updater:
            self.updater.load_state_dict(state)
        self.region.load_state_dict(state)
        self.version = state["version"]
        self._synced = None


class LocalAgent(_Owner):
    r"""An agent updated in this process, on the policy the team plays. The other agents of its
    slot (a role-sharing team) are its :meth:`seat`\ s: they share its optimizer, reference and
    version."""

    def __init__(
        self, name: str, policy: TrainablePolicy, config: TrainConfig, temperature: float
    ) -> None:
        super().__init__(name, policy, config, temperature)
        self._local = LocalUpdater(policy, config)

    def seat(self, name: str, temperature: float) -> LocalAgent:
        """The owner of another agent that plays this agent's policy (its slot's): this owner's
        updater (optimizer, reference) and version, a trust region of its own; this owner
        restores the updater they share from a checkpoint, once."""
        other = LocalAgent.__new__(LocalAgent)
        _Owner.__init__(other, name, self.policy, self.config, temperature)
        other._local, other._version, other._model = self._local, self._version, self._model
        other._restores_updater = False
        return other

    @property
    def updater(self) -> LocalUpdater:
        """The agent's optimizer and reference, in this process."""
        return self._local

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The agent's optimizer."""
        return self._local.optimizer

    @property
    def reference(self) -> TrainablePolicy | None:
        """The agent's frozen reference (``optim.ref_kl_coef > 0``), once frozen."""
        return self._local.reference

    def accept(self) -> None:
        self.version += 1  # the policy was updated in place

    def sync(self, runner: Any) -> None:
        if self._synced != self.version:
            runner.sync(self.name, self.policy, self.version)
            self._synced = self.version


class ActorAgent(_Owner):
    """An agent whose model lives only in its agent actor; the driver plays the
    :class:`~trainers.placement.updaters.ActorPolicy` stand-in."""

    def __init__(
        self, name: str, policy: ActorPolicy, config: TrainConfig, temperature: float
    ) -> None:
        super().__init__(name, policy, config, temperature)
        self._actor: RayUpdater | None = policy.updater

    @property
    def updater(self) -> RayUpdater:
        """The agent's actor (started by :meth:`start`)."""
        if self._actor is None:
            raise RuntimeError(f"agent {self.name!r}: its agent actor has not started")
        return self._actor

    @property
    def started(self) -> bool:
        return self._actor is not None

    def start(self) -> None:
        pass  # an ActorPolicy's actor is running

    def accept(self) -> None:
        self.version += 1

    def sync(self, runner: Any) -> None:
        if self._synced == self.version:
            return
        sync_ref = getattr(runner, "sync_ref", None)
        if sync_ref is not None:  # from the actor straight to the workers (object store)
            sync_ref(self.name, self.updater.weights_ref(), self.version)
        else:
            runner.sync(self.name, self.policy, self.version)
        self._synced = self.version

    def actor_engine_syncs(self) -> dict[str, float] | None:
        return self.updater.engine_syncs()

    def shutdown(self) -> None:
        self.updater.shutdown()

    def restart(self) -> None:
        self.updater.restart()
        self._synced = None


class MirroredAgent(ActorAgent):
    """An agent trained in an agent actor started from a copy of the driver's policy object,
    which is reloaded after every accepted update (and with every loaded state)."""

    def __init__(
        self, name: str, policy: TrainablePolicy, config: TrainConfig, temperature: float
    ) -> None:
        _Owner.__init__(self, name, policy, config, temperature)
        self._actor = None  # started at the first stage, or before a checkpoint is loaded

    def start(self) -> None:
        if self._actor is None:
            self._actor = actor_updater(self.name, self.policy, self.config)

    def accept(self) -> None:
        self.version += 1
        self.policy.load_state_dict(self.updater.weights())

    def load_weights(self, state: Mapping[str, Any]) -> None:
        self.policy.load_state_dict(state)
        super().load_weights(state)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.policy.load_state_dict(state["policy"])


def is_remote(agent: TrainedAgent) -> TypeGuard[RemoteAgent]:
    """Whether ``agent`` is trained in agent actors (a :class:`RemoteAgent`)."""
    return isinstance(agent, ActorAgent)


def score_temperature(sampling: SamplingParams) -> float:
    """The temperature an agent's messages are scored at: its sampling temperature (1 for
    greedy decoding, whose messages have no sampling distribution to match)."""
    return sampling.temperature if sampling.temperature > 0 else 1.0


def role_sharing_errors(config: TrainConfig) -> list[str]:
    """What a run of a role-sharing team (one policy plays several agents) cannot do: train in
    agent actors, which hold a model each. (What a learner cannot do with one, naive
    sequential's importance weighting, is that learner's check.)"""
    errors = []
    if config.runner.agents == "ray":
        errors.append(
            "runner.agents: a shared policy (team.shared_policy) is trained in this process "
            "(agent actors hold a model each); set runner.agents: local"
        )
    return errors


def slot_owners(
    slot: Slot, config: TrainConfig, sampling: Mapping[str, SamplingParams]
) -> dict[str, TrainedAgent]:
    """The owners of a slot's agents (:class:`~teamtr_core.team.Slot`): one (:func:`trained_agent`)
    for an agent of its own; for a shared policy, the first agent's :class:`LocalAgent` and its
    :meth:`~LocalAgent.seat` for each other agent (one optimizer, reference and version).

    Raises:
        ConfigError: as :func:`trained_agent`, or a shared policy that cannot train here
            (:func:`role_sharing_errors`).
    """
    first, *others = slot.agents
    owner = trained_agent(first, slot.policy, config, sampling[first], shared=slot.shared)
    owners: dict[str, TrainedAgent] = {first: owner}
    for name in others:
        assert isinstance(owner, LocalAgent), "a shared policy trains in this process"
        owners[name] = owner.seat(name, score_temperature(sampling[name]))
    return owners


def trained_agent(
    name: str,
    policy: TrainablePolicy,
    config: TrainConfig,
    sampling: SamplingParams,
    *,
    shared: bool = False,
) -> TrainedAgent:
    """The owner of a trainable agent, by what it is given and ``runner.agents``; ``shared``:
    its policy is a role-sharing slot's (trained in this process).

    Raises:
        ConfigError: an :class:`~trainers.placement.updaters.ActorPolicy` without
            ``runner.agents: ray``, or a shared policy that cannot train here
            (:func:`role_sharing_errors`).
    """
    temperature = score_temperature(sampling)
    if shared:
        errors = role_sharing_errors(config)
        if errors:
            raise ConfigError("training config", errors)
        return LocalAgent(name, policy, config, temperature)
    remote = config.runner.agents == "ray"
    if isinstance(policy, ActorPolicy):
        if not remote:
            raise ConfigError(
                "runner", ["an ActorPolicy's agent is trained in its actor: runner.agents: ray"]
            )
        return ActorAgent(name, policy, config, temperature)
    if remote:
        return MirroredAgent(name, policy, config, temperature)
    return LocalAgent(name, policy, config, temperature)
