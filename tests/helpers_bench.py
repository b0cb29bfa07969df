"""What the benchmark scripts' smoke tests share: ``python benchmarks/SCRIPT --quick ...`` in an
interpreter of its own (as a user runs it), its failure shown with the ends of its output, and
the JSON it wrote and the table it printed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
"""The checkout (the scripts run from it)."""


def run_quick(
    script: str,
    args: Sequence[str],
    writes: Path,
    *,
    timeout: float = 900,
    env: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], str]:
    """Runs ``benchmarks/SCRIPT --quick ARGS`` from the checkout and returns the JSON it wrote to
    ``writes`` and what it printed; a failure shows the last 3,000 characters of its output and
    errors."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--quick", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=None if env is None else dict(env),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(writes.read_text()), proc.stdout
