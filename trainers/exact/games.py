"""Exact team games: an n-agent relay in which J, occupancies, advantages, the token KL and the
surrogates are computed by enumeration (no language model; the improvement certificate and the
noise-free stages are in :mod:`trainers.exact.stages`).

The game (``docs/exact-games.md``). A secret ``s`` is uniform on ``{0..K-1}``. The relay runs
``T = n R`` turns (``R`` = ``rounds``); agent ``j(t) = t mod n`` acts at turn ``t``. The agent of
turn 0 observes ``x_0 = s``; the agent of turn ``t > 0`` observes only the previous message
``x_t = y_{t-1}``. Every agent ``k`` is a tabular policy ``P_k[x, y] = pi_k(y | x)``, a ``[K, K]``
row-stochastic table; the message of the last turn is the team's guess, reward ``1{y_{T-1} = s}``.
The team MDP state at turn ``t`` is ``(s, x_t)``: Markov, since ``x_{t+1} ~ P_{j(t)}[x_t, .]``.

Exact quantities (``D_t``, ``V_t`` are ``[K, K]`` matrices indexed ``[s, x]``)::

    D_0 = I / K,              D_{t+1} = D_t P_{j(t)}                 occupancy of (s, x_t)
    V_T = I,                  V_t     = V_{t+1} P_{j(t)}^T           value of (s, x_t)
    Q_t(s, x, m) = V_{t+1}[s, m],   A_t(s, x, m) = V_{t+1}[s, m] - V_t[s, x]
    J = sum_{s,x} D_0[s, x] V_0[s, x] = trace(P_{j(0)} ... P_{j(T-1)}) / K

Agent ``k``'s turns are ``T_k = {k, k + n, ..., k + (R-1) n}``; its occupancy is the uniform
mixture ``d^k = (1/R) sum_{t in T_k} D_t`` (every episode has exactly ``R`` messages of agent
``k``, so this is what averaging over its messages, as the trainer's KL monitor does, estimates).

All arrays are float64 numpy; a *team* is a sequence of ``n`` row-stochastic ``[K, K]`` tables
(``tables(logits)`` turns logits into one). Nothing here does I/O or logging.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Array = np.ndarray
_ROW_TOL = 1e-9


# -- the game -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RelayGame:
    """An n-agent relay with K symbols and R rounds (``T = n R`` turns).

    Attributes:
        n: agents (``>= 1``).
        symbols: ``K``, the secret and message alphabet size (``>= 2``).
        rounds: ``R``, how many times every agent acts (``>= 1``). With ``R = 1`` an agent's own
            occupancy never depends on its own policy, so TeamTR's surrogate is exact.

    Raises:
        ValueError: listing every invalid field.
    """

    n: int
    symbols: int
    rounds: int = 1

    def __post_init__(self) -> None:
        fields = (("n", self.n, 1), ("symbols", self.symbols, 2), ("rounds", self.rounds, 1))
        errors = [
            f"{name} must be an integer >= {low}, got {value!r}"
            for name, value, low in fields
            if not is_integer(value) or value < low
        ]
        if errors:
            raise ValueError("Invalid RelayGame: " + "; ".join(errors))

    @property
    def turns(self) -> int:
        """``T = n R``."""
        return self.n * self.rounds

    def agent_at(self, t: int) -> int:
        """``j(t) = t mod n``, the agent acting at turn ``t``."""
        return t % self.n

    def turns_of(self, k: int) -> tuple[int, ...]:
        """``T_k``: the turns at which agent ``k`` acts, in order (``R`` of them)."""
        self._check_agent(k)
        return tuple(range(k, self.turns, self.n))

    def _check_agent(self, k: int) -> None:
        if not is_integer(k) or not 0 <= k < self.n:
            raise ValueError(f"agent index must be in 0..{self.n - 1}, got {k!r}")


def is_integer(value: object) -> bool:
    """An ``int`` or NumPy integer that is not a ``bool`` (the game's sizes and indices)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def tables(logits: Sequence[Array]) -> list[Array]:
    """Row-wise softmax of each ``[K, K]`` logit table: the team's policy tables."""
    out = []
    for z in logits:
        z = np.asarray(z, dtype=np.float64)
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        out.append(e / e.sum(axis=-1, keepdims=True))
    return out


def random_logits(
    game: RelayGame, rng: np.random.Generator, scale: float = 1.0, code: float = 0.0
) -> list[Array]:
    """A random initialisation: ``n`` ``[K, K]`` logit tables
    ``z_k = scale * Normal(0, 1) + code * onehot(sigma_k)``, ``sigma_k`` a uniformly random
    permutation of the symbols per agent.

    ``code = 0`` gives i.i.d. Gaussian logits; such channels are noisy, so for long relays the
    composed channel mixes, ``J -> 1/K`` and every advantage vanishes. ``code > 0`` gives each
    agent a random near-deterministic code (a noisy permutation): information survives the relay,
    but the team's codes do not compose to the identity, so every agent's best response depends on
    the codes of the agents before it.

    Raises:
        ValueError: a negative ``scale`` or ``code``.
    """
    if not scale >= 0 or not code >= 0:
        raise ValueError(f"scale and code must be >= 0, got scale={scale}, code={code}")
    k = game.symbols
    out = []
    for _ in range(game.n):
        z = scale * rng.standard_normal((k, k))
        if code:
            z[np.arange(k), rng.permutation(k)] += code
        out.append(z)
    return out


def check_team(game: RelayGame, team: Sequence[Array]) -> Array:
    """Validates a team and returns it stacked, ``[n, K, K]``.

    Raises:
        ValueError: wrong number of tables, wrong shapes, negative entries or rows not summing
            to 1 (each named, with the fix).
    """
    k = game.symbols
    if len(team) != game.n:
        raise ValueError(
            f"expected one [K, K] table per agent ({game.n}), got {len(team)}; pass the whole team"
        )
    stacked = np.asarray([np.asarray(p, dtype=np.float64) for p in team])
    if stacked.shape != (game.n, k, k):
        raise ValueError(
            f"team tables must be [K, K] = [{k}, {k}] each; got shape {stacked.shape[1:]}"
        )
    if not np.all(np.isfinite(stacked)) or (stacked < 0).any():
        raise ValueError("team tables must be finite and non-negative (probabilities)")
    rows = np.abs(stacked.sum(-1) - 1.0).max()
    if rows > _ROW_TOL:
        raise ValueError(
            f"every row of every table must sum to 1 (row-stochastic); worst row is off by "
            f"{rows:.3g}. Build tables with tables(logits)."
        )
    return stacked


# -- exact quantities -----------------------------------------------------------------------------
def turn_occupancies(game: RelayGame, team: Sequence[Array]) -> Array:
    """``D[t, s, x] = Pr(secret = s, x_t = x)``, ``[T, K, K]``; each ``D[t]`` sums to 1.

    ``D_0 = I / K`` and ``D_{t+1} = D_t P_{j(t)}`` (the undiscounted per-turn occupancy; the
    paper's ``d^pi`` of Def. B.1 with the finite-horizon uniform mixture over turns, see
    :func:`occupancy_tv`).
    """
    p = check_team(game, team)
    k = game.symbols
    out = np.empty((game.turns, k, k))
    d = np.eye(k) / k
    for t in range(game.turns):
        out[t] = d
        d = d @ p[game.agent_at(t)]
    return out


def turn_values(game: RelayGame, team: Sequence[Array]) -> Array:
    """``V[t, s, x]``, the expected reward from turn ``t`` in state ``(s, x)``, ``[T + 1, K, K]``.

    ``V_T[s, x] = 1{x = s}`` (``x_T`` is the final guess) and ``V_t = V_{t+1} P_{j(t)}^T``.
    """
    p = check_team(game, team)
    k = game.symbols
    out = np.empty((game.turns + 1, k, k))
    out[game.turns] = np.eye(k)
    for t in range(game.turns - 1, -1, -1):
        out[t] = out[t + 1] @ p[game.agent_at(t)].T
    return out


def turn_advantages(game: RelayGame, team: Sequence[Array]) -> Array:
    """``A[t, s, x, m] = Q_t(s, x, m) - V_t(s, x) = V_{t+1}[s, m] - V_t[s, x]``, ``[T, K, K, K]``.

    ``|A| <= 1`` since rewards are in ``{0, 1}``; ``sum_m pi(m|x) A[t, s, x, m] = 0``.
    """
    v = turn_values(game, team)
    return v[1:, :, None, :] - v[:-1, :, :, None]


def expected_return(game: RelayGame, team: Sequence[Array]) -> float:
    """``J = Pr(final guess = secret) = trace(P_{j(0)} ... P_{j(T-1)}) / K``."""
    v = turn_values(game, team)
    return float(np.trace(v[0]) / game.symbols)


def agent_occupancy(game: RelayGame, team: Sequence[Array], k: int) -> Array:
    """Agent ``k``'s occupancy over ``(s, x)``: ``d^k = (1/R) sum_{t in T_k} D_t``, ``[K, K]``.

    The uniform mixture over the agent's ``R`` turns: every episode holds exactly ``R`` messages
    of agent ``k``, so averaging over its messages (Eq. 18's estimator) samples from it.
    """
    d = turn_occupancies(game, team)
    return d[list(game.turns_of(k))].mean(axis=0)


def symbol_occupancy(game: RelayGame, team: Sequence[Array], k: int) -> Array:
    """Agent ``k``'s occupancy over the symbol it observes, ``rho_k(x) = sum_s d^k(s, x)``, ``[K]``."""
    return agent_occupancy(game, team, k).sum(axis=0)


def state_kl(p_old: Array, p_new: Array) -> Array:
    """Per observed symbol, ``KL(p_old(.|x) || p_new(.|x))``, ``[K]`` (``0 log 0 = 0``; ``inf``
    where ``p_new`` is 0 and ``p_old`` is not)."""
    p, q = np.asarray(p_old, dtype=np.float64), np.asarray(p_new, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * (np.log(p) - np.log(q)), 0.0)
    return np.asarray(terms.sum(axis=-1))


def state_tv(p_old: Array, p_new: Array) -> Array:
    """Per observed symbol, ``TV(p_old(.|x), p_new(.|x)) = 1/2 sum_m |p_old - p_new|``, ``[K]``."""
    return np.asarray(0.5 * np.abs(np.asarray(p_old) - np.asarray(p_new)).sum(axis=-1))


def turn_kls(game: RelayGame, team: Sequence[Array], k: int, new_table: Array) -> Array:
    """``kappa_t = E_{(s, x) ~ D_t} KL(pi_k(.|x) || pi_new(.|x))`` for each ``t in T_k``, ``[R]``,
    under the pre-update ``team`` (the reverse KL the trust region constrains, Eq. 4)."""
    d = turn_occupancies(game, team)
    kl = state_kl(check_team(game, team)[k], new_table)
    return np.array([d[t].sum(axis=0) @ kl for t in game.turns_of(k)])


def token_kl(game: RelayGame, team: Sequence[Array], k: int, new_table: Array) -> float:
    """Exact ``KL_tok`` of replacing agent ``k``'s table by ``new_table`` (Eq. 18 / Def. B.1).

    ``KL_tok = E_{x ~ rho_k} KL(pi_k(.|x) || pi_new(.|x)) = (1/R) sum_{t in T_k} kappa_t`` under
    the pre-update ``team``: the mean over agent ``k``'s messages of the token log-ratio sum, which
    is what :func:`trainers.optim.kl.token_kl_monitor` estimates on rollouts of ``team`` (a message is
    one token here). The paper's team-level KL over all states (inactive ones contribute 0) is
    this divided by ``n``.
    """
    return float(turn_kls(game, team, k, new_table).mean())


def occupancy_tv(game: RelayGame, team_a: Sequence[Array], team_b: Sequence[Array]) -> float:
    """TV between the teams' occupancies over the full states ``(turn, s, x)``.

    The featurisation is the full Markov state ``(t, s, x_t)`` with the finite-horizon occupancy
    ``d(t, s, x) = D_t[s, x] / T`` (uniform over turns), so
    ``TV = (1/T) sum_t 1/2 sum_{s,x} |D^a_t - D^b_t|``.
    """
    da, db = turn_occupancies(game, team_a), turn_occupancies(game, team_b)
    return float(0.5 * np.abs(da - db).sum() / game.turns)


def occupancy_drift(game: RelayGame, intermediate: Sequence[Sequence[Array]]) -> float:
    """``D_occ = sum_{i=1}^{n_u} TV(d^{pi_hat^{i-1}}, d^{pi_hat^0})`` (App. G.1), exactly.

    Args:
        game: the relay.
        intermediate: the teams ``pi_hat^0, ..., pi_hat^{n_u - 1}`` (the team before each update
            of the stage; a trailing ``pi_hat^{n_u}`` may be included, it is ignored). TV as in
            :func:`occupancy_tv`, over ``(turn, s, x)``.
    """
    if not intermediate:
        raise ValueError("occupancy_drift needs at least the stage-start team pi_hat^0")
    start = intermediate[0]
    return float(sum(occupancy_tv(game, team, start) for team in intermediate[1:]))


def history_occupancy_tv(
    game: RelayGame, team_a: Sequence[Array], team_b: Sequence[Array]
) -> float:
    """TV between the teams' occupancies over histories: at turn ``t``, the secret and every
    earlier message, ``(t, s, y_0, ..., y_{t-1})``, uniform over turns.

    The shared-context state a transcript holds: the finest featurisation, so it is at least
    :func:`occupancy_tv` (whose Markov state ``(t, s, x_t)`` is a function of the history). It is
    the exact value of the likelihood-ratio estimate
    (:func:`trainers.diagnostics.estimators.ratio_total_variation`), whose weights are products
    of the messages' probability ratios. Enumerates ``K^(t+1)`` histories per turn.
    """
    pa, pb = check_team(game, team_a), check_team(game, team_b)
    k = game.symbols
    a = b = np.full(k, 1.0 / k)  # the secret s; the first agent observes x_0 = s
    last = np.arange(k)
    total = 0.0
    for t in range(game.turns):
        total += 0.5 * float(np.abs(a - b).sum())
        j = game.agent_at(t)
        a = (a[:, None] * pa[j][last]).reshape(-1)
        b = (b[:, None] * pb[j][last]).reshape(-1)
        last = np.tile(np.arange(k), last.size)
    return total / game.turns


def context_occupancy_tv(
    game: RelayGame, team_a: Sequence[Array], team_b: Sequence[Array]
) -> float:
    """TV between the teams' occupancies over what an agent sees, ``(turn, x_t)``.

    The marginal of :func:`occupancy_tv` over the secret: ``d(t, x) = sum_s D_t[s, x] / T``. This
    is the occupancy a run's ``diagnostics.occupancy: task`` featurisation samples (a message at
    turn ``t`` is featurised as ``(t, observed symbol)``), so it is the exact value the run's
    D_occ estimates; it is at most :func:`occupancy_tv`.
    """
    da = turn_occupancies(game, team_a).sum(axis=1)
    db = turn_occupancies(game, team_b).sum(axis=1)
    return float(0.5 * np.abs(da - db).sum() / game.turns)


def importance_second_moment(
    game: RelayGame, team_old: Sequence[Array], team_new: Sequence[Array]
) -> float:
    """``E_{tau ~ old}[w(tau)^2]`` of the trajectory weight ``w = p_new(tau) / p_old(tau)``.

    A trajectory is ``(s, y_0, ..., y_{T-1})``; its weight is the product over turns of
    ``P^new_{j(t)}[x_t, y_t] / P^old_{j(t)}[x_t, y_t]``, so
    ``E[w^2] = sum_tau p_new^2 / p_old = (1/K) sum_s sum_y (Q_{j(0)} ... Q_{j(T-1)})[s, y]`` with
    ``Q_k = P^new_k^2 / P^old_k`` elementwise. The effective sample size of ``B`` weighted
    trajectories is ``ESS/B -> 1 / E[w^2]`` as ``B`` grows (``E[w] = 1``).

    Raises:
        ValueError: ``team_new`` puts mass where ``team_old`` has none (the weight is unbounded).
    """
    old, new = check_team(game, team_old), check_team(game, team_new)
    if np.any((old == 0) & (new > 0)):
        raise ValueError("team_new puts mass where team_old has none: w is unbounded")
    with np.errstate(divide="ignore", invalid="ignore"):
        q = [np.where(o > 0, n * n / o, 0.0) for o, n in zip(old, new)]
    m = np.eye(game.symbols)
    for t in range(game.turns):
        m = m @ q[game.agent_at(t)]
    return float(m.sum() / game.symbols)


# -- surrogates -----------------------------------------------------------------------------------
def surrogate_matrix(game: RelayGame, base: Sequence[Array], k: int) -> Array:
    """``G[x, m] = sum_{t in T_k} sum_s D_t(base)[s, x] A_t^{base}(s, x, m)``, ``[K, K]``.

    The surrogate is linear in the new table: ``L(pi_new) = sum_{x, m} pi_new(m|x) G[x, m]``.
    """
    d, v = turn_occupancies(game, base), turn_values(game, base)
    g = np.zeros((game.symbols, game.symbols))
    for t in game.turns_of(k):
        # sum_s D_t[s,x] (V_{t+1}[s,m] - V_t[s,x])
        g += d[t].T @ v[t + 1] - (d[t] * v[t]).sum(axis=0)[:, None]
    return g


def surrogate(game: RelayGame, base: Sequence[Array], k: int, new_table: Array) -> float:
    """``L = sum_{t in T_k} E_{(s,x) ~ D_t(base)} E_{m ~ pi_new(.|x)} [A_t^{base}(s, x, m)]``.

    With ``base = pi_hat^{i-1}`` this is TeamTR's ``L_i^seq`` (Sec. 3.3: intermediate occupancy and
    intermediate advantages, the finite-horizon form of ``(1/(1-gamma)) E_{d} E_{pi_new} A``);
    with ``base = pi_hat^0`` it is ``L_i^stale``, what naive sequential's estimator on stage-start
    rollouts with stage-start advantages targets. ``L = 0`` for ``new_table = base[k]``.
    """
    return float((np.asarray(new_table) * surrogate_matrix(game, base, k)).sum())


@dataclass(frozen=True)
class SurrogateTerms:
    """What one agent update needs from a base team (all exact).

    Attributes:
        g: ``[K, K]`` the surrogate matrix (:func:`surrogate_matrix`).
        g_pos, g_neg: ``[K, K]`` the same with ``A`` replaced by ``max(A, 0)`` / ``min(A, 0)``
            (for the clipped surrogate).
        rho: ``[K]`` the agent's symbol occupancy (:func:`symbol_occupancy`).
        p_old: ``[K, K]`` the agent's table in the base team.
        turns: ``R``, the agent's turns per episode.
    """

    g: Array
    g_pos: Array
    g_neg: Array
    rho: Array
    p_old: Array
    turns: int


def surrogate_terms(game: RelayGame, base: Sequence[Array], k: int) -> SurrogateTerms:
    """:class:`SurrogateTerms` of agent ``k`` under ``base``."""
    p = check_team(game, base)
    d, a = turn_occupancies(game, base), turn_advantages(game, base)
    ts = list(game.turns_of(k))
    w = d[ts][..., None]  # [R, s, x, 1]
    g_pos = (w * np.maximum(a[ts], 0.0)).sum(axis=(0, 1))
    g_neg = (w * np.minimum(a[ts], 0.0)).sum(axis=(0, 1))
    rho = d[ts].mean(axis=0).sum(axis=0)
    return SurrogateTerms(g_pos + g_neg, g_pos, g_neg, rho, p[k].copy(), len(ts))


def clipped_surrogate(terms: SurrogateTerms, new_table: Array, eps: float) -> float:
    """Exact PPO-clipped surrogate (Eq. 17 without the KL term), summed over the agent's turns::

    sum_{t in T_k} E_{D_t} E_{m ~ pi_old} [min(w A, clip(w, 1-eps, 1+eps) A)],  w = pi_new/pi_old
    = sum_{x,m} pi_old(m|x) [G+[x,m] min(w, 1+eps) + G-[x,m] max(w, 1-eps)]
    """
    w = np.asarray(new_table) / terms.p_old
    return float(
        (
            terms.p_old
            * (terms.g_pos * np.minimum(w, 1.0 + eps) + terms.g_neg * np.maximum(w, 1.0 - eps))
        ).sum()
    )


def objective_and_grad(
    terms: SurrogateTerms, logits: Array, beta: float, ratio_clip: float | None
) -> tuple[float, Array]:
    """The per-update objective ``(1/R) L_clip(pi_z) - beta KL_tok(pi_old || pi_z)`` and its
    gradient in the logits ``z`` (``[K, K]``), in closed form.

    ``L_clip`` is :func:`clipped_surrogate` (``ratio_clip`` ``None``: the unclipped ``L``); the
    ``1/R`` makes it the mean over the agent's messages, as the trainer's loss is. ``KL_tok`` is
    measured on ``terms.rho`` (the base team's occupancy).
    """
    (p,) = tables([logits])
    if ratio_clip is None:
        value = float((p * terms.g).sum())
        dp = terms.g
    else:
        w = p / terms.p_old
        value = clipped_surrogate(terms, p, ratio_clip)
        dp = terms.g_pos * (w < 1.0 + ratio_clip) + terms.g_neg * (w > 1.0 - ratio_clip)
    value /= terms.turns
    dz = p * (dp - (p * dp).sum(axis=-1, keepdims=True)) / terms.turns
    kl = float(terms.rho @ state_kl(terms.p_old, p))
    dz = dz - beta * terms.rho[:, None] * (p - terms.p_old)
    return value - beta * kl, dz
