"""Whole runs on tiny models: every schedule end to end, files written, resume after a crash gives
the uninterrupted result, config errors from the CLI."""

from __future__ import annotations

import io
import json
import logging
import string
from pathlib import Path

import pytest
import torch
from helpers_trainers import CrashAfter, SimulatedCrash, TrainedRun, make_record, small
from rich.console import Console

from adapters.team import team_config_from_dict
from teamtr_cli import main
from teamtr_core.config import from_dict, to_dict
from teamtr_core.errors import ConfigError
from trainers.config import TrainConfig
from trainers.run import rundir
from trainers.run.logger import read_jsonl
from trainers.run.recipe import TrainingRecipe, load_checkpoint, run_training
from trainers.run.state import BestStage, RunState
from trainers.run.team_eval import clipped_warnings
from trainers.run.warm_start import behaviour_clone_cache


def _check_finished_run(run_dir: Path, summary: dict) -> None:
    """What every finished two-stage SMALL run with TensorBoard and the plot on leaves behind."""
    for name in (
        "metrics.jsonl",
        "curves.png",
        "summary.json",
        "config.yaml",
        "checkpoints/latest",
    ):
        assert (run_dir / name).exists(), name
    assert list((run_dir / "tb").glob("events.out.tfevents.*"))
    assert summary["stages"] == 2 and len(summary["updates"]) == 6
    assert summary["accepted_in_region"] is True
    assert {"eval/avg@2", "eval/pass@2"} <= set(summary["before"]) & set(summary["after"])
    assert summary["totals"]["rollouts"] == 2 * 3 * 2 * 2  # equal budget: n * B * G per stage
    records = read_jsonl(run_dir / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2, 2]
    assert "stage/kl_tok_mean" in records[1] and "agent/solver/beta" in records[1]
    saved = json.loads((run_dir / "summary.json").read_text())
    assert saved["paths"]["plot"].endswith("curves.png")
    assert saved["paths"]["tensorboard"].endswith("tb")


def test_a_teamtr_run_writes_every_file(trained: TrainedRun) -> None:
    _check_finished_run(trained.run_dir, trained.summary)
    assert trained.summary["learner"] == "teamtr/TeamTR-v0"


@pytest.mark.slow
@pytest.mark.parametrize("method", ["naive_sequential", "joint"])
def test_every_schedule_runs_end_to_end(method: str, tmp_path: Path) -> None:
    cfg = small(tmp_path / method, schedule__learner=method, loggers=["tensorboard"], plot=True)
    summary = run_training(cfg, console=Console(file=io.StringIO()))
    _check_finished_run(Path(cfg.run_dir), summary)


def test_resume_after_a_crash_equals_the_uninterrupted_run(
    trained: TrainedRun, tmp_path: Path
) -> None:
    """Killed after stage 2 with that stage's checkpoint cut short (a write the kill tore): the
    resume skips it, says so, goes back to stage 1's and trains stage 2 again, to the
    uninterrupted run's numbers."""
    quiet = Console(file=io.StringIO())
    full = trained.summary
    crashed_cfg = trained.same_config(tmp_path / "crashed")
    with pytest.raises(SimulatedCrash):
        run_training(crashed_cfg, console=quiet, callbacks=[CrashAfter(2)])
    folder = Path(crashed_cfg.run_dir) / "checkpoints"
    assert load_checkpoint(Path(crashed_cfg.run_dir))["trainer"]["stage"] == 2
    newest = folder / "stage_0002.pt"
    newest.write_bytes(newest.read_bytes()[:1000])
    assert load_checkpoint(Path(crashed_cfg.run_dir))["trainer"]["stage"] == 1
    out = io.StringIO()
    resumed = run_training(crashed_cfg, resume=True, console=Console(file=out, width=200))
    text = out.getvalue()
    assert "skipped a checkpoint: stage_0002.pt does not match the SHA-256 recorded" in text
    assert "resumed" in text and "after stage 1 (stage_0001.pt)" in text
    # Bit for bit on purpose: both runs are in this process on this CPU, with the same kernels in
    # the same order, and resuming promises the uninterrupted run's exact numbers.
    assert resumed["after"] == full["after"] and resumed["before"] == full["before"]
    for key in ("kl_raw", "beta", "l_seq"):
        assert [u[key] for u in resumed["updates"]] == [u[key] for u in full["updates"]]
    a = load_checkpoint(trained.run_dir)["trainer"]["slots"]
    b = load_checkpoint(Path(crashed_cfg.run_dir))["trainer"]["slots"]
    for agent in a:
        for name, tensor in a[agent]["policy"].items():
            assert torch.equal(tensor, b[agent]["policy"][name]), (agent, name)
    steps = [r["step"] for r in read_jsonl(Path(crashed_cfg.run_dir) / "metrics.jsonl")]
    assert steps == [0, 1, 2, 2]  # the torn stage's records dropped, no stage twice


def test_cli_reports_every_config_problem(tmp_path: Path, capsys) -> None:
    code = main(
        [
            "train",
            "--run-dir",
            str(tmp_path),
            "--set",
            "schedule.learner=teamtrr",
            "--set",
            "optim.lr=fast",
            "--set",
            "schedule.stagez=3",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "schedule.learner: No learner registered as 'teamtrr'. Did you mean 'teamtr'" in err
    assert "optim.lr: expected number" in err
    assert "'stagez'" in err and "did you mean 'stages'" in err


def test_cli_config_file_and_schema(tmp_path: Path, capsys) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("schedule:\n  group_size: 0\n")
    assert main(["train", "--config", str(cfg)]) == 2
    assert "group_size must be >= 1" in capsys.readouterr().err
    assert main(["train", "--schema"]) == 0
    assert '"trust_region"' in capsys.readouterr().out


def test_model_selection_uses_validation_and_final_eval_uses_test(tmp_path: Path) -> None:
    cfg = small(
        tmp_path / "select",
        eval__every=1,
        eval__select="best_validation",
        eval__train_distribution=False,
    )
    out = io.StringIO()
    summary = run_training(cfg, console=Console(file=out, width=200))
    run_dir = Path(cfg.run_dir)
    # SMALL has no loggers and no plot: the run writes neither, and does not say it did.
    assert cfg.loggers == [] and not cfg.plot
    assert not (run_dir / "tb").exists() and not (run_dir / "curves.png").exists()
    assert summary["paths"]["plot"] is None and summary["paths"]["tensorboard"] is None
    assert "curves.png" not in out.getvalue() and "metrics.jsonl" in out.getvalue()
    records = read_jsonl(run_dir / "metrics.jsonl")
    val = {r["step"]: r["val/avg@2"] for r in records if "val/avg@2" in r}
    assert set(val) == {1, 2}
    assert not any("eval/avg@2" in r for r in records if r["step"] in (1,))  # test not peeked at
    best = max(val, key=lambda s: (val[s], -s))
    assert summary["selected_stage"] == best and summary["eval_split"] == "test"
    assert (run_dir / "checkpoints" / "best.pt").exists()


def test_training_on_held_out_problems_is_refused(tmp_path: Path) -> None:
    from tasks import Problem, save_problems

    data = tmp_path / "test.jsonl"
    save_problems(data, [Problem(id="x", data={"expression": "1 + 1"}, answer=2, split="test")])
    cfg = small(tmp_path / "refuse", task_options={"data_path": str(data)})
    with pytest.raises(Exception, match="training on held-out data is refused"):
        run_training(cfg, console=Console(file=io.StringIO()))


def test_generated_splits_keep_evaluation_disjoint_from_training(tmp_path: Path) -> None:
    from trainers.run.recipe import env_factory

    cfg = from_dict(TrainConfig, {"task": "teamtr/Arith-v0", "task_options": {"digits": 2}})
    train, test = env_factory(cfg, "train")(), env_factory(cfg, "test")()
    import numpy as np

    rng = np.random.default_rng(0)
    train_ids = {train.task.sample(rng).id for _ in range(300)}
    test_ids = {test.task.sample(rng).id for _ in range(300)}
    assert train.task.split == "train" and test.task.split == "test"
    assert not train_ids & test_ids


def test_the_default_run_is_the_pipeline_relay() -> None:
    """The defaults; a run of them (the task, its held-out problems, diagnostics that sample
    nothing) is test_entry.py's test_train_is_the_path_teamtr_train_takes."""
    defaults = TrainConfig()
    assert defaults.task == "teamtr/Pipeline-v0" and defaults.schedule.budget == "disjoint"
    assert defaults.diagnostics.level == "cheap"  # no rollouts outside the budget


def test_select_best_needs_periodic_validation() -> None:
    with pytest.raises(Exception, match="needs eval.every >= 1"):
        from_dict(TrainConfig, {"eval": {"select": "best_validation"}})


def test_behaviour_cloning_cache_is_reused_with_the_same_result(tmp_path: Path) -> None:
    quiet = Console(file=io.StringIO())
    cache = tmp_path / "bc-cache"
    # One stage and no training-split evaluation: behaviour cloning is what is tested here.
    short = {"schedule__stages": 1, "eval__train_distribution": False}
    first = run_training(small(tmp_path / "a", sft__cache_dir=str(cache), **short), console=quiet)
    assert len(list(cache.glob("bc-*.pt"))) == 1 and "cached" not in first["sft"]
    second = run_training(small(tmp_path / "b", sft__cache_dir=str(cache), **short), console=quiet)
    assert second["sft"]["cached"].startswith(str(cache))
    assert second["before"] == first["before"]  # the same weights, in this process: exactly
    # The key (no run needed): another clone setting is another file, the run's seed is not in it.
    key = behaviour_clone_cache(small(tmp_path / "c", sft__cache_dir=str(cache), **short))
    assert key is not None and second["sft"]["cached"] == str(key)
    other = small(tmp_path / "c", sft__cache_dir=str(cache), sft__steps=3, **short)
    reseeded = small(tmp_path / "d", seed=1, sft__cache_dir=str(cache), **short)
    assert behaviour_clone_cache(other) != key and behaviour_clone_cache(reseeded) == key


@pytest.mark.slow  # three cloned runs; the clone's cache key in test_behaviour_cloning_cache_is_reused_with_the_same_result
def test_the_clone_depends_on_sft_seed_not_on_the_runs_seed(tmp_path: Path) -> None:
    """Why the cache key leaves the run's seed out: cloned afresh, two seeds give one clone."""
    quiet = Console(file=io.StringIO())
    short = {"schedule__stages": 1, "eval__train_distribution": False, "sft__steps": 20}
    loss = {
        name: run_training(small(tmp_path / name, **short, **extra), console=quiet)["sft"][
            "final_loss"
        ]
        for name, extra in {"a": {"seed": 0}, "b": {"seed": 1}, "c": {"sft__seed": 1}}.items()
    }
    assert loss["a"].keys() == loss["b"].keys()
    for agent in loss["a"]:
        assert loss["a"][agent] == pytest.approx(loss["b"][agent], rel=1e-5, abs=1e-6)
    assert any(abs(loss["a"][a] - loss["c"][a]) > 1e-4 for a in loss["a"])


def test_set_overrides_merge_into_the_defaults() -> None:
    from trainers.run.config_file import config_from_overrides

    assert config_from_overrides([]) == TrainConfig()
    cfg = config_from_overrides(["sft.steps=5", "task_options.digits=2"])
    assert cfg.sft is not None and (cfg.sft.steps, cfg.sft.problems) == (
        5,
        TrainConfig().sft.problems,
    )
    assert cfg.task_options["digits"] == 2 and "system_prompts" in cfg.task_options
    other = config_from_overrides(["task=teamtr/Math-v0", "task_options.difficulty=2"])
    assert other.task_options == {"difficulty": 2}
    assert config_from_overrides(["sft=null"]).sft is None


def test_one_sampling_section_old_keys_are_refused_and_a_team_inherits_the_runs() -> None:
    from teamtr_core.policy import SamplingParams
    from trainers.run.config_file import config_from_overrides
    from trainers.run.team_eval import agent_sampling

    assert TrainConfig().sampling == SamplingParams(temperature=0.8, max_new_tokens=12)
    with pytest.raises(ConfigError) as excinfo:  # the top-level keys of earlier versions
        config_from_overrides(["temperature=0.5", "max_new_tokens=7"])
    assert excinfo.value.errors == [
        "temperature was renamed to sampling.temperature",
        "max_new_tokens was renamed to sampling.max_new_tokens",
    ]
    new = config_from_overrides(["sampling.temperature=0.5", "sampling.max_new_tokens=7"])
    assert new.sampling == SamplingParams(temperature=0.5, max_new_tokens=7)
    with pytest.raises(ConfigError, match="temperature was renamed to sampling.temperature"):
        from_dict(TrainConfig, {"temperature": 0.5, "sampling": {"temperature": 0.4}})
    # Key by key, the most specific section wins: agent, then team, then run.
    team = {
        "default": {"backend": "random"},
        "sampling": {"top_p": 0.9},
        "agents": {"critic": {"backend": "random", "sampling": {"temperature": 0.3}}},
    }
    cfg = from_dict(TrainConfig, {"sampling": {"temperature": 1.0}, "team": team})
    run = SamplingParams(temperature=1.0, max_new_tokens=12)
    assert cfg.sampling == run
    assert agent_sampling(cfg, ["solver", "critic"]) == {
        "solver": SamplingParams(temperature=1.0, top_p=0.9, max_new_tokens=12),
        "critic": SamplingParams(temperature=0.3, top_p=0.9, max_new_tokens=12),
    }
    assert from_dict(TrainConfig, to_dict(cfg)) == cfg  # the run directory's config.yaml
    # Built in Python, a team without sampling sections samples with the run's.
    bare = TrainConfig(team=team_config_from_dict({"default": {"backend": "random"}}))
    assert set(agent_sampling(bare, ["solver", "critic"]).values()) == {bare.sampling}


@pytest.mark.slow  # starts an interpreter; the stage lines in test_a_terminal_keeps_the_progress_bars_instead_of_stage_lines
def test_piped_run_prints_a_line_per_stage_and_counts_distinct_eval_problems(
    tmp_path: Path,
) -> None:
    # One-digit sums: the test and validation splits hold 8 distinct problems, the train split 84.
    cfg = small(tmp_path / "piped", eval__problems=100, eval__every=1)
    out = io.StringIO()
    summary = run_training(cfg, console=Console(file=out, width=200))  # not a terminal
    assert summary["eval_problems_distinct"] == 8 and summary["train_eval_problems_distinct"] == 84
    saved = json.loads((Path(cfg.run_dir) / "summary.json").read_text())
    assert saved["eval_problems_distinct"] == 8 and saved["eval_problems"] == 100
    assert not any(key.startswith("problems/") for key in (*saved["before"], *saved["after"]))
    records = read_jsonl(Path(cfg.run_dir) / "metrics.jsonl")
    assert records[0]["problems/eval_distinct"] == 8 and records[1]["problems/val_distinct"] == 8
    text = out.getvalue()
    lines = [line for line in text.splitlines() if line.startswith("stage ")]
    assert [line.split(":")[0] for line in lines] == ["stage 1/2", "stage 2/2"]
    for line in lines:
        assert "elapsed" in line and "reward mean" in line and "KL" in line
        assert "val avg@2" in line and "(8 problems)" in line
    assert "held-out (test) evaluation: 8 distinct problems x K=2 (asked for 100" in text
    assert "train split evaluation: 84 distinct problems" in text


def test_a_terminal_keeps_the_progress_bars_instead_of_stage_lines(tmp_path: Path) -> None:
    cfg = small(
        tmp_path / "tty",
        progress=True,
        sft=None,
        eval__train_distribution=False,
        schedule__stages=1,
    )
    out = io.StringIO()
    run_training(cfg, console=Console(file=out, width=200, force_terminal=True))
    assert "teamtr/TeamTR-v0 stages" in out.getvalue() and "stage 1/1:" not in out.getvalue()


def test_training_honours_a_team_configs_per_agent_sampling(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a team config, each agent samples (and is scored) with its own temperature and
    message length, in training, in the before/after evaluation and in the trainer."""
    import trainers.run.recipe as run_module
    from teamtr_core.policy import SamplingParams
    from trainers.learners.team_trainer import TeamTrainer
    from trainers.run.team_eval import agent_sampling

    team = {
        "default": {"backend": "hf", "path": str(tiny_model_dir)},
        "agents": {
            "critic": {
                "backend": "hf",
                "path": str(tiny_model_dir),
                "sampling": {"temperature": 0.5},
            },
            "aggregator": {
                "backend": "hf",
                "path": str(tiny_model_dir),
                "sampling": {"max_new_tokens": 4},
            },
        },
        "sampling": {"temperature": 1.0, "max_new_tokens": 6},
    }
    cfg = small(tmp_path, team=team, sft=None, schedule__stages=1)
    expected = {
        "solver": SamplingParams(temperature=1.0, max_new_tokens=6),
        "critic": SamplingParams(temperature=0.5, max_new_tokens=6),
        "aggregator": SamplingParams(temperature=1.0, max_new_tokens=4),
    }
    assert agent_sampling(cfg, list(expected)) == expected
    built: list[TeamTrainer] = []

    class Recording(TeamTrainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            built.append(self)

    monkeypatch.setattr(run_module, "TeamTrainer", Recording)
    run_training(cfg, console=Console(file=io.StringIO()))
    (trainer,) = built
    assert trainer.runner.sampling == expected
    temps = dict(trainer.temperatures)
    assert temps == {"solver": 1.0, "critic": 0.5, "aggregator": 1.0}
    # Without a team config every agent gets the run's temperature and message length.
    plain = small(tmp_path / "plain")
    shared = SamplingParams(temperature=0.8, max_new_tokens=6)
    assert plain.sampling == shared
    assert agent_sampling(plain, ["solver", "critic"]) == {"solver": shared, "critic": shared}


def test_a_token_limit_that_cuts_answers_off_is_warned_about_before_training(
    tmp_path: Path, tiny_model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The default 12 tokens cannot hold some tasks' answers, and nothing said so: now the before
    evaluation logs each agent's share of messages cut off at the token limit, every stage logs
    its training rollouts' share, and a share above 20% is warned about, naming the agent."""
    team = {"default": {"backend": "hf", "path": str(tiny_model_dir)}}
    quick = {"team": team, "sft": None, "schedule__stages": 1, "eval__train_distribution": False}
    agents = ("solver", "critic", "aggregator")
    # An untrained model rarely ends a message within 3 tokens.
    cfg = small(tmp_path / "short", sampling={"max_new_tokens": 3}, **quick)
    out = io.StringIO()
    with caplog.at_level(logging.INFO, logger="trainers.run.recipe"):
        summary = run_training(cfg, console=Console(file=out, width=200))
    text = " ".join(out.getvalue().split())
    for agent in agents:
        share = summary["before"][f"eval/{agent}/clipped_ratio"]
        assert share > 0.2
        assert f"warning: {share:.0%} of {agent}'s messages in the evaluation before" in text
    assert "(sampling.max_new_tokens = 3)" in text and "Raise sampling.max_new_tokens" in text
    logged = [r for r in caplog.records if "hit the token limit" in r.getMessage()]
    # Printed once (the console); logged at INFO, which no last-resort handler prints again.
    assert len(logged) == 3 and all(r.levelno == logging.INFO for r in logged)
    assert text.count("of solver's messages in the evaluation before") == 1
    stage = read_jsonl(Path(cfg.run_dir) / "metrics.jsonl")[1]
    assert all(stage[f"agent/{a}/clipped_ratio"] > 0.2 for a in agents)
    assert 0.2 < stage["stage/clipped_ratio"] <= 1 and "cut off at the token limit" in text
    # A stop string at every character ends each message: nothing is cut off, nothing warned.
    caplog.clear()
    ends = {"max_new_tokens": 3, "stop": list(string.printable)}
    cfg = small(tmp_path / "ends", sampling=ends, **quick)
    out = io.StringIO()
    with caplog.at_level(logging.WARNING, logger="trainers.run.recipe"):
        summary = run_training(cfg, console=Console(file=out, width=200))
    assert all(summary["before"][f"eval/{a}/clipped_ratio"] <= 0.2 for a in agents)
    assert "token limit" not in out.getvalue()
    assert not [r for r in caplog.records if "token limit" in r.getMessage()]


def test_the_clipped_warning_starts_above_a_fifth() -> None:
    from teamtr_core.policy import SamplingParams

    sampling = {"a": SamplingParams(max_new_tokens=12), "b": SamplingParams(max_new_tokens=40)}
    at = {"eval/a/clipped_ratio": 0.2, "eval/b/clipped_ratio": 0.0}
    assert clipped_warnings(at, sampling) == []
    (line,) = clipped_warnings({**at, "train_eval/b/clipped_ratio": 0.25}, sampling)
    assert line.startswith("25% of b's messages") and "(sampling.max_new_tokens = 40)" in line


@pytest.mark.slow  # two whole trainings; the recipe's steps run in every run_training test
def test_the_recipes_steps_by_hand_give_run_trainings_result(
    trained: TrainedRun, tmp_path: Path
) -> None:
    """A driver of its own (swap, the benchmarks, a user's) calls the recipe's public steps;
    they are what run_training does, so the numbers are the same run's (in this process:
    exactly)."""
    recipe = TrainingRecipe(
        trained.same_config(tmp_path / "steps"), console=Console(file=io.StringIO())
    )
    recipe.setup()
    assert recipe.trainer is not None and set(recipe.policies) == {"solver", "critic", "aggregator"}
    assert recipe.warm_start() is not None and recipe.state.sft is not None
    before = recipe.evaluate_before()
    recipe.train()
    summary = recipe.finish(seconds=0.0)
    assert (
        _metrics_only(before) == trained.summary["before"]
        and summary["after"] == trained.summary["after"]
    )
    assert [u["kl_raw"] for u in summary["updates"]] == [
        u["kl_raw"] for u in trained.summary["updates"]
    ]
    assert recipe.state.best is None and recipe.state.stopped_early is None
    assert [d["stage"] for d in recipe.state.diagnostics] in ([], [1, 2])


def test_the_run_state_round_trips_through_a_checkpoint_and_reads_older_ones() -> None:
    state = RunState(
        before={"eval/avg@2": 0.5},
        sft={"steps": 2},
        updates=[make_record(agent="a", kl_raw=0.01)],
        best=BestStage(2, 0.75),
        stopped_early={"stage": 2, "by": "EarlyStopping"},
        diagnostics=[{"stage": 1, "diag/d_occ": 0.3}],
    )
    # repr: the records' unmeasured fields are NaN, which == does not equate
    assert repr(RunState.from_checkpoint(state.to_checkpoint())) == repr(state)
    assert repr(RunState.from_checkpoint(rundir.plain(state.to_checkpoint()))) == repr(state)
    old = {"updates": [], "sft": None, "before": {"eval/avg@2": 0.1}}  # an older run's "extra"
    assert RunState.from_checkpoint(old) == RunState(before={"eval/avg@2": 0.1})


def _metrics_only(values: dict) -> dict:
    return {k: v for k, v in values.items() if not k.startswith(("problems/", "ci/"))}
