"""Where each trainable agent's model lives and is updated: in this process, or in a Ray learner
actor (:mod:`~trainers.placement.updaters`)."""
