"""Team configs: validation, path resolution, building policies, and `teamtr eval --team` driving
three tiny-model HFPolicy agents end to end."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

import teamtr_env
from adapters.hf import HFPolicy
from adapters.scripted import ConstantPolicy, ScriptedExpert
from adapters.team import (
    TeamConfig,
    build_team,
    check_team,
    load_team_config,
    team_config_from_dict,
    team_sampling,
)
from teamtr_cli import main
from teamtr_core.config import to_dict
from teamtr_core.config_schema import json_schema
from teamtr_core.policy import SamplingParams
from teamtr_env import ConfigError

AGENTS = ["solver", "critic", "aggregator"]


def write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def test_schema_lists_backends_and_lora() -> None:
    schema = json_schema(TeamConfig)
    agent = schema["properties"]["agents"]["additionalProperties"]
    assert agent["properties"]["backend"]["enum"] == [
        "hf",
        "vllm",
        "scripted",
        "random",
        "constant",
        "tabular",
    ]
    assert "r" in json.dumps(agent["properties"]["lora"])
    assert agent["properties"]["init"]["enum"] == ["uniform", "random"]


def test_relative_paths_resolve_against_the_config_folder(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    (tmp_path / "cfg").mkdir()
    cfg = write(tmp_path / "cfg" / "team.yaml", {"default": {"backend": "hf", "path": "../m"}})
    config = load_team_config(cfg)
    assert Path(config.default.path).resolve() == (tmp_path / "m").resolve()
    absolute = write(
        tmp_path / "abs.yaml", {"default": {"backend": "hf", "path": str(tiny_model_dir)}}
    )
    assert load_team_config(absolute).default.path == str(tiny_model_dir)


def test_every_problem_reported_at_once(tmp_path: Path) -> None:
    cfg = write(
        tmp_path / "team.yaml",
        {
            "agents": {"solver": {"backend": "hff", "lora": {"rr": 2}}, "critic": {"device": 3}},
            "samplng": {},
        },
    )
    with pytest.raises(ConfigError) as err:
        load_team_config(cfg)
    text = str(err.value)
    assert "agents.solver.backend: 'hff' is not one of" in text
    assert "'rr'" in text and "did you mean 'r'" in text
    assert "agents.critic.device: expected string" in text
    assert "'samplng'" in text and "did you mean 'sampling'" in text


def test_team_level_checks(tiny_model_dir: Path) -> None:
    config = team_config_from_dict(
        {
            "agents": {
                "solver": {"backend": "hf"},
                "judge": {"backend": "random"},
                "critic": {"backend": "scripted", "lora": {"r": 2}},
                "aggregator": {"backend": "hf", "path": "/no/such/dir"},
            }
        }
    )
    with pytest.raises(ConfigError) as err:
        build_team(config, AGENTS)
    errors = err.value.errors
    assert any("['judge'] are not on the team" in p for p in errors)
    assert any("agents.solver: backend 'hf' needs 'path'" in p for p in errors)
    assert any("agents.critic: lora/adapter_path need backend" in p for p in errors)
    assert any("/no/such/dir is not a directory" in p for p in errors)
    with pytest.raises(ConfigError, match="agent 'critic' has no policy"):
        build_team(
            team_config_from_dict({"agents": {"solver": {"backend": "random"}}}),
            ["solver", "critic"],
        )


def test_a_vllm_agent_with_a_saved_adapter_needs_the_shared_engine(tmp_path: Path) -> None:
    """A ``vllm`` agent serves ``adapter_path`` only from the multi-LoRA engine of
    ``shared_base: true``; without it the adapter would be silently left out."""
    agent = {"backend": "vllm", "path": str(tmp_path), "adapter_path": str(tmp_path / "a")}
    config = team_config_from_dict({"agents": {"solver": agent}})
    with pytest.raises(ConfigError, match="agents.solver: backend 'vllm' serves a saved adapter"):
        check_team(config, ["solver"])
    check_team(replace(config, shared_base=True), ["solver"])


def test_a_bad_error_rate_is_listed_with_every_other_team_problem(tmp_path: Path, capsys) -> None:
    """An error_rate outside [0, 1] was a ValueError traceback from the first scripted agent
    built, never listed with the team's other problems."""
    from tests.teamtr_env.toy_tasks import CountdownTask

    config = team_config_from_dict(
        {
            "agents": {
                "solver": {"backend": "scripted", "error_rate": 2},
                "critic": {"backend": "scripted", "error_rate": -0.5},
                "judge": {"backend": "random"},
            }
        }
    )
    with pytest.raises(ConfigError) as err:
        build_team(config, AGENTS, teamtr_env.make("teamtr/Arith-v0").task)
    assert err.value.errors == [
        "agents ['judge'] are not on the team ['solver', 'critic', 'aggregator']",
        "agents.solver.error_rate: must be in [0, 1], got 2.0",
        "agents.critic.error_rate: must be in [0, 1], got -0.5",
        "agent 'aggregator' has no policy: add agents.aggregator or a 'default'",
    ]
    no_expert = team_config_from_dict({"default": {"backend": "scripted"}})
    with pytest.raises(ConfigError, match="agents.solver: backend 'scripted' needs a task with"):
        build_team(no_expert, ["solver"], CountdownTask())
    cfg = write(tmp_path / "team.yaml", {"default": {"backend": "scripted", "error_rate": 2}})
    assert main(["eval", "teamtr/Arith-v0", "--team", str(cfg), "--no-progress"]) == 2
    assert "agents.solver.error_rate: must be in [0, 1], got 2.0" in capsys.readouterr().err


def test_build_team_mixed_backends_and_sampling_precedence(tiny_model_dir: Path) -> None:
    task = teamtr_env.make("teamtr/Arith-v0").task
    config = team_config_from_dict(
        {
            "sampling": {"temperature": 0.7, "max_new_tokens": 20},
            "default": {"backend": "hf", "path": str(tiny_model_dir), "lora": {"r": 2}},
            "agents": {
                "critic": {
                    "backend": "scripted",
                    "error_rate": 0.5,
                    "sampling": {"temperature": 0.3},
                },
                "aggregator": {"backend": "constant", "text": "Answer: 1"},
            },
        }
    )
    policies, sampling = build_team(config, AGENTS, task, max_new_tokens=5)
    assert isinstance(policies["solver"], HFPolicy) and policies["solver"].is_lora
    assert isinstance(policies["critic"], ScriptedExpert) and policies["critic"].error_rate == 0.5
    assert isinstance(policies["aggregator"], ConstantPolicy)
    assert sampling["solver"] == SamplingParams(temperature=0.7, max_new_tokens=5)
    assert sampling["critic"] == SamplingParams(temperature=0.3, max_new_tokens=5)


def test_an_agents_sampling_inherits_the_keys_it_leaves_out_from_the_teams() -> None:
    data = {
        "sampling": {"temperature": 0.7, "top_p": 0.9, "max_new_tokens": 20},
        "default": {"backend": "random"},
        "agents": {"critic": {"backend": "random", "sampling": {"temperature": 0.3}}},
    }
    config = team_config_from_dict(data)
    sampling = team_sampling(config, AGENTS)
    team = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=20)
    assert sampling["solver"] == sampling["aggregator"] == team
    assert sampling["critic"] == SamplingParams(temperature=0.3, top_p=0.9, max_new_tokens=20)
    assert team_config_from_dict(to_dict(config)) == config  # the saved form loads the same
    # A config without sampling sections: the base (a training run's), else the defaults.
    bare = team_config_from_dict({"default": {"backend": "random"}})
    base = SamplingParams(temperature=1.0, max_new_tokens=7)
    assert set(team_sampling(bare, AGENTS, base=base).values()) == {base}
    assert set(team_sampling(bare, AGENTS).values()) == {SamplingParams()}
    assert team_sampling(bare, AGENTS, temperature=0.0)["solver"].temperature == 0.0
    with pytest.raises(ConfigError, match="unknown sampling keys"):
        team_sampling(bare, AGENTS, temprature=1.0)


def test_old_per_agent_sampling_keys_are_refused_naming_the_new_keys() -> None:
    """The per-agent ``temperature`` / ``max_new_tokens`` of earlier versions do not load: each is
    a problem naming its new key, reported with the config's other problems (and not a second
    time as an unknown key)."""
    old = {
        "default": {"backend": "random", "temperature": 0.3},
        "agents": {"solver": {"backend": "random", "max_new_tokens": 9}},
        "sampling": {"seed": 3},
    }
    with pytest.raises(ConfigError) as excinfo:
        team_config_from_dict(old)
    assert excinfo.value.errors == [
        "agents.solver.max_new_tokens was renamed to agents.solver.sampling.max_new_tokens",
        "default.temperature was renamed to default.sampling.temperature",
        "sampling.seed: the runner derives a seed per call from the run's seed; remove it",
    ]
    new = {"default": {"backend": "random", "sampling": {"temperature": 0.3, "max_new_tokens": 9}}}
    assert team_config_from_dict(new).default.sampling == SamplingParams(  # type: ignore[union-attr]
        temperature=0.3, max_new_tokens=9
    )
    with pytest.raises(ConfigError, match="temperature must be >= 0"):
        team_config_from_dict({"sampling": {"temperature": -1}})


def test_separate_parameters_per_agent(tiny_model_dir: Path) -> None:
    config = team_config_from_dict({"default": {"backend": "hf", "path": str(tiny_model_dir)}})
    policies, _ = build_team(config, AGENTS)
    params = [next(iter(p.parameters())) for p in policies.values()]
    assert len({id(p) for p in params}) == 3


def test_cli_eval_with_three_tiny_model_agents(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = write(
        tmp_path / "team.yaml",
        {
            "sampling": {"temperature": 1.0, "max_new_tokens": 8},
            "default": {"backend": "hf", "path": str(tiny_model_dir)},
        },
    )
    out = tmp_path / "r.json"
    argv = [
        "eval",
        "teamtr/Arith-v0",
        "--team",
        str(cfg),
        "--k",
        "2",
        "--problems",
        "3",
        "--no-progress",
        "--out",
        str(out),
        "--transcripts",
        str(tmp_path / "t.jsonl"),
    ]
    assert main(argv) == 0
    report = json.loads(out.read_text())
    assert report["team"] == str(cfg) and report["policy"] is None
    assert report["stats"]["total_policy_calls"] == 3 == report["stats"]["steps"]
    assert report["stats"]["tokens_generated"] > 0
    episodes = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert len(episodes) == 6
    assert [m["speaker"] for m in episodes[0]["transcript"]] == AGENTS
    # An untrained model rarely ends a message within 8 tokens: the report says each agent's
    # share of cut-off messages (valid against the schema), and the console warns.
    import jsonschema

    from teamtr_env.evaluation import report_schema

    jsonschema.validate(report, report_schema())
    assert list(report["clipped_ratio"]) == AGENTS
    assert all(share > 0.2 for share in report["clipped_ratio"].values())
    printed = " ".join(capsys.readouterr().out.split())
    assert "warning: messages cut off at the token limit (no end token): solver" in printed
    assert "(max_new_tokens 8)" in printed and "raise --max-new-tokens" in printed
    scripted = ["eval", "teamtr/Arith-v0", "--k", "1", "--problems", "3", "--no-progress"]
    assert main([*scripted, "--out", str(out)]) == 0  # a scripted team is never cut off
    assert json.loads(out.read_text())["clipped_ratio"] == dict.fromkeys(AGENTS, 0.0)
    assert "token limit" not in capsys.readouterr().out


def test_cli_team_overrides_and_errors(tmp_path: Path, tiny_model_dir: Path, capsys) -> None:
    cfg = write(tmp_path / "team.yaml", {"default": {"backend": "hf", "path": str(tiny_model_dir)}})
    argv = [
        "eval",
        "teamtr/Arith-v0",
        "--team",
        str(cfg),
        "--problems",
        "1",
        "--k",
        "1",
        "--no-progress",
    ]
    assert main([*argv, "--set", "default.backend=random"]) == 0
    assert main([*argv, "--set", "default.backend=hff"]) == 2
    assert "did you mean" in capsys.readouterr().err.replace("\n", " ")
    assert main(["eval", "teamtr/Arith-v0", "--set", "a=1"]) == 2


def test_cli_build_tiny(tmp_path: Path) -> None:
    assert (
        main(
            [
                "models",
                "build-tiny",
                str(tmp_path / "m"),
                "--hidden-size",
                "32",
                "--heads",
                "2",
                "--layers",
                "1",
                "--intermediate-size",
                "64",
                "--max-positions",
                "64",
            ]
        )
        == 0
    )
    policy = HFPolicy.from_pretrained(tmp_path / "m")
    assert policy.context_window == 64
    assert (
        main(["models", "build-tiny", str(tmp_path / "x"), "--hidden-size", "30", "--heads", "4"])
        == 2
    )
