"""Faults of ``teamtr plan`` (issue #57's table, rows S3, S4, E5 and E6), tried as a new user who
makes mistakes would: a plan that said "fits" with the GPUs missing (S3), a ``config.json``
trusted whatever it said (S4), ``--devices`` values that ended in a traceback or grew memory
without bound (E5), and a ``--json`` path that failed only after the whole plan was computed
and printed (E6). Each now gets a clear error (exit 2, the flag, field or file named, the fix
said), every problem at once, before anything is planned where the problem is a flag's.

The paper's team (``benchmarks/configs/paper_qwen3_8b.yaml``: 3 x Qwen3-8B, an agent actor with
one GPU each) is planned from its architecture alone: nothing is loaded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from teamtr_cli import main

ROOT = Path(__file__).resolve().parents[2]
PAPER = ROOT / "benchmarks" / "configs" / "paper_qwen3_8b.yaml"
QWEN = ROOT / "benchmarks" / "configs" / "qwen3-8b"
PLAN = ["plan", "--config", str(PAPER), "--prompt-tokens", "1024"]
LORA = ["--set", "team.default.lora.r=16"]  # 28 GiB an agent: fits an 80 GiB GPU


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """Runs ``teamtr ARGV``, expects exit 2, and returns what it printed and its error (one
    line per problem: no hard wraps)."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    return captured.out, " ".join(captured.err.split())


# -- S3: a plan fails where the run would be refused ----------------------------------------------


@pytest.mark.parametrize(
    ("devices", "seen", "without"),
    [
        ("0x80GiB", "no GPU is given (--devices)", "solver, critic, aggregator"),
        ("1x200GiB", "only 1 GPU is given (--devices: cuda:0)", "critic, aggregator"),
        ("2x80GiB", "only 2 GPUs are given (--devices: cuda:0, cuda:1)", "aggregator"),
    ],
)
def test_agents_without_a_gpu_are_refused_not_put_on_the_host(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, devices: str, seen: str, without: str
) -> None:
    """S3: three agent actors asking one GPU each (``runner.agent_gpus: 1``) on fewer GPUs were
    put on the host, whose capacity was unknown, and "fit"; Ray would never place them, so the
    plan is refused as the run is. Enough GPUs fit; an unknown capacity is "not checked"."""
    argv = [*PLAN, *LORA, "--devices", devices, "--json", str(tmp_path / "plan.json")]
    out, err = _refused(argv, capsys)
    assert "3 agents need runner.agent_gpus=1 each" in err and seen in err
    assert f"no GPU for {without}." in err and "every device holds its plan" not in out
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["devices"]["cpu"]["agents"] == [] and len(plan["refused"]) == 1
    # Half a GPU each: two agent actors to a GPU, so 2 GPUs hold 3 agents and 1 GPU does not.
    half = [*PLAN, *LORA, "--set", "runner.agent_gpus=0.5", "--devices", devices]
    if devices == "2x80GiB":
        assert main(half) == 0
    else:
        assert "2 to a GPU" in _refused(half, capsys)[1]
    # Enough GPUs: fits; the host's snapshots are on a host of unknown capacity: not checked.
    host = ["--set", "trust_region.snapshot_device=cpu", "--json", str(tmp_path / "ok.json")]
    assert main([*PLAN, *LORA, "--devices", "3x80GiB", *host]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "not checked" in out and "cpu not checked: capacity unknown; --host SIZE" in out
    fits = json.loads((tmp_path / "ok.json").read_text())["devices"]
    assert fits["cpu"]["fits"] is None and fits["cuda:2"]["fits"] is True


def test_an_agent_on_a_gpu_the_plan_does_not_have_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """S3: an agent run in this process (``runner.agents: local``) on ``cuda:1`` with one GPU
    given was placed on a device of unknown capacity and "fit"; agent actors on ``cuda`` with
    ``runner.agent_gpus: 0`` were planned on the host, though ``teamtr train`` refuses them."""
    config = tmp_path / "gpu.yaml"
    config.write_text(
        "task: teamtr/Math-v0\nsft: null\nsampling: {max_new_tokens: 256}\n"
        "optim: {micro_batch_size: 1, gradient_checkpointing: true}\nteam:\n  shared_base: true\n"
        f"  default: {{backend: hf, path: {QWEN}, dtype: bfloat16, device: 'cuda:1', "
        "lora: {r: 16}}\n",
        encoding="utf-8",
    )
    argv = ["plan", "--config", str(config), "--prompt-tokens", "1024"]
    out, err = _refused([*argv, "--devices", "1x80GiB"], capsys)
    assert "agents solver, critic, aggregator are on cuda:1" in err
    assert "only 1 GPU is given (--devices: cuda:0)" in err
    assert "cuda:1" not in out and "every device holds its plan" not in out
    assert main([*argv, "--devices", "2x80GiB"]) == 0
    # Agent actors on cuda that ask Ray for no GPU see none (teamtr train refuses them too).
    no_gpu = [*PLAN, *LORA, "--devices", "3x80GiB", "--set", "runner.agent_gpus=0"]
    err = _refused(no_gpu, capsys)[1]
    assert "agents solver, critic, aggregator are on cuda" in err
    assert "runner.agent_gpus is 0" in err


# -- S4: config.json is checked, not trusted ------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "problems"),
    [
        ({"num_hidden_layers": 1e9}, ["num_hidden_layers: expected a whole number", "(a float)"]),
        (
            {"num_hidden_layers": -36, "hidden_size": -4096},
            ["num_hidden_layers: expected a whole number", "hidden_size: expected a whole number"],
        ),
        (
            {"vocab_size": True, "head_dim": "128", "tie_word_embeddings": "false"},
            ["vocab_size: expected", "true (true/false)", "head_dim: expected", '"128" (a string)'],
        ),
        ({"intermediate_size": 10**9, "num_key_value_heads": 0}, ["from 1 to 4,194,304", "got 0"]),
        ({"hidden_size": None}, ["hidden_size: expected a whole number", "got null"]),
        ({"vocab_size": "drop"}, ["vocab_size: missing"]),
    ],
)
def test_a_config_json_with_impossible_sizes_is_refused_naming_file_and_field(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    changes: dict[str, object],
    problems: list[str],
) -> None:
    """S4: ``num_hidden_layers: 1e9`` planned 6,005,111,734 GiB and "fit"; negative layers and
    width cancelled out to 82.6 GiB and "fit". Every field the plan reads is a positive integer
    within bounds (booleans and floats refused), all problems at once, each naming the file."""
    model = tmp_path / "model"
    shutil.copytree(QWEN, model)
    data = {**json.loads((model / "config.json").read_text()), **changes}
    data = {key: value for key, value in data.items() if value != "drop"}
    (model / "config.json").write_text(json.dumps(data), encoding="utf-8")
    config = tmp_path / "team.yaml"
    team = f"{{default: {{backend: hf, path: {model}, dtype: bfloat16, device: cuda}}}}"
    config.write_text(f"task: teamtr/Math-v0\nsft: null\nteam: {team}\n", encoding="utf-8")
    argv = ["plan", "--config", str(config), "--devices", "1x80GiB", "--prompt-tokens", "8"]
    out, err = _refused(argv, capsys)
    assert f"Invalid memory plan ({len(changes)} problem(s))" in err
    assert err.count(f"{model / 'config.json'}: ") == len(changes)
    for problem in problems:
        assert problem in err
    assert "fits" not in out and "Traceback" not in err
    (model / "config.json").write_text('{"hidden_size": 4', encoding="utf-8")  # cut short
    assert "is not a JSON file" in _refused(argv, capsys)[1]
    # Another architecture's names (GPT-2's): not planned, and the plan says so.
    (model / "config.json").write_text('{"n_embd": 768, "n_layer": 12}', encoding="utf-8")
    assert main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "not planned: solver, critic, aggregator:" in out and "(3 agent(s) not planned" in out


# -- E5: --devices and --host values ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--devices", "8x1.2.3GiB"], "--devices: expected NxSIZE such as 8x80GiB"),
        (["--devices", f"8x{'9' * 400}GiB"], "--devices: expected a size of at least 1 byte"),
        (["--devices", "8x0GiB"], "--devices: expected a size of at least 1 byte"),
        (["--devices", "4097x80GiB"], "--devices: expected at most 4096 GPUs, got 4097"),
        (["--devices", "100000x80GiB"], "--devices: expected at most 4096 GPUs, got 100000"),
        (["--devices", "8x80GiB", "--host", f"{'9' * 400}.5TB"], "--host: expected a size"),
    ],
)
def test_a_device_size_or_count_out_of_range_is_named(
    capsys: pytest.CaptureFixture[str], flags: list[str], expected: str
) -> None:
    """E5: ``8x1.2.3GiB`` and a size of 400 digits ended in a traceback (``ValueError``,
    ``OverflowError``); ``99999999999x80GiB`` grew memory until a ``MemoryError``. Sizes are
    read exactly and bounded (1 byte to 1024TiB), counts at 4096 GPUs; long input is cut in the
    message. (Counts of 4097 and 100000 show the cap: without it they plan, in little memory.)"""
    out, err = _refused([*PLAN, *flags], capsys)
    assert expected in err and out == "" and "Traceback" not in err
    assert len(err) < 600  # 400 digits are not echoed whole


# -- E6: --json is checked before the plan ---------------------------------------------------------


def test_a_json_path_that_cannot_be_written_is_refused_before_the_plan(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """E6: ``--json /proc/plan.json`` computed and printed the whole plan, then failed on the
    path. The path is probed first (as ``eval --out``), with the other flags' problems, and
    nothing is printed or written."""
    (tmp_path / "a file").write_text("kept", encoding="utf-8")
    for path, reason in (
        (tmp_path / "a file" / "plan.json", "is not a directory"),
        (tmp_path, "is a directory"),
    ):
        argv = [*PLAN, "--devices", "8x80GiB", "--json", str(path), "--host", "0GiB"]
        out, err = _refused(argv, capsys)
        assert out == "" and f"--json {path}: " in err and reason in err
        assert "Invalid plan (2 problem(s))" in err and "--host: expected a size" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a file"]
    assert (tmp_path / "a file").read_text(encoding="utf-8") == "kept"
