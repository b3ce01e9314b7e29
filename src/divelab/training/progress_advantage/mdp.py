"""The exact check: in a tabular stochastic MDP, beta * log pi*/pi_ref equals Q* - V*.

The KL-regularised objective is ``J(pi) = E[sum_t gamma^t (r(s_t,a_t) - beta KL(pi(.|s_t) || pi_ref(.|s_t)))]``.
Soft value iteration solves its Bellman equation ``V(s) = beta log sum_a pi_ref(a|s) exp(Q(s,a)/beta)``,
``Q(s,a) = r(s,a) + gamma E_{s'}[V(s')]``. The optimal policy is found *independently* here (soft
policy iteration with exact policy evaluation, and KL-regularised policy gradient), and its
log-ratio is compared with ``Q* - V*`` from value iteration.

The "reward recovery" reading (DPO-style) says ``r(s,a) = beta log pi/pi_ref + V(s) - gamma V(s')``
for the observed next state ``s'``. That holds only when ``s'`` is a deterministic function of
``(s, a)``; with slip it is off by ``gamma (E[V(s')] - V(s'))``. :func:`reward_recovery_gap`
measures it.
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


def soft_value_iteration(mdp: TabularMDP, pi_ref: np.ndarray, beta: float, tol: float = 1e-13,
                         max_iter: int = 100_000) -> tuple[np.ndarray, np.ndarray]:
    """``(Q*, V*)`` of the KL-regularised problem by iterating the soft Bellman operator (a gamma-contraction)."""
    _check_ref(mdp, pi_ref, beta)
    log_ref = np.log(pi_ref)
    V = np.zeros(mdp.n_states)
    for _ in range(max_iter):
        Q = mdp.R + mdp.gamma * mdp.P @ V
        V_new = beta * logsumexp(log_ref + Q / beta, axis=1)
        if np.max(np.abs(V_new - V)) < tol:
            V = V_new
            break
        V = V_new
    Q = mdp.R + mdp.gamma * mdp.P @ V
    return Q, V


def soft_policy_evaluation(mdp: TabularMDP, pi: np.ndarray, pi_ref: np.ndarray, beta: float
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``(Q^pi, V^pi)`` of the regularised objective by one linear solve."""
    kl = np.sum(pi * (np.log(pi) - np.log(pi_ref)), axis=1)
    r_pi = np.sum(pi * mdp.R, axis=1) - beta * kl
    P_pi = np.einsum("sa,sat->st", pi, mdp.P)
    V = np.linalg.solve(np.eye(mdp.n_states) - mdp.gamma * P_pi, r_pi)
    return mdp.R + mdp.gamma * mdp.P @ V, V


def kl_objective(mdp: TabularMDP, pi: np.ndarray, pi_ref: np.ndarray, beta: float) -> float:
    """``J(pi)`` from the start distribution."""
    return float(mdp.mu0 @ soft_policy_evaluation(mdp, pi, pi_ref, beta)[1])


def soft_policy_iteration(mdp: TabularMDP, pi_ref: np.ndarray, beta: float, iters: int = 200,
                          tol: float = 1e-14) -> np.ndarray:
    """The optimal policy by soft policy iteration: evaluate exactly, then improve
    ``pi(a|s) proportional to pi_ref(a|s) exp(Q^pi(s,a)/beta)``. Monotone in ``J``; converges to the optimum."""
    _check_ref(mdp, pi_ref, beta)
    pi = pi_ref.copy()
    for _ in range(iters):
        Q, _ = soft_policy_evaluation(mdp, pi, pi_ref, beta)
        logits = np.log(pi_ref) + Q / beta
        new = np.exp(logits - logsumexp(logits, axis=1, keepdims=True))
        if np.max(np.abs(new - pi)) < tol:
            return new
        pi = new
    return pi


def log_ratio_advantage(pi: np.ndarray, pi_ref: np.ndarray, beta: float) -> np.ndarray:
    """The progress advantage of a tabular policy: ``beta * log pi/pi_ref``."""
    return beta * (np.log(pi) - np.log(pi_ref))


def identity_error(pi: np.ndarray, pi_ref: np.ndarray, beta: float, Q: np.ndarray, V: np.ndarray) -> float:
    """``max_{s,a} |beta log pi/pi_ref - (Q* - V*)|``."""
    return float(np.max(np.abs(log_ratio_advantage(pi, pi_ref, beta) - (Q - V[:, None]))))


def occupancy(mdp: TabularMDP, pi: np.ndarray) -> np.ndarray:
    """Normalised discounted state-action occupancy ``d(s, a)`` of ``pi`` from ``mu0``."""
    P_pi = np.einsum("sa,sat->st", pi, mdp.P)
    d_s = (1 - mdp.gamma) * np.linalg.solve((np.eye(mdp.n_states) - mdp.gamma * P_pi).T, mdp.mu0)
    return d_s[:, None] * pi


def reward_recovery_gap(mdp: TabularMDP, pi: np.ndarray, pi_ref: np.ndarray, beta: float, V: np.ndarray) -> float:
    """Expected ``|r_hat - r|`` over the policy's occupancy and sampled next states, where
    ``r_hat(s, a, s') = beta log pi/pi_ref + V(s) - gamma V(s')`` is the deterministic-MDP reading.

    Zero (to precision) when transitions are deterministic; ``gamma |E V(s') - V(s')|`` on average otherwise.
    """
    adv = log_ratio_advantage(pi, pi_ref, beta)
    r_hat = adv[:, :, None] + V[:, None, None] - mdp.gamma * V[None, None, :]
    err = np.abs(r_hat - mdp.R[:, :, None])
    d = occupancy(mdp, pi)
    return float(np.sum(d[:, :, None] * mdp.P * err))


def reward_recovery_max_gap(mdp: TabularMDP, pi: np.ndarray, pi_ref: np.ndarray, beta: float,
                            V: np.ndarray) -> float:
    """The worst ``|r_hat - r|`` over reachable ``(s, a, s')`` triples."""
    adv = log_ratio_advantage(pi, pi_ref, beta)
    r_hat = adv[:, :, None] + V[:, None, None] - mdp.gamma * V[None, None, :]
    err = np.abs(r_hat - mdp.R[:, :, None])
    return float(np.max(np.where(mdp.P > 1e-12, err, 0.0)))


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
    theta = np.log(pi_ref).copy()
    hist = PGHistory([], [], [], [])
    adv_star = Q_star - V_star[:, None]

    def policy() -> np.ndarray:
        z = theta - theta.max(1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(1, keepdims=True)

    for it in range(steps + 1):
        pi = policy()
        if it % log_every == 0 or it == steps:
            d = occupancy(mdp, pi)
            err = np.abs(log_ratio_advantage(pi, pi_ref, beta) - adv_star)
            hist.steps.append(it)
            hist.identity_error.append(float(err.max()))
            hist.mean_error.append(float(np.sum(d * err)))
            hist.objective.append(kl_objective(mdp, pi, pi_ref, beta))
        if it == steps:
            break
        if not sampled:
            Q, V = soft_policy_evaluation(mdp, pi, pi_ref, beta)
            d_s = occupancy(mdp, pi).sum(1) / (1 - mdp.gamma)
            # soft advantage of each action including its own KL cost; softmax policy-gradient theorem
            A_soft = Q - beta * (np.log(pi) - np.log(pi_ref)) - V[:, None]
            grad = d_s[:, None] * pi * A_soft
        else:
            grad = _reinforce_grad(mdp, pi, pi_ref, beta, rng, batch, horizon)
        theta += lr * grad
    return hist


def _reinforce_grad(mdp: TabularMDP, pi: np.ndarray, pi_ref: np.ndarray, beta: float,
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
        rewards[t] = mdp.R[s, a] - beta * (np.log(pi[s, a]) - np.log(pi_ref[s, a]))
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


def _check_ref(mdp: TabularMDP, pi_ref: np.ndarray, beta: float) -> None:
    if pi_ref.shape != (mdp.n_states, mdp.n_actions):
        raise ValueError(f"pi_ref must have shape {(mdp.n_states, mdp.n_actions)}, got {pi_ref.shape}")
    if np.any(pi_ref <= 0) or not np.allclose(pi_ref.sum(1), 1):
        raise ValueError("pi_ref must be a strictly positive distribution over actions in every state")
    if beta <= 0:
        raise ValueError(f"beta must be positive, got {beta}")
