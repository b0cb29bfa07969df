"""The ``teamtr`` command line: the application on top of every other package.

One module per subcommand (``listing``: tasks and learners, ``play``, ``eval``, ``train``,
``swap``, ``diagnostics``, ``models``), what they share (``common``), the user's modules that
``teamtr --import`` brings in (``user_modules``) and the parser and entry point (``app``). It is
the only package that may import all the others (docs/architecture.md); the trainers and the
models are imported when a command needs them, so ``teamtr tasks`` starts without torch.
"""

from teamtr_cli.app import main

__all__ = ["main"]
