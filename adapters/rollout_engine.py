"""A trainable policy whose rollouts come from a separate inference engine (vLLM).

:class:`EngineRollouts` is what a training run with ``rollout.engine: vllm`` gives each
trainable agent: a :class:`~teamtr_core.policy.TrainablePolicy` that *trains* as its
``trainable`` policy (an ``HFPolicy`` or a shared-base LoRA agent: log-probs, parameters,
state dicts and the optimizer are all that policy's) and *samples* through an engine
(:class:`~adapters.vllm_policy.VLLMPolicy`, or one agent of a
:class:`~adapters.vllm_policy.VLLMLoraTeam`).

The engine is given the trainer's weights lazily: :meth:`EngineRollouts.mark_updated` (called by
the trainer after every *accepted* update, and by ``load_state_dict``) marks the engine stale,
and the next ``generate`` syncs first. So the engine serves the weights the trainer holds at
every sampling, an update that the trust region reverted is never served (its weights are
restored before anything is marked), and several changes between two samplings cost one sync.
The engine itself is started at the first ``generate`` (an agent whose rollouts run elsewhere,
on Ray rollout workers, never starts one) and is not copied or pickled with the policy.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from teamtr_core.policy import Completion, Generation, SamplingParams, TokenLogprobs


class EngineRollouts:
    """``trainable``'s training, ``engine()``'s sampling (see the module docstring).

    Args:
        trainable: the policy the trainer updates.
        engine: builds the rollout engine (called once, at the first ``generate``); the engine
            has ``generate(prompts, sampling)``, ``sync_weights(policy)`` and ``syncs``
            (:class:`~adapters.vllm_policy.SyncStats`).
        synced: the engine starts with ``trainable``'s weights (an engine on the same model
            directory as an untouched policy); ``False`` syncs before the first sampling.
    """

    def __init__(self, trainable: Any, engine: Callable[[], Any], *, synced: bool = False) -> None:
        self.trainable = trainable
        self.engine_factory = engine
        self._engine: Any = None
        self.stale = not synced

    # -- sampling: the engine -------------------------------------------------------------------
    @property
    def engine(self) -> Any:
        """The rollout engine, started on first use."""
        if self._engine is None:
            self._engine = self.engine_factory()
        return self._engine

    @property
    def started(self) -> bool:
        """The engine has been started (the first ``generate`` happened)."""
        return self._engine is not None

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        """Samples with the engine, after syncing the trainer's weights into it if they
        changed since the last sampling."""
        engine = self.engine
        if self.stale:
            engine.sync_weights(self.trainable)
            self.stale = False
        return list(engine.generate(prompts, sampling))

    def mark_updated(self) -> None:
        """The trainer's weights changed (an accepted update, a loaded state): the engine gets
        them before its next sampling."""
        self.stale = True

    def close_engine(self) -> None:
        """Stops the engine, if it started (its ``close()``: processes, model copy and KV cache
        freed). The policy still trains; a later ``generate`` starts a new engine and syncs
        it first."""
        engine, self._engine = self._engine, None
        if engine is not None:
            close = getattr(engine, "close", None)
            if callable(close):
                close()
            self.stale = True

    def sync_stats(self) -> dict[str, float]:
        """The engine's syncs so far (``count``, ``tensors``, ``bytes``, ``seconds``; zeros
        before it started)."""
        stats = getattr(self._engine, "syncs", None)
        if stats is None:
            return {"count": 0.0, "tensors": 0.0, "bytes": 0.0, "seconds": 0.0}
        return {
            "count": float(stats.count),
            "tensors": float(stats.tensors),
            "bytes": float(stats.bytes),
            "seconds": float(stats.seconds),
        }

    # -- training: the trainable policy ---------------------------------------------------------
    def logprobs(
        self, prompts: Sequence[str], completions: Sequence[Completion], **kwargs: Any
    ) -> TokenLogprobs:
        """The trainable policy's log-probs (``temperature``, ``autocast``... pass through)."""
        return self.trainable.logprobs(prompts, completions, **kwargs)

    def parameters(self) -> Iterator[Any]:
        return self.trainable.parameters()

    def state_dict(self) -> Mapping[str, Any]:
        return self.trainable.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> Any:
        out = self.trainable.load_state_dict(state)
        self.mark_updated()
        return out

    def frozen_copy(self) -> Any:
        """The reference policy: a frozen copy of the trainable policy (no engine)."""
        own = getattr(self.trainable, "frozen_copy", None)
        if callable(own):
            return own()
        reference = copy.deepcopy(self.trainable)
        for p in reference.parameters():
            p.requires_grad_(False)
        return reference

    def __getattr__(self, name: str) -> Any:
        # Everything else (tokenizer, codec, model, is_lora, save_pretrained, devices...) is the
        # trainable policy's. Guarded so that copying or unpickling an instance does not recurse.
        if name in {"trainable", "engine_factory", "_engine", "stale"}:
            raise AttributeError(name)
        return getattr(self.trainable, name)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (to a Ray actor or worker) without the live engine: it restarts there on
        first use, and is synced before its first sampling."""
        return {"trainable": self.trainable, "engine_factory": self.engine_factory}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.trainable = state["trainable"]
        self.engine_factory = state["engine_factory"]
        self._engine = None
        self.stale = True


def close_engines(policies: Iterable[Any]) -> None:
    """Stops the rollout engine of every policy that started one (:meth:`EngineRollouts.close_engine`;
    other policies are left alone). A shared-base team's agents share one engine: it stops
    once."""
    for policy in policies:
        close = getattr(policy, "close_engine", None)
        if callable(close):
            close()


def mark_updated(policy: Any) -> None:
    """Tells ``policy``'s rollout engine, if it has one, that its weights changed."""
    hook = getattr(policy, "mark_updated", None)
    if callable(hook):
        hook()
