"""The occupancy drift by likelihood ratios: D_occ where contexts never repeat (docs/diagnostics.md).

The plug-in D_occ compares the empirical distributions of featurised contexts from two batches;
when every context is new (random problems, free text), each TV term sits at its ceiling of 1
whatever the team does. This estimate needs no repeat. Every context ``s`` of a stage-start batch
(sampled under ``pi_hat^0``) has a known likelihood ratio under the intermediate team
``pi_hat^{i-1}``: the problem and the environment's transitions are the same under both teams, so

    w_i(s) = d^{pi_hat^{i-1}}(s) / d^{pi_hat^0}(s) = prod over the earlier messages m of s of
             pi_hat^{i-1}(m | its context) / pi_hat^0(m | its context),

and ``TV(d^{pi_hat^{i-1}}, d^{pi_hat^0}) = E_{s ~ d^{pi_hat^0}}[(1 - w_i(s))_+]``, exactly
(:func:`trainers.diagnostics.estimators.ratio_total_variation`). A context here is the whole
history before a turn (the problem and every earlier message), the paper's shared-context state.

:class:`DOccLR` (logged as ``diag/d_occ_lr``, each update's term as ``d_occ_lr_term``: one name
for the one quantity) scores every trainable agent's messages of the stage-start batch once at
the stage start, rescores an agent's messages after each update that changed its weights (every
agent whose version moved: a shared policy's agents all move), and gives each update's term
before it runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from teamtr_env.rollout import MessageRecord, RolloutBatch
from trainers.diagnostics.estimators import context_log_weights, mean_and_se, ratio_tv_terms

Score = Callable[[str, list[MessageRecord]], np.ndarray]
"""An agent's current log-probability of each of the messages (``[N]``, summed over tokens)."""


class DOccLR:
    """``D_occ`` by likelihood ratios (``diag/d_occ_lr``) of one stage, on its stage-start
    batch.

    Args:
        batch: rollouts of the stage-start team ``pi_hat^0``.
        agents: the trainable agents (the others never change, so their ratios are 1).
        score: an agent's current log-probability of each message (:data:`Score`).
        versions: each trainable agent's version now.
    """

    def __init__(
        self,
        batch: RolloutBatch,
        agents: Sequence[str],
        score: Score,
        versions: Mapping[str, int],
    ) -> None:
        self.messages = list(batch.messages)
        self._episodes = [m.episode for m in self.messages]
        self._turns = [m.turn for m in self.messages]
        self._score = score
        self._versions = dict(versions)
        self._start = np.zeros(len(self.messages))
        for agent in agents:
            self._start[self._of(agent)] = self._logprobs(agent)
        self._now = self._start.copy()
        self.terms: list[np.ndarray] = []  # per update i >= 1: its per-episode terms

    def _of(self, agent: str) -> list[int]:
        return [j for j, m in enumerate(self.messages) if m.agent == agent]

    def _logprobs(self, agent: str) -> np.ndarray:
        """Each of ``agent``'s messages' log-probability under its current weights."""
        rows = self._of(agent)
        if not rows:
            return np.zeros(0)
        return np.asarray(self._score(agent, [self.messages[j] for j in rows]), dtype=np.float64)

    def term(self) -> float:
        """``TV(d^{pi_hat^{i-1}}, d^{pi_hat^0})`` for the update about to run (the team now);
        its per-episode terms are kept for the stage's standard error."""
        log_w = context_log_weights(self._episodes, self._turns, self._now - self._start)
        terms = ratio_tv_terms(log_w, self._episodes)
        self.terms.append(terms)
        return float(terms.mean()) if terms.size else math.nan

    def updated(self, versions: Mapping[str, int]) -> None:
        """After an update: rescores the messages of every agent whose version moved."""
        for agent, version in versions.items():
            if self._versions.get(agent) != version:
                self._now[self._of(agent)] = self._logprobs(agent)
        self._versions = dict(versions)

    def total(self) -> tuple[float, float]:
        """``D_occ = sum_i TV_i`` over the terms taken, and its standard error over episodes
        (each episode's terms summed first: the terms share the batch)."""
        if not self.terms or self.terms[0].size == 0:
            return math.nan, math.nan
        return mean_and_se(np.sum(self.terms, axis=0))
