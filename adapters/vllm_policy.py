"""``VLLMPolicy``: fast GPU rollouts with vLLM behind the same Policy protocol (optional extra).

The trainer keeps training an ``HFPolicy``; a ``VLLMPolicy`` serves its rollouts and receives the
trainer's weights after every update (:meth:`VLLMPolicy.sync_weights`). Prompts are rendered to
token ids by the same :class:`~adapters.codec.PromptCodec` as ``HFPolicy`` and passed to vLLM as
token prompts, so both backends condition on identical tokens, and messages are finished by the
same rule (EOS kept in the token ids, stop strings cut, ``clipped`` when vLLM stopped at the
length limit: ``finish_reason == "length"``).

Install with ``pip install -e ".[models,vllm]"`` on a CUDA machine. ``benchmarks/vllm_check.py``
checks this backend against ``HFPolicy`` on a GPU (distribution match, tokens/s).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from adapters.codec import PromptCodec
from teamtr_core.policy import Generation, SamplingParams
from teamtr_core.seeds import SEED_STRIDE

VLLM_HINT = (
    "vLLM is not installed. It needs a CUDA GPU: pip install -e '.[models,vllm]'. "
    "On a CPU use backend 'hf' (HFPolicy) instead."
)


def vllm_available() -> bool:
    """True when vLLM imports and a CUDA device is visible."""
    try:
        import torch
        import vllm  # noqa: F401
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def to_vllm_sampling(sampling: SamplingParams, n_prompts: int, vllm_module: Any) -> list[Any]:
    """One vLLM ``SamplingParams`` per prompt, each with its own seed derived from
    ``sampling.seed`` (so results do not depend on batch composition), ``top_k=0`` meaning off."""
    params = []
    for i in range(n_prompts):
        seed = None if sampling.seed is None else (sampling.seed * SEED_STRIDE + i) % 2**31
        params.append(
            vllm_module.SamplingParams(
                n=1,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                top_k=sampling.top_k,  # 0 = all tokens (vLLM >= 0.8)
                max_tokens=sampling.max_new_tokens,
                seed=seed,
                skip_special_tokens=True,
            )
        )
    return params


class VLLMPolicy:
    """A vLLM engine as a rollout policy.

    Args:
        path: a local model directory (the same one the trainer's ``HFPolicy`` loads).
        max_prompt_tokens: left-truncation budget for prompts (match the trainer's ``HFPolicy``).
        chat_template: as in ``HFPolicy``.
        dtype, gpu_memory_utilization, max_model_len, seed, enable_prefix_caching: passed to
            ``vllm.LLM``.
        llm: an existing engine (tests inject a fake one); built from ``path`` when ``None``.
        tokenizer: defaults to ``AutoTokenizer.from_pretrained(path)``.
        **engine_kwargs: more ``vllm.LLM`` arguments (e.g. ``enable_lora``, ``max_loras``).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        max_prompt_tokens: int | None = None,
        chat_template: bool | None = None,
        dtype: str = "auto",
        gpu_memory_utilization: float = 0.4,
        max_model_len: int | None = None,
        seed: int = 0,
        enable_prefix_caching: bool = True,
        llm: Any | None = None,
        tokenizer: Any | None = None,
        vllm_module: Any | None = None,
        **engine_kwargs: Any,
    ) -> None:
        self.vllm: Any = vllm_module if vllm_module is not None else _import_vllm()
        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self.llm = llm or self.vllm.LLM(
            model=str(path),
            dtype=dtype,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            seed=seed,
            enable_prefix_caching=enable_prefix_caching,
            **engine_kwargs,
        )
        window = max_model_len or _window(self.llm, default=4096)
        self.codec = PromptCodec(
            tokenizer, max_prompt_tokens or max(window - 256, window // 2), chat_template
        )
        self.tokenizer = tokenizer

    def generate(
        self, prompts: Sequence[str], sampling: SamplingParams, *, lora_request: Any = None
    ) -> list[Generation]:
        """Samples one message per prompt with vLLM (continuous batching over the whole list),
        with the LoRA adapter of ``lora_request`` when one is given (:class:`VLLMLoraTeam`)."""
        token_prompts = [{"prompt_token_ids": self.codec.prompt_ids(p)} for p in prompts]
        params = to_vllm_sampling(sampling, len(prompts), self.vllm)
        adapter = {} if lora_request is None else {"lora_request": lora_request}
        outputs = self.llm.generate(token_prompts, params, use_tqdm=False, **adapter)
        # finish_reason "length": vLLM stopped at max_tokens (or the model's length limit).
        return [
            self.codec.finish(
                list(o.outputs[0].token_ids),
                sampling.stop,
                at_limit=getattr(o.outputs[0], "finish_reason", None) == "length",
            )
            for o in outputs
        ]

    def sync_weights(self, source: Any) -> int:
        """Loads new weights into the engine after a trainer update.

        Args:
            source: an ``HFPolicy`` (LoRA adapters are merged into a copy of the weights first) or
                a mapping ``name -> tensor`` in the Hugging Face naming.

        Returns:
            The number of tensors sent.
        """
        weights = dict(_hf_weights(source))
        self.llm.apply_model(lambda model: model.load_weights(weights=weights.items()))
        if hasattr(self.llm, "reset_prefix_cache"):
            self.llm.reset_prefix_cache()  # cached KV blocks were computed with the old weights
        return len(weights)


class VLLMLoraTeam:
    """One vLLM engine serving every agent's LoRA adapter on one base model (vLLM's multi-LoRA
    serving: the engine runs with ``enable_lora`` and each request names its adapter).

    The trainer's agents are the adapters of a :class:`~adapters.shared_lora.SharedLoraBase` (or
    separate LoRA ``HFPolicy`` copies of the same base); :meth:`agent` gives each agent a rollout
    policy, whose ``sync_weights`` sends the adapter alone: it is saved under ``adapter_dir`` as
    a new version and served under a new adapter id (vLLM caches adapters by id), so the base is
    never copied or merged.

    Args:
        path: the base model directory (the one the trainer's adapters are on).
        adapter_dir: where synced adapter versions are written (older versions are removed).
        max_loras: adapters the engine holds at once (default: 4).
        max_lora_rank: the largest adapter rank it serves.
        **kwargs: passed to :class:`VLLMPolicy` (``max_prompt_tokens``, ``dtype``, ``llm``...).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        adapter_dir: str | Path,
        max_loras: int = 4,
        max_lora_rank: int = 16,
        **kwargs: Any,
    ) -> None:
        self.engine = VLLMPolicy(
            path, enable_lora=True, max_loras=max_loras, max_lora_rank=max_lora_rank, **kwargs
        )
        self.adapter_dir = Path(adapter_dir)
        self.max_lora_rank = max_lora_rank
        self.agents: dict[str, VLLMAdapterPolicy] = {}
        self._next_id = 1

    def agent(self, name: str, adapter_path: str | Path | None = None) -> VLLMAdapterPolicy:
        """Agent ``name``'s rollout policy: the base alone until its first ``sync_weights``,
        or the saved adapter at ``adapter_path``."""
        if name in self.agents:
            raise ValueError(f"this engine already serves an agent {name!r}")
        policy = VLLMAdapterPolicy(self, name)
        if adapter_path is not None:
            policy.request = self.request(name, Path(adapter_path))
        self.agents[name] = policy
        return policy

    def request(self, name: str, path: Path) -> Any:
        """A ``LoRARequest`` for the adapter at ``path``, with an id no other version had."""
        lora_id, self._next_id = self._next_id, self._next_id + 1
        return _lora_request_class(self.engine.vllm)(f"{name}-{lora_id}", lora_id, str(path))


class VLLMAdapterPolicy:
    """One agent of a :class:`VLLMLoraTeam`: the shared engine, with this agent's adapter."""

    def __init__(self, team: VLLMLoraTeam, name: str) -> None:
        self.team, self.name = team, name
        self.request: Any = None
        self.version = 0

    @property
    def codec(self) -> PromptCodec:
        return self.team.engine.codec

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        """Samples with this agent's adapter (the base alone before the first sync)."""
        return self.team.engine.generate(prompts, sampling, lora_request=self.request)

    def sync_weights(self, source: Any) -> int:
        """Serves ``source``'s adapter from now on: a LoRA policy (``LoraAgentPolicy`` or a LoRA
        ``HFPolicy``), saved as this agent's next version. Returns the tensors sent.

        Raises:
            ValueError: ``source`` has no LoRA adapter (sync a full model with
                ``VLLMPolicy.sync_weights``), or a rank above the engine's ``max_lora_rank``.
        """
        if not getattr(source, "is_lora", False):
            raise ValueError(
                f"agent {self.name!r}: VLLMLoraTeam serves LoRA adapters; {type(source).__name__} "
                "has none (use VLLMPolicy.sync_weights for a full model)"
            )
        rank = _lora_rank(source)
        if rank > self.team.max_lora_rank:
            raise ValueError(
                f"agent {self.name!r}: adapter rank {rank} > the engine's max_lora_rank "
                f"{self.team.max_lora_rank}"
            )
        self.version += 1
        folder = self.team.adapter_dir / self.name
        path = folder / f"v{self.version}"
        source.save_pretrained(path)
        for old in folder.glob("v*"):  # the engine loaded older versions already
            if old != path and old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
        self.request = self.team.request(self.name, path)
        from peft import get_peft_model_state_dict

        return len(get_peft_model_state_dict(source.model, adapter_name=_adapter_name(source)))


def _adapter_name(source: Any) -> str:
    """The adapter a LoRA policy trains (a shared-base agent's own, else peft's only one)."""
    return str(getattr(source, "adapter", None) or next(iter(source.model.peft_config)))


def _lora_rank(source: Any) -> int:
    return int(source.model.peft_config[_adapter_name(source)].r)


def _lora_request_class(vllm_module: Any) -> Any:
    """vLLM's ``LoRARequest`` (``vllm.lora.request``; a stand-in module may carry its own)."""
    own = getattr(vllm_module, "LoRARequest", None)
    if own is not None:
        return own
    from vllm.lora.request import LoRARequest

    return LoRARequest


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise ImportError(VLLM_HINT) from exc
    return vllm


def _hf_weights(source: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(source, Mapping):
        yield from source.items()
        return
    model = source.model
    if hasattr(model, "peft_config"):
        # Merge adapters into a copy of the weights, leaving the trainer's model untouched.
        yield from _merged_lora_state(model)
        return
    yield from model.state_dict().items()


def _merged_lora_state(peft_model: Any) -> Iterable[tuple[str, Any]]:
    import copy

    merged = copy.deepcopy(peft_model).merge_and_unload()
    return merged.state_dict().items()


def _window(llm: Any, default: int) -> int:
    try:
        return int(llm.llm_engine.model_config.max_model_len)
    except AttributeError:
        return default
