"""A repeated problem is never an independent one: distinct sampling, the shortfall when fewer
distinct problems exist than asked for, evaluation over distinct problems, the CLI's note."""

from __future__ import annotations

import json
import logging

import jsonschema
import numpy as np
import pytest

import teamtr_env
from adapters.scripted import RandomPolicy, ScriptedExpert
from tasks import Problem, save_problems, split_of
from teamtr_cli import main
from teamtr_env.evaluation import evaluate, report_schema
from teamtr_env.metrics import bootstrap_ci
from teamtr_env.runners import Runner

ONE_DIGIT_TEST = {
    f"arith:{a}+{b}" for a in range(10) for b in range(10) if split_of(f"arith:{a}+{b}") == "test"
}


def _runner(policy=None, **options) -> Runner:
    def env_fn():
        return teamtr_env.make("teamtr/Arith-v0", **options)

    return Runner(env_fn, policy or RandomPolicy(), progress=False)


def _fixed(n: int) -> list[Problem]:
    return [
        Problem(id=f"p{i}", data={"expression": f"{i} + 0"}, answer=i, split="test")
        for i in range(n)
    ]


def test_a_small_generator_gives_its_distinct_problems_and_says_it_fell_short(caplog) -> None:
    runner = _runner(digits=1, split="test")
    problems, draw = runner.sample_distinct(200, seed=0)
    ids = [p.id for p in problems]
    assert len(ids) == len(set(ids)) == 8 and set(ids) == ONE_DIGIT_TEST
    assert draw.requested == 200 and draw.found == 8 and draw.shortfall
    assert draw.source == "generator" and draw.available is None and draw.split == "test"
    assert draw.draws < 20 * 200 + 100  # stopped once the space was exhausted
    assert "asked for 200 problems, found 8 distinct" in draw.message
    assert "split 'test'" in draw.message and "too small" in draw.message
    assert draw.to_dict()["shortfall"] == draw.message
    again, _ = runner.sample_distinct(200, seed=0)
    assert [p.id for p in again] == ids  # deterministic per seed
    with caplog.at_level(logging.WARNING, logger="teamtr_env.runners.local"):
        listed = runner.sample_problems(200, seed=0)
        runner.sample_problems(200, seed=1)
    assert [p.id for p in listed] == ids
    shortfalls = [r for r in caplog.records if "found 8 distinct" in r.getMessage()]
    assert len(shortfalls) == 1  # once per runner and size, not once per training batch


def test_a_large_generator_gives_n_distinct_problems_without_a_shortfall() -> None:
    runner = _runner()  # two-digit sums of the train split: thousands of problems
    problems, draw = runner.sample_distinct(300, seed=0)
    assert len({p.id for p in problems}) == 300 and not draw.shortfall
    assert draw.draws >= 300 and draw.to_dict()["shortfall"] is None
    assert draw.message == "asked for 300 problems, found 300 distinct"


def test_a_problem_set_is_sampled_without_replacement() -> None:
    fixed = [*_fixed(6), Problem(id="p2", data={"expression": "2 + 0"}, answer=2, split="test")]
    runner = _runner(problems=fixed)
    some, draw = runner.sample_distinct(4, seed=0)
    assert len({p.id for p in some}) == 4 and not draw.shortfall and draw.available == 6
    everything, draw = runner.sample_distinct(10, seed=0)
    assert sorted(p.id for p in everything) == [f"p{i}" for i in range(6)]  # each once
    assert draw.shortfall and draw.found == 6 and draw.source == "problem set"
    assert "the problem set holds only 6 distinct problems" in draw.message
    orders = {tuple(p.id for p in runner.sample_problems(10, seed=s)) for s in range(5)}
    assert len(orders) > 1  # a seeded order, not always the set's
    assert runner.sample_problems(10, seed=3) == runner.sample_problems(10, seed=3)
    in_order, _ = runner.sample_distinct(3, seed=9, in_order=True)
    assert [p.id for p in in_order] == ["p0", "p1", "p2"]


def test_evaluate_counts_a_repeated_problem_once(caplog) -> None:
    runner = _runner(ScriptedExpert(teamtr_env.make("teamtr/Arith-v0").task, 0.5, seed=0))
    distinct = runner.sample_problems(5, seed=0)
    repeated = [*distinct, *distinct, distinct[0], distinct[0]]
    with caplog.at_level(logging.WARNING, logger="teamtr_env.evaluation"):
        report = evaluate(runner, repeated, k=4, seed=0)
    assert any("7 of the 12 problems repeat" in r.getMessage() for r in caplog.records)
    assert report.n_problems == 12 and report.n_problems_distinct == 5
    assert [p["problem_id"] for p in report.per_problem] == [p.id for p in distinct]
    assert report.batch.stats.envs == 5 * 4 and sum(report.splits.values()) == 5
    assert all(m.n_problems == 5 for m in report.metrics.values())
    # The interval resamples the 5 distinct problems, exactly as for the list without repeats.
    values = [p["correct"] / 4 for p in report.per_problem]
    assert report.metrics["avg@4"] == bootstrap_ci(values, seed=0)
    assert evaluate(runner, distinct, k=4, seed=0).metrics == report.metrics
    doc = json.loads(json.dumps({"task": "teamtr/Arith-v0", **report.to_dict()}))
    assert doc["n_problems"] == 12 and doc["n_problems_distinct"] == 5
    jsonschema.validate(doc, report_schema())


def test_cli_says_when_fewer_distinct_problems_exist_than_asked(tmp_path, capsys) -> None:
    out = tmp_path / "r.json"
    argv = ["eval", "teamtr/Arith-v0", "-o", "digits=1", "--problems", "50", "--k", "2"]
    assert main([*argv, "--no-progress", "--out", str(out)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "asked for 50 problems, found 8 distinct" in printed
    assert "problem space is too small" in printed and "evaluating those 8" in printed
    assert "8 distinct problems (asked for 50)" in printed
    report = json.loads(out.read_text())
    jsonschema.validate(report, report_schema())
    assert report["n_problems"] == report["n_problems_distinct"] == 8
    assert report["sampling"]["requested"] == 50 and report["sampling"]["found"] == 8
    assert "found 8 distinct" in report["sampling"]["shortfall"]
    assert len({p["problem_id"] for p in report["per_problem"]}) == 8


def test_cli_refuses_a_data_file_with_repeats_naming_each_line(tmp_path, capsys) -> None:
    """A repeated id in a problem file is an error (file:line of each repeat and of its first
    occurrence), not a note: the file claims more problems than it has."""
    data = tmp_path / "problems.jsonl"
    save_problems(data, [*_fixed(3), *_fixed(2)])
    out = tmp_path / "r.json"
    argv = ["eval", "teamtr/Arith-v0", "--data-path", str(data), "--k", "2", "--no-progress"]
    assert main([*argv, "--out", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{data}:4: duplicate id 'p0' (first on line 1)" in err
    assert f"{data}:5: duplicate id 'p1' (first on line 2)" in err
    assert not out.exists()


def test_cli_data_file_with_too_few_problems(tmp_path, capsys) -> None:
    data = tmp_path / "problems.jsonl"
    save_problems(data, _fixed(3))
    out = tmp_path / "r.json"
    argv = ["eval", "teamtr/Arith-v0", "--data-path", str(data), "--k", "2", "--no-progress"]
    assert main([*argv, "--problems", "10", "--out", str(out)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "asked for 10 problems, found 3 distinct" in printed
    report = json.loads(out.read_text())
    assert [p["problem_id"] for p in report["per_problem"]] == ["p0", "p1", "p2"]
    assert report["sampling"]["available"] == 3
    assert main([*argv, "--out", str(out)]) == 0  # every distinct problem: no shortfall
    assert "found 3 distinct" not in " ".join(capsys.readouterr().out.split())
    assert json.loads(out.read_text())["sampling"]["shortfall"] is None


def test_a_loader_of_another_format_with_repeats_is_refused_too(tmp_path) -> None:
    """The registry refuses repeated ids whatever the task's loader (not only the JSONL one)."""
    from teamtr_core.errors import ConfigError
    from teamtr_env.registration import Registry

    class OwnFormat(teamtr_env.make("teamtr/Arith-v0").task.__class__):
        def load(self, path):
            return [*_fixed(2), _fixed(1)[0]]

    reg = Registry(plugins=False)
    reg.register("own/Arith-v0", OwnFormat)
    data = tmp_path / "anything.txt"
    data.write_text("x")
    with pytest.raises(ConfigError, match="problem 3 repeats the id 'p0' of problem 1"):
        reg.make("own/Arith-v0", data_path=str(data))


@pytest.mark.parametrize("n", [1, 8])
def test_exactly_as_many_as_exist_is_no_shortfall(n: int) -> None:
    problems, draw = _runner(digits=1, split="test").sample_distinct(n, seed=2)
    assert len(problems) == n and not draw.shortfall


def test_iid_draws_on_request_keep_the_old_sampling() -> None:
    runner = _runner(digits=1, split="test")
    drawn = runner.sample_problems(50, seed=0, distinct=False)
    assert len(drawn) == 50 and len({p.id for p in drawn}) == 8  # repeats: training data only
    rng = np.random.default_rng(0)
    assert [p.id for p in drawn] == [runner.env.task.sample(rng).id for _ in range(50)]
    fixed = _runner(problems=_fixed(3)).sample_problems(10, seed=0, distinct=False)
    assert len(fixed) == 10 and {p.id for p in fixed} == {"p0", "p1", "p2"}
