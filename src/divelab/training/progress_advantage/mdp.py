"""The exact check: in a tabular stochastic MDP, beta * log pi*/pi_ref equals Q* - V*.

The KL-regularised objective is ``J(pi) = E[sum_t gamma^t (r(s_t,a_t) - beta KL(pi(.|s_t) || pi_ref(.|s_t)))]``.
Soft value iteration solves its Bellman equation ``V(s) = beta log sum_a pi_ref(a|s) exp(Q(s,a)/beta)``,
``Q(s,a) = r(s,a) + gamma E_{s'}[V(s')]``. The optimal policy is found *independently* here (soft
policy iteration with exact policy evaluation, and KL-regularised policy gradient), and its
log-ratio is compared with ``Q* - V*`` from value iteration.

The "reward recovery" reading (DPO-style) says ``r(s,a) = beta log pi/pi_ref + V(s) - gamma V(s')``
for the observed next state ``s'``. That holds only when ``s'`` is a deterministic function of
``(s, a)``; with slip it is off by ``gamma (E[V(s')] - V(s'))``. :func:`reward_recovery_gap`
measures it on average over the occupancy, :func:`reward_recovery_max_gap` in the worst reachable case.

Log space: at RLHF-typical settings (beta 0.01 or less, gamma 0.99 or more) the optimal policy has
probabilities far below float64's range (log pi* around -1,000 and smaller), so every function that
takes a policy also takes log-probabilities (``log=True``), the solvers work in log space
throughout, and nothing returns NaN silently: a result that cannot be computed or represented
raises an error that says why (:class:`PolicyUnderflowError` when probabilities underflow).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp


@dataclass
class TabularMDP:
    """``P[s, a, s']`` transition probabilities, ``R[s, a]`` rewards, discount, start distribution."""

    P: np.ndarray
    R: np.ndarray
    gamma: float
    mu0: np.ndarray

    def __post_init__(self) -> None:
        S, A, S2 = self.P.shape
        if S != S2:
            raise ValueError(f"P must have shape [S, A, S], got {self.P.shape}")
        if self.R.shape != (S, A):
            raise ValueError(f"R must have shape {(S, A)}, got {self.R.shape}")
        if not np.allclose(self.P.sum(-1), 1.0):
            raise ValueError("each P[s, a, :] must sum to 1")
        if not 0 <= self.gamma < 1:
            raise ValueError(f"gamma must be in [0, 1), got {self.gamma}")
        if self.mu0.shape != (S,) or not np.isclose(self.mu0.sum(), 1.0):
            raise ValueError("mu0 must be a distribution over the S states")

    @property
    def n_states(self) -> int:
        return self.P.shape[0]

    @property
    def n_actions(self) -> int:
        return self.P.shape[1]

    @property
    def deterministic(self) -> bool:
        return bool(np.all(np.isclose(self.P.max(-1), 1.0)))


def slip_chain(n_states: int = 6, slip: float = 0.2, gamma: float = 0.9, step_cost: float = 0.05) -> TabularMDP:
    """A chain: actions left / stay / right; with probability ``slip`` the move is replaced by one of
    the other two at random. Reward 1 for acting in the rightmost state, ``-step_cost`` elsewhere."""
    if n_states < 2:
        raise ValueError(f"n_states must be >= 2, got {n_states}")
    if not 0 <= slip <= 1:
        raise ValueError(f"slip must be in [0, 1], got {slip}")
    S, A = n_states, 3
    P = np.zeros((S, A, S))
    moves = (-1, 0, 1)
    for s in range(S):
        for a in range(A):
            for b in range(A):
                p = (1 - slip) if a == b else slip / 2
                P[s, a, min(S - 1, max(0, s + moves[b]))] += p
    R = np.full((S, A), -step_cost)
    R[S - 1, :] = 1.0
    mu0 = np.zeros(S)
    mu0[0] = 1.0
    return TabularMDP(P, R, gamma, mu0)


def random_mdp(rng: np.random.Generator, n_states: int, n_actions: int, gamma: float = 0.9,
               concentration: float = 0.5) -> TabularMDP:
    """A random MDP: Dirichlet transitions (stochastic), Gaussian rewards, uniform start."""
    P = rng.dirichlet(np.full(n_states, concentration), size=(n_states, n_actions))
    R = rng.normal(size=(n_states, n_actions))
    return TabularMDP(P, R, gamma, np.full(n_states, 1.0 / n_states))


class PolicyUnderflowError(ValueError):
    """A policy given (or asked for) as probabilities cannot represent the answer: some action the
    reference allows has a probability below float64's range (it underflowed to exactly 0), so its
    log-ratio is -inf. Carry log-policies instead (``log=True``)."""


def _log_policy(pi: np.ndarray, log: bool, name: str) -> np.ndarray:
    """Log-probabilities of a policy given as probabilities (``log=False``) or log-probabilities."""
    a = np.asarray(pi, dtype=float)
    if np.isnan(a).any():
        raise ValueError(f"{name} contains NaN at (state, action) {tuple(np.argwhere(np.isnan(a))[0])}")
    if log:
        if np.any(a > 1e-12) or np.any(np.isposinf(a)):
            raise ValueError(f"{name} was given as log-probabilities (log=True) but has entries > 0 (max "
                             f"{a.max():.3g}); pass probabilities with log=False")
        lp = a
    else:
        if np.any(a < 0) or np.any(a > 1 + 1e-12):
            raise ValueError(f"{name} was given as probabilities (log=False) but has entries outside [0, 1] "
                             f"(min {a.min():.3g}, max {a.max():.3g}); pass log-probabilities with log=True")
        with np.errstate(divide="ignore"):
            lp = np.log(a)
    total = logsumexp(lp, axis=-1)
    if np.any(np.abs(total) > 1e-6):
        s = int(np.argmax(np.abs(total)))
        raise ValueError(f"{name} is not a distribution over actions in state {s} (its probabilities sum to "
                         f"{np.exp(total[s]):.6g})")
    return lp


def _finite(x: np.ndarray, what: str, why: str) -> np.ndarray:
    if not np.all(np.isfinite(x)):
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(x))[0])
        raise FloatingPointError(f"{what} is not finite at {bad}: {why}")
    return x


def _rounding(mdp: TabularMDP, *arrays: np.ndarray) -> float:
    """A bound on the rounding of one soft Bellman step at this value scale: the expectation over
    ``S`` next states, logsumexp and the rescaling by ``beta`` each lose a few float64 ulps of the
    largest value. Stopping rules add it, so a bound they certify holds for the computed numbers too."""
    scale = max([1.0, *(float(np.max(np.abs(a))) for a in arrays)])
    return (mdp.n_states + 8) * float(np.finfo(float).eps) * scale


def _floor_error(what: str, tol: float, floor: float, mdp: TabularMDP, beta: float) -> ValueError:
    return ValueError(f"{what}: tol={tol:.3g} is below what float64 can certify for this problem (gamma "
                      f"{mdp.gamma}, beta {beta}: values this large round to about {floor:.2g} after dividing by "
                      f"1 - gamma); pass tol >= {floor:.2g}, or tol=None for the tightest bound float64 allows")


def soft_value_iteration(mdp: TabularMDP, pi_ref: np.ndarray, beta: float, tol: float | None = None,
                         max_iter: int = 1_000_000, *, log: bool = False, with_bound: bool = False):
    """``(Q*, V*)`` of the KL-regularised problem by iterating the soft Bellman operator (a gamma-contraction).

    Stopping rule, a guarantee rather than a heuristic: for a gamma-contraction
    ``max|V_k - V*| <= (gamma max|V_k - V_{k-1}| + delta) / (1 - gamma)``, where ``delta`` bounds one
    step's float64 rounding (:func:`_rounding`). Iteration stops once that bound is at most ``tol``
    (absolute), so ``max|V - V*| <= tol`` and ``max|Q - Q*| <= gamma tol``. With ``tol=None`` (the
    default) it stops where float64 stops helping (``gamma`` times the change is down to ``delta``),
    which certifies ``2 delta / (1 - gamma)``: about 1e-12 of the value scale at gamma 0.99, 1e-11 at
    0.999. A ``tol`` float64 cannot certify raises ``ValueError`` naming the smallest one it can.
    ``with_bound=True`` also returns the certified bound: ``(Q, V, bound)``.

    ``pi_ref`` is a probability table, or log-probabilities with ``log=True``. Raises ``RuntimeError``
    if ``max_iter`` steps are not enough."""
    log_ref = _check_ref(mdp, pi_ref, beta, log)
    if tol is not None and not tol > 0:
        raise ValueError(f"tol must be a positive bound on max|V - V*| or None, got {tol!r}")
    S, A = mdp.n_states, mdp.n_actions
    g = mdp.gamma
    P2 = mdp.P.reshape(S * A, S)
    base = (log_ref + mdp.R / beta).reshape(S * A)  # log pi_ref + R / beta, flattened once
    gb = g / beta
    V = np.zeros(S)
    for _ in range(max_iter):  # the plain contraction, written out for speed (gamma 0.999 takes ~35k steps)
        x = (base + gb * (P2 @ V)).reshape(S, A)
        m = x.max(axis=1)
        V_new = beta * (m + np.log(np.exp(x - m[:, None]).sum(axis=1)))
        change = float(np.abs(V_new - V).max())
        V = V_new
        delta = _rounding(mdp, V)
        bound = (g * change + delta) / (1 - g)
        if tol is not None and bound <= tol:
            break
        if g * change <= delta:  # at float64's floor: another step changes only rounding
            if tol is not None:
                raise _floor_error("soft value iteration", tol, 2 * delta / (1 - g), mdp, beta)
            break
    else:
        raise RuntimeError(f"soft value iteration did not converge in {max_iter} iterations (gamma "
                           f"{mdp.gamma}, last change {change:.3g}, certified bound {bound:.3g}); raise max_iter "
                           "or tol")
    Q = mdp.R + mdp.gamma * mdp.P @ V
    _finite(Q, "Q*", f"beta={beta}, gamma={mdp.gamma}: rewards or beta out of float64's range")
    return (Q, V, bound) if with_bound else (Q, V)


def soft_policy_evaluation(mdp: TabularMDP, pi: np.ndarray, pi_ref: np.ndarray, beta: float, *,
                           log: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``(Q^pi, V^pi)`` of the regularised objective by one linear solve.

    ``pi`` and ``pi_ref`` are probability tables, or log-probabilities with ``log=True``. The KL term
    uses ``0 log 0 = 0`` (an action the policy never takes costs nothing), so a policy with underflowed
    entries is evaluated correctly."""
    log_ref = _check_ref(mdp, pi_ref, beta, log)
    lp = _log_policy(pi, log, "pi")
    p = np.exp(lp)
    kl = np.sum(p * np.where(p > 0, lp - log_ref, 0.0), axis=1)  # 0 log 0 = 0, as xlogy
    r_pi = np.sum(p * mdp.R, axis=1) - beta * kl
    P_pi = np.einsum("sa,sat->st", p, mdp.P)
    V = np.linalg.solve(np.eye(mdp.n_states) - mdp.gamma * P_pi, r_pi)
    _finite(V, "V^pi", "the policy-evaluation solve failed")
    return mdp.R + mdp.gamma * mdp.P @ V, V


def kl_objective(mdp: TabularMDP, pi: np.ndarray, pi_ref: np.ndarray, beta: float, *, log: bool = False) -> float:
    """``J(pi)`` from the start distribution."""
    return float(mdp.mu0 @ soft_policy_evaluation(mdp, pi, pi_ref, beta, log=log)[1])


def soft_policy_iteration(mdp: TabularMDP, pi_ref: np.ndarray, beta: float, iters: int = 200,
                          tol: float | None = None, *, log: bool = False, with_bound: bool = False):
    """The optimal policy by soft policy iteration: evaluate exactly, then improve
    ``log pi(a|s) = log pi_ref(a|s) + Q^pi(s,a)/beta - logsumexp``. Monotone in ``J``; converges to the optimum.

    The iteration runs in log space throughout, so small ``beta`` with long horizons (beta 0.001,
    gamma 0.999), where optimal probabilities fall far below float64's range, is exact. With
    ``log=True`` ``pi_ref`` is given, and the policy returned, as log-probabilities. With
    ``log=False`` (probabilities in and out, the convenience form) a policy that cannot be represented
    as probabilities raises :class:`PolicyUnderflowError` instead of returning zeros.

    Certificate: the improved policy's ``beta log pi/pi_ref`` differs from ``Q* - V*`` by at most
    ``2 (gamma res + delta) / (1 - gamma)``, where ``res = max|T V - V|`` is the Bellman residual of the
    evaluated values (``|V - V*| <= res / (1 - gamma)``, and both ``Q`` and the normaliser ``T V`` are then
    within ``gamma |V - V*|`` of ``Q*`` and ``V*``) and ``delta`` bounds float64 rounding.

    Guarantee (tested on random MDPs, slip chains up to 200 states, gamma up to 0.999, beta 1e-3 to 10 and
    sparse rewards, against value iteration in extended precision): the returned policy is the iterate with
    the smallest certified bound seen, never an earlier, worse one, and the true error is within that bound.
    The residual is not monotone (on a slip chain at gamma 0.99 it can rise for several iterations before
    falling to rounding), so a rise never stops the iteration. It stops when

    - the bound is at most ``tol`` (absolute), when one is given;
    - the residual is down to rounding (``gamma res <= delta``): another step changes nothing;
    - or on a true plateau: for three iterations in a row the policy moved by no more than rounding can
      explain (``beta max|log pi_k - log pi_{k-1}| <= 100 delta / (1 - gamma)``, the exact evaluation's
      linear solve losing up to ``1/(1 - gamma)`` ulps of the values).

    With ``tol=None`` (the default) it returns the best iterate at float64's floor; ``with_bound=True`` also
    returns that bound: ``(pi, bound)``. On random MDPs the bound reaches a few 1e-9 at gamma 0.99 (values
    near 100) and about 1e-6 at 0.999 (values near 1000), while the actual error stays far smaller;
    :func:`soft_value_iteration` certifies ``V*`` more tightly. A ``tol`` float64 cannot certify raises
    ``ValueError`` naming the smallest it can; ``RuntimeError`` if ``iters`` are not enough."""
    log_ref = _check_ref(mdp, pi_ref, beta, log)
    if tol is not None and not tol > 0:
        raise ValueError(f"tol must be a positive bound on the identity error or None, got {tol!r}")
    g = mdp.gamma
    lp = log_ref.copy()
    best_lp, best = lp, np.inf
    still = 0  # iterations in a row in which the policy moved only by rounding
    for _ in range(iters):
        Q, V = soft_policy_evaluation(mdp, lp, log_ref, beta, log=True)
        new_lp, TV = _improve(log_ref, Q, beta)
        _finite(new_lp, "log pi", f"beta={beta} too small for Q/beta in float64")
        delta = _rounding(mdp, Q, V, TV)
        res = float(np.max(np.abs(TV - V)))
        bound = 2 * (g * res + delta) / (1 - g)
        if bound < best:
            best_lp, best = new_lp, bound
        if tol is not None and best <= tol:
            break
        moved = beta * float(np.max(np.abs(new_lp - lp)))
        still = still + 1 if moved <= 100 * delta / (1 - g) else 0
        lp = new_lp
        if g * res <= delta or still >= 3:  # float64's floor: further steps only reshuffle rounding
            if tol is not None:
                raise _floor_error("soft policy iteration", tol, best, mdp, beta)
            break
    else:
        raise RuntimeError(f"soft policy iteration did not converge in {iters} iterations (beta {beta}, gamma "
                           f"{mdp.gamma}, certified identity bound {best:.3g})")
    out = best_lp if log else _to_probs(best_lp, log_ref)
    return (out, best) if with_bound else out


def _improve(log_ref: np.ndarray, Q: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """The improved log-policy and the soft Bellman backup ``T V = beta logsumexp(log pi_ref + Q / beta)``.

    The largest logit is subtracted before anything else: at small ``beta`` the logits reach 1e4 and more,
    and ``logits - logsumexp(logits)`` then loses their ulp (about 2e-12) in every entry, leaving the policy
    summing to 1 +- 1e-12 and the identity error near 3e-9 at gamma 0.99. Shifted, the largest entry is an
    exact 0 and the normaliser is the log of a sum between 1 and the number of actions."""
    logits = log_ref + Q / beta
    top = logits.max(axis=1, keepdims=True)
    shifted = logits - top
    norm = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return shifted - norm, beta * (top + norm)[:, 0]


def _to_probs(lp: np.ndarray, log_ref: np.ndarray) -> np.ndarray:
    p = np.exp(lp)
    under = (p == 0) & np.isfinite(log_ref)
    if under.any():
        s, a = (int(i) for i in np.argwhere(under)[0])
        raise PolicyUnderflowError(
            f"the policy's probability of action {a} in state {s} is exp({lp[s, a]:.4g}), below float64's "
            "range, so it cannot be returned as probabilities (its log-ratio would be -inf); call with "
            "log=True to get log-probabilities")
    return p


def log_ratio_advantage(pi: np.ndarray, pi_ref: np.ndarray, beta: float, *, log: bool = False) -> np.ndarray:
    """The progress advantage of a tabular policy: ``beta * log pi/pi_ref``.

    Probabilities by default, log-probabilities with ``log=True``. A probability of exactly 0 where the
    reference is positive (an underflowed policy) raises :class:`PolicyUnderflowError` rather than
    returning -inf or NaN."""
    lp = _log_policy(pi, log, "pi")
    lr = _log_policy(pi_ref, log, "pi_ref")
    if lp.shape != lr.shape:
        raise ValueError(f"pi and pi_ref must have the same shape, got {lp.shape} and {lr.shape}")
    if np.any(~np.isfinite(lr)):
        s, a = (int(i) for i in np.argwhere(~np.isfinite(lr))[0])
        raise ValueError(f"pi_ref gives action {a} in state {s} probability 0: the log-ratio is undefined there "
                         "(a KL-regularised policy needs a reference with full support)")
    if np.any(~np.isfinite(lp)):
        s, a = (int(i) for i in np.argwhere(~np.isfinite(lp))[0])
        raise PolicyUnderflowError(
            f"pi gives action {a} in state {s} probability 0 where pi_ref does not, so beta*log pi/pi_ref is "
            "-inf. If pi is an optimal policy at small beta its probabilities underflowed float64: carry "
            "log-policies (soft_policy_iteration(..., log=True), then log=True here)")
    return beta * (lp - lr)


def identity_error(pi: np.ndarray, pi_ref: np.ndarray, beta: float, Q: np.ndarray, V: np.ndarray, *,
                   log: bool = False) -> float:
    """``max_{s,a} |beta log pi/pi_ref - (Q* - V*)|`` (log-probabilities with ``log=True``)."""
    _finite(np.asarray(Q), "Q", "pass finite Q*, V*")
    _finite(np.asarray(V), "V", "pass finite Q*, V*")
    return float(np.max(np.abs(log_ratio_advantage(pi, pi_ref, beta, log=log) - (Q - V[:, None]))))


def bellman_residual(mdp: TabularMDP, pi: np.ndarray, pi_ref: np.ndarray, beta: float, *,
                     log: bool = False) -> float:
    """A certificate of optimality that needs no value iteration: evaluate ``pi`` exactly and return
    ``max_s |V^pi(s) - beta log sum_a pi_ref exp(Q^pi(s,a)/beta)|``. Zero only at the soft optimum;
    ``|V^pi - V*| <= residual / (1 - gamma)``."""
    log_ref = _check_ref(mdp, pi_ref, beta, log)
    Q, V = soft_policy_evaluation(mdp, pi, pi_ref, beta, log=log)
    return float(np.max(np.abs(V - beta * logsumexp(log_ref + Q / beta, axis=1))))


def occupancy(mdp: TabularMDP, pi: np.ndarray, *, log: bool = False) -> np.ndarray:
    """Normalised discounted state-action occupancy ``d(s, a)`` of ``pi`` from ``mu0``."""
    p = np.exp(_log_policy(pi, log, "pi"))
    P_pi = np.einsum("sa,sat->st", p, mdp.P)
    d_s = (1 - mdp.gamma) * np.linalg.solve((np.eye(mdp.n_states) - mdp.gamma * P_pi).T, mdp.mu0)
    return d_s[:, None] * p


def reachable_states(mdp: TabularMDP, pi: np.ndarray, *, log: bool = False) -> np.ndarray:
    """Boolean mask of the states reachable from ``mu0`` with positive probability under ``pi``
    (graph search on the support, so states whose occupancy underflows still count)."""
    lp = _log_policy(pi, log, "pi")
    step = np.any((mdp.P > 0) & np.isfinite(lp)[:, :, None], axis=1)  # step[s, s']
    seen = mdp.mu0 > 0
    frontier = seen.copy()
    while frontier.any():
        nxt = step[frontier].any(0) & ~seen
        seen |= nxt
        frontier = nxt
    return seen


def _recovery_errors(mdp: TabularMDP, pi: np.ndarray, pi_ref: np.ndarray, beta: float, V: np.ndarray,
                     log: bool) -> np.ndarray:
    adv = log_ratio_advantage(pi, pi_ref, beta, log=log)
    r_hat = adv[:, :, None] + V[:, None, None] - mdp.gamma * V[None, None, :]
    return np.abs(r_hat - mdp.R[:, :, None])


def reward_recovery_gap(mdp: TabularMDP, pi: np.ndarray, pi_ref: np.ndarray, beta: float, V: np.ndarray, *,
                        log: bool = False) -> float:
    """Expected ``|r_hat - r|`` over the policy's occupancy and sampled next states, where
    ``r_hat(s, a, s') = beta log pi/pi_ref + V(s) - gamma V(s')`` is the deterministic-MDP reading.

    Zero (to precision) when transitions are deterministic; ``gamma |E V(s') - V(s')|`` on average otherwise.
    The mean can be tiny where values are flat near the start (short horizons), so report
    :func:`reward_recovery_max_gap` beside it.
    """
    err = _recovery_errors(mdp, pi, pi_ref, beta, V, log)
    d = occupancy(mdp, pi, log=log)
    return float(np.sum(d[:, :, None] * mdp.P * err))


def reward_recovery_max_gap(mdp: TabularMDP, pi: np.ndarray, pi_ref: np.ndarray, beta: float,
                            V: np.ndarray, *, log: bool = False, reachable: bool = True) -> float:
    """The worst ``|r_hat - r|`` over ``(s, a, s')`` triples that can occur: ``s`` reachable from ``mu0``
    under ``pi`` (all states with ``reachable=False``), ``a`` in the policy's support, ``P(s'|s,a) > 0``."""
    err = _recovery_errors(mdp, pi, pi_ref, beta, V, log)
    lp = _log_policy(pi, log, "pi")
    mask = (mdp.P > 0) & np.isfinite(lp)[:, :, None]
    if reachable:
        mask &= reachable_states(mdp, pi, log=log)[:, None, None]
    return float(np.max(np.where(mask, err, 0.0)))


@dataclass
class PGHistory:
    steps: list[int]
    identity_error: list[float]  # max |beta log pi/pi_ref - (Q* - V*)|
    mean_error: list[float]  # occupancy-weighted mean |.|
    objective: list[float]


def kl_policy_gradient(mdp: TabularMDP, pi_ref: np.ndarray, beta: float, Q_star: np.ndarray,
                       V_star: np.ndarray, steps: int = 2000, lr: float = 0.5, sampled: bool = False,
                       batch: int = 64, horizon: int = 40, seed: int = 0, log_every: int = 10) -> PGHistory:
    """Train a softmax tabular policy (initialised at ``pi_ref``) by KL-regularised policy gradient and
    record how close its log-ratio gets to ``Q* - V*``.

    ``sampled=False``: the exact gradient of ``J`` (policy-gradient theorem with exact ``Q^pi``).
    ``sampled=True``: REINFORCE on sampled episodes (truncated at ``horizon``) with the per-step
    regularised reward ``r - beta log pi/pi_ref`` and a per-state value baseline, as an RL run would.
    """
    rng = np.random.default_rng(seed)
    theta = np.log(np.asarray(pi_ref, dtype=float)).copy()
    hist = PGHistory([], [], [], [])
    adv_star = Q_star - V_star[:, None]

    log_ref = _check_ref(mdp, pi_ref, beta)

    for it in range(steps + 1):
        log_pi = theta - logsumexp(theta, axis=1, keepdims=True)  # log space: no underflow at small beta
        pi = np.exp(log_pi)
        if it % log_every == 0 or it == steps:
            d = occupancy(mdp, log_pi, log=True)
            err = np.abs(beta * (log_pi - log_ref) - adv_star)
            hist.steps.append(it)
            hist.identity_error.append(float(err.max()))
            hist.mean_error.append(float(np.sum(d * err)))
            hist.objective.append(kl_objective(mdp, log_pi, log_ref, beta, log=True))
        if it == steps:
            break
        if not sampled:
            Q, V = soft_policy_evaluation(mdp, log_pi, log_ref, beta, log=True)
            d_s = occupancy(mdp, log_pi, log=True).sum(1) / (1 - mdp.gamma)
            # soft advantage of each action including its own KL cost; softmax policy-gradient theorem
            A_soft = Q - beta * (log_pi - log_ref) - V[:, None]
            grad = d_s[:, None] * pi * A_soft
        else:
            grad = _reinforce_grad(mdp, pi, log_pi - log_ref, beta, rng, batch, horizon)
        theta += lr * grad
    return hist


def _reinforce_grad(mdp: TabularMDP, pi: np.ndarray, log_ratio: np.ndarray, beta: float,
                    rng: np.random.Generator, batch: int, horizon: int) -> np.ndarray:
    S, A = mdp.n_states, mdp.n_actions
    s = rng.choice(S, size=batch, p=mdp.mu0)
    states = np.zeros((horizon, batch), dtype=int)
    actions = np.zeros((horizon, batch), dtype=int)
    rewards = np.zeros((horizon, batch))
    cum_pi = pi.cumsum(1)
    cum_P = mdp.P.cumsum(-1)
    for t in range(horizon):
        a = (rng.random(batch)[:, None] > cum_pi[s]).sum(1).clip(max=A - 1)
        states[t], actions[t] = s, a
        rewards[t] = mdp.R[s, a] - beta * log_ratio[s, a]
        s = (rng.random(batch)[:, None] > cum_P[s, a]).sum(1).clip(max=S - 1)
    G = np.zeros((horizon, batch))
    acc = np.zeros(batch)
    for t in reversed(range(horizon)):
        acc = rewards[t] + mdp.gamma * acc
        G[t] = acc
    # per-state baseline: the batch mean return from that state (reduces variance, keeps unbiasedness approx.)
    base = np.zeros(S)
    for st in range(S):
        m = states == st
        if m.any():
            base[st] = G[m].mean()
    adv = G - base[states]
    grad = np.zeros((S, A))
    disc = mdp.gamma ** np.arange(horizon)[:, None]
    for t in range(horizon):
        onehot = np.zeros((batch, A))
        onehot[np.arange(batch), actions[t]] = 1
        g = (onehot - pi[states[t]]) * (disc[t] * adv[t])[:, None]
        np.add.at(grad, states[t], g)
    return grad / batch


def _check_ref(mdp: TabularMDP, pi_ref: np.ndarray, beta: float, log: bool = False) -> np.ndarray:
    """Validate the reference and return its log-probabilities."""
    pi_ref = np.asarray(pi_ref, dtype=float)
    if pi_ref.shape != (mdp.n_states, mdp.n_actions):
        raise ValueError(f"pi_ref must have shape {(mdp.n_states, mdp.n_actions)}, got {pi_ref.shape}")
    if not np.isfinite(beta) or beta <= 0:
        raise ValueError(f"beta must be positive and finite, got {beta}")
    log_ref = _log_policy(pi_ref, log, "pi_ref")
    if not np.all(np.isfinite(log_ref)):
        raise ValueError("pi_ref must be a strictly positive distribution over actions in every state")
    return log_ref
