"""Training a team: learners, the team trainer and the run around them.

The package is in rooms that import one way (``pyproject.toml``'s import-linter contracts):

* :mod:`trainers.tools` and :mod:`trainers.exact`: built on runs (compare, swap, align,
  export; the exact games);
* :mod:`trainers.run`: running a run (the recipe, run directory and state, reports, logging,
  the warm start, team evaluation);
* :mod:`trainers.learners`: the algorithm a learner author reads (the ``Learner`` interface,
  the built-in learners and their registry, ``Stage``, ``TeamTrainer``, callbacks);
* :mod:`trainers.placement`: where each agent's model lives and is updated (in this process or
  in a Ray agent actor);
* :mod:`trainers.optim`: one update's maths (advantages, surrogate, token KL, the trust region,
  behaviour cloning, the update record);
* :mod:`trainers.diagnostics`: the paper's estimators and the improvement certificate;
* :mod:`trainers.config`: the typed training configuration (the bottom floor).

docs/architecture.md draws the tree and lists the public names.

Training from Python is one call, :func:`train` (what ``teamtr train`` runs), which returns a
:class:`RunResult`; both are imported when first used, so ``import trainers`` stays light.
"""

from typing import Any

__all__ = ["RunResult", "train"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from trainers.run import entry

        return getattr(entry, name)
    raise AttributeError(f"module 'trainers' has no attribute {name!r}")
