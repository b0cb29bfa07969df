"""A newcomer's second hour (issue #58), rows N1, N8 and N9: real models, plans and output.

- N1: the README's ``teamtr plan --config gpu.yaml --devices 1x80GiB`` exited 2 with "/models/
  Qwen3-8B is not a directory", once per agent, and so did a hub id (``Qwen/Qwen3-8B``). Now a
  model that is not on this machine is planned from the ``config.json`` teamtr keeps of the
  model its path names (Qwen3 0.6B-32B, Llama 3.x 1B-70B, in ``trainers/run/model_configs/``,
  shipped as package data), the plan says so, a path naming none is refused once with the forms
  the plan takes, and ``teamtr train``'s check still needs the model's folder. (The README line
  itself runs as written in ``tests/test_readme.py``.)
- N8: on 80 columns and no terminal, ``teamtr learners`` cut ids ("teamtr/NaiveSequentia…")
  and ``teamtr plan`` split its headers ("weight s"). Ids, numbers and headers are now whole.
- N9: transformers' "Loading weights" bars printed with ``progress=False``; a run with its
  progress off now loads and writes its models without them, and leaves them as they were.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import shutil
import sys
from pathlib import Path

import pytest

from teamtr_cli import main
from teamtr_core.errors import ConfigError
from trainers.run.bundled_models import BUNDLED, MODEL_CONFIGS, bundled_folder
from trainers.run.checks import env_factory
from trainers.run.config_file import load_train_config
from trainers.run.memory_model import ModelShape

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the venv is 3.11+
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "examples" / "gpu.yaml"
PAPER = ROOT / "benchmarks" / "configs" / "paper_qwen3_8b.yaml"

# -- N1: a model that is not here ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "devices", "model"),
    [
        ("/models/Qwen3-8B", "1x80GiB", "Qwen3-8B"),  # the README's config as written
        ("qwen3-8b", "1x80GiB", "Qwen3-8B"),
        ("Qwen/Qwen3-8B", "1x80GiB", "Qwen3-8B"),
        ("meta-llama/Llama-3.1-8B-Instruct", "1x80GiB", "Llama-3.1-8B"),
        ("/models/Llama-3.3-70B-Instruct", "1x400GiB", "Llama-3.1-70B"),
    ],
)
def test_n1_a_model_not_here_plans_from_teamtr_s_config_json_of_it(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    path: str,
    devices: str,
    model: str,
) -> None:
    """N1: a checkpoint path on the GPU machine, a folder name or a hub id (an instruct variant,
    Llama-3.3 as 3.1) plans from the bundled ``config.json``, and the plan says so, once."""
    monkeypatch.chdir(tmp_path)  # a relative name is not a folder here
    plan = tmp_path / "plan.json"
    argv = ["plan", "--config", str(GPU), "--devices", devices, "--json", str(plan)]
    assert main([*argv, "--set", f"team.default.path={path}"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    note = f"solver, critic, aggregator: planned from teamtr's bundled config.json of {model}"
    assert out.count(note) == 1, out
    assert "every device holds its plan" in out
    written = json.loads(plan.read_text())
    hub = next(h for h in BUNDLED.values() if h.endswith(f"/{model}"))
    assert written["bundled"] == dict.fromkeys(("solver", "critic", "aggregator"), hub)
    assert written["unplanned"] == {}


def test_n1_a_bare_config_json_folder_plans_and_an_unknown_path_says_what_plan_takes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """N1: a folder holding only ``config.json`` plans from it (not from a bundled one); a path
    that is not here and names no bundled model is refused once, not once per agent, with the
    forms the plan takes and every bundled name."""
    bare = tmp_path / "my-llama"
    bare.mkdir()
    shutil.copy(bundled_folder("llama-3.2-1b") / "config.json", bare / "config.json")
    argv = ["plan", "--config", str(GPU), "--devices", "1x80GiB"]
    assert main([*argv, "--set", f"team.default.path={bare}"]) == 0
    out = capsys.readouterr().out
    assert "bundled" not in out and "every device holds its plan" in out
    assert main([*argv, "--set", "team.default.path=/models/NoSuchModel-7B"]) == 2
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert err.count("/models/NoSuchModel-7B") == 1, err  # one line for the three agents
    for expected in (
        "Invalid memory plan (1 problem(s))",
        "/models/NoSuchModel-7B (the model of solver, critic, aggregator) is not on this machine",
        "a folder holding just its config.json (as benchmarks/configs/qwen3-8b does)",
        "--set team.default.path=Qwen/Qwen3-8B",
        "Qwen3-0.6B, Qwen3-1.7B, Qwen3-4B, Qwen3-8B, Qwen3-14B, Qwen3-32B, Llama-3.2-1B, "
        "Llama-3.2-3B, Llama-3.1-8B, Llama-3.1-70B",
    ):
        assert expected in err, (expected, err)
    assert "Traceback" not in err and "is not a directory" not in err and captured.out == ""


def test_n1_a_run_s_memory_check_still_needs_the_model_s_folder() -> None:
    """N1: the bundled configs are the plan's alone. ``teamtr train``'s memory check (and its
    team check before it) refuse a model path that is not a folder here, so a run never takes
    a bundled ``config.json`` for a model it could load."""
    from trainers.run.memory_plan import check_memory, plan_memory

    config = load_train_config(GPU, ["runner.check_memory=true"])
    env = env_factory(config, "train")()
    for check in (lambda: check_memory(config, env), lambda: plan_memory(config, env)):
        with pytest.raises(ConfigError) as caught:
            check()
        assert "agents.solver.path: /models/Qwen3-8B is not a directory" in str(caught.value)
        assert "give a local model folder (its config.json, tokenizer and weights" in str(
            caught.value
        )


# Published sizes (the model cards): total parameters, and without the embeddings (Qwen3).
PUBLISHED = {
    "qwen3-0.6b": (0.6e9, 0.44e9),
    "qwen3-1.7b": (1.7e9, 1.4e9),
    "qwen3-4b": (4.0e9, 3.6e9),
    "qwen3-8b": (8.2e9, 6.95e9),
    "qwen3-14b": (14.8e9, 13.2e9),
    "qwen3-32b": (32.8e9, 31.2e9),
    "llama-3.2-1b": (1.24e9, None),
    "llama-3.2-3b": (3.21e9, None),
    "llama-3.1-8b": (8.03e9, None),
    "llama-3.1-70b": (70.6e9, None),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_n1_each_bundled_config_is_its_published_architecture_and_ships(name: str) -> None:
    """N1: every bundled ``config.json`` gives the sizes the plan reads, its parameter count
    matches the model card's, and ``pyproject.toml`` ships it as package data."""
    data = json.loads((bundled_folder(name) / "config.json").read_text())
    for key in (
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "vocab_size",
        "max_position_embeddings",
        "tie_word_embeddings",
        "torch_dtype",
    ):
        assert key in data, key
    assert data["torch_dtype"] == "bfloat16"
    shape = ModelShape.from_folder(bundled_folder(name))
    total, body = PUBLISHED[name]
    assert shape.parameters == pytest.approx(total, rel=0.015)
    if body is not None:
        embeddings = shape.vocab * shape.hidden * (1 if shape.tied else 2)
        assert shape.parameters - embeddings == pytest.approx(body, rel=0.015)
    assert set(BUNDLED) == set(PUBLISHED) == {p.name for p in MODEL_CONFIGS.iterdir() if p.is_dir()}
    shipped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    file = (bundled_folder(name) / "config.json").relative_to(ROOT / "trainers").as_posix()
    assert any(fnmatch.fnmatch(file, p) for p in shipped["package-data"]["trainers"]), file
    if name == "qwen3-8b":  # the benchmark's copy is the same architecture
        bench = ROOT / "benchmarks" / "configs" / "qwen3-8b" / "config.json"
        assert json.loads(bench.read_text()) == data


# -- N8: ids and headers whole on 80 columns, piped -------------------------------------------------


def _listed_ids(command: str) -> list[str]:
    if command == "learners":
        from trainers.learners.registry import registry as learners

        return list(learners)
    from teamtr_env.registration import registry

    return list(registry)


@pytest.mark.parametrize(
    "argv",
    [
        ["learners"],
        ["tasks"],
        ["plan", "--config", str(GPU), "--devices", "1x80GiB"],
        ["plan", "--config", str(PAPER), "--devices", "8x80GiB", "--set", "runner.agent_shards=2"],
    ],
    ids=["learners", "tasks", "plan", "plan-ranks"],
)
def test_n8_listings_never_cut_an_id_or_split_a_header_on_80_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    """N8: output to a pipe (pytest's capture) at ``COLUMNS=80``: every id is printed whole on
    one line, no cell ends in an ellipsis, every header is one whole word or phrase, and no
    line is wider than 80."""
    monkeypatch.setenv("COLUMNS", "80")
    main(argv)  # the two-rank plan does not fit (exit 2): its table is printed all the same
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "…" not in out
    assert max(len(line) for line in lines) <= 80
    if argv[0] == "plan":
        headers = [
            "device",
            "agent",
            "weights",
            "grads",
            "optim",
            "snap",
            "ref",
            "activ",
            "engine",
            "peak",
        ]
        assert any(line.split() == headers for line in lines), out
        assert any(line.split() == ["device", "capacity", "plan", "verdict"] for line in lines)
        ids = ["solver", "critic", "aggregator"]
        if "runner.agent_shards=2" in argv:
            ids = [f"{a} (rank" for a in ids]
    else:
        ids = _listed_ids(argv[0])
        header = next(line for line in lines if "┃ id " in line)
        if argv[0] == "learners":
            assert "┃ short name " in header
    for name in ids:
        assert any(name in line for line in lines), (name, out)


# -- N9: no transformers bars when the run's progress is off ----------------------------------------


def test_n9_a_run_with_progress_off_builds_its_models_without_transformers_bars(
    capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """N9: the demo team (three tiny models written once and loaded) with ``progress: false``
    prints nothing to stderr, even where transformers' bars are on (a notebook's default; the
    ``teamtr`` command turns them off for itself), and leaves them on after; with progress on
    the same load shows transformers' "Loading weights" bar (the check sees bars)."""
    hf_logging = pytest.importorskip("transformers.utils.logging")
    from trainers.run.team_eval import build_policies

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()
    try:
        config = load_train_config(None, ["progress=false"])
        env = env_factory(config, "train")()
        capfd.readouterr()
        policies = build_policies(config, env, tmp_path)
        captured = capfd.readouterr()
        assert sorted(policies) == sorted(env.possible_agents)
        assert (tmp_path / "models" / "tiny" / "config.json").is_file()
        assert captured.err == "", captured.err
        assert hf_logging.is_progress_bar_enabled()  # as it was before the run
        build_policies(dataclasses.replace(config, progress=True), env, tmp_path)
        assert "Loading weights" in capfd.readouterr().err
    finally:
        if not was_on:
            hf_logging.disable_progress_bar()
