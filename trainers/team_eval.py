"""A training run's team and its evaluations: each agent's policy and sampling, avg@K / pass@K on
distinct held-out problems with bootstrap CIs, and the share of messages cut off at the token
limit (warned about before training)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from teamtr_core.policy import SamplingParams
from teamtr_core.seeds import EVAL_STREAM, INIT_STREAM, derive_seed
from teamtr_env.evaluation import CLIPPED_WARN_RATIO, evaluate
from teamtr_env.runners import Runner
from trainers.config import TrainConfig

log = logging.getLogger(__name__)


def build_policies(config: TrainConfig, env: Any, run_dir: Path) -> dict[str, Any]:
    """Every agent's policy: the team config's, or a separate copy of the tiny model each. A
    team config's fresh weights (new LoRA adapters) are drawn from the run's seed, so a run and
    its rerun (or a separate and a shared-base team) start alike."""
    if config.team is not None:
        import torch

        from adapters.team import build_team

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(config.seed, INIT_STREAM))
            policies, _ = build_team(config.team, env.possible_agents, env.task)
        return policies
    from adapters.hf import HFPolicy
    from adapters.tiny import build_tiny_model

    path = run_dir / "models" / "tiny"
    if not (path / "config.json").exists():
        build_tiny_model(path, config.tiny_model)
    return {a: HFPolicy.from_pretrained(path) for a in env.possible_agents}


def agent_sampling(config: TrainConfig, agents: Sequence[str]) -> dict[str, SamplingParams]:
    """Each agent's rollout sampling: its own ``sampling`` in the team config, else the team's,
    else the run's ``sampling`` (every agent's when there is no team config)."""
    if config.team is not None:
        from adapters.team import team_sampling

        return team_sampling(config.team, agents, base=config.sampling)
    return dict.fromkeys(agents, config.sampling)


def evaluate_team(
    config: TrainConfig,
    env_fn: Callable[[], Any],
    policies: dict[str, Any],
    prefix: str = "eval",
    per_problem: dict[str, float] | None = None,
) -> dict[str, float]:
    """avg@K / pass@K (and maj@K) on up to ``config.eval.problems`` distinct problems of
    ``env_fn``'s problem set (for generated tasks, the held-out split's partition: disjoint from
    the training problems); a small split gives fewer (``Runner.sample_distinct``).

    ``prefix`` namespaces the keys: ``eval/`` for the before/after (test) evaluation, ``val/`` for
    the validation evaluations used for model selection. ``problems/{prefix}_distinct`` is the
    number of distinct problems evaluated (logged, not plotted); ``{prefix}/clipped_ratio/<agent>``
    the share of each agent's messages that hit the token limit (cut off). ``per_problem``, when
    given, receives each problem's avg@K (``problem id -> correct / K``): what paired
    comparisons of two teams on the same problems resample."""
    sampling = agent_sampling(config, list(policies))
    runner = Runner(env_fn, policies, sampling, progress=False)
    seed = derive_seed(config.seed, EVAL_STREAM)
    problems, draw = runner.sample_distinct(config.eval.problems, seed=seed)
    if draw.shortfall:
        log.info("%s evaluation: %s", prefix, draw.message)
    report = evaluate(runner, problems, config.eval.k, seed=seed)
    if per_problem is not None:
        per_problem.update(
            {r["problem_id"]: r["correct"] / r["samples"] for r in report.per_problem}
        )
    out: dict[str, float] = {f"{prefix}/{name}": m.mean for name, m in report.metrics.items()}
    for name, m in report.metrics.items():  # bootstrap CIs over distinct problems (not plotted)
        out[f"ci/{prefix}/{name}_low"], out[f"ci/{prefix}/{name}_high"] = m.ci_low, m.ci_high
    out[distinct_key(prefix)] = report.n_problems_distinct
    for agent, ratio in report.clipped_ratio.items():
        out[clipped_key(prefix, agent)] = ratio
    return out


def clipped_key(prefix: str, agent: str) -> str:
    """The metric key of ``agent``'s share of messages cut off at the token limit in an
    evaluation (``eval/clipped_ratio/solver``)."""
    return f"{prefix}/clipped_ratio/{agent}"


def clipped_warnings(
    metrics: Mapping[str, float], sampling: Mapping[str, SamplingParams]
) -> list[str]:
    """One line per agent whose share of messages that hit the token limit exceeds
    ``CLIPPED_WARN_RATIO`` in the evaluations of ``metrics`` (its highest share over ``eval/``
    and ``train_eval/``), naming the share and the agent's ``sampling.max_new_tokens``."""
    lines = []
    for agent, params in sampling.items():
        shares = [
            metrics[key]
            for key in (clipped_key("eval", agent), clipped_key("train_eval", agent))
            if key in metrics
        ]
        share = max(shares, default=0.0)
        if share > CLIPPED_WARN_RATIO:
            lines.append(
                f"{share:.0%} of {agent}'s messages in the evaluation before training hit the "
                f"token limit (sampling.max_new_tokens = {params.max_new_tokens}) without an end "
                "token: its messages are being cut off. Raise sampling.max_new_tokens (e.g. "
                "--set sampling.max_new_tokens=N; with a team config, the agent's own sampling "
                "section if it sets one) to at least the longest answer in tokens plus one for "
                "the end token."
            )
    return lines


def distinct_key(prefix: str) -> str:
    """The metric key of the number of distinct problems an evaluation used."""
    return f"problems/{prefix}_distinct"


def evaluate_all(
    config: TrainConfig,
    eval_fn: Callable[[], Any],
    train_fn: Callable[[], Any],
    policies: dict[str, Any],
    per_problem: dict[str, float] | None = None,
) -> dict[str, float]:
    """The held-out evaluation (``eval/``) and, if asked, the training split's (``train_eval/``),
    each with its number of distinct problems (``problems/eval_distinct``,
    ``problems/train_eval_distinct``); ``per_problem`` receives the held-out problems' avg@K
    (see :func:`evaluate_team`)."""
    out = evaluate_team(config, eval_fn, policies, per_problem=per_problem)
    if config.eval.train_distribution:
        out.update(evaluate_team(config, train_fn, policies, prefix="train_eval"))
    return out
