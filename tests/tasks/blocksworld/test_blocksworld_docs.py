"""The Blocksworld page's python examples run verbatim, in order, in a fresh process."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_blocksworld_page_examples_run(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "tasks" / "blocksworld.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert blocks
    script = tmp_path / "example.py"
    script.write_text("\n\n".join(blocks), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert proc.returncode == 0, f"example failed:\n{proc.stdout}\n{proc.stderr}"
