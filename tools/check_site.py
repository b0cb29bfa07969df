"""The documentation site in a real browser: serves the built site (``make docs``) on localhost,
opens it in headless Chromium (Debian's ``chromium`` and ``chromium-driver`` packages) through
selenium, and checks what a reader sees:

* the home page renders with the navigation's sections (Get started ... Reference);
* the search box finds pages: typing a query lists results (the search index loaded in the
  browser's worker);
* an API page renders the reference generated from the docstrings (``trainers.train``'s heading
  and its parameters);
* no page logs a browser error (a missing asset, a script that failed).

It saves a screenshot of each (``home.png``, ``search.png``, ``api.png``) in ``--out`` and exits
1 with every failed check listed.

Usage::

    .venv/bin/python tools/check_site.py [--site site] [--out site-check]

``make docs-check`` builds the site and runs it; CI runs that (.ci/run installs the two Debian
packages where they are missing).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import shutil
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

NAV_SECTIONS = [
    "Get started",
    "Concepts",
    "Tasks",
    "Training",
    "Evaluating and comparing",
    "Scaling",
    "Reference",
]
SEARCH_QUERY = "trust region"
API_PAGE = "reference/training/"
API_NAME = "trainers.run.entry.train"  # the heading's id, from the docstrings
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",  # no network here: no calls home
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
]


@contextmanager
def serve(site: Path) -> Iterator[str]:
    """Serves ``site`` on 127.0.0.1 (a free port) in a thread; yields the base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def browser(chromium: str, driver: str) -> Any:
    """A headless Chromium driven by selenium (browser logs kept for the error check)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


def check_site(site: Path, out: Path, chromium: str, driver: str) -> list[str]:
    """Runs every check; returns the failures (empty when the site is fine)."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    failures: list[str] = []
    out.mkdir(parents=True, exist_ok=True)
    with serve(site) as base:
        page = browser(chromium, driver)
        try:

            def wait(what: str, condition: Callable[[Any], Any], seconds: float = 15) -> Any:
                try:
                    return WebDriverWait(page, seconds).until(condition)
                except TimeoutException:
                    failures.append(what)
                    return None

            page.get(base)
            wait("the home page's title", lambda d: "teamtr" in d.title)
            nav = wait(
                "the navigation",
                lambda d: d.find_elements(By.CSS_SELECTOR, "nav.md-nav--primary"),
            )
            if nav:
                text = nav[0].get_attribute("textContent")
                missing = [s for s in NAV_SECTIONS if s not in text]
                if missing:
                    failures.append(f"the navigation lacks the sections {missing}")
            page.save_screenshot(str(out / "home.png"))

            # Search: Material loads the index in a web worker; a query lists its results.
            opener = page.find_elements(By.CSS_SELECTOR, "label.md-search__icon, .md-search__input")
            if opener:
                opener[0].click()
            box = wait(
                "the search box",
                lambda d: [
                    e
                    for e in d.find_elements(By.CSS_SELECTOR, ".md-search__input")
                    if e.is_displayed()
                ],
            )
            if box:
                box[0].send_keys(SEARCH_QUERY)
                results = wait(
                    f"search results for {SEARCH_QUERY!r}",
                    lambda d: d.find_elements(By.CSS_SELECTOR, ".md-search-result__item"),
                )
                if results:
                    print(f"search {SEARCH_QUERY!r}: {len(results)} results")
            page.save_screenshot(str(out / "search.png"))

            page.get(base + API_PAGE)
            heading = wait(
                f"the API page's heading {API_NAME}",
                lambda d: d.find_elements(By.ID, API_NAME),
            )
            if heading:
                body = page.find_element(By.TAG_NAME, "body").get_attribute("textContent")
                for word in ("run_dir", "RunResult", "overrides"):
                    if word not in body:
                        failures.append(f"the API page does not show {word!r}")
            page.save_screenshot(str(out / "api.png"))

            errors = [e["message"] for e in page.get_log("browser") if e["level"] == "SEVERE"]
            failures += [f"browser error: {message}" for message in errors]
        finally:
            page.quit()
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--site", type=Path, default=Path("site"), help="the built site")
    parser.add_argument("--out", type=Path, default=Path("site-check"), help="screenshots go here")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--driver", default=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    args = parser.parse_args(argv)
    problems = []
    if not (args.site / "index.html").is_file():
        problems.append(f"no built site in {args.site} (run `make docs` first)")
    for name, path in (("chromium", args.chromium), ("chromedriver", args.driver)):
        if not Path(path).is_file():
            problems.append(f"no {name} at {path} (apt-get install chromium chromium-driver)")
    if problems:
        print("error: " + "; ".join(problems), file=sys.stderr)
        return 2
    failures = check_site(args.site, args.out, args.chromium, args.driver)
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    print(f"screenshots: {args.out}/home.png, search.png, api.png")
    if failures:
        return 1
    print("the site renders: navigation, search and the API reference")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
