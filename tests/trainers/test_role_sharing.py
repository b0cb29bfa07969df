"""Role-sharing teams (``team.shared_policy``): one policy, one model and one optimizer, plays
every agent. The team config builds one object for every agent and refuses configs that differ;
the trainer gives the agents one updater and one version; each learner steps the one model on
every agent's update; checkpoints hold its weights once; warm start clones it once; the memory
plan counts it once; an export writes one folder."""

from __future__ import annotations

import copy
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from helpers_trainers import SMALL, config
from rich.console import Console
from test_local_rewards import AGENTS, CHOICES, pipeline_env

from adapters.tabular import TabularPolicy
from adapters.team import build_team, check_team, team_config_from_dict
from teamtr_core.errors import ConfigError
from trainers.learners.team_trainer import TeamTrainer
from trainers.placement.agents import LocalAgent
from trainers.run import rundir
from trainers.run.config_file import load_train_config
from trainers.run.recipe import run_training
from trainers.tools.export import SHARED_FOLDER, export_run, load_run_team


def shared_table(seed: int = 0) -> dict[str, TabularPolicy]:
    """One table plays both steps of the 2-step chain; its state is the seat that writes (the
    context ends with the writer's header), so the one model can learn both steps."""

    def seat(context: str) -> str:
        return "step2" if context.rstrip().endswith("### step2") else "step1"

    table = TabularPolicy(["step1", "step2"], CHOICES, featurize=seat, seed=seed)
    return dict.fromkeys(AGENTS, table)


def test_a_shared_policy_config_builds_one_object_for_every_agent(tiny_model_dir: Path) -> None:
    team = team_config_from_dict(
        {
            "shared_policy": True,
            "default": {"backend": "hf", "path": str(tiny_model_dir)},
            "agents": {
                "critic": {
                    "backend": "hf",
                    "path": str(tiny_model_dir),
                    "sampling": {"temperature": 0.5},
                }
            },
        }
    )
    agents = ["solver", "critic", "aggregator"]
    policies, sampling = build_team(team, agents)
    assert len({id(p) for p in policies.values()}) == 1
    assert sampling["critic"].temperature == 0.5 != sampling["solver"].temperature
    alone, _ = build_team(team, agents, only=["aggregator"])
    assert list(alone) == ["aggregator"]


def test_a_shared_policy_refuses_configs_that_differ_and_shared_base_at_once(
    tiny_model_dir: Path,
) -> None:
    team = team_config_from_dict(
        {
            "shared_policy": True,
            "shared_base": True,
            "default": {"backend": "hf", "path": str(tiny_model_dir), "lora": {"r": 4}},
            "agents": {"critic": {"backend": "random"}},
        }
    )
    with pytest.raises(ConfigError) as info:
        check_team(team, ["solver", "critic"])
    errors = info.value.errors
    assert any("shared_base" in e and "keep one" in e for e in errors)
    assert any("['critic']" in e and "more than sampling" in e for e in errors)


def test_the_trainer_gives_a_shared_policy_one_optimizer_and_one_version() -> None:
    cfg = config(
        schedule={"learner": "teamtr", "stages": 1, "problems_per_batch": 2, "group_size": 4},
        diagnostics=False,
    )
    trainer = TeamTrainer(cfg, pipeline_env, shared_table())
    first, second = (trainer.slots[a] for a in AGENTS)
    assert isinstance(first, LocalAgent) and isinstance(second, LocalAgent)
    assert first.optimizer is second.optimizer
    assert len(first.optimizer.param_groups[0]["params"]) == 1  # the one table
    assert first.region is not second.region  # each agent its own trust region
    report = trainer.run_stage()
    accepted = sum(u.accepted for u in report.updates)
    assert trainer.versions() == dict.fromkeys(AGENTS, accepted)
    # every sampling saw the one version both agents play
    assert [len(set(e.versions.values())) for e in report.samples] == [1, 1]


@pytest.mark.parametrize("learner", ["at_grpo", "teamtr", "naive_sequential", "joint"])
def test_every_learner_trains_the_shared_policy_on_every_agents_turns(learner: str) -> None:
    """The one table learns step 1 from step1's updates and step 2 from step2's: each agent's
    update steps the shared model on that agent's messages."""
    cfg = config(
        reward={"team": 1.0, "local": 1.0},
        schedule={"learner": learner, "stages": 6, "problems_per_batch": 4, "group_size": 4},
        optim={"lr": 0.5, "epochs": 2},
        trust_region={"delta_mode": "none"},
        diagnostics=False,
    )
    team = shared_table()
    table = team["step1"]

    def prob(state: str, text: str) -> float:
        return float(table.probs(state).detach()[CHOICES.index(text)])

    before = prob("step1", "2 +1"), prob("step2", "Answer: 3")
    trainer = TeamTrainer(cfg, pipeline_env, team)
    for _ in range(cfg.schedule.stages):
        report = trainer.run_stage()
        assert [u.agent for u in report.updates] == list(AGENTS)
    after = prob("step1", "2 +1"), prob("step2", "Answer: 3")
    assert after[0] > before[0] + 0.2 and after[1] > before[1] + 0.2


SAMPLER_CASES = {
    "at_grpo": {},
    "joint": {},
    "naive_sequential": {},
    "independent": {},
    "teamtr": {"resample_every": 2},  # one batch serves both updates
}


@pytest.mark.parametrize("learner", list(SAMPLER_CASES))
def test_every_agents_behaviour_log_probs_are_the_samplers_under_a_shared_policy(
    learner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loss of every update takes its behaviour log-probs (the ratio's denominator) from the
    policy that sampled its batch, not from the shared model as the stage's earlier updates
    left it: PettingLLMs computes them once, before the update. Without keeping them, agent 2's
    ratio would start at 1 on messages the moved model no longer samples as the sampler did."""
    import trainers.optim.update as update_module

    cfg = config(
        schedule={
            "learner": learner,
            "stages": 2,
            "problems_per_batch": 4,
            "group_size": 4,
        },
        learner_options=SAMPLER_CASES[learner],
        optim={"lr": 0.5, "epochs": 2},
        trust_region={"delta_mode": "none"},
        diagnostics=False,
    )
    # one state for both seats: every update moves what the other agent's messages are scored by
    table = TabularPolicy(["any"], CHOICES, featurize=lambda context: "any", seed=0)
    team = dict.fromkeys(AGENTS, table)
    trainer = TeamTrainer(cfg, pipeline_env, team)
    samplers: list[TabularPolicy] = []  # the table as it was at each training sampling
    sample = trainer.sampler.__call__

    def recording(*args: Any, **kwargs: Any) -> Any:
        samplers.append(team["step1"].copy())
        return sample(*args, **kwargs)

    monkeypatch.setattr(type(trainer.sampler), "__call__", lambda self, *a, **k: recording(*a, **k))
    used: list[tuple[list[Any], torch.Tensor, TabularPolicy]] = []
    moved: list[float] = []  # how far the shared model at each update is from the sampler
    step, loss = update_module.policy_step, update_module._loss
    current: list[Any] = []

    def step_spy(policy: Any, optimizer: Any, messages: Any, *args: Any, **kwargs: Any) -> Any:
        current[:] = [list(messages)]
        contexts, texts = [m.context for m in messages], [m.text for m in messages]
        now = policy.logprobs(contexts, texts).logprobs.detach()
        then = samplers[-1].logprobs(contexts, texts).logprobs.detach()
        moved.append(float((now - then).abs().max()))
        return step(policy, optimizer, messages, *args, **kwargs)

    def loss_spy(new: Any, cur: Any, *args: Any) -> Any:
        used.append((current[0], cur.logprobs.detach().clone(), samplers[-1]))
        return loss(new, cur, *args)

    monkeypatch.setattr(update_module, "policy_step", step_spy)
    monkeypatch.setattr(update_module, "_loss", loss_spy)
    gaps = []
    for _ in range(cfg.schedule.stages):
        trainer.run_stage()
    assert used, "no update ran"
    for messages, behaviour, sampler in used:
        expected = sampler.logprobs([m.context for m in messages], [m.text for m in messages])
        gaps.append(float((behaviour[:, :1] - expected.logprobs.detach()).abs().max()))
    assert max(gaps) < 1e-5, gaps
    # the shared model had moved from the sampler by then: its own log-probs would be wrong
    assert max(moved) > 0.1, moved


def test_a_learner_that_reuses_a_batch_of_a_moved_shared_model_is_stopped() -> None:
    """A learner of the user's that updates two agents of one model from one batch without
    keeping the sampler's log-probs gets an error that says what to call, not a silent
    off-policy update."""
    from teamtr_core.errors import LearnerError
    from trainers.learners.base import Learner

    class Forgetful(Learner):
        def run_stage(self, stage: Any) -> None:
            batch = stage.sample(0, stage.schedule.batch_prompts(1))
            for i, agent in enumerate(stage.order):
                stage.update(agent, batch, index=i)

    cfg = config(
        schedule={"stages": 1, "problems_per_batch": 4, "group_size": 4},
        optim={"lr": 0.5},
        trust_region={"delta_mode": "none"},
        diagnostics=False,
    )
    trainer = TeamTrainer(cfg, pipeline_env, shared_table(), Forgetful())
    with pytest.raises(LearnerError, match="keep_sampler_logprobs"):
        trainer.run_stage()
    # with a model per agent the same learner is fine: each model is its batch's sampler
    separate = {a: shared_table(seed=i)[a] for i, a in enumerate(AGENTS)}
    TeamTrainer(cfg, pipeline_env, separate, Forgetful()).run_stage()


def test_what_a_shared_policy_cannot_do_is_refused() -> None:
    for overrides, phrase in (
        ({"runner": {"agents": "ray"}}, "runner.agents"),
        (
            {
                "schedule": {"learner": "naive_sequential"},
                "learner_options": {"importance_weighting": True},
            },
            "importance_weighting",
        ),
    ):
        with pytest.raises(ConfigError, match=phrase):
            TeamTrainer(config(diagnostics=False, **overrides), pipeline_env, shared_table())


def test_a_checkpoint_holds_the_shared_weights_once_and_resumes() -> None:
    cfg = config(
        schedule={"learner": "teamtr", "stages": 2, "problems_per_batch": 2, "group_size": 4},
        diagnostics=False,
    )
    trainer = TeamTrainer(cfg, pipeline_env, shared_table())
    trainer.run_stage()
    state = copy.deepcopy(trainer.state_dict())
    saved, alone = io.BytesIO(), io.BytesIO()
    torch.save(rundir.plain(state), saved)
    torch.save(rundir.plain({**state, "slots": {"step1": state["slots"]["step1"]}}), alone)
    assert saved.tell() < alone.tell() + 2_000  # the second slot adds its region, not weights
    again = TeamTrainer(cfg, pipeline_env, shared_table(seed=5))
    again.load_state_dict(state)
    table = again.policies["step1"]
    assert table is again.policies["step2"]
    assert torch.allclose(table.logits, trainer.policies["step1"].logits)
    assert again.versions() == trainer.versions()
    resumed = again.run_stage().updates[0].kl_raw
    torch.set_rng_state(state["torch_rng"])  # the stage both play from
    assert resumed == pytest.approx(trainer.run_stage().updates[0].kl_raw, rel=1e-5)


def _shared_run(root: Path, tiny_model_dir: Path, learner: str = "at_grpo") -> Path:
    (root / "models").mkdir(parents=True)
    shutil.copytree(tiny_model_dir, root / "models" / "tiny")
    team = {"shared_policy": True, "default": {"backend": "hf", "path": "models/tiny"}}
    (root / "team.yaml").write_text(yaml.safe_dump(team))
    data: dict[str, Any] = json.loads(json.dumps(SMALL))
    data.update(team="team.yaml", run_dir=str(root / "run"))
    data["schedule"].update(learner=learner, stages=1)
    (root / "train.yaml").write_text(yaml.safe_dump(data))
    return root / "train.yaml"


def test_a_shared_policy_run_trains_exports_one_folder_and_evaluates(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    config_file = _shared_run(tmp_path, tiny_model_dir)  # train.yaml names team.yaml
    cfg = load_train_config(config_file)
    assert cfg.team is not None and cfg.team.default is not None
    assert cfg.team.default.path == str((tmp_path / "models" / "tiny").resolve())
    console = io.StringIO()
    summary = run_training(cfg, console=Console(file=console, width=200))
    assert summary["stages"] == 1
    written = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert written["team"]["default"]["path"] == cfg.team.default.path  # resumable as is
    assert "one shared model" in console.getvalue()  # behaviour cloning: once, on every seat
    team = load_run_team(cfg.run_dir)
    assert len({id(p) for p in team.policies.values()}) == 1
    manifest = export_run(cfg.run_dir, tmp_path / "out")
    folders = {entry["folder"] for entry in manifest["agents"].values()}
    assert folders == {SHARED_FOLDER}
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_dir()) == [SHARED_FOLDER]
    exported = yaml.safe_load((tmp_path / "out" / "team.yaml").read_text())
    assert exported["shared_policy"] is True
    from adapters.team import load_team_config

    reloaded = load_team_config(tmp_path / "out" / "team.yaml")
    policies, _ = build_team(reloaded, list(team.policies))
    assert len({id(p) for p in policies.values()}) == 1
    trained = next(iter(team.policies.values())).state_dict()
    for key, value in next(iter(policies.values())).state_dict().items():
        assert torch.allclose(value, trained[key])


def test_the_memory_plan_counts_a_shared_policy_once(tmp_path: Path, tiny_model_dir: Path) -> None:
    import teamtr_env
    from trainers.run.memory_plan import plan_memory

    cfg = load_train_config(_shared_run(tmp_path, tiny_model_dir))
    env = teamtr_env.make(cfg.task, **cfg.task_options)
    shared = plan_memory(cfg, env)
    separate = plan_memory(
        load_train_config(tmp_path / "train.yaml", ["team.shared_policy=false"]), env
    )
    assert [p.agent for p in shared.placed] == ["solver+critic+aggregator"]
    assert len(separate.placed) == 3
    assert shared.placed[0].bytes == separate.placed[0].bytes


def test_warm_start_clones_each_slot_once_on_its_agents_messages(tmp_path: Path) -> None:
    """A team whose solver and critic share one model (a slot of two) and whose aggregator has
    its own: behaviour cloning trains two models, the shared one once on both agents' expert
    messages, and the separate one as a team without sharing would."""
    import teamtr_env
    from adapters.hf import HFPolicy
    from adapters.tiny import build_tiny_model
    from teamtr_core.team import Slot, Team
    from trainers.run.warm_start import warm_start

    cfg = from_dict_small(tmp_path)
    path = build_tiny_model(tmp_path / "tiny", cfg.tiny_model)
    shared, alone = HFPolicy.from_pretrained(path), HFPolicy.from_pretrained(path)
    team = Team([Slot(shared, ("solver", "critic")), Slot(alone, ("aggregator",))])
    env_fn = lambda: teamtr_env.make(cfg.task, **cfg.task_options)  # noqa: E731
    out = io.StringIO()
    info = warm_start(cfg, env_fn, env_fn(), team, Console(file=out))
    assert set(info["final_loss"]) == {"solver", "aggregator"} and info["shared"] is False
    assert "behaviour cloning: 2 models for 3 agents" in out.getvalue()
    assert team["critic"] is team["solver"] is not team["aggregator"]


def from_dict_small(run_dir: Path) -> Any:
    """:data:`SMALL` as a config (2 cloning steps on 8 expert episodes), each model cloned on
    its own (``sft_shared`` off)."""
    from helpers_trainers import small

    return small(run_dir, sft_shared=False)
