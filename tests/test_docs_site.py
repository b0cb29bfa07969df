"""The documentation site: the strict MkDocs build passes (broken links, anchors, snippets and
docstring references fail it), and the hooks that keep the pages' GitHub links working on the
site rewrite exactly the links that leave docs/."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_links_outside_docs_point_at_their_site_copies() -> None:
    hooks = _module("hooks")
    page = "\n".join(
        [
            "See [the config](../benchmarks/configs/relay_tabular.yaml#L1), "
            "[the changelog](../CHANGELOG.md), [a page](trainers.md#the-demo),",
            "[a missing file](../benchmarks/configs/nope.yaml) and [a site](https://x.org/a.md).",
            "```bash",
            "[not a link](../CHANGELOG.md)",
            "```",
        ]
    )
    out = hooks._rewrite(page, "compare.md")
    assert "[the config](repo/benchmarks/configs/relay_tabular.yaml#L1)" in out
    assert "[the changelog](changelog.md)" in out
    assert "[a page](trainers.md#the-demo)" in out  # inside docs/: left to MkDocs
    assert "[a missing file](../benchmarks/configs/nope.yaml)" in out  # the build flags it
    assert "[a site](https://x.org/a.md)" in out
    assert "[not a link](../CHANGELOG.md)" in out  # code blocks are left alone
    nested = hooks._rewrite("[c](../../benchmarks/configs/convention.yaml)", "tasks/x.md")
    assert nested == "[c](../repo/benchmarks/configs/convention.yaml)"


def test_sphinx_roles_in_docstrings_render_as_code() -> None:
    roles = _module("griffe_roles")
    text = "Returns a :class:`~trainers.run.entry.RunResult` from :func:`train` (:mod:`tasks`)."
    assert roles.ROLE.sub(roles._code, text) == "Returns a `RunResult` from `train` (`tasks`)."


@pytest.mark.slow
def test_the_strict_build_passes(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "s")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    site = tmp_path / "s"
    for page in ("index.html", "getting-started/index.html", "reference/training/index.html"):
        assert (site / page).is_file(), page
    quickstart = (site / "getting-started/index.html").read_text(encoding="utf-8")
    assert "schedule" in quickstart and "resample_every" in quickstart  # the README's blocks
    api = (site / "reference/training/index.html").read_text(encoding="utf-8")
    assert 'id="trainers.run.entry.train"' in api and ":func:" not in api
    assert (site / "repo/benchmarks/configs/relay_tabular.yaml").is_file()


def test_the_readme_picture_is_drawn_by_its_script(tmp_path: Path) -> None:
    """docs/figures/stale_vs_fresh.py draws the README's diagram: naive sequential's updates read
    n(n-1)/2 = 3 stale parts of a 3-agent stage, TeamTR's none."""
    spec = importlib.util.spec_from_file_location(
        "stale_vs_fresh", ROOT / "docs" / "figures" / "stale_vs_fresh.py"
    )
    assert spec and spec.loader
    figure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(figure)
    out = tmp_path / "figure.png"
    assert figure.draw(out) == {"naive_sequential": 3, "teamtr": 0}
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20_000
    assert "docs/img/stale_vs_fresh.png" in (ROOT / "README.md").read_text(encoding="utf-8")
