"""``openenv.core`` without Gradio: OpenEnv's package imports its Gradio web interface on import
(6 s of the 8 s ``import openenv.core`` takes here, most of it Gradio writing its components'
stub files), and teamtr plays environments over WebSocket or in process, never through that web
page. OpenEnv imports the web interface only if it can (``except ModuleNotFoundError``), so the
first import here hides Gradio for its duration: ``teamtr serve`` is healthy in about 3 s
instead of 6, and so is every process that makes an ``openenv/Env-v0`` environment.

Gradio stays importable afterwards (OpenEnv's ``create_app`` imports the web interface itself when
``ENABLE_WEB_INTERFACE`` asks for it); where Gradio is already imported, or an OpenEnv release
needs it elsewhere, ``openenv.core`` is imported as usual.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType

_LOCK = threading.Lock()


def import_openenv_core() -> ModuleType:
    """``openenv.core``, imported without its Gradio web interface when this process has not
    imported Gradio yet (see the module docstring); the module itself when imported already.

    Raises:
        ModuleNotFoundError: OpenEnv is not installed.
    """
    with _LOCK:
        if "openenv.core" in sys.modules or "gradio" in sys.modules:
            return importlib.import_module("openenv.core")
        sys.modules["gradio"] = None  # type: ignore[assignment]  # `import gradio` fails fast
        try:
            return importlib.import_module("openenv.core")
        except ModuleNotFoundError as exc:
            if exc.name != "gradio":
                raise
        finally:
            if "gradio" in sys.modules and sys.modules["gradio"] is None:
                del sys.modules["gradio"]
        return importlib.import_module("openenv.core")  # a release that needs Gradio elsewhere
