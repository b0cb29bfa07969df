"""The docs' examples run verbatim: every ```python block of a page, in order, in a fresh process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    "docs/adding-a-task.md",
    "docs/adding-a-trainer.md",
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


def test_adding_a_trainer_shows_the_plugin_file_verbatim() -> None:
    """The page's complete learner is the example distribution's file, so neither can drift."""
    plugin = ROOT / "tests/fixtures/example_plugin/teamtr_example_plugin/learners.py"
    assert python_blocks(ROOT / "docs/adding-a-trainer.md")[0] == plugin.read_text("utf-8")


def test_adding_a_trainer_cli_lines_run(tmp_path: Path) -> None:
    """Every line of the page's ```bash block runs (in a scratch directory) and exits 0."""
    page = (ROOT / "docs/adding-a-trainer.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```bash\n(.*?)```", page, flags=re.DOTALL)
    bindir = Path(sys.executable).parent
    outputs = []
    for line in block.strip().splitlines():
        argv = line.split()
        if argv[0] == "teamtr":
            argv[0] = str(bindir / "teamtr")
        elif argv[0] == ".venv/bin/python":
            argv[:2] = [sys.executable, str(ROOT / argv[1])]
        env = {**os.environ, "COLUMNS": "200"}  # rich tables: ids unabridged
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env
        )
        assert proc.returncode == 0, f"{line}\n{proc.stdout}\n{proc.stderr}"
        outputs.append(proc.stdout)
    assert "example/IndependentGRPO-v0" in outputs[0] and "teamtr/TeamTR-v0" in outputs[0]
    summary = (tmp_path / "runs/independent/summary.json").read_text()
    assert '"method": "example/IndependentGRPO-v0"' in summary
    assert (tmp_path / "runs/compare-quick/compare.json").exists()
