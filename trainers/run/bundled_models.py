"""The ``config.json`` files of common model families that teamtr keeps (``model_configs/``:
sizes only, no weights, no tokenizer), so that ``teamtr plan`` can plan a model that is not on
this machine from its name: a hub id (``Qwen/Qwen3-8B``), a folder name (``qwen3-8b``) or the
path of a checkpoint on another machine (``/models/Qwen3-8B``). Only the plan reads them: a run
needs the model's own folder.

Each file holds the published architecture of its model (the hub's ``config.json``, sizes and
dtype); an instruct or base variant (``-Instruct``, ``-Base``, ``Meta-Llama-...``) has the same
architecture, and so has Llama-3.3-70B as Llama-3.1-70B.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BUNDLED", "MODEL_CONFIGS", "bundled_folder", "bundled_model", "bundled_names"]

MODEL_CONFIGS = Path(__file__).with_name("model_configs")
"""The folder of the bundled configs: one folder per model, holding its ``config.json``."""

BUNDLED = {
    "qwen3-0.6b": "Qwen/Qwen3-0.6B",
    "qwen3-1.7b": "Qwen/Qwen3-1.7B",
    "qwen3-4b": "Qwen/Qwen3-4B",
    "qwen3-8b": "Qwen/Qwen3-8B",
    "qwen3-14b": "Qwen/Qwen3-14B",
    "qwen3-32b": "Qwen/Qwen3-32B",
    "llama-3.2-1b": "meta-llama/Llama-3.2-1B",
    "llama-3.2-3b": "meta-llama/Llama-3.2-3B",
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B",
    "llama-3.1-70b": "meta-llama/Llama-3.1-70B",
}
"""Each bundled folder's model, by its hub id."""

_SAME_ARCHITECTURE = {"llama-3.3-70b": "llama-3.1-70b"}
_VARIANTS = ("-instruct", "-base")


def bundled_model(path: str | Path) -> str | None:
    """The bundled folder named by ``path``'s last part, case aside (``Qwen/Qwen3-8B``,
    ``/models/qwen3-8b``, ``meta-llama/Llama-3.1-8B-Instruct``), or ``None``: no bundled
    config is that model's."""
    name = Path(path).name.lower().removeprefix("meta-")
    for suffix in _VARIANTS:
        name = name.removesuffix(suffix)
    name = _SAME_ARCHITECTURE.get(name, name)
    return name if name in BUNDLED else None


def bundled_folder(name: str) -> Path:
    """The folder holding the bundled ``config.json`` of ``name`` (a key of :data:`BUNDLED`)."""
    return MODEL_CONFIGS / name


def bundled_names() -> str:
    """The bundled models' names, for a message (``Qwen3-0.6B, ..., Llama-3.1-70B``)."""
    return ", ".join(hub.rsplit("/", 1)[-1] for hub in BUNDLED.values())
