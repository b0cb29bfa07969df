"""The noise-free stages on the relay of :mod:`trainers.exact.games`: the exact improvement
certificate of an agent update (finite horizon, and the paper's Thm. 3.6 form), and TeamTR and
naive sequential run with exact surrogates, exact trust-region line searches and exact
measurements (:func:`run_exact_stage`, :func:`run_exact`).

Arrays and teams as in :mod:`trainers.exact.games`. Nothing here does I/O or logging.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from trainers.diagnostics.certificate import Certificate, certificate_lower_bound
from trainers.exact.games import (
    Array,
    RelayGame,
    SurrogateTerms,
    check_team,
    expected_return,
    is_integer,
    objective_and_grad,
    occupancy_drift,
    state_kl,
    surrogate,
    surrogate_terms,
    tables,
    turn_advantages,
    turn_occupancies,
)

Method = Literal["teamtr", "naive_sequential"]
METHODS: tuple[Method, ...] = ("teamtr", "naive_sequential")


# -- the certificate ------------------------------------------------------------------------------
def radius_penalty(rounds: int, delta: float, a_max: float = 1.0) -> float:
    """The certificate's penalty per update when only ``KL_tok <= delta`` is known::

        pen_R(delta) = 2 A_max sqrt(R S_R delta / 2),   S_R = sum_{c=1}^{R-1} c^2 = (R-1) R (2R-1) / 6

    (0 for ``R = 1``; ``2 A_max sqrt(delta)`` for ``R = 2``). See :func:`update_certificate`.
    """
    if not is_integer(rounds) or rounds < 1 or not delta >= 0:
        raise ValueError(f"need rounds >= 1 and delta >= 0; got {rounds!r}, {delta!r}")
    s_r = (rounds - 1) * rounds * (2 * rounds - 1) / 6
    return 2.0 * a_max * math.sqrt(rounds * s_r * delta / 2.0)


@dataclass(frozen=True)
class UpdateCertificate:
    """The finite-horizon improvement certificate of one agent update (exact terms).

    Attributes:
        l_seq: ``L^seq`` under the pre-update team.
        turn_kl: ``kappa_t`` per turn of the agent (:func:`~trainers.exact.games.turn_kls`).
        kl_tok: ``mean(turn_kl)``, the exact ``KL_tok``.
        tv_bound: per turn of the agent, ``sum_{t' in T_k, t' < t} sqrt(kappa_t' / 2)``, the bound
            on ``TV(D_t(new), D_t(old))``.
        oscillation: per turn, ``max f_t - min f_t`` over states ``(s, x)`` with
            ``f_t = E_{m ~ pi_new} A_t^{old}``.
        penalty: ``sum_t oscillation_t * tv_bound_t``.
        lower_bound: ``l_seq - penalty <= J(new) - J(old)`` (a theorem).
    """

    l_seq: float
    turn_kl: tuple[float, ...]
    kl_tok: float
    tv_bound: tuple[float, ...]
    oscillation: tuple[float, ...]
    penalty: float
    lower_bound: float


def update_certificate(
    game: RelayGame, team: Sequence[Array], k: int, new_table: Array
) -> UpdateCertificate:
    """Exact finite-horizon lower bound on ``J(team[k <- new]) - J(team)``.

    Derivation (``pi = team``, ``pi'`` = ``pi`` with agent ``k``'s table replaced):

    1. Performance difference, finite horizon (telescoping ``V_t`` along ``pi'`` trajectories):
       ``J(pi') - J(pi) = sum_t E_{D_t(pi')} E_{m ~ pi'} A_t^pi``. At ``t not in T_k`` the acting
       policy is unchanged and ``E_{m ~ pi} A_t^pi = 0``, so only ``t in T_k`` remain:
       ``J(pi') - J(pi) = sum_{t in T_k} E_{D_t(pi')} f_t``, ``f_t(s,x) = E_{m ~ pi'_k(.|x)}
       A_t^pi(s,x,m)``.
    2. ``= L^seq + sum_{t in T_k} (E_{D_t(pi')} - E_{D_t(pi)}) f_t`` and
       ``|E_p f - E_q f| <= TV(p, q) (max f - min f)``.
    3. The laws of the prefix ``(s, x_0..x_t)`` differ only through agent ``k``'s kernels at its
       earlier turns; replacing one kernel at a time (hybrid argument),
       ``TV(D_t(pi'), D_t(pi)) <= sum_{t' in T_k, t' < t} E_{D_t'(pi)} TV(pi_k(.|x), pi'_k(.|x))``,
       with the expectation under the OLD team (the one the KL is measured on).
    4. Pinsker, then Jensen: ``E TV <= E sqrt(KL(pi_k || pi'_k) / 2) <= sqrt(kappa_t' / 2)``.

    Hence ``J(pi') - J(pi) >= L^seq - sum_{t in T_k} osc(f_t) sum_{t' < t} sqrt(kappa_t'/2)``.
    With ``R = 1`` the sum is empty and the bound is an equality. Knowing only
    ``KL_tok = (1/R) sum kappa <= delta`` and ``osc <= 2 A_max`` (``A_max = 1`` here),
    Cauchy-Schwarz gives the penalty :func:`radius_penalty`.
    """
    p = check_team(game, team)
    new = np.asarray(new_table, dtype=np.float64)
    d, a = turn_occupancies(game, team), turn_advantages(game, team)
    kl = state_kl(p[k], new)
    ts = game.turns_of(k)
    kappa = [float(d[t].sum(axis=0) @ kl) for t in ts]
    tv = [sum(math.sqrt(max(kappa[j], 0.0) / 2.0) for j in range(i)) for i in range(len(ts))]
    osc = []
    l_seq = 0.0
    for t in ts:
        f = (a[t] * new[None, :, :]).sum(axis=-1)  # [s, x]
        osc.append(float(f.max() - f.min()))
        l_seq += float((d[t] * f).sum())
    penalty = float(sum(o * b for o, b in zip(osc, tv)))
    return UpdateCertificate(
        l_seq,
        tuple(kappa),
        float(np.mean(kappa)),
        tuple(tv),
        tuple(osc),
        penalty,
        l_seq - penalty,
    )


def paper_certificate(
    game: RelayGame, l_seq: Sequence[float], kl_tok: Sequence[float]
) -> Certificate:
    """The paper's Thm. 3.6 form through :func:`trainers.diagnostics.certificate.certificate_lower_bound`.

    Effective-horizon mapping: ``gamma = 1 - 1/T`` (so ``1/(1-gamma) = T``), ``A_max = 1``,
    ``zeta_i = 0`` (exact advantages), ``l_seq`` the finite-horizon ``L^seq`` (already the sum over
    turns, i.e. ``T`` times the mean over the uniform-over-turns occupancy, the analogue of the
    paper's ``(1/(1-gamma)) E_{d^gamma}``), ``deltas`` = the per-agent ``KL_tok`` (what Eq. 18 and
    the trainer measure; the paper's team-level KL is ``n`` times smaller, so this is more
    conservative). The result is sound for ``T >= 2``: its penalty
    ``sqrt(2) gamma T^2 sqrt(KL)`` is at least :func:`radius_penalty` (``<= R^2 sqrt(2 KL / 3)``),
    which bounds :func:`update_certificate`'s, so it is never above that theorem's bound.

    Raises:
        ValueError: ``T < 2`` (``gamma`` would be 0), or mismatched lengths.
    """
    if game.turns < 2:
        raise ValueError(
            f"the paper form needs T = n R >= 2 (gamma = 1 - 1/T); got T = {game.turns}"
        )
    deltas = [max(float(x), 0.0) for x in kl_tok]
    return certificate_lower_bound(
        list(l_seq), deltas, [0.0] * len(deltas), gamma=1.0 - 1.0 / game.turns, a_max=1.0
    )


# -- exact-mode stage runners ---------------------------------------------------------------------
@dataclass(frozen=True)
class ExactSettings:
    """One agent update of the exact (noise-free) runners; the same for both methods.

    Attributes:
        steps: Adam ascent steps on the objective (:func:`~trainers.exact.games.objective_and_grad`).
        lr: Adam learning rate on the logits.
        delta: trust-region radius on ``KL_tok``.
        beta: KL-penalty coefficient (fixed).
        ratio_clip: ``eps`` of the clipped surrogate; ``None`` = unclipped (the default: with
            the exact line search doing the trust region's job, clipping only flattens the
            objective, and Adam then drifts inside the region; docs/exact-games.md).
        max_backtracks: halvings of the step toward the old logits before reverting.
    """

    steps: int = 20
    lr: float = 0.05
    delta: float = 0.01
    beta: float = 0.0
    ratio_clip: float | None = None
    max_backtracks: int = 12

    def __post_init__(self) -> None:
        errors = []
        if not is_integer(self.steps) or self.steps < 1:
            errors.append(f"steps must be an integer >= 1, got {self.steps!r}")
        if not self.lr > 0:
            errors.append(f"lr must be > 0, got {self.lr!r}")
        if not self.delta > 0:
            errors.append(f"delta must be > 0, got {self.delta!r}")
        if not self.beta >= 0:
            errors.append(f"beta must be >= 0, got {self.beta!r}")
        if self.ratio_clip is not None and not self.ratio_clip > 0:
            errors.append(f"ratio_clip must be > 0 or None, got {self.ratio_clip!r}")
        if not is_integer(self.max_backtracks) or self.max_backtracks < 0:
            errors.append(f"max_backtracks must be an integer >= 0, got {self.max_backtracks!r}")
        if errors:
            raise ValueError("Invalid ExactSettings: " + "; ".join(errors))


@dataclass(frozen=True)
class ExactUpdate:
    """One agent update of an exact stage.

    Attributes:
        index, agent: position ``i - 1`` in the update order and the agent index.
        l_used: the surrogate the method used (TeamTR: ``l_seq``; naive: ``l_stale``).
        l_seq: exact ``L_i^seq`` of the kept table (under ``pi_hat^{i-1}``).
        l_stale: exact ``L_i^stale`` of the kept table (under ``pi_hat^0``).
        improvement: ``J(pi_hat^i) - J(pi_hat^{i-1})``.
        kl_tok: exact ``KL_tok`` under ``pi_hat^{i-1}`` (the true trust-region quantity).
        kl_used: the ``KL_tok`` the method's monitor measured (naive: under ``pi_hat^0``).
        in_region: ``kl_tok <= delta``.
        accepted: the update was kept (else reverted to the old table).
        backtracks: step halvings.
        lower_bound: the update's certificate (:func:`update_certificate`).
    """

    index: int
    agent: int
    l_used: float
    l_seq: float
    l_stale: float
    improvement: float
    kl_tok: float
    kl_used: float
    in_region: bool
    accepted: bool
    backtracks: int
    lower_bound: float


@dataclass(frozen=True)
class ExactStage:
    """One exact stage.

    Attributes:
        method: ``"teamtr"`` or ``"naive_sequential"``.
        j_before, j_after: ``J(pi_hat^0)``, ``J(pi_hat^n)``.
        l_used: ``sum_i`` of what the method used.
        surrogate_error: ``|l_used - (j_after - j_before)|``.
        update_error: ``sum_i |l_used_i - improvement_i|`` (per-update errors, no cancellation
            between updates).
        delta_stale: ``sum_i |l_stale_i - l_seq_i|`` (exact ``Delta_stale``).
        d_occ: :func:`~trainers.exact.games.occupancy_drift` of the stage.
        certificate: ``sum_i`` of the updates' lower bounds (measured-KL form, a theorem).
        certificate_radius: ``sum_i l_seq_i - n_u radius_penalty(R, delta)``; a theorem when
            ``all_in_region``.
        certificate_paper: :func:`paper_certificate` of the stage (``nan`` when ``T < 2``).
        all_in_region: every update's exact ``KL_tok <= delta``.
        updates: per update records.
    """

    method: Method
    j_before: float
    j_after: float
    l_used: float
    surrogate_error: float
    update_error: float
    delta_stale: float
    d_occ: float
    certificate: float
    certificate_radius: float
    certificate_paper: float
    all_in_region: bool
    updates: tuple[ExactUpdate, ...] = field(default_factory=tuple)

    @property
    def improvement(self) -> float:
        """``J(pi_bar) - J(pi_cur)``."""
        return self.j_after - self.j_before


def _adam_ascent(terms: SurrogateTerms, z0: Array, settings: ExactSettings) -> Array:
    z = z0.copy()
    m, v = np.zeros_like(z), np.zeros_like(z)
    b1, b2, eps = 0.9, 0.999, 1e-8
    for step in range(1, settings.steps + 1):
        _, g = objective_and_grad(terms, z, settings.beta, settings.ratio_clip)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        z = z + settings.lr * (m / (1 - b1**step)) / (np.sqrt(v / (1 - b2**step)) + eps)
    return z


def _line_search(
    terms: SurrogateTerms, z_old: Array, z_full: Array, settings: ExactSettings
) -> tuple[Array, float, int, bool]:
    """Halves the step toward ``z_old`` until the exact KL on ``terms.rho`` is ``<= delta``;
    returns ``(z, kl, backtracks, accepted)`` (``z_old``, 0 when it never fits)."""
    scale, backtracks = 1.0, 0
    while True:
        z = z_old + scale * (z_full - z_old)
        (p,) = tables([z])
        kl = float(terms.rho @ state_kl(terms.p_old, p))
        if kl <= settings.delta:
            return z, kl, backtracks, True
        if backtracks >= settings.max_backtracks:
            return z_old.copy(), 0.0, backtracks, False
        scale *= 0.5
        backtracks += 1


def run_exact_stage(
    game: RelayGame,
    logits: Sequence[Array],
    method: Method,
    settings: ExactSettings,
    order: Sequence[int] | None = None,
) -> tuple[list[Array], ExactStage]:
    """One noise-free stage of TeamTR or naive sequential on the relay.

    For each agent ``k = sigma(i)``: ``settings.steps`` Adam steps (a fresh Adam state per update)
    on the exact objective (:func:`~trainers.exact.games.objective_and_grad`), then an exact
    trust-region line search (halve the step toward the old logits until ``KL_tok <= delta``,
    else revert). TeamTR measures the surrogate, the
    advantages and the KL under ``pi_hat^{i-1}``; naive sequential under ``pi_hat^0`` (all that
    its stage-start rollouts show it). Equal budget: same steps, lr, delta, beta.

    Args:
        game: the relay.
        logits: ``n`` ``[K, K]`` logit tables, the stage-start team ``pi_hat^0`` (not modified).
        method: ``"teamtr"`` or ``"naive_sequential"``.
        settings: the update settings.
        order: the update order sigma (agent indices); default ``0..n-1``.

    Returns:
        ``(new_logits, ExactStage)``.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    order = list(range(game.n)) if order is None else list(order)
    if sorted(order) != list(range(game.n)):
        raise ValueError(f"order must be a permutation of 0..{game.n - 1}, got {order}")
    z = [np.asarray(x, dtype=np.float64).copy() for x in logits]
    start = tables(z)
    check_team(game, start)
    teams = [start]
    updates: list[ExactUpdate] = []
    for i, k in enumerate(order):
        update, z[k], team = _exact_update(game, start, teams[-1], z[k], i, k, method, settings)
        updates.append(update)
        teams.append(team)
    return z, _exact_stage_record(game, method, settings, teams, updates)


def _exact_update(
    game: RelayGame,
    start: Sequence[Array],
    current: Sequence[Array],
    z_k: Array,
    i: int,
    k: int,
    method: Method,
    settings: ExactSettings,
) -> tuple[ExactUpdate, Array, list[Array]]:
    """The ``i``-th update of a stage, of agent ``k`` (logits ``z_k``) in team ``current``:
    its record, the agent's new logits and the new team. TeamTR's surrogate is under
    ``current``, naive sequential's under the stage-start team ``start``."""
    base = current if method == "teamtr" else start
    terms = surrogate_terms(game, base, k)
    z_full = _adam_ascent(terms, z_k, settings)
    z_new, kl_used, backtracks, accepted = _line_search(terms, z_k, z_full, settings)
    (p_new,) = tables([z_new])
    cert = update_certificate(game, current, k, p_new)
    l_stale = surrogate(game, start, k, p_new)
    nxt = [*current[:k], p_new, *current[k + 1 :]]
    update = ExactUpdate(
        index=i,
        agent=k,
        l_used=cert.l_seq if method == "teamtr" else l_stale,
        l_seq=cert.l_seq,
        l_stale=l_stale,
        improvement=expected_return(game, nxt) - expected_return(game, current),
        kl_tok=cert.kl_tok,
        kl_used=kl_used,
        in_region=cert.kl_tok <= settings.delta * (1 + 1e-9),
        accepted=accepted,
        backtracks=backtracks,
        lower_bound=cert.lower_bound,
    )
    return update, z_new, nxt


def _exact_stage_record(
    game: RelayGame,
    method: Method,
    settings: ExactSettings,
    teams: Sequence[Sequence[Array]],
    updates: Sequence[ExactUpdate],
) -> ExactStage:
    """A stage's record from its teams (stage start, then after each update) and updates."""
    j_before, j_after = expected_return(game, teams[0]), expected_return(game, teams[-1])
    l_used = float(sum(u.l_used for u in updates))
    l_seq = [u.l_seq for u in updates]
    paper = (
        paper_certificate(game, l_seq, [u.kl_tok for u in updates]).lower_bound
        if game.turns >= 2
        else math.nan
    )
    return ExactStage(
        method=method,
        j_before=j_before,
        j_after=j_after,
        l_used=l_used,
        surrogate_error=abs(l_used - (j_after - j_before)),
        update_error=float(sum(abs(u.l_used - u.improvement) for u in updates)),
        delta_stale=float(sum(abs(u.l_stale - u.l_seq) for u in updates)),
        d_occ=occupancy_drift(game, list(teams[:-1])),
        certificate=float(sum(u.lower_bound for u in updates)),
        certificate_radius=float(
            sum(l_seq) - len(updates) * radius_penalty(game.rounds, settings.delta)
        ),
        certificate_paper=paper,
        all_in_region=all(u.in_region for u in updates),
        updates=tuple(updates),
    )


def run_exact(
    game: RelayGame,
    logits: Sequence[Array],
    method: Method,
    settings: ExactSettings,
    stages: int,
) -> tuple[list[Array], list[ExactStage]]:
    """``stages`` consecutive :func:`run_exact_stage` calls (fixed order) from ``logits``."""
    z = [np.asarray(x, dtype=np.float64).copy() for x in logits]
    out = []
    for _ in range(stages):
        z, stage = run_exact_stage(game, z, method, settings)
        out.append(stage)
    return z, out
