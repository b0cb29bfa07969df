"""The tasks that ship with teamtr, registered in the default registry at import."""

from __future__ import annotations

from tasks.reasoning_gym.catalogue import CATALOGUE, NO_DEFAULT_BUILD
from tasks.textarena.catalogue import GAMES, unavailable_reason
from teamtr_env.registration import Registry

REASONING_GYM_ENV = {"max_message_chars": 8000}
"""The environment defaults of the reasoning-gym ids: some reference answers (a Tower of Hanoi
move list, an ARC grid) are longer than the default 2000-character message."""


def register_builtin(registry: Registry) -> None:
    """Registers the built-in tasks (same hook shape as a third-party plugin's)."""
    _register_team_games(registry)
    _register_benchmarks(registry)
    _register_reasoning_gym(registry)
    _register_textarena(registry)
    registry.register(
        "openenv/Env-v0",
        "tasks.openenv:OpenEnvTask",
        description=(
            "Any OpenEnv environment (-o url=... a server, or -o env=module:Class -o "
            "action=module:Class in process): the actor agent's messages are its actions."
        ),
        env_kwargs={"max_turns": 30},
        source="openenv",
    )


def _register_team_games(registry: Registry) -> None:
    """The generated tasks built for teams: arithmetic, the pipeline, the relays."""
    registry.register(
        "teamtr/Arith-v0",
        "tasks.arith:ArithTask",
        description="Integer arithmetic (2-digit addition by default); exact integer verifier.",
        kwargs={"digits": 2, "operators": "+", "operands": 2},
    )
    # A relay: the first agent sees the chain, each later agent only the message before its turn.
    registry.register(
        "teamtr/Pipeline-v0",
        "tasks.pipeline:PipelineTask",
        description=(
            "A chain of +/- steps done one step per agent; each later agent sees only the previous "
            "message, so every message matters."
        ),
        kwargs={"steps": 3, "max_operand": 9, "max_value": 99},
        env_kwargs={
            "agents": ["step1", "step2", "step3"],
            "visibility": "previous",
            "system_prompts": {
                a: "Apply the first operation of the chain and write the new chain; with one "
                "operation left, reply: Answer: <integer>"
                for a in ("step1", "step2", "step3")
            },
        },
    )
    # The exact team game of docs/exact-games.md: a relay (later agents see only the previous
    # message); one round by default, max_turns=n*R for R rounds.
    registry.register(
        "teamtr/Relay-v0",
        "tasks.relay:RelayTask",
        description=(
            "A secret symbol passed along a relay (each later agent sees only the previous "
            "message); the last message must name it. A toy with exact J, no held-out split."
        ),
        kwargs={"symbols": 4},
        env_kwargs={"agents": ["a1", "a2", "a3"], "visibility": "previous"},
    )
    # The relay game for language models: a secret word in a code the team must agree on (any
    # chain of bijections that composes to the identity wins). max_turns=n*R for R rounds; the
    # system prompts say 3 letters, so pass your own with another length.
    registry.register(
        "teamtr/Convention-v0",
        "tasks.convention:ConventionTask",
        description=(
            "A secret word passed along a relay in a code the team chooses (each later agent sees "
            "only the previous message); the last message must name it."
        ),
        kwargs={"length": 3, "conventions": 4},
        env_kwargs={
            "agents": ["a1", "a2", "a3"],
            "visibility": "previous",
            "system_prompts": {
                **{
                    a: "Pass the secret word on as one word of 3 lowercase letters, in your "
                    "team's code."
                    for a in ("a1", "a2")
                },
                "a3": "Pass the secret word on as one word of 3 lowercase letters, in your team's "
                "code. You speak last: in the last round your word must be the secret itself.",
            },
        },
    )


def _register_benchmarks(registry: Registry) -> None:
    """The benchmark tasks: math, AR-Bench, Blocksworld, ZebraLogic, tool use."""
    registry.register(
        "teamtr/Math-v0",
        "tasks.math:MathTask",
        description=(
            "Generated algebra (or MATH-500 / AIME via --data-path); last \\boxed{} graded by "
            "math-verify with a hard per-answer timeout."
        ),
        kwargs={"difficulty": 1, "timeout_s": 5.0},
    )
    # AR-Bench: 25 interaction rounds, then the final answer, so the team's turn limit is 26.
    registry.register(
        "teamtr/ARBench-GN-v0",
        "tasks.arbench:GuessingNumbersTask",
        description="AR-Bench Guessing Numbers: 4 distinct digits, A/B feedback, 25 rounds.",
        kwargs={"max_rounds": 25, "early_stop": True},
        env_kwargs={"max_turns": 26},
    )
    registry.register(
        "teamtr/ARBench-SP-v0",
        "tasks.arbench:SituationPuzzleTask",
        description="AR-Bench Situation Puzzles: yes/no referee, word F1 vs the hidden story.",
        kwargs={"max_rounds": 25, "responder": "scripted"},
        env_kwargs={"max_turns": 26},
    )
    registry.register(
        "teamtr/ARBench-DC-v0",
        "tasks.arbench:DetectiveCaseTask",
        description="AR-Bench Detective Cases: interrogate 5 suspects, name the murderer (A-E).",
        kwargs={"max_rounds": 25, "responder": "scripted"},
        env_kwargs={"max_turns": 26},
    )
    registry.register(
        "teamtr/Blocksworld-v0",
        "tasks.blocksworld:BlocksworldTask",
        description=(
            "PlanBench Blocksworld plan generation (4 blocks by default; PlanBench PDDL/prompt "
            "files via --data-path); plans graded by STRIPS simulation."
        ),
        kwargs={"blocks": 4, "require_optimal": False},
    )
    registry.register(
        "teamtr/ZebraLogic-v0",
        "tasks.zebra:ZebraTask",
        description=(
            "ZebraLogic grid-mode logic puzzles (generated 3x3 by default; official grid_mode rows "
            "via --data-path); ZeroEval JSON grading, per-cell and per-puzzle."
        ),
        kwargs={"houses": 3, "attributes": 3},
    )
    # tau-bench retail mechanics: 30 steps, canonical tool calls, room for tool results (JSON
    # orders and products) and a ~8k-character prompt (policy + tool list) plus 30 messages.
    registry.register(
        "teamtr/ToolUse-v0",
        "tasks.tooluse:ToolUseTask",
        description=(
            "tau-bench-style retail support: 16 tools on a JSON database + a simulated user; "
            "reward = final DB matches gold and outputs said (tau-bench task files via --data-path)."
        ),
        kwargs={"user_sim": "scripted"},
        env_kwargs={
            "max_turns": 30,
            "tool_calls": "canonical",
            "max_message_chars": 6000,
            "max_context_chars": 80000,
        },
    )


def _register_reasoning_gym(registry: Registry) -> None:
    """Every reasoning-gym dataset as ``reasoning_gym/<name>-v0`` (reasoning-gym is imported only
    when one is made; the names come from a static catalogue)."""
    for name, (category, levels, has_answer) in CATALOGUE.items():
        notes = [f"curriculum levels 0-{levels - 1}" if levels else "no curriculum"]
        if not has_answer:
            notes.append("no reference answer (no scripted expert)")
        if name in NO_DEFAULT_BUILD:
            notes.append(NO_DEFAULT_BUILD[name])
        registry.register(
            f"reasoning_gym/{name}-v0",
            "tasks.reasoning_gym:make_task",
            description=f"reasoning-gym {category}: {name}; {'; '.join(notes)}.",
            kwargs={"dataset": name},
            env_kwargs=REASONING_GYM_ENV,
            source="reasoning-gym",
        )


def _register_textarena(registry: Registry) -> None:
    """TextArena's cooperative games as ``textarena/<Game>-v0`` (TextArena is imported only when
    one is made); a game that cannot run here is listed with its reason."""
    from functools import partial

    for name, game in GAMES.items():
        registry.register(
            f"textarena/{name}-v0",
            "tasks.textarena:make_task",
            description=game.description,
            kwargs={"game": name},
            env_kwargs={"max_turns": game.max_turns, "max_message_chars": 2000},
            source="textarena",
            unavailable=partial(unavailable_reason, name),
        )
