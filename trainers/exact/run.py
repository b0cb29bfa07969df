"""The relay game of ``trainers.exact.games`` played through the real trainer machinery, sampled.

Each agent is an :class:`adapters.tabular.TabularPolicy` whose states are the observed symbol
(``featurize``: the rendered context -> the symbol of its last ``secret s`` / ``m x`` line; the
turn-0 agent observes the secret) and whose messages are ``"m0"`` .. ``"m{K-1}"``, on
``teamtr/Relay-v0`` (``visibility="previous"``, ``max_turns = n R``). :func:`run_sampled` trains
them with :class:`trainers.learners.team_trainer.TeamTrainer` and, after every update, reads the tables
back and computes the EXACT ``J``, ``L^seq`` and ``KL_tok`` of what the sampled update did.

Scale of the trainer's ``l_seq``. With ``optim.normalize_advantages = false`` and
``optim.a_clip = null`` (what :func:`sampled_config` sets) a message's advantage is
``R_g - mean_G R`` of its group. Given the secret, a group's rollouts are independent, so
``E[w_g (R_g - mean_G R)] = (1 - 1/G) E[w_g (R_g - V(s))]`` and, message by message,
``E[w (R - V(s))] = E_{D_t} E_{m ~ pi_new} A_t`` (a martingale argument). The trainer averages over
the agent's messages (``R`` per episode), so ``E[l_seq] ~ (1 - 1/G) L / R`` and
``l_seq * R / (1 - 1/G)`` estimates the exact surrogate in ``J`` units. It is measured on the
batch the update was fitted to (in-sample), so it is biased upward by the fit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

import teamtr_env
from adapters.tabular import TabularPolicy
from tasks.relay.rules import observed_symbol
from teamtr_core.config import from_dict
from teamtr_env.env import TeamEnv
from trainers.config import TrainConfig
from trainers.exact.games import Array, RelayGame, expected_return, surrogate, token_kl
from trainers.exact.stages import Method
from trainers.learners.callbacks import OnUpdate
from trainers.learners.team_trainer import TeamTrainer

TASK_ID = "teamtr/Relay-v0"


def agent_names(game: RelayGame) -> list[str]:
    """``["a1", ..., "an"]``."""
    return [f"a{i + 1}" for i in range(game.n)]


def relay_env_fn(game: RelayGame) -> Callable[[], TeamEnv]:
    """Builds ``teamtr/Relay-v0`` with ``K`` symbols, agents ``a1..an`` and ``n R`` turns."""
    names = agent_names(game)

    def make() -> TeamEnv:
        return teamtr_env.make(
            TASK_ID, symbols=game.symbols, agents=names, max_turns=game.turns, system_prompts={}
        )

    return make


def featurize(context: str) -> str:
    """The observed symbol of a rendered relay context, as a state key (``"3"``); ``"?"`` when
    there is none (an unknown state: the tabular policy raises on it)."""
    symbol = observed_symbol(context)
    return "?" if symbol is None else str(symbol)


def relay_policies(game: RelayGame, logits: Sequence[Array], seed: int = 0) -> dict[str, Any]:
    """One :class:`TabularPolicy` per agent with the given ``[K, K]`` logits (rows: observed
    symbol, columns: message ``m0..m{K-1}``)."""
    if len(logits) != game.n:
        raise ValueError(f"expected {game.n} logit tables (one per agent), got {len(logits)}")
    k = game.symbols
    out: dict[str, Any] = {}
    for i, name in enumerate(agent_names(game)):
        policy = TabularPolicy(
            [str(x) for x in range(k)],
            [f"m{x}" for x in range(k)],
            featurize=featurize,
            seed=seed + i,
        )
        z = torch.as_tensor(np.asarray(logits[i], dtype=np.float64))
        if z.shape != (k, k):
            raise ValueError(f"logits[{i}] must be [K, K] = [{k}, {k}], got {tuple(z.shape)}")
        with torch.no_grad():
            policy.logits.copy_(z)
        out[name] = policy
    return out


def team_tables(game: RelayGame, policies: dict[str, Any]) -> list[Array]:
    """The team's current probability tables, in agent order (``[K, K]`` float64 each)."""
    return [
        policies[name].log_probs_table().detach().exp().double().numpy().copy()
        for name in agent_names(game)
    ]


def sampled_config(method: Method, **sections: Any) -> TrainConfig:
    """A cheap :class:`TrainConfig` for the relay: temperature 1 (``TabularPolicy`` scores at
    temperature 1), raw centred advantages (``normalize_advantages = false``, ``a_clip = null``,
    so ``l_seq`` has a known scale), no behaviour cloning, no extra diagnostic batches.

    Args:
        method: ``"teamtr"`` or ``"naive_sequential"``.
        sections: overrides per section, e.g. ``schedule={"group_size": 16}``,
            ``trust_region={"delta": 0.02}``.
    """
    data: dict[str, Any] = {
        "task": TASK_ID,
        "sampling": {"temperature": 1.0},
        "sft": None,
        "diagnostics": "off",
        "progress": False,
        "schedule": {"learner": method, "stages": 1, "problems_per_batch": 8, "group_size": 8},
        "optim": {"lr": 0.1, "epochs": 4, "normalize_advantages": False, "a_clip": None},
        "trust_region": {"delta": 0.01, "beta": 0.1},
    }
    for name, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(name), dict):
            data[name] = {**data[name], **value}
        else:
            data[name] = value
    return from_dict(TrainConfig, data, what="relay training config")


@dataclass(frozen=True)
class SampledStage:
    """One sampled stage, measured exactly.

    Attributes:
        method: the trainer's ``schedule.learner``.
        j_before, j_after: exact ``J`` of the team before and after the stage.
        l_hat: per update, the trainer's ``l_seq`` in ``J`` units (``l_seq R / (1 - 1/G)``).
        l_seq: per update, the exact ``L^seq`` of the kept table under the pre-update team.
        improvement: per update, the exact ``J(pi_hat^i) - J(pi_hat^{i-1})``.
        kl_hat: per update, the trainer's monitored ``KL_tok`` of the kept parameters.
        kl_tok: per update, the exact ``KL_tok`` under the pre-update team.
        accepted: per update, whether the trainer kept it.
    """

    method: str
    j_before: float
    j_after: float
    l_hat: tuple[float, ...]
    l_seq: tuple[float, ...]
    improvement: tuple[float, ...]
    kl_hat: tuple[float, ...]
    kl_tok: tuple[float, ...]
    accepted: tuple[bool, ...]

    @property
    def surrogate_error(self) -> float:
        """``|sum_i l_hat_i - (J_after - J_before)|``: the sampled surrogate's total error."""
        return abs(sum(self.l_hat) - (self.j_after - self.j_before))

    @property
    def exact_error(self) -> float:
        """``|sum_i L_i^seq - (J_after - J_before)|`` of the same (sampled) updates."""
        return abs(sum(self.l_seq) - (self.j_after - self.j_before))


def run_sampled(
    game: RelayGame, logits: Sequence[Array], config: TrainConfig, stages: int
) -> list[SampledStage]:
    """Trains the relay team from ``logits`` with :class:`TeamTrainer` for ``stages`` stages and
    measures every stage exactly.

    Uses only the trainer's public surface: ``run_stage()`` with an ``OnUpdate`` callback (the callback snapshots
    the tables after every update) and the update records' ``"agent"``, ``"l_seq"``,
    ``"kl_tok"`` and ``"accepted"``.

    Raises:
        ValueError: ``config`` normalises or clips advantages (then ``l_seq`` has no ``J`` scale),
            or does not sample at temperature 1.
    """
    errors = []
    o = config.optim
    if o.normalize_advantages or o.a_clip is not None or o.advantage != "group":
        errors.append(
            "optim.normalize_advantages must be false, optim.a_clip null and optim.advantage "
            "group (raw centred advantages); build the config with sampled_config()"
        )
    sampling = config.sampling
    if (sampling.temperature, sampling.top_p, sampling.top_k) != (1.0, 1.0, 0):
        errors.append(
            "sampling must be the policy's own distribution (temperature 1, top_p 1, top_k 0: "
            f"TabularPolicy scores at 1), got temperature {sampling.temperature}, top_p "
            f"{sampling.top_p}, top_k {sampling.top_k}"
        )
    if errors:
        raise ValueError("run_sampled: " + "; ".join(errors))
    policies = relay_policies(game, logits, seed=config.seed)
    trainer = TeamTrainer(config, relay_env_fn(game), policies)
    g = config.schedule.group_size
    scale = game.rounds / (1.0 - 1.0 / g) if g > 1 else math.nan
    names = agent_names(game)
    out = []
    for _ in range(stages):
        snapshots = [team_tables(game, policies)]

        def snapshot(record: Any, into: list[list[Array]] = snapshots) -> None:
            into.append(team_tables(game, policies))

        watch = OnUpdate(snapshot)
        trainer.callbacks.append(watch)
        try:
            report = trainer.run_stage()
        finally:
            trainer.callbacks.remove(watch)
        l_seq, gains, kls = [], [], []
        for u, before, after in zip(report.updates, snapshots[:-1], snapshots[1:]):
            k = names.index(u.agent)
            l_seq.append(surrogate(game, before, k, after[k]))
            gains.append(expected_return(game, after) - expected_return(game, before))
            kls.append(token_kl(game, before, k, after[k]))
        out.append(
            SampledStage(
                method=trainer.config.schedule.learner,
                j_before=expected_return(game, snapshots[0]),
                j_after=expected_return(game, snapshots[-1]),
                l_hat=tuple(u.l_seq * scale for u in report.updates),
                l_seq=tuple(l_seq),
                improvement=tuple(gains),
                kl_hat=tuple(u.kl_tok for u in report.updates),
                kl_tok=tuple(kls),
                accepted=tuple(u.accepted for u in report.updates),
            )
        )
    return out
