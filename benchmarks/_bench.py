"""Helpers shared by the benchmark scripts (imported as ``_bench`` when a script runs from this
folder, e.g. ``python benchmarks/zebra_speed.py``)."""

from __future__ import annotations

import contextlib
import resource
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def median_time(fn: Callable[[], object], repeats: int) -> float:
    """Median wall seconds of ``fn()`` over ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def markdown_table(title: str, header: Sequence[Any], rows: Sequence[Sequence[Any]]) -> str:
    """A ``### title`` heading and a padded Markdown table."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]

    def line(cells: Sequence[Any]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([f"### {title}", line(header), rule, *(line(r) for r in rows)])


def grading_rates(
    grader: Any, cases: Sequence[tuple[str, Any, str, int]]
) -> list[tuple[str, float, str]]:
    """For each ``(name, problem, reply, count)``: grades ``reply`` ``count`` times with
    ``grader.grade`` and returns ``(name, replies/s, the distinct score reasons)``."""
    rows = []
    for name, problem, reply, count in cases:
        reasons = set()
        start = time.perf_counter()
        for _ in range(count):
            reasons.add(str(grader.grade(problem, reply).details["reason"]))
        rows.append((name, count / (time.perf_counter() - start), ",".join(sorted(reasons))))
    return rows


def power_fit(
    per_n: Mapping[int, Sequence[float]],
    rng: np.random.Generator,
    resamples: int,
    floor: Mapping[int, Sequence[float]] | None = None,
) -> dict[str, Any]:
    """``x ~ n^alpha``: :func:`trainers.diagnostics.estimators.loglog_fit` of the per-``n`` means, with a
    95% percentile-bootstrap CI over runs (resampled within each ``n``).

    A log-log fit needs positive points, so an ``n`` whose mean is ``<= 0`` is dropped. With
    ``floor`` (one noise-floor value per run, paired with ``per_n``) the fitted quantity is the
    excess ``x - floor`` of each run, and an ``n`` is kept only when its excess is clearly above
    the floor (the lower end of its 95% CI is ``> 0``): a point at its noise floor says nothing
    about the trend. Every dropped ``n`` is named in ``dropped`` with the reason. A bootstrap
    resample in which a kept ``n``'s mean is ``<= 0`` cannot be fitted and is skipped; when
    more than 5% are skipped the CI is not reported (``ci`` ``None`` and a ``note``).

    Returns:
        ``value`` (``None`` with a ``note`` when fewer than 2 distinct ``n`` are left), ``ci``,
        ``intercept``, ``kept``, ``dropped`` ({n: reason}), ``means`` (of every ``n``),
        ``resamples``, ``resamples_used``.
    """
    from trainers.diagnostics.estimators import (
        loglog_fit,  # here: the speed scripts need no torch import
    )

    runs: dict[int, np.ndarray] = {}
    for n, values in per_n.items():
        x = np.asarray(values, dtype=np.float64)
        if floor is not None:
            f = np.asarray(floor[n], dtype=np.float64)
            if f.shape != x.shape:
                raise ValueError(f"floor[{n}] has {f.shape} values, per_n[{n}] {x.shape}")
            x = x - f
        if x.size == 0:
            raise ValueError(f"no runs for n = {n}")
        runs[n] = x
    means = {n: float(x.mean()) for n, x in sorted(runs.items())}
    what = "mean excess over the noise floor" if floor is not None else "mean"
    dropped: dict[str, str] = {}
    for n, m in means.items():
        if not m > 0:
            dropped[str(n)] = f"{what} {m:.3g} <= 0"
        elif floor is not None:
            lo, hi = mean_ci_bounds(runs[n], rng, resamples)
            if lo <= 0:
                dropped[str(n)] = f"at the noise floor: excess {m:.3g}, 95% CI [{lo:.3g}, {hi:.3g}]"
    kept = [n for n in means if str(n) not in dropped]
    out: dict[str, Any] = {
        "value": None,
        "ci": None,
        "intercept": None,
        "kept": kept,
        "dropped": dropped,
        "means": {str(n): m for n, m in means.items()},
        "resamples": resamples,
        "resamples_used": 0,
    }
    if len(kept) < 2:
        clear = "clearly above its noise floor" if floor is not None else f"with a positive {what}"
        out["note"] = f"no fit: {len(kept)} n {clear}"
        return out
    alpha, intercept = loglog_fit(kept, [means[n] for n in kept])
    from teamtr_env.metrics import bootstrap, percentile_interval

    def fitted(idx: list[np.ndarray]) -> float | None:  # None: a kept n's mean <= 0
        m = [float(runs[n][i].mean()) for n, i in zip(kept, idx, strict=True)]
        return loglog_fit(kept, m)[0] if min(m) > 0 else None

    boots = bootstrap(fitted, [runs[n].size for n in kept], resamples=resamples, rng=rng)
    out.update(value=alpha, intercept=intercept, resamples_used=len(boots))
    if len(boots) and len(boots) >= 0.95 * resamples:
        out["ci"] = list(percentile_interval(boots))
    elif resamples:
        out["note"] = (
            f"no CI: in {resamples - len(boots)} of {resamples} resamples a kept n had a mean <= 0"
        )
    return out


def mean_ci_bounds(
    values: Sequence[float] | np.ndarray, rng: np.random.Generator, resamples: int
) -> tuple[float, float]:
    """The 95% percentile-bootstrap CI of the mean of ``values`` (``(mean, mean)`` for 0
    resamples)."""
    from teamtr_env.metrics import bootstrap, percentile_interval

    x = np.asarray(values, dtype=np.float64)
    if resamples == 0:
        return float(x.mean()), float(x.mean())
    boot = bootstrap(
        lambda idx: x[idx[0]].mean(axis=1), [x.size], resamples=resamples, rng=rng, batched=True
    )
    return percentile_interval(boot)


def status_kib(field: str, pid: int | str = "self") -> int | None:
    """A ``/proc/PID/status`` field in KiB (Linux; this process by default), else ``None`` (no
    such file, or a process that has ended)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak_rss() -> int:
    """Resets the peak resident memory to the current one where the kernel allows it (Linux:
    ``/proc/self/clear_refs``), so that what torch's import touched and freed does not hide what
    comes next; returns the current resident bytes."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")
    now = status_kib("VmRSS")
    return peak_rss_bytes() if now is None else now * 1024


def peak_rss_bytes() -> int:
    """This process's peak resident memory (since :func:`reset_peak_rss` where it worked)."""
    peak = status_kib("VmHWM")
    if peak is not None:
        return peak * 1024
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(maxrss if sys.platform == "darwin" else maxrss * 1024)


def write_outputs(
    json_path: Path | None,
    data: Any,
    plot_path: Path | None = None,
    plot: Callable[[Path], None] | None = None,
) -> None:
    """Writes a benchmark's JSON to ``json_path`` and its figure (``plot(path)``) to ``plot_path``,
    each where given, and says where."""
    import json

    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {json_path}")
    if plot_path and plot is not None:
        plot(plot_path)
        print(f"wrote {plot_path}")
