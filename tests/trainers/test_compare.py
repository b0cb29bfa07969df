"""``trainers.tools.compare``: the paired bootstrap, the spec's checks, the budget check, and a small
comparison end to end (resumed after an interruption, read back on a rerun)."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pytest
from helpers_trainers import CrashAfter, SimulatedCrash
from rich.console import Console

from teamtr_core.errors import ConfigError
from trainers.run.recipe import load_checkpoint, run_training
from trainers.run.warm_start import behaviour_clone_cache
from trainers.tools.compare import (
    CompareSpec,
    compare,
    learner_entry,
    measured_budget,
    paired_difference,
    run_configs,
)

QUIET = Console(file=io.StringIO())
#: A comparison of seconds: a few cloning steps, one small stage, a small evaluation.
TINY = (
    "schedule.stages=1",
    "schedule.problems_per_batch=4",
    "schedule.group_size=2",
    "sft.steps=20",
    "sft.problems=40",
    "eval.problems=12",
    "eval.k=2",
    "eval.train_distribution=false",
    "loggers=[]",
    "plot=false",
)


def test_the_paired_difference_is_other_minus_first_by_seed_and_problem() -> None:
    first = {0: {"a": 0.0, "b": 0.5}, 1: {"a": 1.0, "b": 1.0}}
    other = {0: {"a": 0.5, "b": 1.0}, 1: {"a": 1.0, "b": 0.5}}
    out = paired_difference(first, other, samples=500)
    assert out["per_seed"] == [0.5, -0.25]
    assert out["mean"] == pytest.approx(0.125)
    low, high = out["ci"]
    assert -0.5 <= low <= out["mean"] <= high <= 0.5  # within the per-problem extremes
    assert paired_difference(first, other, samples=500) == out  # seeded
    same = paired_difference(first, first, samples=200)
    assert same["mean"] == 0.0 and same["ci"] == [0.0, 0.0]


def test_the_bootstrap_ci_covers_a_known_difference() -> None:
    """Many seeds of many problems whose difference is +0.1 on average: the CI holds 0.1 and
    excludes 0."""
    rng = np.random.default_rng(0)
    first, other = {}, {}
    for seed in range(8):
        ids = [f"p{i}" for i in range(200)]
        base = rng.random(200)
        first[seed] = dict(zip(ids, base))
        other[seed] = dict(zip(ids, base + 0.1 + 0.05 * rng.standard_normal(200)))
    out = paired_difference(first, other, samples=400)
    assert out["ci"][0] < 0.1 < out["ci"][1] and out["ci"][0] > 0


def test_a_bad_spec_reports_every_problem_at_once(tmp_path: Path) -> None:
    spec = CompareSpec("teamtr/Relay-v0", ("teamtr", "no_such_learner", "teamtr"), (1, 1), tmp_path)
    with pytest.raises(ConfigError) as err:
        run_configs(spec)
    text = str(err.value)
    assert "no_such_learner" in text and "named twice" in text and "seeds must be distinct" in text
    with pytest.raises(ConfigError, match="at least two learners"):
        run_configs(CompareSpec("teamtr/Relay-v0", ("teamtr",), (0,), tmp_path))


def test_every_run_shares_the_settings_and_the_clone_but_not_the_directory(tmp_path: Path) -> None:
    configs = run_configs(
        CompareSpec("teamtr/Relay-v0", ("teamtr", "joint"), (0, 1), tmp_path, overrides=TINY)
    )
    assert list(configs) == ["teamtr/TeamTR-v0", "teamtr/Joint-v0"]
    runs = [c for by_seed in configs.values() for c in by_seed.values()]
    assert len({c.run_dir for c in runs}) == 4
    assert {c.sft.cache_dir for c in runs if c.sft} == {str(tmp_path / "bc-cache")}
    assert len({behaviour_clone_cache(c) for c in runs}) == 1  # one clone for every seed
    assert {(c.schedule.problems_per_batch, c.optim.epochs, c.task) for c in runs} == {
        (4, configs["teamtr/Joint-v0"][0].optim.epochs, "teamtr/Relay-v0")
    }


def test_a_config_without_behaviour_cloning_keeps_it_off_quick_or_not(tmp_path: Path) -> None:
    """``sft: null`` in the config file: the comparison's own ``sft.`` settings (the shared
    clone's folder, ``--quick``'s smaller cloning) turned cloning back on with the default
    settings; they now apply only where the runs clone, and the user's ``sft.`` wins."""
    base = tmp_path / "base.yaml"
    base.write_text("task: teamtr/Arith-v0\nsft: null\n", encoding="utf-8")
    for quick in (False, True):
        spec = CompareSpec("teamtr/Arith-v0", ("teamtr", "joint"), (0,), tmp_path, quick=quick)
        config = run_configs(dataclasses.replace(spec, config_file=base))["teamtr/TeamTR-v0"][0]
        assert config.sft is None
    spec = CompareSpec("teamtr/Arith-v0", ("teamtr", "joint"), (0,), tmp_path, quick=True)
    on = dataclasses.replace(spec, config_file=base, overrides=("sft.problems=16",))
    (config,) = run_configs(on)["teamtr/TeamTR-v0"].values()
    assert config.sft is not None and config.sft.problems == 16 and config.sft.steps == 200
    assert config.sft.cache_dir == str(tmp_path / "bc-cache")


def test_the_budget_check_compares_messages_per_update() -> None:
    run = {"updates": [{"messages": 8}, {"messages": 8}]}
    more = {"updates": [{"messages": 8}, {"messages": 24}]}
    assert measured_budget({"a": {0: run}, "b": {0: run}})["equal"]
    assert not measured_budget({"a": {0: run}, "b": {0: more}})["equal"]


def test_a_learner_entry_is_a_name_or_a_variant_with_settings_of_its_own(tmp_path: Path) -> None:
    assert learner_entry("joint") == ("teamtr/Joint-v0", "teamtr/Joint-v0", ())
    assert learner_entry("at_grpo:learner_options.trust_region=true, optim.epochs=2") == (
        "teamtr/ATGRPO-v0:learner_options.trust_region=true,optim.epochs=2",
        "teamtr/ATGRPO-v0",
        ("learner_options.trust_region=true", "optim.epochs=2"),
    )
    assert learner_entry("no-radius=teamtr:trust_region.delta_mode=none")[:2] == (
        "no-radius",
        "teamtr/TeamTR-v0",
    )
    for bad, phrase in (("teamtr:epochs", "NAME:KEY=VALUE"), ("a b=teamtr:x=1", "label")):
        with pytest.raises(ConfigError, match=phrase):
            learner_entry(bad)
    configs = run_configs(
        CompareSpec(
            "teamtr/Relay-v0",
            ("teamtr", "no-radius=teamtr:trust_region.delta_mode=none"),
            (0,),
            tmp_path,
            overrides=TINY,
        )
    )
    plain, variant = (configs[label][0] for label in ("teamtr/TeamTR-v0", "no-radius"))
    assert variant.trust_region.delta_mode == "none" != plain.trust_region.delta_mode
    assert variant.schedule.learner == plain.schedule.learner == "teamtr/TeamTR-v0"
    assert Path(variant.run_dir).name == "no-radius-seed0" != Path(plain.run_dir).name


def write_metrics(path: Path, stages: list[dict[str, float]]) -> dict:
    """A run summary whose metrics file logs ``stages`` (one row per stage)."""
    path.write_text("\n".join(json.dumps({"step": i + 1, **m}) for i, m in enumerate(stages)))
    return {"updates": [{"messages": 8}], "paths": {"metrics": str(path)}}


def test_the_budget_counts_what_every_learner_generated(tmp_path: Path) -> None:
    from trainers.tools.compare_stats import generation_line

    stage = {"stage/messages": 64.0, "stage/tokens": 640.0, "stage/rollouts": 16.0}
    tree = {"stage/messages": 40.0, "stage/tokens": 320.0, "stage/rollouts": 16.0}
    ref = write_metrics(tmp_path / "a.jsonl", [stage, stage])
    same = write_metrics(tmp_path / "b.jsonl", [stage, stage])
    fewer = write_metrics(tmp_path / "c.jsonl", [tree, tree])
    budget = measured_budget({"ref": {0: ref}, "same": {0: same}, "tree": {0: fewer}})
    assert budget["equal"]  # the updates saw the same messages ...
    assert budget["generated"]["ref"][0] == {
        "messages": 128.0,
        "tokens": 1280.0,
        "episodes": 32.0,
        "stages": 2.0,
    }
    assert budget["generation_equal"] is False  # ... the generation differs
    assert budget["generated_ratio"]["tree"] == {"messages": 0.625, "tokens": 0.5}
    assert budget["generated_ratio"]["same"] == {"messages": 1.0, "tokens": 1.0}
    line = generation_line(budget)
    assert "NOT EQUAL" in line and "tree 0.62x messages, 0.50x tokens" in line
    equal = measured_budget({"ref": {0: ref}, "same": {0: same}})
    assert equal["generation_equal"] is True and generation_line(equal).endswith("equal")
    unknown = measured_budget({"ref": {0: ref}, "old": {0: {"updates": [{"messages": 8}]}}})
    assert unknown["generation_equal"] is None  # a run that did not log it is not "equal"


def test_a_comparison_with_a_tree_learner_and_a_variant_reports_their_generation(
    tmp_path: Path,
) -> None:
    """End to end on the tabular relay: AT-GRPO's 4-turn tree generates 40 messages per
    prompt against TeamTR's 64, which the budget line says, and the variant ran with its own
    setting."""
    config_file = Path(__file__).resolve().parents[2] / "benchmarks/configs/relay_tabular.yaml"
    quick = ("schedule.stages=1", "schedule.problems_per_batch=4", "eval.problems=8", "loggers=[]")
    printed = io.StringIO()
    data = compare(
        CompareSpec(
            "teamtr/Relay-v0",
            ("teamtr", "at_grpo", "tr=at_grpo:learner_options.trust_region=true"),
            (0,),
            tmp_path / "cmp",
            config_file=config_file,
            overrides=quick,
        ),
        Console(file=printed, width=200),
    )
    assert "tr seed 0: stage 1/1" in printed.getvalue()  # a variant's lines carry its label
    budget = data["budget"]
    assert budget["equal"]
    assert budget["generation_equal"] is False
    assert budget["generated_ratio"]["teamtr/ATGRPO-v0"]["messages"] == pytest.approx(40 / 64)
    assert budget["generated"]["teamtr/TeamTR-v0"][0]["messages"] == 4 * 64
    assert data["variants"] == {
        "tr": {"learner": "teamtr/ATGRPO-v0", "settings": ["learner_options.trust_region=true"]}
    }
    summary = json.loads((tmp_path / "cmp/runs/tr-seed0/summary.json").read_text())
    assert summary["config"]["learner_options"] == {"trust_region": True}
    table = (tmp_path / "cmp/compare.md").read_text()
    assert "generated messages: NOT EQUAL" in table and "tr: teamtr/ATGRPO-v0 with" in table


@pytest.mark.slow  # an interrupted and a resumed comparison; refusals in tests/reliability/test_faults.py, resume in tests/trainers/test_run.py
def test_a_comparison_resumes_an_interrupted_run_and_refuses_other_settings(
    tmp_path: Path,
) -> None:
    spec = CompareSpec(
        "teamtr/Relay-v0",
        ("teamtr", "naive_sequential"),
        (0,),
        tmp_path / "cmp",
        overrides=(*TINY, "schedule.stages=2"),
    )
    configs = run_configs(spec)
    interrupted = configs["teamtr/NaiveSequential-v0"][0]
    with pytest.raises(SimulatedCrash):
        run_training(interrupted, console=QUIET, callbacks=[CrashAfter(1)])
    assert load_checkpoint(Path(interrupted.run_dir)) is not None
    out = io.StringIO()
    data = compare(spec, console=Console(file=out, width=200))
    assert f"resuming {interrupted.run_dir}" in out.getvalue()
    assert "teamtr/TeamTR-v0 seed 0: stage 2/2, reward of the stage-start team" in out.getvalue()
    assert "teamtr/NaiveSequential-v0 seed 0: stage 2/2" in out.getvalue()  # after the resume
    saved = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    (entry,) = saved["paired"]
    assert entry["learner"] == "teamtr/NaiveSequential-v0"
    assert set(entry) >= {"mean", "ci", "per_seed"} and len(entry["ci"]) == 2
    assert saved["budget"]["equal"] and data["budget"]["schedule.stages"] == 2
    assert all(len(r["after"]) == 1 for r in saved["results"].values())
    assert (tmp_path / "cmp" / "compare.md").read_text().startswith("# teamtr/Relay-v0")
    assert (tmp_path / "cmp" / "compare.png").stat().st_size > 0
    summary = json.loads((Path(interrupted.run_dir) / "summary.json").read_text())
    assert summary["stages"] == 2  # the resumed run finished both stages
    # A rerun reads the finished runs back; other settings are refused, naming the key.
    again = compare(spec, console=QUIET)
    assert again["paired"][0]["mean"] == data["paired"][0]["mean"]
    other = CompareSpec(**{**spec.__dict__, "overrides": (*spec.overrides, "optim.lr=0.01")})
    with pytest.raises(ConfigError, match=r"optim\.lr"):
        compare(other, console=QUIET)
