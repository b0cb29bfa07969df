"""benchmarks/update_speed.py: TRL at teamtr's settings (every option whose default differs, the
effective values in the JSON), the generation tokens/s of both, and the optional peers."""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
import torch
from fresh import run_fresh

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("update_speed")


def test_trl_runs_at_teamtrs_settings(bench: ModuleType) -> None:
    settings = bench.TRL_SETTINGS
    assert settings["bf16"] is False and settings["gradient_checkpointing"] is False
    assert settings["num_iterations"] == 1 and settings["beta"] == 0.0
    assert settings["lr_scheduler_type"] == "constant" and settings["top_k"] == 0
    assert set(settings) <= set(bench.TRL_REPORTED)  # every setting is read back into the JSON
    args = SimpleNamespace(bf16=False, optim=SimpleNamespace(value="adamw_torch"))
    assert bench._effective(args, ("bf16", "optim", "absent")) == {
        "bf16": False,
        "optim": "adamw_torch",
        "absent": None,
    }


def test_the_settings_are_valid_grpo_config_options(bench: ModuleType) -> None:
    trl = pytest.importorskip("trl", reason="trl is not installed (.venv/bin/pip install trl)")
    settings = bench.TRL_SETTINGS
    config = trl.GRPOConfig(output_dir="unused", use_cpu=True, report_to="none", **settings)
    assert bench._effective(config, tuple(settings)) == settings


def test_generation_is_timed_and_counted_to_the_first_end_token(bench: ModuleType) -> None:
    class Model:
        def generate(self, input_ids: torch.Tensor, **kwargs: object) -> torch.Tensor:
            new = torch.tensor([[5, 9, 2, 0], [5, 5, 5, 5]])  # 9 ends the first: 2 tokens, 4
            return torch.cat([input_ids, new], dim=1)

    model, clock = Model(), bench.GenerateClock(9)
    clock.wrap(model)
    out = model.generate(input_ids=torch.zeros((2, 3), dtype=torch.long))
    assert out.shape == (2, 7) and clock.tokens == 6 and clock.calls == 1
    assert clock.seconds > 0
    clock.unwrap()
    assert "generate" not in model.__dict__  # the class's method again


@pytest.mark.slow
def test_a_short_run_writes_both_peers_sections_and_generation_rates(tmp_path: Path) -> None:
    out = tmp_path / "speed.json"
    cmd = [sys.executable, str(ROOT / "benchmarks/update_speed.py"), "--steps", "1"]
    cmd += ["--multi-turn-problems", "0", "--flip-updates", "0", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert result["gen_tokens_per_s"]["teamtr"] > 0
    for peer, module in (("trl", "trl"), ("comlrl", "comlrl")):
        installed = importlib.util.find_spec(module) is not None
        assert (result[peer] is not None) == installed, peer
        if not installed:
            assert f"{'TRL' if peer == 'trl' else 'CoMLRL'} arm skipped" in proc.stdout
    if result["trl"] is not None:
        assert result["trl"]["settings"]["bf16"] is False
        assert result["trl"]["settings"]["gradient_checkpointing"] is False
        assert result["gen_tokens_per_s"]["trl"] > 0 and result["ratio_vs_trl"] > 0


def test_trl_gets_the_chat_template_teamtr_renders(bench: ModuleType, tiny_model_dir: Path) -> None:
    """A tokenizer with a chat template (a real instruct model): TRL's prompts are
    conversational, and rendered as TRL renders them (the template with the generation prompt)
    they are the token ids teamtr's codec gives the same context; without a template, the plain
    text. Rewards read the text back from either form."""
    from transformers import AutoTokenizer

    from adapters.codec import PromptCodec

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert bench.trl_prompts(["1+2=?"], tokenizer) == ["1+2=?"]
    tokenizer.chat_template = (
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    (prompt,) = bench.trl_prompts(["1+2=?"], tokenizer)
    assert prompt == [{"role": "user", "content": "1+2=?"}]
    rendered = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)
    ids = (
        rendered["input_ids"]
        if isinstance(rendered, dict) or hasattr(rendered, "keys")
        else rendered
    )
    assert list(ids) == PromptCodec(tokenizer, 512).prompt_ids("1+2=?")
    assert bench.trl_text(prompt) == "1+2=?" and bench.trl_text("Answer: 3") == "Answer: 3"
    assert bench.trl_text([{"role": "assistant", "content": "Answer: 3"}]) == "Answer: 3"


@pytest.mark.xdist_group("fresh")  # tests/fresh.py's fork server: one worker starts it
def test_another_batch_needs_the_comlrl_section_off(tmp_path: Path) -> None:
    """--prompts/--generations change every row's batch; CoMLRL's section runs at its own, so the
    two together are refused (exit 2) before anything runs."""
    cmd = [sys.executable, str(ROOT / "benchmarks/update_speed.py"), "--prompts", "8"]
    proc = run_fresh(cmd, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and "need --comlrl-steps 0" in proc.stderr
