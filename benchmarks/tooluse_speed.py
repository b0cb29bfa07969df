"""ToolUse speed: tool calls (with validation), scripted-expert episodes and grading, per second.

What is measured
----------------
1. Tool calls: ``ToolBox.execute`` calls/s on the shipped store and on a synthetic store scaled
   ``--scale`` times (users, orders and products replicated under new ids; tau-bench's retail data
   has ~500 users and ~1000 orders): a read (``get_order_details``), a write that succeeds
   (``modify_user_address``: validation + a transaction that copies the rows it reads + commit),
   a write the tool refuses (``cancel_pending_order`` on a delivered order: row copies, no
   commit), a call rejected by the schema
   (an extra field) and an unknown tool. Then ``task.respond`` on a canonical tool-call message
   (message parsing by the project's tool-call normaliser + execution + feedback) and on a message
   to the scripted user.
2. Episodes: whole episodes through ``Runner.rollout`` (the default three-agent round-robin team,
   every agent the task's ``ScriptedExpert``) on the 12 shipped tasks, ``--episodes`` in lockstep,
   at error rates 0 and 0.3: episodes/s, ms per turn, turns per episode, success rate.
3. Grading: ``task.score`` per finished episode (final hash + gold hash from the cache + output
   matching), and the cold gold replay (copy + replay + hash) per task.

Every figure is the median of ``--repeats`` timings. The default run takes well under a minute on
one CPU core.

Usage::

    .venv/bin/python benchmarks/tooluse_speed.py [--episodes 64] [--repeats 3] [--scale 100]
"""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

import numpy as np
from _bench import markdown_table, median_time

import teamtr_env
from adapters.scripted import ScriptedExpert
from tasks import Episode
from tasks.tooluse import ToolUseTask, copy_db, load_db, make_toolbox
from tasks.tooluse.expert import call_text
from tasks.tooluse.reward import replay_gold
from tasks.tooluse.tasks_data import ToolTask
from tasks.tooluse.toolbox import ToolBox
from teamtr_env.runners import Runner

ADDRESS = {
    "address1": "1 Main St",
    "address2": "",
    "city": "Springfield",
    "state": "IL",
    "country": "USA",
    "zip": "62701",
}


def scaled_store(scale: int) -> dict[str, Any]:
    """The shipped store replicated ``scale`` times under fresh ids (same shapes and sizes)."""
    base = load_db()
    db: dict[str, Any] = {"users": {}, "products": {}, "orders": {}}
    for k in range(scale):
        for user_id, user in base["users"].items():
            new_user = copy_db(user)
            new_user["orders"] = [f"{o}-{k}" for o in user["orders"]]  # type: ignore[assignment]
            db["users"][f"{user_id}-{k}"] = {**new_user, "user_id": f"{user_id}-{k}"}
        for order_id, order in base["orders"].items():
            db["orders"][f"{order_id}-{k}"] = {
                **copy_db(order),
                "order_id": f"{order_id}-{k}",
                "user_id": f"{order['user_id']}-{k}",
            }
        for product_id, product in base["products"].items():
            db["products"][f"{product_id}-{k}"] = copy_db(product)
    # the benchmark's calls name the first replica's records
    for table in ("users", "orders", "products"):
        for record_id in list(base[table]):
            db[table][record_id] = db[table].pop(f"{record_id}-0")
    for order in db["orders"].values():
        order["user_id"] = order["user_id"].removesuffix("-0")
    return db


def tool_section(scale: int, repeats: int) -> list[tuple[str, ...]]:
    box = make_toolbox()
    rows: list[tuple[str, ...]] = []
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("read: get_order_details", "get_order_details", {"order_id": "#W5001001"}),
        (
            "write ok: modify_user_address",
            "modify_user_address",
            {"user_id": "ada_park_1001", **ADDRESS},
        ),
        (
            "write refused: cancel delivered",
            "cancel_pending_order",
            {"order_id": "#W5001002", "reason": "no longer needed"},
        ),
        ("schema error: extra field", "get_user_details", {"user_id": "x", "admin": True}),
        ("unknown tool", "drop_tables", {}),
    ]
    stores = {"shipped": load_db(), f"x{scale}": scaled_store(scale)}
    sizes = {name: len(db["orders"]) for name, db in stores.items()}
    for label, name, args in calls:
        cells = [label]
        for db in stores.values():
            n = 2000
            seconds = median_time(partial(_calls, box, db, name, args, n), repeats)
            cells.append(f"{n / seconds:,.0f}")
        rows.append(tuple(cells))
    task = ToolUseTask()
    problem = task.problem_pool()[0]
    message = call_text("get_order_details", {"order_id": "#W5001001"})
    for label, text in (
        ("task.respond: canonical tool call", message),
        ("task.respond: message to the user", "Could you tell me your email address?"),
    ):
        state = task.start(problem, np.random.default_rng(0))
        n = 2000
        seconds = median_time(partial(_responds, task, state, text, n), repeats)
        rows.append((label, f"{n / seconds:,.0f}", "-"))
    header_sizes = [f"{name} ({size} orders)" for name, size in sizes.items()]
    return [("call", *header_sizes), *rows]


def _calls(box: ToolBox, db: dict[str, Any], name: str, args: dict[str, Any], n: int) -> None:
    for _ in range(n):
        box.execute(db, name, args)


def _responds(task: ToolUseTask, state: Any, text: str, n: int) -> None:
    for _ in range(n):
        task.respond(state, "solver", text)


def episodes_section(episodes: int, repeats: int) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for error_rate in (0.0, 0.3):
        env_fn = lambda: teamtr_env.make("teamtr/ToolUse-v0")  # noqa: E731
        task = env_fn().task
        runner = Runner(env_fn, ScriptedExpert(task, error_rate=error_rate, seed=0), progress=False)
        problems = runner.sample_problems(episodes, seed=0, distinct=False)
        runner.rollout(problems, group_size=1, seed=0)  # warm-up: env pool, caches
        wall = median_time(partial(runner.rollout, problems, group_size=1, seed=1), repeats)
        batch = runner.rollout(problems, group_size=1, seed=1)
        turns = float(np.mean([e.turns for e in batch.episodes]))
        solved = float(np.mean([e.correct for e in batch.episodes]))
        rows.append(
            (
                f"{error_rate:.1f}",
                f"{episodes / wall:.0f}",
                f"{1e3 * wall / (episodes * turns):.2f}",
                f"{turns:.2f}",
                f"{solved:.2f}",
            )
        )
    return rows


def grading_section(repeats: int) -> list[tuple[str, ...]]:
    env = teamtr_env.make("teamtr/ToolUse-v0")
    task = env.task
    assert isinstance(task, ToolUseTask)
    expert = ScriptedExpert(task, seed=0)
    runner = Runner(lambda: teamtr_env.make("teamtr/ToolUse-v0"), expert, progress=False)
    problems = task.problem_pool()
    runner.rollout(problems, group_size=1, seed=0)
    # finished states: replay each task's gold actions on a fresh episode state
    episodes = []
    for problem in problems:
        state = task.start(problem, np.random.default_rng(0))
        for action in ToolTask.from_problem(problem).actions:
            task.toolbox.execute(state.db, action.name, dict(action.kwargs))
        state.done = True
        episodes.append(Episode(problem, (), None, state))
    n = 50
    score_s = median_time(lambda: [task.score(e) for e in episodes for _ in range(n)], repeats)
    gold_s = median_time(
        lambda: [
            replay_gold(task.db, ToolTask.from_problem(p).actions, task.toolbox) for p in problems
        ],
        repeats,
    )
    return [
        ("task.score (gold hash cached)", f"{n * len(episodes) / score_s:,.0f} episodes/s"),
        ("gold replay, cold (copy + replay + hash)", f"{len(problems) / gold_s:,.0f} tasks/s"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--episodes", type=int, default=64, help="episodes per rollout")
    parser.add_argument("--repeats", type=int, default=3, help="timings per figure (median)")
    parser.add_argument("--scale", type=int, default=100, help="replicas in the synthetic store")
    args = parser.parse_args()
    header, *rows = tool_section(args.scale, args.repeats)
    print(markdown_table("Tool calls/s (validation included)", header, rows))
    print()
    print(
        markdown_table(
            f"Episodes (3-agent team, scripted expert, {args.episodes} in lockstep)",
            ("error rate", "episodes/s", "ms/turn", "turns/episode", "solved"),
            episodes_section(args.episodes, args.repeats),
        )
    )
    print()
    print(markdown_table("Grading", ("what", "rate"), grading_section(args.repeats)))


if __name__ == "__main__":
    main()
