"""The docs' examples run verbatim: every ```python block of a page, in order, in a fresh process."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    "docs/adding-a-task.md",
    "README.md",
    "docs/environment.md",
    "docs/runner-and-metrics.md",
    "docs/policies.md",
    "docs/evaluation.md",
    "docs/exact-games.md",
    *sorted(f"docs/tasks/{p.name}" for p in (ROOT / "docs" / "tasks").glob("*.md")),
]


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.DOTALL)


@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run(page: str, tmp_path: Path) -> None:
    blocks = python_blocks(ROOT / page)
    assert blocks, f"{page} has no python example"
    script = tmp_path / "example.py"
    script.write_text("\n\n".join(blocks), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert proc.returncode == 0, f"{page} example failed:\n{proc.stdout}\n{proc.stderr}"
