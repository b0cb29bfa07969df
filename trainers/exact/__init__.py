"""Exact team games: the n-agent relay computed by enumeration (no language model).

* :mod:`trainers.exact.games`: the game and its exact quantities (J, occupancies, advantages,
  the token KL, the surrogates);
* :mod:`trainers.exact.stages`: the improvement certificate and the noise-free TeamTR / naive
  sequential stages;
* :mod:`trainers.exact.run`: the same game through the real trainer (``teamtr/Relay-v0``,
  ``TeamTrainer``, tabular agents), sampled and measured exactly.

The modules import one way (``run`` -> ``stages`` -> ``games``); docs/exact-games.md.
"""
