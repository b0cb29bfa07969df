"""The code teamtr adds to every vLLM worker: loading a trainer's weights in place.

vLLM runs its model in worker processes (the default multiprocess engine) or in the caller's
process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``). Either way the model is reached only through
``LLM.collective_rpc(method, args)``, which calls ``method`` on every worker; a *worker
extension class* (``vllm.LLM(worker_extension_cls=...)``, named by its import path) adds such
methods to the worker. :class:`WeightSyncExtension` adds one, :meth:`teamtr_load_weights`,
which :meth:`adapters.vllm_policy.VLLMPolicy.sync_weights` calls.

Two hand-offs, one reload (vLLM's in-place ``Worker.reload_weights``: the model's own
``load_weights`` on named tensors, followed by the same post-processing as at start-up, so
kernels that repack weights, such as the CPU GEMMs, are rebuilt):

- an engine in the trainer's process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) is handed the
  tensors themselves (:meth:`WeightSyncExtension.teamtr_load_tensors`): no file, nothing
  pickled (the GPU path it maps to for a colocated engine is CUDA IPC handles, as veRL and TRL
  do);
- a multiprocess engine's workers read a safetensors file the trainer writes once, in shared
  memory (``/dev/shm``) where there is one (:meth:`WeightSyncExtension.teamtr_load_weights`): only
  a path crosses the process boundary (a remote engine's GPU path is an NCCL broadcast, as
  OpenRLHF does).

This module imports neither vLLM nor teamtr's other modules: vLLM's workers import it by name.
"""

from __future__ import annotations

from typing import Any

#: What ``vllm.LLM(worker_extension_cls=...)`` is given.
WORKER_EXTENSION = "adapters.vllm_worker.WeightSyncExtension"


class WeightSyncExtension:
    """Mixed into vLLM's worker class; ``self`` is the worker (``reload_weights``, ``device``)."""

    reload_weights: Any

    def teamtr_load_tensors(self, weights: Any) -> int:
        """Loads ``weights`` (``(name, tensor)`` pairs in Hugging Face names, or a mapping,
        handed over in this process by an in-process engine: no file, no copy) into the served
        model in place; returns how many."""
        pairs = list(weights.items() if hasattr(weights, "items") else weights)
        self.reload_weights(weights_iterator=pairs)
        return len(pairs)

    def teamtr_load_weights(self, path: str) -> int:
        """Loads the tensors of the safetensors file at ``path`` (Hugging Face names) into the
        served model in place; returns how many were loaded."""
        from safetensors.torch import load_file

        weights = load_file(path, device="cpu")
        self.reload_weights(weights_iterator=list(weights.items()))
        return len(weights)
