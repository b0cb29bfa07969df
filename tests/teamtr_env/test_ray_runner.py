"""RayRunner on a local two-CPU Ray: the same records as the local runner, weights synced after every
update (no stale replica), a killed worker replaced without losing or double-counting anything."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from helpers_skip import skip_module_without

skip_module_without("ray")

import teamtr_env  # noqa: E402
from adapters.scripted import RandomPolicy  # noqa: E402
from teamtr_core.errors import ConfigError  # noqa: E402
from teamtr_core.policy import Generation, SamplingParams  # noqa: E402
from teamtr_env.runners import RayRunner, RolloutFailed, Runner  # noqa: E402

# One worker of a parallel run (pytest -n, make test) holds the session's local Ray.
pytestmark = pytest.mark.xdist_group("ray")


@pytest.fixture(autouse=True)
def _ray(local_ray: None) -> None:
    """Every test here runs on the session's local two-CPU Ray (tests/conftest.py); its workers
    get this module's classes by value (they cannot import tests/)."""
    import ray

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def env_fn():  # type: ignore[no-untyped-def]
    return teamtr_env.make("teamtr/Arith-v0", digits=1)


class KillOnce:
    """RandomPolicy that kills its own worker process the first time it plays (a marker file
    says it has), as a crashed node would."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker
        self.inner = RandomPolicy(seed=0)

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        if not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            os._exit(1)
        return self.inner.generate(prompts, sampling)


class FailsOn:
    """Raises whenever a context shows the given sum."""

    def __init__(self, needle: str) -> None:
        self.needle = needle

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        if any(self.needle in p for p in prompts):
            raise RuntimeError(f"cannot play {self.needle}")
        return [Generation("Answer: 1") for _ in prompts]


@pytest.mark.slow
def test_records_equal_the_local_runners_for_the_same_seeds(tiny_model_dir: Path) -> None:
    from adapters.hf import HFPolicy

    local = Runner(env_fn, RandomPolicy(seed=0), progress=False)
    problems = local.sample_problems(5, seed=1)
    on_ray = RayRunner(env_fn, RandomPolicy(seed=0), workers=2)
    batch = on_ray.rollout(problems, group_size=2, seed=3)
    on_ray.shutdown()  # each test's workers take the local Ray's two CPUs
    sharded = local.rollout(problems, group_size=2, seed=3, shards=2)
    assert batch.messages == sharded.messages and batch.episodes == sharded.episodes
    assert [e.problem_id for e in batch.episodes] == [p.id for p in problems for _ in range(2)]
    one = RayRunner(env_fn, RandomPolicy(seed=0), workers=1)  # one block: the plain rollout
    assert one.rollout(problems, 2, seed=3).episodes == local.rollout(problems, 2, seed=3).episodes
    one.shutdown()
    # A model policy samples its batch from seeded torch streams: the same records too.
    sampling = SamplingParams(temperature=1.0, max_new_tokens=6)
    hf_local = Runner(env_fn, HFPolicy.from_pretrained(tiny_model_dir), sampling, progress=False)
    hf_ray = RayRunner(env_fn, HFPolicy.from_pretrained(tiny_model_dir), sampling, workers=2)
    a = hf_ray.rollout(problems, 2, seed=4)
    hf_ray.shutdown()
    b = hf_local.rollout(problems, 2, seed=4, shards=2)
    assert a.messages == b.messages and a.episodes == b.episodes
    assert any(m.clipped for m in a.messages)  # cut-off messages stay marked across workers
    with pytest.raises(
        ConfigError, match="3 workers x 1 CPUs = 3 CPUs, but the Ray cluster has 2 free"
    ):
        RayRunner(env_fn, RandomPolicy(seed=0), workers=3)


@pytest.mark.slow  # a worker killed and replaced (two Ray actor starts); a failing block's retries and error in test_a_problem_that_keeps_failing_is_named_and_does_not_hang
def test_a_killed_worker_is_replaced_and_nothing_is_lost_or_counted_twice(tmp_path: Path) -> None:
    marker = tmp_path / "killed"
    runner = RayRunner(env_fn, KillOnce(marker), workers=2)
    problems = Runner(env_fn, RandomPolicy(seed=0), progress=False).sample_problems(4, seed=2)
    batch = runner.rollout(problems, group_size=2, seed=5)
    assert marker.exists() and runner.restarts == 1
    expected = Runner(env_fn, RandomPolicy(seed=0), progress=False).rollout(
        problems, group_size=2, seed=5, shards=2
    )
    assert batch.episodes == expected.episodes and batch.messages == expected.messages
    assert [e.episode for e in batch.episodes] == list(range(8))
    runner.shutdown()


def two_digit_env():  # type: ignore[no-untyped-def]
    prompts = {a: "OTHER SPLIT" for a in ("solver", "critic", "aggregator")}
    return teamtr_env.make("teamtr/Arith-v0", digits=2, system_prompts=prompts)


def random_team() -> dict[str, RandomPolicy]:
    """What each worker builds for itself (``team=``): the driver passes no policy."""
    return {a: RandomPolicy(seed=0) for a in env_fn().possible_agents}


def test_workers_build_their_team_and_play_another_split_on_request() -> None:
    """``team=``: each worker builds its replicas (the driver's map holds stand-ins);
    ``for_env``: the same workers play another environment's problems, as a local runner of
    that environment would, and the first runner still plays its own."""
    stand_ins = dict.fromkeys(env_fn().possible_agents, "built on the workers")
    # One worker (one actor start) playing two blocks, as two workers would.
    runner = RayRunner(env_fn, stand_ins, workers=1, num_cpus=0.25, team=random_team)
    other = runner.for_env(two_digit_env)
    local = Runner(two_digit_env, RandomPolicy(seed=0), progress=False)
    problems = local.sample_problems(4, seed=2)
    assert other.sample_problems(4, seed=2) == problems  # drawn from the new environment
    batch = other.rollout(problems, group_size=2, seed=5, shards=2)
    expected = local.rollout(problems, group_size=2, seed=5, shards=2)
    assert batch.episodes == expected.episodes and batch.messages == expected.messages
    assert all("OTHER SPLIT" in m.context for m in batch.messages)  # that environment's
    again_other = runner.for_env(two_digit_env)  # the same split: the workers' environments
    assert again_other._env == other._env
    again_batch = again_other.rollout(problems, group_size=2, seed=5, shards=2)
    assert again_batch.episodes == expected.episodes
    own = Runner(env_fn, RandomPolicy(seed=0), progress=False)
    first = own.sample_problems(3, seed=1)
    again = runner.rollout(first, group_size=1, seed=4, shards=2)
    assert again.episodes == own.rollout(first, group_size=1, seed=4, shards=2).episodes
    runner.shutdown()


def test_a_problem_that_keeps_failing_is_named_and_does_not_hang() -> None:
    local = Runner(env_fn, RandomPolicy(seed=0), progress=False)
    problems = local.sample_problems(4, seed=2)
    bad = problems[3]
    # One worker (one actor start) playing two blocks: the failing block is named.
    runner = RayRunner(env_fn, FailsOn(bad.data["expression"]), workers=1, max_retries=1)
    with pytest.raises(
        RolloutFailed, match=re.escape(bad.id) + r".*failed 2 times.*RuntimeError: cannot play"
    ):
        runner.rollout(problems, group_size=1, seed=0, shards=2)
    runner.shutdown()


@pytest.mark.slow
def test_eval_and_train_on_ray_from_the_cli(tmp_path: Path, capsys) -> None:
    from teamtr_cli import main

    out = tmp_path / "report.json"
    argv = ["eval", "teamtr/Arith-v0", "-o", "digits=1", "--policy", "random", "--k", "2"]
    assert main([*argv, "--problems", "6", "--ray", "--workers", "2", "--out", str(out)]) == 0
    assert out.exists()
    assert main([*argv, "--problems", "6", "--workers", "2"]) == 2  # --workers needs --ray
    assert "--workers needs --ray" in capsys.readouterr().err
