"""Learners: what one training stage samples and which agent is updated on what.

Each built-in reads top to bottom in one short file; the shared machinery (sampling through the
runner, the trust-region update, diagnostics, logging, checkpoints) lives in
:class:`trainers.learners.stage.Stage` and :class:`trainers.learners.team_trainer.TeamTrainer`. Register a
new learner with :func:`trainers.learners.registry.register_learner` or the ``teamtr.learners`` entry-point
group (see docs/adding-a-trainer.md).
"""

from trainers.learners.base import Learner

__all__ = ["Learner"]
