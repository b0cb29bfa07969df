"""Draws docs/img/stale_vs_fresh.png, the README's picture: one stage of sequential training of a
three-agent team, with the batch each agent's update reads.

* Top row, naive sequential: one batch is sampled at the start of the stage and every agent is
  updated on it. By agent i's update, agents 1..i-1 have changed, so the parts of the batch they
  wrote (hatched) come from policies the team no longer runs: 0 + 1 + 2 stale parts here,
  n(n-1)/2 in a team of n, which is where the paper's n^2 penalty comes from.
* Bottom row, TeamTR: before every agent's update the team samples a fresh batch under the
  partially updated team, so every part matches the team that will act, and each update stays
  inside a KL trust region (KL <= delta) so the next agent's batch does not move too far.

Usage::

    .venv/bin/python docs/figures/stale_vs_fresh.py [--out docs/img/stale_vs_fresh.png]

It needs matplotlib only (the ``models`` extra) and draws in a second.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from matplotlib.figure import Figure  # no pyplot: the Agg canvas, no display needed
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

AGENTS = 3
COLOURS = ["#4C72B0", "#DD8452", "#55A868"]  # agent 1, 2, 3
OLD_ALPHA, NEW_ALPHA = 0.28, 0.95
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "img" / "stale_vs_fresh.png"


def _batch(ax, x: float, y: float, versions: list[int], current: list[int]) -> int:
    """A batch as one cell per agent: the version of the agent that wrote that part (0: the
    stage's start, 1: updated). A cell whose version is not the team's current one is stale
    (hatched). Returns how many cells are stale."""
    stale = 0
    for i, (wrote, now) in enumerate(zip(versions, current)):
        is_stale = wrote != now
        stale += is_stale
        ax.add_patch(
            Rectangle(
                (x + 0.36 * i, y),
                0.34,
                0.42,
                facecolor=COLOURS[i],
                alpha=NEW_ALPHA if wrote else OLD_ALPHA,
                edgecolor="#B00020" if is_stale else "#333333",
                linewidth=2.0 if is_stale else 0.8,
                hatch="////" if is_stale else None,
            )
        )
        label = f"π{i + 1}" + ("'" if wrote else "")
        ax.text(x + 0.36 * i + 0.17, y + 0.21, label, ha="center", va="center", fontsize=10)
    return stale


def _update(ax, x: float, y: float, agent: int, text: str) -> None:
    ax.add_patch(
        FancyBboxPatch(
            (x, y),
            1.06,
            0.5,
            boxstyle="round,pad=0.03,rounding_size=0.08",
            facecolor=COLOURS[agent],
            alpha=NEW_ALPHA,
            edgecolor="#222222",
        )
    )
    ax.text(x + 0.53, y + 0.25, text, ha="center", va="center", fontsize=9.5, color="white")


def _arrow(ax, start: tuple[float, float], end: tuple[float, float], style: str = "-|>") -> None:
    ax.add_patch(
        FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=12, color="#444444", lw=1.2)
    )


def draw(out: Path) -> dict[str, int]:
    """Draws the figure into ``out`` (PNG) and returns the stale parts each learner reads in the
    stage: ``{"naive_sequential": 3, "teamtr": 0}`` for three agents."""
    fig = Figure(figsize=(11.2, 4.2), dpi=100)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 11.2)
    ax.set_ylim(0, 4.2)
    ax.axis("off")
    counts = {}
    rows = [
        ("naive_sequential", 2.3, "Naive sequential: one batch per stage, read by every update"),
        (
            "teamtr",
            0.15,
            "TeamTR: a fresh batch under the partially updated team before each update",
        ),
    ]
    for learner, y, title in rows:
        ax.text(0.15, y + 1.55, title, fontsize=12, fontweight="bold", va="center")
        team = [0] * AGENTS  # the team's current version of each agent
        start = [0] * AGENTS  # the versions that wrote the stage's first batch
        stale = 0
        for agent in range(AGENTS):
            x = 0.35 + 3.7 * agent
            wrote = start if learner == "naive_sequential" else list(team)
            here = _batch(ax, x, y + 0.72, wrote, team)
            stale += here
            if here:
                changed = ", ".join(f"π{i + 1}" for i in range(agent))
                ax.text(
                    x + 0.53,
                    y + 0.52,
                    f"{changed} changed since",
                    ha="center",
                    fontsize=8.5,
                    color="#B00020",
                )
            if learner == "naive_sequential":
                caption = "sampled at stage start" if agent == 0 else "the same cached batch"
            else:
                caption = "sampled now"
            ax.text(x + 0.53, y + 1.24, caption, ha="center", fontsize=8.5, color="#333333")
            _arrow(ax, (x + 1.14, y + 0.93), (x + 1.55, y + 0.93))
            kl = "" if learner == "naive_sequential" else "\nKL ≤ δ"
            _update(ax, x + 1.6, y + 0.68, agent, f"update π{agent + 1}{kl}")
            team[agent] = 1
            if agent < AGENTS - 1:
                _arrow(ax, (x + 2.72, y + 0.93), (x + 3.65, y + 0.93))
        verdict = (
            f"{stale} stale parts (hatched): n(n-1)/2 for n agents"
            if stale
            else "0 stale parts: every update reads the team that will act"
        )
        colour = "#B00020" if stale else "#1B5E20"
        ax.text(0.35, y + 0.12, verdict, fontsize=10, color=colour, va="center")
        counts[learner] = stale
    ax.text(
        11.1,
        0.05,
        "a batch's cell i: the part agent i wrote; π' = updated this stage",
        ha="right",
        fontsize=8.5,
        color="#555555",
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the PNG to write")
    args = parser.parse_args(argv)
    counts = draw(args.out)
    print(f"wrote {args.out} (stale parts read in one stage: {counts})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
