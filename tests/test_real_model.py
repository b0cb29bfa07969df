"""The real-model configs (``examples/real_smollm2*.yaml``): they load, name the folder that
``teamtr models get`` writes, and (slow) one TeamTR stage trains SmolLM2-135M-Instruct, fetched
by the same command CI and a user run."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from adapters.fetch import default_out
from adapters.team import check_team, team_config_from_dict
from teamtr_cli import main
from teamtr_core.errors import ConfigError
from trainers.run.config_file import load_train_config

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ("examples/real_smollm2.yaml", "examples/real_smollm2_full.yaml")


@pytest.mark.parametrize("name", CONFIGS)
def test_the_real_model_configs_name_the_folder_models_get_writes(name: str) -> None:
    """Each config is a valid training config of the Convention relay whose agents load the
    folder ``teamtr models get smollm2-135m-instruct`` writes by default, with a short,
    reported behaviour-cloning warm start; the LoRA layout shares one frozen base."""
    config = load_train_config(ROOT / name)
    assert config.task == "teamtr/Convention-v0"
    assert config.team is not None and config.team.default is not None
    assert config.team.default.path == str(default_out("smollm2-135m-instruct"))
    assert config.sft is not None and config.sft.steps <= 50
    lora = config.team.default.lora
    assert (lora is not None and config.team.shared_base) == name.endswith("smollm2.yaml")
    text = (ROOT / name).read_text()
    assert "teamtr models get smollm2-135m-instruct" in text


def test_a_missing_model_folder_named_after_a_known_model_says_how_to_fetch_it(
    tmp_path: Path,
) -> None:
    """The config's folder before `teamtr models get`: the refusal gives the command that writes
    it; a folder of another name gets no such hint."""
    missing = tmp_path / "models" / "smollm2-135m-instruct"
    config = team_config_from_dict(
        {
            "default": {"backend": "hf", "path": str(missing)},
            "agents": {"receiver": {"backend": "hf", "path": str(tmp_path / "other")}},
        }
    )
    with pytest.raises(ConfigError) as info:
        check_team(config, ["sender", "receiver"])
    sender, receiver = info.value.errors
    assert sender.endswith(
        f"fetch it with `teamtr models get smollm2-135m-instruct --out {missing}`"
    )
    assert "teamtr models get" not in receiver


@pytest.fixture(scope="module")
def smollm2() -> Path:
    """SmolLM2-135M-Instruct, fetched (or found) by the command a user runs."""
    out = ROOT / default_out("smollm2-135m-instruct")
    assert main(["models", "get", "smollm2-135m-instruct", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def one_stage(
    request: pytest.FixtureRequest, smollm2: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """Each real-model config cut to two warm-start steps, one stage and 8 held-out problems
    (about 80 s on 2 cores with LoRA)."""
    run = tmp_path_factory.mktemp("real") / "run"
    overrides = {
        "sft.steps": 2,
        "sft.problems": 32,
        "schedule.stages": 1,
        "eval.problems": 8,
        "eval.k": 1,
        "plot": "false",
    }
    sets = [arg for key, value in overrides.items() for arg in ("--set", f"{key}={value}")]
    argv = ["train", "--config", str(ROOT / request.param), "--run-dir", str(run), *sets]
    assert main(argv) == 0
    return run


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.xdist_group("real_model")  # one worker builds each run once
@pytest.mark.parametrize("one_stage", CONFIGS, indirect=True)
def test_one_teamtr_stage_trains_the_real_model(one_stage: Path) -> None:
    """Both agents are updated inside their trust regions (their adapters, or their own full
    weights), the KL is finite, and the run's held-out evaluation and checkpoint are written."""
    summary = json.loads((one_stage / "summary.json").read_text())
    assert summary["stages"] == 1 and summary["accepted_in_region"] is True
    assert math.isfinite(summary["kl_raw_mean"])
    assert summary["eval_problems_distinct"] == 8
    assert sorted(u["agent"] for u in summary["updates"]) == ["receiver", "sender"]
    state = torch.load(
        one_stage / "checkpoints" / "stage_0001.pt", map_location="cpu", weights_only=True
    )
    lora = "lora" in (one_stage / "config.yaml").read_text()
    assert any("lora" in key for key in _keys(state)) == lora


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.xdist_group("real_model")  # one worker builds each run once
@pytest.mark.parametrize("one_stage", CONFIGS[:1], indirect=True)
def test_the_start_table_runs_the_candidates_and_reads_the_warm_start(
    smollm2: Path, one_stage: Path, tmp_path: Path
) -> None:
    """benchmarks/real_model_start.py on 4 problems of one candidate, plus the run's
    behaviour-cloned start: the table's rows, their commands and the run's "before" figure."""
    out = tmp_path / "start.json"
    argv = [sys.executable, str(ROOT / "benchmarks" / "real_model_start.py"), "--model"]
    argv += [str(smollm2), "--problems", "4", "--only", "convention relay"]
    argv += ["--warm-run", str(one_stage), "--json", str(out)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "pretrained team on held-out problems" in done.stdout
    pretrained, warm = json.loads(out.read_text())["rows"]
    assert pretrained["name"] == "convention relay" and pretrained["problems"] == 4
    assert pretrained["command"].startswith("teamtr eval teamtr/Convention-v0 -o length=3")
    assert 0.0 <= pretrained["avg"] <= 1.0 and pretrained["k"] == 1
    before = json.loads((one_stage / "summary.json").read_text())["before"]
    assert warm["avg"] == before["eval/avg@1"] and warm["problems"] == 8


def _keys(tree: object, prefix: str = "") -> list[str]:
    """Every key path of a nested checkpoint dict."""
    if isinstance(tree, dict):
        return [k for key, value in tree.items() for k in _keys(value, f"{prefix}{key}.")]
    return [prefix]
