"""``skip_module_without``: a test module's optional dependency, checked without importing it.

``pytest.importorskip`` imports the package while the module is collected, on every test worker
(ray 0.7 s, reasoning-gym 1.9 s); a module whose tests import it themselves checks only that it
is installed."""

from __future__ import annotations

import importlib.util

import pytest


def skip_module_without(package: str) -> None:
    """Skips the calling test module when ``package`` is not installed (call at module level)."""
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed", allow_module_level=True)
