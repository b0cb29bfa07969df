"""The memory plan (``teamtr plan``, ``trainers.run.memory_plan``): model sizes from a
``config.json`` equal transformers' and peft's counts, the paper's 3 x Qwen3-8B team is refused
on 80 GB GPUs whole and fits sharded or with LoRA, ``teamtr train`` refuses a run that cannot fit
before it writes anything, and the plan's peak of an update is within 25% of the measured one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from teamtr_cli import main
from trainers.run.memory_model import ModelShape, update_peak
from trainers.run.plan_devices import Device, parse_devices, parse_size

ROOT = Path(__file__).resolve().parents[2]
PAPER = ROOT / "benchmarks" / "configs" / "paper_qwen3_8b.yaml"
PLAN = ["plan", "--config", str(PAPER), "--devices", "8x80GiB", "--prompt-tokens", "1024"]


def test_model_sizes_come_from_the_config_alone(tiny_model_dir: Path) -> None:
    from adapters.hf import HFPolicy
    from teamtr_core.policy import LoraSettings

    shape = ModelShape.from_folder(tiny_model_dir)
    policy = HFPolicy.from_pretrained(tiny_model_dir)
    assert shape.parameters == sum(p.numel() for p in policy.model.parameters())
    lora = LoraSettings(r=4, target_modules=("q_proj", "v_proj", "down_proj"))
    adapted = HFPolicy.from_pretrained(tiny_model_dir, lora=lora)
    trainable = sum(p.numel() for p in adapted.parameters())
    assert shape.lora_parameters(4, lora.target_modules) == trainable
    qwen = ModelShape.from_folder(ROOT / "benchmarks" / "configs" / "qwen3-8b")
    assert 8.18e9 < qwen.parameters < 8.2e9  # Qwen3-8B: 8.19B (its q/k norms left out)


def test_device_specs_are_parsed_and_bad_ones_named() -> None:
    devices = parse_devices("2x80GiB", host=parse_size("512GB"))
    assert devices["cuda:1"] == Device("cuda:1", 80 * 2**30)
    assert devices["cpu"].capacity == 512 * 10**9
    for bad in ("80GiB", "2x", "x80GiB", "2x80 apples"):
        with pytest.raises(Exception, match="expected NxSIZE"):
            parse_devices(bad)


def test_an_update_peaks_at_its_backward_pass_or_its_step() -> None:
    shape = ModelShape(
        hidden=64, layers=2, intermediate=256, vocab=10, heads=2, kv_heads=2, head_dim=32
    )
    on = update_peak(shape, dtype="float32", trainable=shape.parameters, tokens=10)
    off = update_peak(shape, dtype="float32", trainable=shape.parameters, tokens=10, snapshot=False)
    params = shape.parameters * 4
    assert on.snapshot == 3 * params and off.snapshot == 0  # one copy of params and 2 moments
    assert on.peak(1) == params * 4 + on.snapshot  # the step: weights, 2 moments, grads, snapshot
    sharded = update_peak(shape, dtype="float32", trainable=shape.parameters, tokens=10, shards=2)
    assert sharded.weights == params // 2 and sharded.optimizer == params
    assert sharded.gathered == shape.layer_parameters * 4 and sharded.activations == on.activations


def test_the_papers_team_is_refused_whole_and_fits_sharded_or_with_lora(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """3 x Qwen3-8B, full weights in bfloat16 with AdamW and the trust region's snapshot: about
    118 GiB an agent, refused on 80 GiB GPUs with one line per GPU; two shards an agent, or LoRA
    adapters, fit."""
    assert main(PLAN) == 2
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    for gpu, agent in (("cuda:0", "solver"), ("cuda:1", "critic"), ("cuda:2", "aggregator")):
        assert f"{gpu}: the plan needs" in err and f"({agent} 118" in err
    assert "short" in err and "runner.agent_shards" in err
    assert "short by" in captured.out  # the table is printed before the refusal
    out = tmp_path / "plan.json"
    assert main([*PLAN, "--set", "runner.agent_shards=2", "--json", str(out)]) == 0
    assert "every device holds its plan" in capsys.readouterr().out
    devices = json.loads(out.read_text())["devices"]
    ranks = {(a["agent"], a["rank"]) for d in devices.values() for a in d["agents"]}
    assert ("solver", 1) in ranks and len(ranks) == 6 and devices["cuda:5"]["fits"]
    assert main([*PLAN, "--set", "team.default.lora.r=16"]) == 0
    host = [*PLAN, "--set", "trust_region.snapshot_device=cpu", "--host", "512GiB"]
    assert main([*host, "--json", str(out)]) == 0
    on_host = json.loads(out.read_text())["devices"]["cpu"]["agents"]
    assert {a["agent"] for a in on_host} == {
        f"{n} snapshot" for n in ("solver", "critic", "aggregator")
    }


def test_teamtr_train_refuses_a_run_that_cannot_fit_before_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = [
        "tiny_model.hidden_size=8192",
        "tiny_model.num_heads=64",
        "tiny_model.intermediate_size=32768",
        "tiny_model.num_layers=64",
    ]
    argv = ["train", "--run-dir", str(tmp_path / "run")]
    for setting in big:
        argv += ["--set", setting]
    assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Invalid memory plan" in err and "cpu: the plan needs" in err
    assert "runner.check_memory: false runs anyway" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.parametrize(("hidden", "layers"), [(256, 4), (512, 6), (768, 8)])
def test_the_planned_peak_of_an_update_is_within_a_quarter_of_the_measured(
    tmp_path: Path, hidden: int, layers: int
) -> None:
    """Two updates of a fixed batch with the trust region on, in a fresh process: the second's
    peak resident memory over the memory before the model was loaded, against the plan's."""
    done = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("helpers_memory.py")),
            "plan",
            str(tmp_path / "model"),
            str(hidden),
            str(layers),
        ],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"},
    )
    measured, predicted = (int(x) for x in done.stdout.split()[-2:])
    assert 0.75 * measured <= predicted <= 1.25 * measured, (measured, predicted)


def test_what_a_gang_cannot_train_yet_is_refused_before_anything_starts(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gang = ["--set", "runner.agents=ray", "--set", "runner.agent_shards=2"]
    argv = ["train", "--run-dir", str(tmp_path / "run"), *gang, "--set", "rollout.engine=vllm"]
    argv += ["--set", "rollout.in_process=true"]
    assert main(argv) == 2
    assert "would join the gang's process group" in capsys.readouterr().err
    team = f"team={{default: {{backend: hf, path: {tiny_model_dir}, lora: {{r: 4}}}}}}"
    assert main(["train", "--run-dir", str(tmp_path / "run"), *gang, "--set", team]) == 2
    assert "shard full-weight agents only" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_prompts_are_counted_as_the_policy_renders_them(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """A model folder with a tokenizer: the plan counts the longest context in that tokenizer's
    tokens with its chat template (as HFPolicy renders it), so an instruct model's template
    (here 40 characters of markup around the context) is counted; with the template turned
    off (``chat_template: false``), the plain context. A micro-batch of one message holds the
    prompt and its completion."""
    import shutil

    import teamtr_env
    from adapters.codec import PromptCodec
    from teamtr_core.config import from_dict
    from trainers.config import TrainConfig
    from trainers.run.memory_plan import plan_memory

    folder = tmp_path / "chat"
    shutil.copytree(tiny_model_dir, folder)
    settings = json.loads((folder / "tokenizer_config.json").read_text())
    settings["chat_template"] = (
        "{% for m in messages %}<|system|>be brief<|user|>{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))

    options = {"agents": ["solver"], "max_turns": 1, "system_prompts": {"solver": ""}}

    def planned(chat_template: bool | None) -> int:
        agent = {"backend": "hf", "path": str(folder), "chat_template": chat_template}
        config = from_dict(
            TrainConfig,
            {
                "task": "teamtr/Arith-v0",
                "task_options": options,
                "team": {"default": agent},
                "sampling": {"max_new_tokens": 4},
                "schedule": {"problems_per_batch": 1, "group_size": 1},
            },
        )
        env = teamtr_env.make(config.task, **config.task_options)
        return plan_memory(config, env).tokens["solver"]

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    env = teamtr_env.make("teamtr/Arith-v0", **options)
    longest = {}
    for template in (True, False):
        codec = PromptCodec(tokenizer, 1 << 20, template)
        counts = []
        for seed in range(4):
            env.reset(seed=seed)
            counts.append(len(codec.prompt_ids(env.context(env.agent_selection))))
        longest[template] = max(counts)
    assert longest[True] > longest[False] + 30  # the template's markup is counted
    assert planned(None) == longest[True] + 4
    assert planned(False) == longest[False] + 4
