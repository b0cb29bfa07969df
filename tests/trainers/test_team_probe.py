"""benchmarks/team_probe.py: the 'is it a team effect?' probe, on scripted teams with known answers."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from adapters.scripted import ConstantPolicy, ScriptedExpert
from teamtr_core.config import from_dict
from trainers.config import TrainConfig

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("team_probe", ROOT / "benchmarks" / "team_probe.py")
assert _spec is not None and _spec.loader is not None
team_probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(team_probe)

AGENTS = ("step1", "step2", "step3")


def _config() -> TrainConfig:
    return from_dict(TrainConfig, {"eval": {"k": 2}})  # the demo's pipeline task


def _expert(error_rate: float, seed: int = 0) -> ScriptedExpert:
    import teamtr_env

    return ScriptedExpert(teamtr_env.make("teamtr/Pipeline-v0").task, error_rate, seed=seed)


def test_an_exact_expert_team_is_right_at_every_step() -> None:
    out = team_probe.probe(_config(), {a: _expert(0.0) for a in AGENTS}, 50, 2)
    assert out["problems_distinct"] == 50 and out["team_avg"] == 1.0
    assert out["step_accuracy"] == {a: 1.0 for a in AGENTS} and out["all_steps_right"] == 1.0
    assert out["p_right_given_earlier_wrong"] is None and out["copy_rate"]["step2"] == 0.0
    assert 0.05 < out["best_constant_answer"] < 0.3


def test_a_noisy_first_agent_shows_in_its_step_accuracy_and_sinks_the_team() -> None:
    policies = {a: _expert(0.0) for a in AGENTS}
    policies["step1"] = _expert(0.5, seed=1)
    out = team_probe.probe(_config(), policies, 100, 2)
    assert 0.35 < out["step_accuracy"]["step1"] < 0.65
    assert out["step_accuracy"]["step2"] == 1.0  # the later agents still do their step right
    # Nobody downstream can repair step1's error: only cancelling errors could, and there are none.
    assert out["p_right_given_earlier_wrong"] == 0.0
    assert abs(out["team_avg"] - out["all_steps_right"]) < 1e-12


def test_a_copying_agent_is_detected() -> None:
    policies = {a: _expert(0.0) for a in AGENTS}
    policies["step3"] = ConstantPolicy("5 +1")  # an unfinished chain: never an answer
    out = team_probe.probe(_config(), policies, 40, 2)
    assert out["team_avg"] == 0.0 and out["step_accuracy"]["step3"] == 0.0
    parrot = {a: _expert(0.0) for a in AGENTS}
    parrot["step2"] = _Parrot()
    out = team_probe.probe(_config(), parrot, 40, 2)
    assert out["copy_rate"]["step2"] == 1.0


class _Parrot:
    """Repeats the last line of content in its context (the previous message)."""

    def generate(self, prompts, sampling):  # type: ignore[no-untyped-def]
        from teamtr_core.policy import Generation

        return [Generation(p.rstrip("\n").split("\n")[-2]) for p in prompts]
