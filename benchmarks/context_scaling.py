"""Context scaling: does a step cost the same at turn 5000 as at turn 5 (issue #15 A)?

What is measured
----------------
One long ``teamtr/Arith-v0`` episode (the default three-agent round-robin team, ``max_turns =
--turns``): at every turn the active agent observes its context (``env.observe``) and plays a
constant reply of ``--reply-chars`` characters (``env.step``). The script reports the wall seconds
of each block of ``--block`` turns, for two renderers of the same contexts:

* ``incremental``: ``TeamEnv`` as shipped: each message is rendered once, when it is played
  (``teamtr_env.context.ContextHistory``);
* ``full``: a ``TeamProtocol`` subclass whose ``render`` only calls ``TeamProtocol.render``, which
  makes ``TeamEnv`` re-render every visible message at every turn (the code before the fix).

Both see byte-identical contexts (``tests/teamtr_env/test_context.py``). Flat rows mean a per-step
cost independent of the history; a growing ``full`` row is the O(turns^2) episode. With the default
``max_context_chars`` (32000) a context holds the newest ~1250 messages of 12 characters, so the
contexts stop growing (second table) after ~1250 turns (``visibility="all"``) or ~3750 turns
(``"own"``: an agent sees a third of the messages); a renderer's cost that grows after that is the
history scan alone.

Usage::

    .venv/bin/python benchmarks/context_scaling.py [--turns 5000] [--block 1000]
        [--visibility all own] [--reply-chars 12] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from typing import Any

from _bench import markdown_table

import teamtr_env
from tasks.base import Message
from teamtr_env import TeamEnv, TeamProtocol


class FullRender(TeamProtocol):
    """Renders every context from the whole transcript (``TeamEnv`` skips its incremental path
    when ``render`` is overridden)."""

    def render(self, prompt: str | None, transcript: list[Message], agent: str) -> tuple[str, bool]:
        return super().render(prompt, transcript, agent)


def block_times(
    renderer: str, visibility: str, turns: int, block: int, reply: str
) -> tuple[list[float], list[int]]:
    """Wall seconds of each ``block`` turns of one ``turns``-turn episode, and the length of the
    context observed at the last turn of each block."""
    kind = FullRender if renderer == "full" else TeamProtocol
    task = teamtr_env.make("teamtr/Arith-v0").task
    env = TeamEnv(task, protocol=kind(max_turns=turns, visibility=visibility))  # type: ignore[arg-type]
    env.reset(seed=0)
    times: list[float] = []
    lengths: list[int] = []
    start = time.perf_counter()
    for turn in range(1, turns + 1):
        text = env.observe(env.agent_selection)["text"]
        env.step(reply)
        if turn % block == 0:
            now = time.perf_counter()
            times.append(now - start)
            lengths.append(len(text))
            start = now
    return times, lengths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--block", type=int, default=1000)
    parser.add_argument("--visibility", nargs="+", default=["all", "own"])
    parser.add_argument("--reply-chars", type=int, default=12)
    parser.add_argument("--renderers", nargs="+", default=["incremental", "full"])
    parser.add_argument("--json", metavar="PATH", help="write the rows (and machine) as JSON")
    args = parser.parse_args()
    reply = ("Answer: 42 " * (args.reply_chars // 11 + 1))[: args.reply_chars]
    blocks = [
        f"turns {i * args.block + 1}-{(i + 1) * args.block}"
        for i in range(args.turns // args.block)
    ]
    header = ["renderer", "visibility", *[f"{b} s" for b in blocks], "last/first"]
    rows: list[list[Any]] = []
    records = []
    sizes: list[list[Any]] = []
    for renderer in args.renderers:
        for visibility in args.visibility:
            times, lengths = block_times(renderer, visibility, args.turns, args.block, reply)
            ratio = times[-1] / times[0] if times and times[0] > 0 else float("nan")
            rows.append([renderer, visibility, *(f"{t:.3f}" for t in times), f"{ratio:.1f}"])
            if renderer == args.renderers[0]:
                sizes.append([visibility, *lengths])
            records.append(
                {
                    "renderer": renderer,
                    "visibility": visibility,
                    "block_s": times,
                    "last_over_first": ratio,
                    "context_chars": lengths,
                }
            )
    title = f"teamtr/Arith-v0, one {args.turns}-turn episode, {args.reply_chars}-char replies"
    print(markdown_table(title, header, rows))
    print()
    print(markdown_table("Context chars at the end of each block", ["visibility", *blocks], sizes))
    if args.json:
        payload = {
            "turns": args.turns,
            "block": args.block,
            "reply_chars": args.reply_chars,
            "rows": records,
            "machine": {"python": platform.python_version(), "processor": platform.processor()},
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=2)
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
