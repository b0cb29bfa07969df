"""Tools built on runs: ``teamtr compare`` (learners at a fair budget), ``teamtr swap``
(trained agents across runs), alignment and ``teamtr export``."""
