"""A griffe extension for the API reference (mkdocs.yml): the docstrings' Sphinx roles
(``:class:`~trainers.config.TrainConfig```, ``:func:`train```) shown as code, as Markdown has no
roles. The name keeps its last part when the role asks for it with ``~``."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const):`(~?)([^`]+)`")


def _code(match: re.Match[str]) -> str:
    name = match[2]
    return f"`{name.rsplit('.', 1)[-1] if match[1] else name}`"


class SphinxRolesAsCode(griffe.Extension):
    """Rewrites every object's docstring once it is loaded."""

    def on_object(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(_code, obj.docstring.value)
