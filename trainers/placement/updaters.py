"""Where each agent's training state lives and its updates run: this process, or a Ray actor.

An agent's *updater* holds what training needs beyond the policy that plays: the trainable
copy of the policy, its optimizer and its frozen reference (``optim.ref_kl_coef > 0``). The stage
hands it the agent's messages and advantages; the updater scores the reference, takes the policy
step and enforces the trust region (backtracking included) where it lives, and returns the
update's :class:`~trainers.optim.update.UpdateResult`.

* :class:`LocalUpdater` (``runner.agents: local``, the default): in this process, on the
  policy the team plays (nothing is copied).
* :class:`RayUpdater` (``runner.agents: ray``): a Ray actor per trainable agent that asks for
  its own resources (``runner.agent_cpus``, ``runner.agent_gpus``) and holds the agent's model,
  optimizer and reference. The actor builds its model itself from a picklable builder (a
  training run's :class:`~trainers.run.team_eval.TeamSource`), or starts from a copy of a policy
  object it is given. A Ray rollout runner receives the actor's weights through the object
  store without the driver in between. A dead actor raises :class:`AgentActorLost`; the recipe
  restarts it (:meth:`RayUpdater.restart`), restores the last checkpoint and replays the stage.
* :class:`ActorPolicy`: what the driver holds for an agent whose model lives in its learner
  actor: a :class:`~teamtr_core.policy.TrainablePolicy` with no parameters whose calls
  (``generate``, ``logprobs``, ``state_dict``, ``load_state_dict``) run in the actor. A training
  run with agent actors holds only these in the driver: evaluation, diagnostics scoring and
  behaviour cloning run in the actors (or on the Ray rollout workers), so the driver process
  loads no model (tested).

The update math is the same function in both places (:func:`trainers.optim.update.update_agent`,
which draws no global randomness), so a run's numbers do not depend on where its updates run
(tested within tolerance on a local Ray).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch

from adapters.rollout_engine import mark_updated
from teamtr_core.errors import ConfigError, TeamTRError
from teamtr_core.policy import (
    Completion,
    Generation,
    SamplingParams,
    TokenLogprobs,
    TrainablePolicy,
    engine_syncs,
)
from teamtr_env.rollout import MessageRecord
from trainers.config import Gang, TrainConfig
from trainers.optim.collective import SOLO, Group, Share
from trainers.optim.scoring import scored
from trainers.optim.update import UpdateResult, update_agent


class AgentActorLost(TeamTRError):
    """An agent's agent actor died (its process, node or GPU was lost) during a stage."""


class LocalUpdater:
    """An agent's optimizer and reference in this process, updating ``policy`` in place."""

    #: The ranks this updater's calls run on (a gang's rank replaces it): the update, the
    #: reference and the scoring take their batches as a share over them (:meth:`share`).
    group: Group = SOLO

    def __init__(self, policy: TrainablePolicy, config: TrainConfig) -> None:
        self.policy, self.config = policy, config
        opt = config.optim
        self.optimizer: torch.optim.Optimizer = torch.optim.AdamW(
            policy.parameters(), lr=opt.lr, weight_decay=opt.weight_decay
        )
        self.reference: TrainablePolicy | None = None
        self._clone: Any = None  # behaviour cloning in progress (clone_start)

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
        behaviour: Sequence[TokenLogprobs] | None = None,
    ) -> tuple[UpdateResult, float]:
        """The policy step and the trust region on ``messages`` (``behaviour``: the sampler's
        log-probs of them, when the model moved since they were sampled); returns the result
        and the seconds spent scoring the reference."""
        cfg = self.config
        reference: list[TokenLogprobs] | None = None
        t0 = time.perf_counter()
        if self.reference is not None:
            mb = cfg.optim.micro_batch_size
            reference = scored(self.reference, self.share(messages), mb, temperature)
        reference_s = time.perf_counter() - t0
        result = update_agent(
            self.policy,
            self.optimizer,
            self.share(messages),
            advantages,
            beta=beta,
            delta=delta,
            optim=cfg.optim,
            region=cfg.trust_region,
            temperature=temperature,
            flip_trials=flip_trials,
            weights=weights,
            behaviour=behaviour,
            reference=reference,
            tis_cap=cfg.rollout.tis,
        )
        if result.changed_weights:
            # the weights changed: a rollout engine gets them before its next sampling (a
            # reverted update restored them, so nothing is marked and nothing is served)
            mark_updated(self.policy)
        return result, reference_s

    def score(self, messages: Sequence[MessageRecord], temperature: float) -> list[TokenLogprobs]:
        """The policy's current log-probs of ``messages`` (no gradient; diagnostics and the
        importance weights of naive sequential read them)."""
        mb = self.config.optim.micro_batch_size
        return scored(self.policy, self.share(messages), mb, temperature)

    def share(self, messages: Sequence[MessageRecord]) -> Share:
        """``messages`` as this process's share of them (the whole batch, but on a gang's
        rank)."""
        return Share(messages, self.group)

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

    def load_weights(self, state: Mapping[str, Any]) -> None:
        """Loads policy weights (a best-validation team, a behaviour clone); the optimizer and
        the reference are left as they are."""
        self.policy.load_state_dict(state)  # marks a rollout engine stale

    def engine_syncs(self) -> dict[str, float] | None:
        """The weight syncs into the policy's rollout engine so far (``None`` without a started
        engine; :func:`teamtr_core.policy.engine_syncs`)."""
        return engine_syncs([self.policy])

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """The shape of every weight of the policy's state dict."""
        return {k: tuple(v.shape) for k, v in self.policy.state_dict().items()}

    # -- what an ActorPolicy forwards, and behaviour cloning where the model lives ----------
    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        return self.policy.generate(prompts, sampling)

    def logprobs(
        self, prompts: Sequence[str], completions: Sequence[Completion], **kwargs: Any
    ) -> TokenLogprobs:
        return self.policy.logprobs(prompts, completions, **kwargs)

    def clone_start(self, index: int, pairs: Sequence[tuple[str, str]], sft: Any) -> None:
        """Starts behaviour cloning of this agent (its ``index`` in the team seeds its
        minibatches) on its expert ``pairs`` (:func:`trainers.optim.sft.behaviour_clone`)."""
        from trainers.optim.sft import Clone

        self._clone = Clone.of(index, self.policy, pairs, sft)

    def clone_steps(
        self, agent: str, sft: Any, first: int, last: int, check: bool
    ) -> tuple[list[float], float | None]:
        """Behaviour-cloning steps ``first`` to ``last - 1``: their losses and, with ``check``,
        the held-out match after them."""
        return self._clone.run(agent, sft, first, last, check)


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


def prepared(policy: Any, config: TrainConfig) -> Any:
    """``policy`` made ready to train as ``config`` says (the one place this happens, wherever
    the agent lives): gradient checkpointing on with ``optim.gradient_checkpointing`` (where the
    policy supports it)."""
    if config.optim.gradient_checkpointing and hasattr(policy, "enable_gradient_checkpointing"):
        policy.enable_gradient_checkpointing()
    return policy


class _Given:
    """A builder that returns a policy it was given (pickled with it to the actor)."""

    def __init__(self, policy: TrainablePolicy) -> None:
        self.policy = policy

    def __call__(self) -> TrainablePolicy:
        return self.policy


class _LearnerActor(LocalUpdater):
    """The Ray actor behind a :class:`RayUpdater`: a :class:`LocalUpdater` (its methods are the
    actor's) on the policy the actor builds (or the copy it was sent)."""

    def __init__(
        self, build: Callable[[], TrainablePolicy], config: TrainConfig, device: str | None
    ) -> None:
        if config.torch_threads > 0:
            torch.set_num_threads(config.torch_threads)
        policy = build()
        if device is not None and hasattr(policy, "model"):
            policy.model.to(device)
        super().__init__(prepared(policy, config), config)


class RayUpdater:
    """An agent's updater in a Ray actor (see the module docstring).

    Every call goes to each of its ranks (one actor here; a :class:`GangUpdater`'s N), which
    answer alike; the first rank's answer is returned. A rank that died makes the call raise
    :class:`AgentActorLost` once every rank is stopped.

    Args:
        agent: the agent's name (for messages).
        source: the policy to train, built in the actor by calling ``source`` (a picklable
            zero-argument builder: the driver loads no model), or a policy object, of which
            the actor gets a copy as it is now.
        config: the run's configuration (``trainer`` places the actor).
    """

    def __init__(
        self,
        agent: str,
        source: TrainablePolicy | Callable[[], TrainablePolicy],
        config: TrainConfig,
    ) -> None:
        from teamtr_env.runners.ray import init_ray

        self.agent, self.config = agent, config
        self.ray = init_ray(config.runner.address)
        build = _Given(source) if isinstance(source, TrainablePolicy) else source
        self._build = self.ray.put(build)  # a restart builds from the same object
        self.ranks: list[Any] = self._start()
        self._reference = False
        self._weights: Any = None  # the object-store copy of the current weights, once asked for

    @property
    def actor(self) -> Any:
        """The first rank's actor (the one that answers)."""
        return self.ranks[0]

    def _device(self) -> str | None:
        return "cuda" if self.config.runner.agent_gpus > 0 else None

    def _start(self) -> list[Any]:
        placement = self.config.runner
        actor = self.ray.remote(
            num_cpus=placement.agent_cpus, num_gpus=placement.agent_gpus, max_restarts=0
        )(_LearnerActor)
        return [actor.remote(self._build, self.config, self._device())]

    def restart(self) -> None:
        """Starts new actors built as the first were, in place of ones that died or were
        stopped (:meth:`shutdown`); the caller loads a checkpoint into them."""
        self.shutdown()
        self.ranks = self._start()
        self._reference = False
        self._weights = None

    def _get(self, ref: Any) -> Any:
        """What one call on every rank returned (``ref``: their references): the first rank's
        answer, once every rank answered."""
        refs = ref if isinstance(ref, list) else [ref]
        pending = list(refs)
        try:
            while pending:  # every rank, so a dead one is seen even while the others wait on it
                done, pending = self.ray.wait(pending, num_returns=1)
                self.ray.get(done)
            return self.ray.get(refs[0])
        except self.ray.exceptions.RayActorError as exc:
            self.shutdown()  # the others would wait on the dead one in their collectives
            raise AgentActorLost(f"the agent actor of agent {self.agent!r} died: {exc}") from exc

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """``method`` on every rank; the first rank's answer."""
        return self._get(self._submit(method, *args, **kwargs))

    def _submit(self, method: str, *args: Any, **kwargs: Any) -> list[Any]:
        return [getattr(rank, method).remote(*args, **kwargs) for rank in self.ranks]

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
            refs = self._submit("weights")
            self._get(refs)  # a gang gathers them on its first rank
            self._weights = refs[0]
        return self._weights

    def weights(self) -> Mapping[str, Any]:
        state: Mapping[str, Any] = self._get(self.weights_ref())
        return state

    def load_weights(self, state: Any) -> None:
        """Loads policy weights into the actor (a state dict, or an object-store reference to
        one: another actor's :meth:`weights_ref`, which then never passes the driver)."""
        self._weights = None
        self._call("load_weights", state)

    def score(self, messages: Sequence[MessageRecord], temperature: float) -> list[TokenLogprobs]:
        """:meth:`LocalUpdater.score` in the actor."""
        result: list[TokenLogprobs] = self._call("score", list(messages), temperature)
        return result

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = self._call("state_dict")
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._weights = None
        self._call("load_state_dict", dict(state))
        self._reference = "reference" in state

    def engine_syncs(self) -> dict[str, float] | None:
        """:meth:`LocalUpdater.engine_syncs` of the actor's policy."""
        result: dict[str, float] | None = self._call("engine_syncs")
        return result

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """:meth:`LocalUpdater.shapes` of the actor's policy (its weights stay there)."""
        result: dict[str, tuple[int, ...]] = self._call("shapes")
        return result

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        """The actor's policy writes the messages."""
        result: list[Generation] = self._call("generate", list(prompts), sampling)
        return result

    def logprobs(
        self, prompts: Sequence[str], completions: Sequence[Completion], **kwargs: Any
    ) -> TokenLogprobs:
        result: TokenLogprobs = self._call("logprobs", list(prompts), list(completions), **kwargs)
        return result

    def clone_start(self, index: int, pairs: Sequence[tuple[str, str]], sft: Any) -> None:
        """:meth:`LocalUpdater.clone_start` in the actor."""
        self._weights = None
        self._call("clone_start", index, list(pairs), sft)

    def submit_clone_steps(self, agent: str, sft: Any, first: int, last: int, check: bool) -> Any:
        """Starts :meth:`LocalUpdater.clone_steps` in the actor and returns its reference without
        waiting (several actors clone at once; :meth:`result` waits)."""
        self._weights = None
        return self._submit("clone_steps", agent, sft, first, last, check)

    def result(self, ref: Any) -> Any:
        """What :meth:`submit_clone_steps` started, once it is done (:class:`AgentActorLost` if the
        actor died)."""
        return self._get(ref)

    def shutdown(self) -> None:
        """Stops the actors."""
        for rank in self.ranks:
            self.ray.kill(rank, no_restart=True)


def check_actor_resources(config: TrainConfig, count: int) -> None:
    """Refuses ``count`` agent actors that the Ray cluster cannot place (they would wait for
    resources forever): a ``ConfigError`` naming what is short."""
    from teamtr_env.runners.ray import init_ray, short_of_resources

    gang = Gang.of(config)
    ray = init_ray(config.runner.address)
    # a sharded agent is a gang of actors
    short = short_of_resources(ray, count * gang.ranks, gang.cpus, gang.gpus, "agent actors")
    if short:
        raise ConfigError("runner", short)


class ActorPolicy:
    """The driver's handle on an agent whose model lives in its agent actor (see the module
    docstring): a :class:`~teamtr_core.policy.TrainablePolicy` whose calls run in the actor and
    which holds no parameters itself.

    Args:
        updater: the agent's :class:`RayUpdater`.
    """

    def __init__(self, updater: RayUpdater) -> None:
        self.updater = updater

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        """The actor's policy writes the messages (seeded by ``sampling.seed`` as anywhere)."""
        return self.updater.generate(prompts, sampling)

    def logprobs(
        self, prompts: Sequence[str], completions: Sequence[Completion], **kwargs: Any
    ) -> TokenLogprobs:
        return self.updater.logprobs(prompts, completions, **kwargs)

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """None here: the parameters are the actor's."""
        return iter(())

    def state_dict(self) -> Mapping[str, Any]:
        """The actor's current weights (fetched to the driver)."""
        return self.updater.weights()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.updater.load_weights(state)

    def __repr__(self) -> str:
        return f"ActorPolicy({self.updater.agent!r})"
