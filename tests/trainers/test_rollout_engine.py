"""Training with a separate rollout engine (``rollout.engine``; adapters/rollout_engine.py): the
engine gets the trainer's weights after every accepted update and before the next sampling, a
reverted update is never served, syncs are counted per stage, and the engine-trainer log-prob
gap is measured. The engine here is a stand-in with its own copy of the weights (the real vLLM
engine: tests/vllm/)."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from helpers_trainers import config, env_fn, tabular_team

from adapters.rollout_engine import EngineRollouts, close_engines
from adapters.vllm_policy import SyncStats
from teamtr_core.policy import TokenLogprobs
from teamtr_env.rollout import MessageRecord
from trainers.learners.team_trainer import TeamTrainer
from trainers.optim.engine import engine_mismatch

AGENTS = ("a", "b", "c")


class CopyEngine:
    """An engine with its own copy of a policy: it serves what was last synced into it."""

    def __init__(self, policy) -> None:
        self.served = copy.deepcopy(policy)
        self.syncs = SyncStats()
        self.trainer_policy = policy
        self.stale_samplings = 0
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def sync_weights(self, source) -> int:
        state = source.state_dict()
        self.served.load_state_dict(state)
        self.syncs.add(len(state), sum(t.numel() * 4 for t in state.values()), 0.0)
        return len(state)

    def generate(self, prompts, sampling):
        if not all(
            torch.equal(v, self.trainer_policy.state_dict()[k])
            for k, v in self.served.state_dict().items()
        ):
            self.stale_samplings += 1
        return self.served.generate(prompts, sampling)


def engine_team(seed: int = 0) -> tuple[dict[str, EngineRollouts], dict[str, list[CopyEngine]]]:
    team = tabular_team(AGENTS, seed)
    engines: dict[str, list[CopyEngine]] = {a: [] for a in AGENTS}

    def factory(agent):
        def make():
            engines[agent].append(CopyEngine(team[agent]))
            return engines[agent][-1]

        return make

    return {a: EngineRollouts(team[a], factory(a)) for a in AGENTS}, engines


def run(cfg, policies, stages: int = 2) -> tuple[TeamTrainer, list]:
    trainer = TeamTrainer(cfg, lambda: env_fn(AGENTS), policies)
    return trainer, [trainer.run_stage() for _ in range(stages)]


def records(reports) -> list[dict]:
    """Every update's record, NaN fields dropped (NaN != NaN)."""
    return [
        {k: v for k, v in u.to_dict().items() if not (isinstance(v, float) and math.isnan(v))}
        for r in reports
        for u in r.updates
    ]


def test_the_engine_serves_every_accepted_update_and_trains_as_without_it() -> None:
    cfg = config(schedule__learner="teamtr", diagnostics=False)
    policies, engines = engine_team()
    _, reports = run(cfg, policies)
    _, plain = run(cfg, tabular_team(AGENTS))
    # same samples, same updates: the engine only moved where sampling happens
    assert records(reports) == records(plain)
    updates = [u for r in reports for u in r.updates]
    for agent in AGENTS:
        (engine,) = engines[agent]  # started once, at the first sampling
        assert engine.stale_samplings == 0  # never sampled with weights the trainer no longer had
        accepted = sum(u.accepted and u.step_scale > 0 for u in updates if u.agent == agent)
        # one sync before the first sampling, then one per accepted update (each is followed
        # by a sampling here, except possibly the very last of the run)
        assert accepted <= engine.syncs.count <= accepted + 1
    assert reports[-1].metrics["rollout/sync_count"] >= 1
    assert reports[-1].metrics["rollout/sync_bytes"] > 0


def test_a_reverted_update_is_never_served() -> None:
    # a radius almost no step fits in, and no backtracking: updates are reverted
    cfg = config(
        schedule__learner="teamtr",
        diagnostics=False,
        trust_region__delta=1e-12,
        trust_region__max_backtracks=0,
    )
    policies, engines = engine_team()
    start = {a: copy.deepcopy(p.trainable.state_dict()) for a, p in policies.items()}
    _, reports = run(cfg, policies, stages=1)
    reverted = [u.agent for u in reports[0].updates if not u.accepted]
    assert reverted  # (the k3 token-KL estimate can be <= 0, so some steps are kept)
    for agent in reverted:
        (engine,) = engines[agent]
        assert engine.syncs.count == 1  # the first sampling's sync only
        assert engine.stale_samplings == 0
        for k, v in engine.served.state_dict().items():
            assert torch.equal(v, start[agent][k])
    kept = sum(u.accepted for u in reports[0].updates[:-1])  # each followed by a sampling
    assert reports[0].metrics["rollout/sync_count"] == len(AGENTS) + kept


def test_loading_a_state_marks_the_engine_stale_and_copies_drop_it() -> None:
    policies, _ = engine_team()
    policy = policies["a"]
    policy.generate(["x"], config().sampling)
    assert not policy.stale and policy.started
    policy.load_state_dict(policy.state_dict())
    assert policy.stale
    copied = copy.deepcopy(policy)  # through __getstate__, as pickling to a Ray actor
    assert not copied.started and copied.stale  # restarts, and syncs, where it is unpickled
    assert copied.logprobs(["x"], ["Answer: 1"]).logprobs.shape[0] == 1


def test_closing_an_engine_frees_it_and_a_later_sampling_starts_and_syncs_a_new_one() -> None:
    policies, engines = engine_team()
    sampling = config().sampling
    policies["a"].generate(["x"], sampling)
    close_engines([*policies.values(), tabular_team(AGENTS)["b"]])  # no engine: left alone
    (first,) = engines["a"]
    assert first.closed and not policies["a"].started and policies["a"].stale
    assert engines["b"] == []  # never started, nothing to close
    policies["a"].generate(["x"], sampling)
    second = engines["a"][-1]
    assert second is not first and second.syncs.count == 1 and second.stale_samplings == 0


def test_run_training_closes_the_engines_of_its_run(tmp_path, monkeypatch) -> None:
    """``run_training`` (what ``teamtr train`` and ``teamtr compare`` call) stops the run's
    engines when the run ends, also when it fails, so the next run in the process gets their
    memory."""
    import io

    from helpers_trainers import CrashAfter, SimulatedCrash, small
    from rich.console import Console

    import trainers.run.recipe as recipe_module

    closed: list[list[str]] = []

    def record(policies) -> None:
        closed.append(sorted(type(p).__name__ for p in policies))

    monkeypatch.setattr(recipe_module, "close_engines", record)
    quiet = Console(file=io.StringIO())
    short = {"schedule__stages": 1, "sft": None, "eval__train_distribution": False}
    recipe_module.run_training(small(tmp_path / "run", **short), console=quiet)
    assert len(closed) == 1 and closed[0]  # the run's team, once
    with pytest.raises(SimulatedCrash):
        recipe_module.run_training(
            small(tmp_path / "crash", **short), console=quiet, callbacks=[CrashAfter(1)]
        )
    assert len(closed) == 2


def _messages(logprobs: list[tuple[float, ...]]) -> list[MessageRecord]:
    return [
        MessageRecord(i, i, 0, "a", "ctx", "m", tuple(range(len(lp))), logprobs=lp)
        for i, lp in enumerate(logprobs)
    ]


def test_engine_mismatch_is_the_mean_absolute_gap_and_a_k3_kl() -> None:
    trainer_lp = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, 0.0, 0.0]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    behaviour = [TokenLogprobs(trainer_lp, mask, torch.zeros(2, 3, dtype=torch.long))]
    same = _messages([(-1.0, -2.0), (-0.5,)])
    assert engine_mismatch(same, behaviour) == (0.0, 0.0)
    shifted = _messages([(-1.1, -2.1), (-0.6,)])
    gap, kl = engine_mismatch(shifted, behaviour)
    assert gap == pytest.approx(0.1)
    assert kl == pytest.approx(math.exp(0.1) - 1 - 0.1)
    assert all(math.isnan(x) for x in engine_mismatch(_messages([(), ()]), behaviour))
