"""DatasetTask: rows of a local dataset graded by TRL-style weighted reward functions.

JSONL needs only the standard library and is tested unconditionally; parquet and save_to_disk
directories need ``datasets`` and skip without it."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adapters.scripted import ConstantPolicy
from tasks.base import SPLITS, Problem, TaskConfigError, split_of
from tasks.dataset import DatasetTask, exact_match
from teamtr_env.registration import Registry
from teamtr_env.runners import Runner

CAPITALS = Path(__file__).resolve().parents[1] / "fixtures" / "dataset" / "capitals.jsonl"
ROWS = [json.loads(line) for line in CAPITALS.read_text().splitlines()]


def exact(prompts, completions, answer, **kw):
    return [float(c.strip() == a) for c, a in zip(completions, answer)]


def ANY(prompts, completions, **kw):
    return [1.0] * len(completions)


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def capitals(**options: Any) -> DatasetTask:
    return DatasetTask(
        **{
            "path": str(CAPITALS),
            "prompt_column": "question",
            "reward_funcs": [exact],
            **options,
        }
    )


def play(registry: Registry, task_id: str, text: str, n: int, **options: Any):
    runner = Runner(lambda: registry.make(task_id, **options), ConstantPolicy(text), progress=False)
    problems, _ = runner.sample_distinct(n, seed=0)
    return runner.rollout(problems, group_size=1, seed=0)


# -- registration and play --------------------------------------------------------------------
def test_five_line_registration_makes_a_playable_env() -> None:
    registry = Registry(plugins=False)
    registry.register(
        "mylab/Capitals-v0",
        DatasetTask,
        kwargs={
            "path": str(CAPITALS),
            "prompt_column": "question",
            "reward_funcs": [exact],
            "reward_weights": [1.0],
        },
    )
    env = registry.make("mylab/Capitals-v0")
    env.reset(seed=0)
    assert env.problem is not None and env.problem.split == "train"
    assert env.problem.data["question"] in env.context(env.agent_selection)
    for _agent in env.agent_iter():
        _, _, terminated, truncated, info = env.last()
        env.step(None if terminated or truncated else f"  {env.problem.data['answer']}\n")
    assert info["score"]["correct"] and info["score"]["reward"] == 1.0
    assert info["score"]["details"] == {"reason": "correct", "rewards": {"exact": 1.0}}

    batch = play(registry, "mylab/Capitals-v0", "Paris", 20)
    assert len(batch.episodes) == 10  # the train split's rows, each once
    assert sum(e.correct for e in batch.episodes) == 1  # France only
    assert {e.details["reason"] for e in batch.episodes} == {"correct", "below_threshold"}


def test_import_strings_name_reward_functions_and_overrides_merge() -> None:
    registry = Registry(plugins=False)
    registry.register(
        "mylab/Capitals-v0",
        "tasks.dataset:DatasetTask",
        kwargs={
            "path": str(CAPITALS),
            "prompt_column": "question",
            "reward_funcs": "tasks.dataset.rewards:exact_match",
        },
    )
    env = registry.make("mylab/Capitals-v0", split="test", id_column="id")
    assert env.task.reward_funcs == [exact_match]
    assert env.task.reward_names == ["exact_match"]
    assert {p.id for p in env.task.problems_in_split()} == {"fi", "dk", "ie", "gr"}
    with pytest.raises(TaskConfigError, match="cannot import 'no_such_module_xyz'"):
        DatasetTask(CAPITALS, "question", ["no_such_module_xyz:f"])


def test_data_path_loads_another_file_with_the_same_columns(tmp_path: Path) -> None:
    other = write_jsonl(
        tmp_path / "more.jsonl",
        [{"id": "ee", "question": "Capital of Estonia?", "answer": "Tallinn", "split": "test"}],
    )
    registry = Registry(plugins=False)
    registry.register(
        "mylab/Capitals-v0",
        DatasetTask,
        kwargs={"path": str(CAPITALS), "prompt_column": "question", "reward_funcs": exact},
    )
    env = registry.make("mylab/Capitals-v0", data_path=str(other), id_column="id")
    assert [p.id for p in env.problems] == ["ee"] and env.problems[0].split == "test"


# -- splits and ids ---------------------------------------------------------------------------
def test_a_split_column_labels_rows_and_sample_stays_in_the_split() -> None:
    for split in SPLITS:
        task = capitals(split=split, id_column="id")
        want = {r["id"] for r in ROWS if r["split"] == split}
        assert {p.id for p in task.problems_in_split()} == want
        rng = np.random.default_rng(0)
        drawn = [task.sample(rng) for _ in range(50)]
        assert {p.id for p in drawn} == want and {p.split for p in drawn} == {split}
    ignored = capitals(split_column=None, id_column="id")  # the column is data, not a label
    assert all(p.split == split_of(p.id) for p in ignored.problems)
    assert any(
        "split_column: no column 'fold'" in p
        for p in problems_of(
            path=CAPITALS, prompt_column="question", reward_funcs=exact, split_column="fold"
        )
    )
    a, b = capitals(), capitals()
    assert [a.sample(np.random.default_rng(3)) for _ in range(5)] == [
        b.sample(np.random.default_rng(3)) for _ in range(5)
    ]


def test_without_a_split_column_the_id_hash_assigns_splits(tmp_path: Path) -> None:
    rows = [{"q": f"What is {i} + 1?", "a": str(i + 1), "n": i} for i in range(200)]
    path = write_jsonl(tmp_path / "sums.jsonl", rows)
    task = DatasetTask(path, "q", ANY, split="validation")
    assert all(p.split == split_of(p.id) for p in task.problems)
    counts = {s: len(task.problems_in_split(s)) for s in SPLITS}
    assert sum(counts.values()) == 200 and counts["train"] > 120 and counts["test"] > 5
    # Hash ids are stable: the same content gives the same id whatever the key order.
    reordered = write_jsonl(tmp_path / "reordered.jsonl", [dict(reversed(r.items())) for r in rows])
    assert [p.id for p in DatasetTask(reordered, "q", ANY).problems] == [
        p.id for p in task.problems
    ]
    assert all(p.id.startswith("row-") for p in task.problems)
    # Identical rows are one problem; an id column gives the ids (and so the hash partition).
    dup = write_jsonl(tmp_path / "dup.jsonl", [rows[0], rows[0], rows[1]])
    assert len(DatasetTask(dup, "q", ANY).problems) == 2
    with_ids = DatasetTask(path, "q", ANY, id_column="n")
    assert [p.id for p in with_ids.problems[:3]] == ["0", "1", "2"]
    assert all(p.split == split_of(p.id) for p in with_ids.problems)


def test_an_empty_split_fails_when_sampled_naming_the_counts(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "tiny.jsonl", [{"prompt": "hi", "split": "train"}])
    task = DatasetTask(path, reward_funcs=ANY, split="test")  # made fine: may not be used
    with pytest.raises(TaskConfigError, match=r"split 'test' .* has no rows .*train 1"):
        task.sample(np.random.default_rng(0))


def test_problems_are_json_and_meta_columns_feed_breakdowns() -> None:
    task = capitals(id_column="id", meta_columns=["region"])
    problem = task.problems[0]
    assert problem.meta == {"region": "west"}
    assert Problem.from_dict(json.loads(json.dumps(problem.to_dict()))) == problem


# -- grading ----------------------------------------------------------------------------------
def test_reward_functions_get_trl_style_batches_of_one() -> None:
    seen: list[dict[str, Any]] = []

    def spy(prompts, completions, **kwargs):
        seen.append(
            json.loads(json.dumps({"prompts": prompts, "completions": completions, **kwargs}))
        )
        kwargs["answer"][0] = "mutated"  # must not reach the shared problem
        return [0.5]

    task = capitals(reward_funcs=[spy], id_column="id")
    problem = task.problems[0]
    score = task.grade(problem, "Paris ")
    assert seen == [
        {
            "prompts": ["What is the capital of France?"],
            "completions": ["Paris "],
            "id": ["fr"],
            "answer": ["Paris"],
            "region": ["west"],
            "split": ["train"],
        }
    ]
    assert problem.data["answer"] == "Paris"
    assert score.reward == 0.5 and not score.correct and score.answer == "Paris"


def test_weighted_sum_and_the_correct_rule() -> None:
    def short(prompts, completions, **kw):
        return [float(len(c) <= 10) for c in completions]

    def penalty(prompts, completions, **kw):
        return [float("!" in c) for c in completions]

    def abstain(prompts, completions, **kw):
        return [None]  # TRL: does not apply, adds nothing

    task = capitals(
        reward_funcs=[exact, short, penalty, abstain, exact], reward_weights=[2, 0.5, -1, 3, 1]
    )
    problem = task.problems_in_split("train")[0]
    gold = problem.data["answer"]
    assert task.success_threshold == 6.5  # the positive weights: full marks
    full = task.grade(problem, gold)
    assert full.reward == pytest.approx(3.5) and not full.correct  # abstain never scores
    task = capitals(reward_funcs=[exact, short, penalty], reward_weights=[2, 0.5, -1])
    assert task.success_threshold == 2.5
    full = task.grade(problem, gold)
    assert (full.reward, full.correct) == (2.5, True)
    assert full.details["rewards"] == {"exact": 1.0, "short": 1.0, "penalty": 0.0}
    loud = task.grade(problem, gold + "!")
    assert (loud.reward, loud.correct, loud.details["reason"]) == (-0.5, False, "below_threshold")
    lenient = capitals(reward_funcs=[exact, short], success_threshold=0.5)
    assert lenient.grade(problem, "no idea").correct
    names = capitals(reward_funcs=[exact, exact]).reward_names
    assert names == ["exact", "exact#2"]


def _broken(kind: str):
    def reward(prompts, completions, **kw):
        if kind == "raise":
            raise KeyError("missing")
        return {
            "nan": [float("nan")],
            "inf": [float("inf")],
            "long": [1.0, 1.0],
            "empty": [],
            "none": None,
            "text": "1.0",
            "word": ["yes"],
            "number": 1.0,
        }[kind]

    reward.__name__ = f"broken_{kind}"
    return reward


@pytest.mark.parametrize(
    "kind", ["raise", "nan", "inf", "long", "empty", "none", "text", "word", "number"]
)
def test_a_broken_reward_function_is_a_scored_reward_error(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    task = capitals(reward_funcs=[exact, _broken(kind)])
    problem = task.problems[0]
    with caplog.at_level(logging.WARNING, logger="tasks.dataset.task"):
        score = task.grade(problem, problem.data["answer"])
    assert (score.reward, score.correct) == (0.0, False)
    assert score.details["reason"] == "reward_error" and score.grader_failed  # not the team's
    assert score.details["reward_func"] == f"broken_{kind}" and score.details["error"]
    assert score.details["rewards"] == {"exact": 1.0}
    assert f"broken_{kind}" in caplog.text


def test_a_broken_reward_function_does_not_stop_a_rollout() -> None:
    registry = Registry(plugins=False)
    registry.register(
        "mylab/Broken-v0",
        DatasetTask,
        kwargs={
            "path": str(CAPITALS),
            "prompt_column": "question",
            "reward_funcs": _broken("raise"),
        },
    )
    batch = play(registry, "mylab/Broken-v0", "Paris", 4)
    assert {e.details["reason"] for e in batch.episodes} == {"reward_error"}


def test_conversational_prompts_follow_trl(tmp_path: Path) -> None:
    seen = []

    def spy(prompts, completions, **kwargs):
        seen.append((prompts, completions))
        return exact_match(prompts, completions, **kwargs)

    conversation = [
        {"role": "system", "content": "Answer with one word."},
        {"role": "user", "content": "Capital of France?"},
    ]
    path = write_jsonl(tmp_path / "chat.jsonl", [{"prompt": conversation, "answer": "Paris"}])
    task = DatasetTask(path, reward_funcs=spy)
    problem = task.problems[0]
    assert task.prompt(problem) == "Answer with one word.\n\nCapital of France?"
    assert task.grade(problem, "Paris").correct
    assert seen == [([conversation], [[{"role": "assistant", "content": "Paris"}]])]


# -- bad options and data -----------------------------------------------------------------------
def problems_of(**options: Any) -> list[str]:
    with pytest.raises(TaskConfigError) as info:
        DatasetTask(**options)
    return info.value.errors


def test_every_option_problem_is_reported_at_once(tmp_path: Path) -> None:
    found = problems_of(
        path=str(CAPITALS),
        prompt_column="questoin",
        id_column="key",
        meta_columns=["zone"],
        reward_funcs=[exact, 42, "not an import string"],
        reward_weights=[1.0, 2.0],
        split="dev",
        success_threshold=float("nan"),
    )
    text = "\n".join(found)
    assert len(found) == 8, text
    assert "prompt_column: no column 'questoin'" in text
    assert "['id', 'question', 'answer', 'region', 'split']" in text  # the columns that exist
    assert "id_column: no column 'key'" in text and "meta_columns: no column(s) ['zone']" in text
    assert "reward_funcs[1]: expected a callable" in text and "got int 42" in text
    assert "reward_funcs[2]" in text and "2 weight(s) for 3 reward function(s)" in text
    assert "split: expected 'train', 'validation' or 'test', got 'dev'" in text
    assert "success_threshold" in text

    missing = problems_of(path=str(tmp_path / "nope.jsonl"), reward_funcs=None)
    assert any("no such file or directory" in p and "nope.jsonl" in p for p in missing)
    assert any("reward_funcs: give at least one reward function" in p for p in missing)
    empty = write_jsonl(tmp_path / "empty.jsonl", [])
    assert any("an empty dataset" in p for p in problems_of(path=empty, reward_funcs=exact))
    assert any("expected the path" in p for p in problems_of(reward_funcs=exact))
    weights = problems_of(path=CAPITALS, prompt_column="question", reward_funcs=exact,
                          reward_weights=[True, "1"])  # fmt: skip
    assert any("expected finite numbers" in p for p in weights)


def test_a_reward_function_that_cannot_take_the_columns_is_refused() -> None:
    def narrow(prompts, completions, answer):  # no **kwargs: the other columns would fail
        return [0.0]

    (problem,) = problems_of(path=CAPITALS, prompt_column="question", reward_funcs=narrow)
    assert "narrow(prompts, completions, answer)" in problem and "**kwargs" in problem
    assert "'region'" in problem


def test_malformed_data_is_reported_with_rows(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\nnot json\n[1, 2]\n\n{"prompt": "x"\n', encoding="utf-8")
    found = problems_of(path=bad, reward_funcs=exact_match)
    assert [p.split(": ", 1)[0] for p in found] == [f"{bad}:2", f"{bad}:3", f"{bad}:5"]
    assert "not valid JSON" in found[0] and "expected a JSON object, got list" in found[1]
    rows = [
        {"prompt": "a", "id": 1, "split": "train"},
        {"prompt": "", "id": 2, "split": "train"},
        {"prompt": "c", "id": 1, "split": "test"},
        {"prompt": "d", "id": 3, "split": "dev"},
        {"prompt": "e", "id": None, "split": "test"},
    ]
    path = write_jsonl(tmp_path / "rows.jsonl", rows)
    found = problems_of(path=path, reward_funcs=exact_match, id_column="id")
    assert [p.split(": ", 1)[0] for p in found] == [f"{path}:{n}" for n in (2, 3, 4, 5)]
    text = "\n".join(found)
    assert f"{path}:2: prompt_column 'prompt' must hold a non-empty string or a list" in text
    assert f"{path}:3: duplicate id '1' (first on line 1) with different content" in text
    assert "must hold one of ['train', 'validation', 'test'], got 'dev'" in text
    assert f"{path}:5: id_column 'id' must hold a non-empty string or number, got None" in text
    many = write_jsonl(tmp_path / "many.jsonl", [{"prompt": ""}] * 3 + [{"prompt": 1}] * 60)
    found = problems_of(path=many, reward_funcs=exact_match)
    assert len(found) == 51 and found[49].startswith(f"{many}:50: prompt_column")
    assert found[-1] == "... and 13 more (the first 50 shown)"
    arr = tmp_path / "rows.json"
    arr.write_text(json.dumps([{"prompt": "p"}, 3]), encoding="utf-8")
    assert any(
        "item 2: expected a JSON object" in p for p in problems_of(path=arr, reward_funcs=exact)
    )
    odd = tmp_path / "rows.csv"
    odd.write_text("prompt\nhi\n", encoding="utf-8")
    assert any("unknown format '.csv'" in p for p in problems_of(path=odd, reward_funcs=exact))
    plain_dir = tmp_path / "folder"
    plain_dir.mkdir()
    assert any(
        "not one written by datasets" in p for p in problems_of(path=plain_dir, reward_funcs=exact)
    )


def test_a_json_array_file_loads(tmp_path: Path) -> None:
    arr = tmp_path / "rows.json"
    arr.write_text(json.dumps([{"prompt": "p1"}, {"prompt": "p2"}]), encoding="utf-8")
    assert [p.data["prompt"] for p in DatasetTask(arr, reward_funcs=ANY).problems] == ["p1", "p2"]


def test_parse_errors_repeated_ids_and_empty_prompts_are_reported_together(
    tmp_path: Path,
) -> None:
    """A line that is not JSON no longer hides the rows' own problems: one error lists them all,
    each with its file:line, in file order."""
    path = tmp_path / "mixed.jsonl"
    lines = [
        json.dumps({"id": "a", "prompt": "What is 2 + 2?", "answer": "4"}),
        "{not json",
        json.dumps({"id": "a", "prompt": "Another question", "answer": "5"}),
        json.dumps({"id": "b", "prompt": "   ", "answer": "6"}),
        json.dumps({"id": "c", "answer": "7"}),
        "[1]",
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    found = problems_of(path=path, reward_funcs=exact, id_column="id")
    assert [p.split(": ", 1)[0] for p in found] == [f"{path}:{n}" for n in (2, 3, 4, 5, 6)]
    assert "not valid JSON" in found[0]
    assert "duplicate id 'a' (first on line 1)" in found[1]
    assert "prompt_column 'prompt' must hold a non-empty string" in found[2]
    assert "got '   '" in found[2] and "got None" in found[3]
    assert "expected a JSON object, got list" in found[4]


def test_the_list_of_bad_lines_is_capped(tmp_path: Path) -> None:
    path = tmp_path / "many.jsonl"
    path.write_text('{"prompt": "ok"}\n' + "nope\n" * 60, encoding="utf-8")
    found = problems_of(path=path, reward_funcs=exact)
    assert len(found) == 51 and found[0].startswith(f"{path}:2: not valid JSON")
    assert found[-1] == "... and 10 more (the first 50 shown)"


def test_missing_optional_libraries_name_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # import fails as if absent
    monkeypatch.setitem(sys.modules, "datasets", None)
    parquet = tmp_path / "rows.parquet"
    parquet.write_bytes(b"PAR1")
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "state.json").write_text("{}")
    for path in (parquet, saved):
        (problem,) = problems_of(path=path, reward_funcs=exact)
        assert "pip install 'teamtr[datasets]'" in problem and "not installed" in problem


# -- parquet and save_to_disk (need the datasets extra) -----------------------------------------
def test_parquet_and_save_to_disk_load_like_jsonl(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    plain = [{k: v for k, v in r.items() if k != "split"} for r in ROWS]
    ds = datasets.Dataset.from_list(ROWS)
    ds.to_parquet(str(tmp_path / "capitals.parquet"))
    ds.save_to_disk(str(tmp_path / "saved"))
    datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_list(plain[:10]),
            "valid": datasets.Dataset.from_list(plain[10:12]),
            "test": datasets.Dataset.from_list(plain[12:]),
        }
    ).save_to_disk(str(tmp_path / "saved_dict"))
    want = capitals(id_column="id").problems
    for name in ("capitals.parquet", "saved", "saved_dict"):
        task = capitals(path=str(tmp_path / name), id_column="id")
        assert [(p.id, p.split) for p in task.problems] == [(p.id, p.split) for p in want], name
        problem = task.problems_in_split("test")[0]
        assert task.grade(problem, problem.data["answer"]).correct
    bad = datasets.DatasetDict({"train": ds, "extra": ds})
    bad.save_to_disk(str(tmp_path / "bad_dict"))
    (problem,) = problems_of(path=tmp_path / "bad_dict", reward_funcs=exact)
    assert "split(s) ['extra']" in problem


def test_columns_that_are_not_json_are_named(tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "b.parquet"
    pq.write_table(pa.table({"prompt": ["a", "b"], "blob": [b"x", b"y"]}), path)
    found = problems_of(path=path, reward_funcs=exact)
    assert [p.split(": rows must", 1)[0] for p in found] == [f"{path}: row 1", f"{path}: row 2"]
    assert all("JSON-serialisable" in p and "blob (bytes)" in p for p in found)
