"""The paper's inference-time baselines as team-environment configurations (not trainers).

Each protocol is a set of ``make()`` keyword arguments (agents, system prompts, router, visibility,
final-answer rule) plus the number of messages an episode generates, so every protocol runs through
the same env, runner and metrics as a trained team:

============================  ==========================================================  ========
protocol                      how the team talks                                          messages
============================  ==========================================================  ========
``single``                    one agent answers once (chain of thought)                   1
``self_consistency``          ``n`` agents answer independently (``visibility="own"``);   n
                              the majority answer is graded
``debate``                    ``n`` agents answer independently, then for ``rounds - 1``  n*rounds
                              rounds each sees the previous rounds and revises
                              (``visibility="rounds"``); majority of the last round
``debate_judge``              the same debate, then a judge who sees everything gives     n*rounds
                              the graded answer                                           + 1
``role_play``                 fixed roles speak in turn on a shared context; the last     turns
                              role's last message is graded
============================  ==========================================================  ========

Matched budgets (:func:`build_protocol`): with ``budget_kind="samples"`` every sizeable protocol is
sized to generate ``budget`` messages per episode (self-consistency ``n = budget``, debate
``n * rounds (+1) <= budget``, role-play ``budget`` turns); ``single`` stays one message. With
``budget_kind="tokens"`` each protocol's per-message ``max_new_tokens`` is ``budget // messages``,
so every protocol may generate the same number of tokens per episode (``single`` gets all of them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from teamtr_core.errors import ConfigError

BudgetKind = Literal["samples", "tokens"]

MAX_PROTOCOL_MESSAGES = 1024
"""The most messages one episode of a protocol may generate (``n``, ``n * rounds (+1)``,
``turns``, or a ``samples`` budget). Sizes are checked before any agent list is built: a team of
10^8 agents would exhaust memory before the first message, and 1024 messages already fill any
context many times over."""

SOLVE = "Solve the problem step by step and end with the final answer."
DEBATE = (
    "Solve the problem and end with the final answer. If answers of other agents are shown, "
    "check them critically and give your own, possibly revised, final answer."
)
JUDGE = (
    "You are the judge. Read the debaters' answers, decide which is right and give the team's "
    "final answer."
)
ROLE_PROMPTS: Mapping[str, str] = {
    "solver": "You are the solver. Solve the problem and end with the final answer.",
    "critic": "You are the critic. Check the previous answer and give the corrected final answer.",
    "aggregator": "You are the aggregator. Give the team's final answer.",
}


@dataclass(frozen=True)
class InferenceProtocol:
    """One inference-time protocol, ready for ``teamtr_env.make(task_id, **env_kwargs)``.

    Attributes:
        name: the protocol's name (``single``, ``self_consistency``, ...).
        env_kwargs: team-protocol and router arguments for ``make``.
        messages_per_episode: how many messages one episode generates.
        max_new_tokens: the per-message token limit a matched token budget sets (``None``: the
            sampling config's own).
        params: the sizes chosen (``n``, ``rounds``, ``turns``), for reports.
    """

    name: str
    env_kwargs: dict[str, Any]
    messages_per_episode: int
    max_new_tokens: int | None = None
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        env = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.env_kwargs.items()}
        return {
            "name": self.name,
            "params": dict(self.params),
            "messages_per_episode": self.messages_per_episode,
            "max_new_tokens": self.max_new_tokens,
            "env_kwargs": env,
        }


def single_agent() -> InferenceProtocol:
    """One agent, one message."""
    return InferenceProtocol(
        "single", {"agents": ["solver"], "system_prompts": {"solver": SOLVE}, "max_turns": 1}, 1
    )


def self_consistency(n: int = 5) -> InferenceProtocol:
    """``n`` independent answers (no agent sees another's), graded by majority vote."""
    _check_positive(n=n)
    _check_messages("self_consistency", n, n=n)
    agents = [f"sample_{i + 1}" for i in range(n)]
    return InferenceProtocol(
        "self_consistency",
        {
            "agents": agents,
            "system_prompts": dict.fromkeys(agents, SOLVE),
            "max_turns": n,
            "visibility": "own",
            "final_answer": "majority",
        },
        n,
        params={"n": n},
    )


def debate(n: int = 3, rounds: int = 2, judge: bool = False) -> InferenceProtocol:
    """``n`` debaters for ``rounds`` rounds (answers private within a round), then a majority
    vote over the last round or, with ``judge``, a judge's answer."""
    _check_positive(n=n, rounds=rounds)
    name = "debate_judge" if judge else "debate"
    _check_messages(name, n * rounds + int(judge), n=n, rounds=rounds)
    debaters = [f"debater_{i + 1}" for i in range(n)]
    order = debaters * rounds
    prompts = dict.fromkeys(debaters, DEBATE)
    kwargs: dict[str, Any] = {
        "agents": debaters,
        "system_prompts": prompts,
        "router": order,
        "max_turns": len(order),
        "visibility": "rounds",
        "round_size": n,
        "final_answer": "majority",
    }
    if judge:
        kwargs.update(
            agents=[*debaters, "judge"],
            system_prompts={**prompts, "judge": JUDGE},
            router=[*order, "judge"],
            max_turns=len(order) + 1,
            full_view=["judge"],
            final_answer="final_agent",
            final_agent="judge",
        )
    return InferenceProtocol(
        name,
        kwargs,
        len(order) + int(judge),
        params={"n": n, "rounds": rounds},
    )


def role_play(
    roles: tuple[str, ...] = ("solver", "critic", "aggregator"), turns: int | None = None
) -> InferenceProtocol:
    """Fixed roles speaking in turn on one shared context (cycling for ``turns`` turns, default one
    round); the last role's last message is graded."""
    roles = tuple(roles)
    turns = len(roles) if turns is None else turns
    _check_positive(roles=len(roles), turns=turns)
    _check_messages("role_play", turns, turns=turns)
    order = [roles[t % len(roles)] for t in range(turns)]
    return InferenceProtocol(
        "role_play",
        {
            "agents": list(roles),
            "system_prompts": {r: ROLE_PROMPTS.get(r, f"You are the {r}.") for r in roles},
            "router": order,
            "max_turns": turns,
            "final_agent": order[-1],
        },
        turns,
        params={"roles": list(roles), "turns": turns},
    )


PROTOCOL_PARAMS: Mapping[str, frozenset[str]] = {
    "single": frozenset(),
    "self_consistency": frozenset({"n"}),
    "debate": frozenset({"n", "rounds"}),
    "debate_judge": frozenset({"n", "rounds"}),
    "role_play": frozenset({"roles", "turns"}),
}
"""Each protocol's own size parameters."""
PROTOCOLS = tuple(PROTOCOL_PARAMS)


def build_protocol(
    name: str,
    *,
    budget_kind: BudgetKind | None = None,
    budget: int | None = None,
    **params: Any,
) -> InferenceProtocol:
    """A protocol by name, optionally sized to a matched budget.

    Args:
        name: one of :data:`PROTOCOLS`.
        budget_kind: ``"samples"`` (messages per episode) or ``"tokens"`` (tokens per episode).
        budget: the budget's size.
        **params: the protocol's own sizes (``n``, ``rounds``, ``roles``, ``turns``); with a
            samples budget, ``n``/``turns`` default to what fits the budget.

    Raises:
        ConfigError: unknown protocol or parameters, a budget without a kind (or the reverse), or a
            budget too small for the protocol.
    """
    errors: list[str] = []
    if name not in PROTOCOLS:
        errors.append(f"protocol: unknown {name!r}; choose from {list(PROTOCOLS)}")
    if (budget_kind is None) != (budget is None):
        errors.append("budget: give both budget_kind and budget, or neither")
    if budget_kind not in (None, "samples", "tokens"):
        errors.append(f"budget_kind: expected 'samples' or 'tokens', got {budget_kind!r}")
    if budget is not None and (not isinstance(budget, int) or budget < 1):
        errors.append(f"budget: expected a positive integer, got {budget!r}")
    allowed = PROTOCOL_PARAMS.get(name, frozenset())
    unknown = sorted(set(params) - allowed)
    if unknown and name in PROTOCOLS:
        errors.append(f"{name}: unknown parameters {unknown}; it takes {sorted(allowed)}")
    if errors:
        raise ConfigError("inference protocol", errors)
    if budget_kind == "samples" and budget is not None:
        params = _fit_samples(name, budget, params)
    protocol = _make(name, params)
    if budget_kind == "samples" and budget is not None and protocol.messages_per_episode > budget:
        raise ConfigError(
            "inference protocol",
            [
                f"{name} with {protocol.params} needs {protocol.messages_per_episode} messages "
                f"per episode, over the budget of {budget}"
            ],
        )
    if budget_kind == "tokens" and budget is not None:
        per_message = budget // protocol.messages_per_episode
        if per_message < 1:
            raise ConfigError(
                "inference protocol",
                [f"a token budget of {budget} is under one token per message for {name}"],
            )
        protocol = InferenceProtocol(
            protocol.name,
            protocol.env_kwargs,
            protocol.messages_per_episode,
            per_message,
            protocol.params,
        )
    return protocol


def _make(name: str, params: dict[str, Any]) -> InferenceProtocol:
    if name == "single":
        return single_agent()
    if name == "self_consistency":
        return self_consistency(**params)
    if name in ("debate", "debate_judge"):
        return debate(**params, judge=name == "debate_judge")
    roles = params.get("roles")
    return role_play(
        tuple(roles) if roles else ("solver", "critic", "aggregator"), params.get("turns")
    )


def _fit_samples(name: str, budget: int, params: dict[str, Any]) -> dict[str, Any]:
    """Sizes a protocol so that it generates at most ``budget`` messages (as many as fit)."""
    params = dict(params)
    if name == "self_consistency":
        params.setdefault("n", budget)
    elif name in ("debate", "debate_judge"):
        rounds = params.setdefault("rounds", 2)
        judge = int(name == "debate_judge")
        params.setdefault("n", max(1, (budget - judge) // max(1, rounds)))
    elif name == "role_play":
        params.setdefault("turns", budget)
    return params


def _check_positive(**values: int) -> None:
    bad = [
        f"{k}: expected a positive integer, got {v!r}"
        for k, v in values.items()
        if not isinstance(v, int) or v < 1
    ]
    if bad:
        raise ConfigError("inference protocol", bad)


def _check_messages(name: str, messages: int, **sizes: int) -> None:
    """Refuses a protocol past :data:`MAX_PROTOCOL_MESSAGES` before any agent list is built."""
    if messages > MAX_PROTOCOL_MESSAGES:
        given = ", ".join(f"{k}={v}" for k, v in sizes.items())
        raise ConfigError(
            "inference protocol",
            [
                f"{name} with {given} would generate {messages} messages per episode, over the "
                f"limit of {MAX_PROTOCOL_MESSAGES} (teamtr_env.baselines.MAX_PROTOCOL_MESSAGES); "
                "choose smaller sizes"
            ],
        )
