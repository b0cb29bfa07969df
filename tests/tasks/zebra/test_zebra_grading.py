"""ZeroEval grading: JSON extraction by brace counting, cell rules, edge cases, size buckets."""

from __future__ import annotations

import json
import time

import pytest

from tasks import Score
from tasks.zebra.grading import (
    SIZE_BUCKETS,
    aggregate,
    extract_last_complete_json,
    gold_table,
    grade_grid,
    size_bucket,
    zeroeval_group,
)

GOLD = gold_table(
    {
        "header": ["House", "Name", "Drink"],
        "rows": [["1", "Arnold", "tea"], ["2", "Eric", "water"]],
    }
)


def answer(table: object, reasoning: str = "r") -> str:
    return json.dumps({"reasoning": reasoning, "solution": table})


RIGHT = {
    "House 1": {"Name": "Arnold", "Drink": "tea"},
    "House 2": {"Name": "Eric", "Drink": "water"},
}


def test_extract_last_complete_top_level_object() -> None:
    assert extract_last_complete_json('a {"x": 1} b {"y": {"z": 2}} c') == {"y": {"z": 2}}
    assert extract_last_complete_json('{"x": 1} then {"y": 2') == {"x": 1}  # unclosed: ignored
    assert extract_last_complete_json('}} {"x": 1} }') == {"x": 1}  # stray closers skipped
    assert extract_last_complete_json('{"x": 1} {bad json}') is None  # the last one decides
    assert extract_last_complete_json('{"s": "a\nb"}') == {"s": "ab"}  # newlines removed first
    assert extract_last_complete_json("no braces") is None
    # braces inside strings count, exactly as ZeroEval's counter does
    assert extract_last_complete_json('{"s": "}"}') is None


def test_correct_answer_and_normalisation() -> None:
    noisy = {
        "House 1": {"Name": "  ARNOLD ", "Drink": ["Tea", "milk"], "Extra": "x"},
        "House 2": {"Name": "eric", "Drink": "Water"},
        "House 3": {"Name": "ignored"},
    }
    text = "Let me think {scratch} ...\n```json\n" + answer(noisy) + "\n```"
    result = grade_grid(GOLD, text)
    assert result.correct and result.reason == "correct"
    assert (result.cells_correct, result.cells_total) == (4, 4)
    assert result.cells == ("arnold", "tea", "eric", "water")


@pytest.mark.parametrize(
    ("table", "right"),
    [
        ({"house 1": RIGHT["House 1"], "House 2": RIGHT["House 2"]}, 2),  # house key case
        ({"House 1": {"name": "Arnold", "drink": "tea"}, "House 2": RIGHT["House 2"]}, 2),
        ({"House 1": RIGHT["House 1"]}, 2),  # missing house
        ({"House 1": {"Name": "Arnold", "Drink": None}, "House 2": RIGHT["House 2"]}, 3),
        ({"House 1": {"Name": "Arnold", "Drink": []}, "House 2": RIGHT["House 2"]}, 3),
        ({"House 1": {"Name": "Arnold", "Drink": 7}, "House 2": RIGHT["House 2"]}, 3),
        ({"House 1": {"Name": "Arnold", "Drink": [7]}, "House 2": RIGHT["House 2"]}, 3),
        ({"House 1": {"Name": "Arnold", "Drink": {"a": 1}}, "House 2": RIGHT["House 2"]}, 3),
        ({"House 1": ["Name", "Drink"], "House 2": RIGHT["House 2"]}, 2),  # house not an object
        ({"House 1": {"Name": "Eric", "Drink": "tea"}, "House 2": RIGHT["House 2"]}, 3),
        ("House 1 Arnold", 0),  # solution not an object
        ([RIGHT], 0),
    ],
)
def test_partially_wrong_answers(table: object, right: int) -> None:
    result = grade_grid(GOLD, answer(table))
    assert result.answered and not result.correct
    assert result.reason == "wrong_cells"
    assert (result.cells_correct, result.cells_total) == (right, 4)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "no_json"),
        ("The answer is Arnold, tea, Eric, water.", "no_json"),
        ('{"reasoning": "x", "solution": {"House 1": {"Name": "Arnold",}}}', "no_json"),
        ("{'solution': {}}", "no_json"),  # Python repr, not JSON
        ('{"reasoning": "x"}', "no_solution_key"),
        ('{"reasoning": "x", "solution": null}', "no_solution_key"),
        ('{"Solution": {"House 1": {"Name": "Arnold"}}}', "no_solution_key"),
        ('{"a": ' * 500 + "1" + "}" * 500, "no_solution_key"),
        ('{"a": ' * 5000 + "1" + "}" * 5000, "no_json"),  # json's RecursionError is caught
        ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "no_json"),  # too deep to decode
        ('{"a": ' + "9" * 5000 + "}", "no_json"),  # an integer beyond Python's digit limit
    ],
)
def test_no_answer_cases(text: str, reason: str) -> None:
    result = grade_grid(GOLD, text)
    assert not result.answered and not result.correct
    assert result.reason == reason
    assert (result.cells_correct, result.cells_total) == (0, 4)


def test_huge_inputs_are_fast_and_bounded() -> None:
    start = time.perf_counter()
    huge = "x" * 1_500_000 + "{" * 100_000 + answer(RIGHT)
    assert grade_grid(GOLD, huge).reason == "no_json"  # the opening braces never close
    assert grade_grid(GOLD, "x" * 1_900_000 + answer(RIGHT)).correct
    assert grade_grid(GOLD, "x" * 2_000_001 + answer(RIGHT)).reason == "answer_too_long"
    assert time.perf_counter() - start < 5.0


def test_gold_table_validation() -> None:
    with pytest.raises(ValueError, match="header must start with 'House'"):
        gold_table({"header": ["Name"], "rows": []})
    with pytest.raises(ValueError, match="rows must be lists"):
        gold_table({"header": ["House", "Name"], "rows": [["1"]]})


def test_size_buckets_cover_all_25_sizes_once() -> None:
    sizes = [s for group in SIZE_BUCKETS.values() for s in group]
    assert sorted(sizes) == sorted(f"{n}*{m}" for n in range(2, 7) for m in range(2, 7))
    assert size_bucket("3*3") == "Small" and size_bucket("4*2") == "Small"
    assert size_bucket("4*4") == "Medium" and size_bucket("6*2") == "Medium"
    assert size_bucket("4*6") == "Large" and size_bucket("6*3") == "Large"
    assert size_bucket("5*5") == "XL" and size_bucket("6*6") == "XL"
    assert zeroeval_group("3*3") == "Easy" and zeroeval_group("4*2") == "Hard"
    with pytest.raises(ValueError, match="N\\*M"):
        size_bucket("7*7")


def test_aggregate_pools_cells_and_counts_unanswered() -> None:
    def details(bucket: str, right: int, total: int, answered: bool = True) -> dict:
        return {
            "bucket": bucket,
            "cells_correct": right,
            "cells_total": total,
            "answered": answered,
        }

    scores = [
        Score(1.0, True, "a", details("Small", 4, 4)),
        Score(0.0, False, "b", details("Small", 2, 4)),
        Score(0.0, False, None, details("Small", 0, 4, answered=False)),
        details("XL", 25, 25),  # a bare details mapping works too
    ]
    summary = aggregate(scores)
    assert list(summary) == ["Small", "XL", "All"]
    small = summary["Small"]
    assert (small.puzzles, small.solved, small.no_answer) == (3, 1, 1)
    assert small.puzzle_acc == pytest.approx(1 / 3)
    assert small.cell_acc == pytest.approx(6 / 12)
    assert small.no_answer_rate == pytest.approx(1 / 3)
    assert summary["All"].cell_acc == pytest.approx(31 / 37)
    assert summary["All"].to_dict()["puzzle_acc"] == pytest.approx(0.5)
    assert aggregate([])["All"].puzzle_acc == 0.0
