"""benchmarks/peer_comlrl.py: CoMLRL's MAGRPO beside teamtr (comlrl is not a teamtr dependency)."""

from __future__ import annotations

import builtins
import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def peer(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("peer_comlrl")


def test_comlrl_stages_is_none_without_comlrl(
    peer: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    real_import = builtins.__import__

    def no_comlrl(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "comlrl" or name.startswith("comlrl."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_comlrl)
    assert peer.comlrl_stages(tmp_path / "no-model", 1, 1) is None
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""


@pytest.mark.slow
def test_comlrl_stages_runs_magrpo_on_the_benchmark_settings(
    peer: ModuleType, tmp_path: Path
) -> None:
    pytest.importorskip(
        "comlrl", reason="comlrl is not installed (pip install comlrl; not a teamtr dependency)"
    )
    from adapters.tiny import build_tiny_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = peer.comlrl_stages(build_tiny_model(tmp_path / "tiny"), 1, 1)
    finally:
        torch.set_num_threads(threads)
    assert result is not None
    assert {"stage_s", "gen_s", "update_s", "gen_tokens_per_s", "settings"} <= set(result)
    assert result["stage_s"] > 0 and result["gen_tokens_per_s"] > 0
    assert result["rollouts"] == peer.PROMPTS * peer.GENERATIONS
    settings = result["settings"]
    assert settings["bf16"] is False
    assert settings["gradient_checkpointing"] is False
    assert settings["dtype"] == "torch.float32"
    assert settings["num_generations"] == peer.GENERATIONS
    assert settings["max_new_tokens"] == peer.NEW_TOKENS
    assert settings["temperature"] == peer.TEMPERATURE
    assert (settings["top_k"], settings["top_p"]) == (0, 1.0)
    assert settings["agent_learning_rate"] == peer.LR
    assert settings["prompts_per_update"] == peer.PROMPTS
    assert settings["optimizer_steps_per_update"] == 1
    assert settings["reference_kl_enabled"] is False and settings["reference_models"] == 0
    assert settings["wandb_initialized"] is False
    assert settings["device"] == "cpu"
