"""MkDocs hooks for the site (mkdocs.yml's ``hooks``): the pages stay readable on GitHub, where
they link files outside docs/ by their path in the repository, and the site keeps those links.

* ``CHANGELOG.md`` becomes the page ``changelog.md`` (its ``docs/...`` links made site-relative).
* A link from a page to another file of the repository outside docs/ (a benchmark config, say)
  is served as a copy under ``repo/`` and the link points there. A link to a file that does not
  exist is left as it is, so the strict build fails on it as on any broken link.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LINK = re.compile(r"(\]\()([^)\s#]+)(#[^)\s]*)?(\))")
FENCE = re.compile(r"^(```|~~~)", re.MULTILINE)
PAGES = {"CHANGELOG.md": "changelog.md", "README.md": "index.md"}  # repo file -> site page


def _outside_target(page_uri: str, target: str) -> str | None:
    """The repository path a page's link names when it lies outside docs/, else ``None``."""
    if "://" in target or target.startswith(("mailto:", "/")):
        return None
    path = (DOCS / posixpath.dirname(page_uri) / target).resolve()
    if path.is_relative_to(DOCS) or not path.is_relative_to(ROOT):
        return None
    return path.relative_to(ROOT).as_posix()


def _site_uri(repo_path: str) -> str:
    return PAGES.get(repo_path, f"repo/{repo_path}")


def _rewrite(markdown: str, page_uri: str) -> str:
    """Rewrites the outside links of ``markdown`` (code blocks untouched)."""

    def fix(match: re.Match[str]) -> str:
        repo_path = _outside_target(page_uri, match[2])
        if repo_path is None or not (ROOT / repo_path).is_file():
            return match[0]
        link = posixpath.relpath(_site_uri(repo_path), posixpath.dirname(page_uri) or ".")
        return f"{match[1]}{link}{match[3] or ''}{match[4]}"

    parts = FENCE.split(markdown)
    out, in_code = [], False
    for part in parts:
        if part in ("```", "~~~"):
            in_code = not in_code
            out.append(part)
        else:
            out.append(part if in_code else LINK.sub(fix, part))
    return "".join(out)


def on_files(files: Files, config: Any) -> Files:
    """Adds the changelog page and a copy of every repository file that a page links."""
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    changelog = re.sub(r"\]\(docs/", "](", changelog)
    files.append(File.generated(config, "changelog.md", content=changelog))
    linked: set[str] = set()
    for file in list(files):
        if not file.src_uri.endswith(".md") or file.abs_src_path is None:
            continue
        text = Path(file.abs_src_path).read_text(encoding="utf-8")
        for match in LINK.finditer(text):
            repo_path = _outside_target(file.src_uri, match[2])
            if repo_path and repo_path not in PAGES and (ROOT / repo_path).is_file():
                linked.add(repo_path)
    for repo_path in sorted(linked):
        files.append(
            File.generated(config, _site_uri(repo_path), abs_src_path=str(ROOT / repo_path))
        )
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Points the page's links to repository files at their site copies."""
    return _rewrite(markdown, page.file.src_uri)
