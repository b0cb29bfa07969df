"""Shared fixtures: a tiny local model built once per test session (no network)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised 0.55M-parameter char-level Llama saved with save_pretrained."""
    from adapters.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def pytest_configure(config: pytest.Config) -> None:
    """One torch thread: the tiny models gain little from two, and on a 2-core machine two torch
    threads stall badly whenever another process holds a core (timings vary 10x)."""
    try:
        import torch
    except ImportError:  # model-free parts of the suite still run
        return
    torch.set_num_threads(1)
