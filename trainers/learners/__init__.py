"""Learners: what one training stage samples and which agent is updated on what.

Each built-in reads top to bottom in one short file; the shared machinery (sampling through the
runner, the trust-region update, diagnostics, logging, checkpoints) lives in
:class:`trainers.team_trainer.Stage` and :class:`trainers.team_trainer.TeamTrainer`. Register a
new learner with :func:`trainers.registry.register_learner` or the ``teamtr.learners`` entry-point
group (see docs/adding-a-trainer.md).
"""

from trainers.learners.base import Learner, SamplePlan

__all__ = ["Learner", "SamplePlan"]
