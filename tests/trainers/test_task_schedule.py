"""``task_schedule``: the training problems' task options by stage (a curriculum), applied at the
stage it names, kept on resume, checked before anything is written; evaluation keeps
``task_options``."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from helpers_trainers import CrashAfter, SimulatedCrash, small
from rich.console import Console

from teamtr_core.errors import ConfigError
from trainers.config.task_schedule import TaskStage, scheduled_options
from trainers.run.config_file import load_train_config
from trainers.run.recipe import TrainingRecipe

SCHEDULE = [{"from_stage": 2, "options": {"digits": 2}}]


def test_scheduled_options_merge_in_stage_order() -> None:
    schedule = [TaskStage(5, {"a": 3}), TaskStage(2, {"a": 2, "b": 1})]
    assert scheduled_options({"a": 1}, schedule, 1) == {"a": 1}
    assert scheduled_options({"a": 1}, schedule, 2) == {"a": 2, "b": 1}
    assert scheduled_options({"a": 1}, schedule, 9) == {"a": 3, "b": 1}


def test_a_schedule_switches_the_training_problems_at_its_stage(tmp_path: Path) -> None:
    out = io.StringIO()
    recipe = TrainingRecipe(
        small(
            tmp_path / "run",
            schedule__stages=2,
            task_schedule=SCHEDULE,
            sft=None,
            eval__train_distribution=False,
        ),
        console=Console(file=out, width=200),
    )
    seen: list[int] = []
    original = recipe._run_stage

    def run_stage() -> object:
        assert recipe.trainer is not None
        seen.append(recipe.trainer.runner.env.task.digits)
        return original()

    recipe._run_stage = run_stage  # type: ignore[method-assign]
    try:
        recipe.run()
    finally:
        recipe.close()
    assert seen == [1, 2]
    assert "stage 2: training problems with {'digits': 2} (task_schedule)" in out.getvalue()
    assert recipe.eval_env().task.digits == 1  # evaluation keeps task_options


def test_a_resumed_run_draws_with_its_stage_s_options(tmp_path: Path) -> None:
    config = small(
        tmp_path / "run",
        schedule__stages=3,
        task_schedule=SCHEDULE,
        sft=None,
        eval__train_distribution=False,
    )
    first = TrainingRecipe(config, console=Console(file=io.StringIO()), callbacks=[CrashAfter(2)])
    with pytest.raises(SimulatedCrash):
        first.run()
    first.close()
    again = TrainingRecipe(config, console=Console(file=io.StringIO()))
    again.setup(resume=True)
    try:
        assert again.trainer is not None and again.trainer.stage == 2
        again._schedule_task(3)
        assert again.trainer.runner.env.task.digits == 2
    finally:
        again.close()


def test_a_bad_scheduled_option_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    config = small(
        run_dir,
        task_schedule=[
            {"from_stage": 2, "options": {"digits": 0}},
            {"from_stage": 3, "options": {"digitz": 2}},
        ],
    )
    with pytest.raises(ConfigError) as err:
        TrainingRecipe(config, console=Console(file=io.StringIO())).setup()
    text = str(err.value)
    assert "task_schedule from_stage 2" in text and "digits must be an integer in 1..9" in text
    assert "task_schedule from_stage 3" in text and "'digitz' is not accepted" in text
    assert not run_dir.exists()


def test_schedule_entries_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "task_schedule:\n  - {from_stage: 0, options: {}}\n  - {from_stage: 0}\n"
        "  - {from_stage: 2, option: {}}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_train_config(path)
    text = str(err.value)
    assert "expected a stage >= 1, got 0" in text and "from_stage 0 is given more than once" in text
    assert "unknown key 'option'" in text


@pytest.mark.slow
def test_a_curriculum_over_stages_on_a_reasoning_gym_task(tmp_path: Path) -> None:
    pytest.importorskip("reasoning_gym")
    out = io.StringIO()
    config = small(
        tmp_path / "run",
        task="reasoning_gym/basic_arithmetic",
        task_options={
            "curriculum_level": 0,
            "system_prompts": {"solver": "", "critic": "", "aggregator": ""},
        },
        task_schedule=[{"from_stage": 2, "options": {"curriculum_level": 2}}],
    )
    recipe = TrainingRecipe(config, console=Console(file=out, width=200))
    try:
        recipe.run()
        assert recipe.trainer is not None
        assert recipe.trainer.runner.env.task.dataset_config["max_terms"] == 4  # level 2
        assert recipe.eval_env().task.dataset_config["max_terms"] == 2  # evaluation: level 0
    finally:
        recipe.close()
    assert "stage 2: training problems with {'curriculum_level': 2}" in out.getvalue()
