"""``teamtr --import MODULE``: the user's own modules, imported before a command runs.

``register_learner(...)`` or a task registry's ``register(...)`` in a user's script registers in
that script's process only; the ``teamtr`` command is another process. ``--import mylab.learners``
imports the module in the command's process first, so its registrations take effect there, as
an installed plugin's entry point would (docs/adding-a-trainer.md).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Sequence

from teamtr_core.errors import ConfigError

_MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def add_import_arg(parser: argparse.ArgumentParser) -> None:
    """``--import MODULE`` (repeatable), an option of the ``teamtr`` command itself."""
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import this Python module before the command runs, so that its register_learner "
        "/ register calls take effect (e.g. teamtr --import mylab.learners compare ...); the "
        "current folder is on the path, as for python -m; repeatable; give it before the command",
    )


def import_modules(names: Sequence[str]) -> None:
    """Imports each module of ``names`` in order, with the current folder on ``sys.path`` (as
    ``python -m`` puts it there), so that the registrations they make reach the command.

    Raises:
        ConfigError: every module that could not be imported, each with its exception and what
            to do (no traceback: the CLI prints it and exits 2).
    """
    if not names:
        return
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    importlib.invalidate_caches()  # a module written since this process started is found
    errors = [problem for name in names if (problem := _import_one(name, cwd)) is not None]
    if errors:
        raise ConfigError("--import", errors)


def _import_one(name: str, cwd: str) -> str | None:
    """``None`` when ``name`` imports, else the line that says why it did not."""
    if not _MODULE_NAME.match(name):
        hint = ""
        if name.endswith(".py") or "/" in name or "\\" in name:
            dotted = re.sub(r"\.py$", "", name).strip("/\\").replace("/", ".").replace("\\", ".")
            hint = f" (for the file {name}, run teamtr from the folder that holds it and pass "
            hint += f"--import {dotted})"
        return (
            f"{name!r}: expected a module name as an import statement writes it, e.g. "
            f"mylab.learners{hint}"
        )
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if not missing or not (name == missing or name.startswith(missing + ".")):
            return _raised(name, exc)  # the module imports something that is not there
        package, _, last = missing.rpartition(".")
        if package:
            return (
                f"{name}: the package {package!r} has no module {last!r} (no {last}.py or "
                f"{last}/ in it; ModuleNotFoundError: {exc}); check the name"
            )
        return (
            f"{name}: no module {missing!r} in the current folder ({cwd}) or the installed "
            f"packages (ModuleNotFoundError: {exc}); run teamtr from the folder that holds "
            f"{missing}/ (or {missing}.py), add that folder to PYTHONPATH, or pip install the "
            "package"
        )
    except Exception as exc:  # the module's own code failed: say what it raised, not a traceback
        return _raised(name, exc)
    return None


def _raised(name: str, exc: BaseException) -> str:
    """The line for a module whose import raised ``exc``."""
    text = " ".join(str(exc).split()) or "(no message)"
    return (
        f"{name}: importing it raised {type(exc).__name__}: {text}; fix the module "
        f'(python -c "import {name}" shows the traceback) or leave out --import {name}'
    )
