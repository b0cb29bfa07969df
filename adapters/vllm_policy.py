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
        )
        window = max_model_len or _window(self.llm, default=4096)
        self.codec = PromptCodec(
            tokenizer, max_prompt_tokens or max(window - 256, window // 2), chat_template
        )
        self.tokenizer = tokenizer

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        """Samples one message per prompt with vLLM (continuous batching over the whole list)."""
        token_prompts = [{"prompt_token_ids": self.codec.prompt_ids(p)} for p in prompts]
        params = to_vllm_sampling(sampling, len(prompts), self.vllm)
        outputs = self.llm.generate(token_prompts, params, use_tqdm=False)
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
