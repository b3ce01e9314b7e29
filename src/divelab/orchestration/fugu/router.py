"""The Fugu router: a bias-free linear head over worker logits, trained by SFT then sep-CMA-ES.

- Stage 1 (SFT): minimise KL(p_q ‖ π_W(·|x_q)) with p_q = softmax(r̄_q / τ), r̄ the replayed mean
  reward of each worker on query q (L-BFGS on the flattened head, l2-regularised).
- Stage 2 (sep-CMA-ES, the ``cma`` package with ``CMA_diagonal=True``) on the end-to-end fitness
  Ĵ = E_q Σ_i π(i|q) r̄_{q,i} + w_div · H(E_q π(·|q)) − w_cost · E_q Σ_i π(i|q) c_{q,i},
  i.e. expected success, plus the entropy of the agent-selection distribution, minus cost.
At serving time the router picks ``argmax_i logits_i − λ·c_i`` (λ = 0 at free cost).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize
from scipy.special import log_softmax, softmax


def entropy(p: np.ndarray) -> float:
    """Shannon entropy (nats) of a probability vector."""
    p = np.asarray(p, dtype=float)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def route_entropy(choices: np.ndarray, n_workers: int) -> float:
    """Entropy (nats) of the empirical distribution of chosen workers."""
    return entropy(np.bincount(np.asarray(choices, dtype=int), minlength=n_workers) / max(1, len(choices)))


def penalised_argmax(scores: np.ndarray, cost: np.ndarray | None = None, lam: float = 0.0) -> np.ndarray:
    """The worker each row picks: argmax of ``scores − lam·cost`` (``cost`` (L,) or (N, L)); every router routes
    this way, so a cost penalty can be calibrated on scores computed once."""
    if lam and cost is not None:
        scores = scores - lam * np.broadcast_to(cost, scores.shape)
    return scores.argmax(axis=1)


def _check(x: np.ndarray, r: np.ndarray) -> None:
    if x.ndim != 2 or r.ndim != 2 or x.shape[0] != r.shape[0]:
        raise ValueError(f"need features (N, d) and rewards (N, L) with the same N, got {x.shape} and {r.shape}")


@dataclass
class LinearRouter:
    """π(i|x) = softmax(W x)_i with W ∈ R^{L×d}, no bias (the metadata feature 1.0 can act as one)."""

    workers: list[str]
    dim: int
    w: np.ndarray = field(default=None)  # type: ignore[assignment]
    history: dict[str, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.workers) < 2 or len(set(self.workers)) != len(self.workers):
            raise ValueError(f"need >= 2 distinct workers, got {self.workers}")
        if self.w is None:
            self.w = np.zeros((len(self.workers), self.dim))
        if self.w.shape != (len(self.workers), self.dim):
            raise ValueError(f"W must have shape {(len(self.workers), self.dim)}, got {self.w.shape}")

    @property
    def n_params(self) -> int:
        return int(self.w.size)

    def logits(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x) @ self.w.T

    def probs(self, x: np.ndarray) -> np.ndarray:
        return softmax(self.logits(x), axis=1)

    def route_scores(self, x: np.ndarray) -> np.ndarray:
        """The scores ``route`` takes the argmax of before any cost penalty: the log-probs."""
        return log_softmax(self.logits(x), axis=1)

    def route(self, x: np.ndarray, cost: np.ndarray | None = None, lam: float = 0.0) -> np.ndarray:
        """Chosen worker index per row; ``cost`` (L,) or (N, L) is subtracted times ``lam`` from the log-probs."""
        return penalised_argmax(self.route_scores(x), cost, lam)

    # -- stage 1 ---------------------------------------------------------------------------
    def fit_sft(self, x: np.ndarray, rbar: np.ndarray, tau: float = 0.1, l2: float = 1e-3,
                maxiter: int = 300) -> LinearRouter:
        """KL(softmax(r̄/τ) ‖ π_W) minimised by L-BFGS; returns self."""
        _check(x, rbar)
        if tau <= 0:
            raise ValueError(f"tau must be > 0, got {tau}")
        target = softmax(rbar / tau, axis=1)
        n, shape = x.shape[0], self.w.shape

        def f(flat: np.ndarray) -> tuple[float, np.ndarray]:
            w = flat.reshape(shape)
            lp = log_softmax(x @ w.T, axis=1)
            kl = float((target * (np.log(np.clip(target, 1e-300, None)) - lp)).sum() / n)
            grad = (np.exp(lp) - target).T @ x / n + l2 * w
            return kl + 0.5 * l2 * float((w * w).sum()), grad.ravel()

        res = minimize(f, self.w.ravel(), jac=True, method="L-BFGS-B", options={"maxiter": maxiter})
        self.w = res.x.reshape(shape)
        self.history["sft_kl"] = [float(res.fun)]
        return self

    # -- stage 2 ---------------------------------------------------------------------------
    @staticmethod
    def fitness(w: np.ndarray, x: np.ndarray, rbar: np.ndarray, cost: np.ndarray | None = None,
                w_div: float = 0.15, w_cost: float = 0.0) -> float:
        """Ĵ = expected success + w_div · H(mean routing distribution) − w_cost · expected cost."""
        p = softmax(x @ w.T, axis=1)
        j = float((p * rbar).sum(axis=1).mean()) + w_div * entropy(p.mean(axis=0))
        if w_cost and cost is not None:
            j -= w_cost * float((p * np.broadcast_to(cost, p.shape)).sum(axis=1).mean())
        return j

    def fit_cma(self, x: np.ndarray, rbar: np.ndarray, cost: np.ndarray | None = None, *, w_div: float = 0.15,
                w_cost: float = 0.0, sigma0: float = 0.03, iters: int = 60, popsize: int | None = 33,
                seed: int = 0) -> LinearRouter:
        """sep-CMA-ES (diagonal covariance) from the current W on the fitness above; returns self."""
        import cma

        _check(x, rbar)
        shape = self.w.shape
        opts = {"CMA_diagonal": True, "seed": seed + 1, "maxiter": iters, "verbose": -9, "tolfun": 0,
                "tolflatfitness": 10**9}
        if popsize:
            opts["popsize"] = popsize
        es = cma.CMAEvolutionStrategy(self.w.ravel(), sigma0, opts)
        best, best_f, curve = self.w.ravel().copy(), -self.fitness(self.w, x, rbar, cost, w_div, w_cost), []
        while not es.stop():
            sols = es.ask()
            fs = [-self.fitness(np.asarray(s).reshape(shape), x, rbar, cost, w_div, w_cost) for s in sols]
            es.tell(sols, fs)
            i = int(np.argmin(fs))
            if fs[i] < best_f:
                best, best_f = np.asarray(sols[i]).copy(), fs[i]
            curve.append(-best_f)
        self.w = best.reshape(shape)
        self.history["cma_fitness"] = curve
        return self


# -- baselines a user would otherwise pick (RouteLLM / RouterBench style) ---------------------

def best_single(rbar_train: np.ndarray) -> int:
    """Index of the worker with the highest mean training reward."""
    return int(np.asarray(rbar_train).mean(axis=0).argmax())


class KNNRouter:
    """Predict each worker's reward as the mean over the k nearest training queries (cosine); pick the best."""

    def __init__(self, k: int = 10) -> None:
        self.k = k

    def fit(self, x: np.ndarray, rbar: np.ndarray) -> KNNRouter:
        from sklearn.neighbors import KNeighborsRegressor

        _check(x, rbar)
        self._m = KNeighborsRegressor(n_neighbors=min(self.k, len(x)), metric="cosine").fit(x, rbar)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self._m.predict(x)

    def route_scores(self, x: np.ndarray) -> np.ndarray:
        return self.predict(x)

    def route(self, x: np.ndarray, cost: np.ndarray | None = None, lam: float = 0.0) -> np.ndarray:
        return penalised_argmax(self.predict(x), cost, lam)


class MFRouter:
    """RouteLLM-style matrix factorisation: r̂_{q,i} = σ(v_iᵀ P x_q + b_i), fit by cross-entropy (L-BFGS)."""

    def __init__(self, rank: int = 8, l2: float = 1e-3, seed: int = 0) -> None:
        self.rank, self.l2, self.seed = rank, l2, seed

    def fit(self, x: np.ndarray, rbar: np.ndarray) -> MFRouter:
        _check(x, rbar)
        n, d = x.shape
        n_workers = rbar.shape[1]
        rng = np.random.default_rng(self.seed)
        k = self.rank
        sizes = (k * d, n_workers * k, n_workers)

        def unpack(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            p = flat[:sizes[0]].reshape(k, d)
            v = flat[sizes[0]:sizes[0] + sizes[1]].reshape(n_workers, k)
            return p, v, flat[sizes[0] + sizes[1]:]

        def f(flat: np.ndarray) -> tuple[float, np.ndarray]:
            p, v, b = unpack(flat)
            z = x @ p.T
            s = z @ v.T + b
            q = 1 / (1 + np.exp(-s))
            eps = 1e-9
            loss = -float((rbar * np.log(q + eps) + (1 - rbar) * np.log(1 - q + eps)).sum()) / n
            g = (q - rbar) / n
            gv, gb, gz = g.T @ z, g.sum(axis=0), g @ v
            gp = gz.T @ x
            reg = 0.5 * self.l2 * float((p * p).sum() + (v * v).sum())
            return loss + reg, np.concatenate([(gp + self.l2 * p).ravel(), (gv + self.l2 * v).ravel(), gb])

        x0 = np.concatenate([rng.normal(0, 0.1, sizes[0]), rng.normal(0, 0.1, sizes[1]), np.zeros(sizes[2])])
        res = minimize(f, x0, jac=True, method="L-BFGS-B", options={"maxiter": 300})
        self._p, self._v, self._b = unpack(res.x)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        return 1 / (1 + np.exp(-((x @ self._p.T) @ self._v.T + self._b)))

    def route_scores(self, x: np.ndarray) -> np.ndarray:
        return self.predict(x)

    def route(self, x: np.ndarray, cost: np.ndarray | None = None, lam: float = 0.0) -> np.ndarray:
        return penalised_argmax(self.predict(x), cost, lam)


def cascade(answers: np.ndarray, rewards: np.ndarray, cost: np.ndarray, cheap: tuple[int, int],
            strong: int) -> tuple[np.ndarray, np.ndarray]:
    """AutoMix/FrugalGPT-style cascade by replay: ask two cheap workers; if their answers agree accept the
    first, else pay for the strong worker. Returns per-query (reward, cost)."""
    a, b = cheap
    agree = answers[:, a] == answers[:, b]
    reward = np.where(agree, rewards[:, a], rewards[:, strong])
    c = cost[:, a] + cost[:, b] + np.where(agree, 0.0, cost[:, strong])
    return reward.astype(float), c.astype(float)


def tune_cascade(answers: np.ndarray, rewards: np.ndarray, cost: np.ndarray,
                 budget: float) -> tuple[tuple[int, int], int] | None:
    """The cascade (cheap pair, escalation target) with the highest replayed success whose mean cost is
    <= ``budget``, searched over every pair and target on the data given (the training queries);
    None when no configuration fits the budget. Tuning it this way makes it a budget-matched baseline
    as strong as the replay allows, not a fixed recipe that may overspend."""
    n_workers = rewards.shape[1]
    best: tuple[float, tuple[int, int], int] | None = None
    for a in range(n_workers):
        for b in range(a + 1, n_workers):  # the pair is unordered: when both agree either answer is the same
            for t in range(n_workers):
                r, c = cascade(answers, rewards, cost, (a, b), t)
                if c.mean() <= budget * (1 + 1e-9) and (best is None or r.mean() > best[0]):
                    best = (float(r.mean()), (a, b), t)
    return None if best is None else (best[1], best[2])


def calibrate_lambda(route_fn, cost_row: np.ndarray, target: float, hi: float = 100.0,
                     iters: int = 40) -> float:
    """Smallest λ (bisection) such that the mean cost of ``route_fn(lam)`` choices is <= ``target``
    (RouteLLM calibrates its threshold on a target share of strong calls the same way). ``cost_row`` is
    each worker's cost (L,) or each query's cost per worker (N, L), for the N queries ``route_fn`` routes."""
    cost = np.asarray(cost_row, dtype=float)

    def spend(lam: float) -> float:
        choice = route_fn(lam)
        return float(cost[np.arange(len(choice)), choice].mean() if cost.ndim == 2 else cost[choice].mean())

    if spend(0.0) <= target:
        return 0.0
    lo = 0.0
    if spend(hi) > target:
        return hi
    for _ in range(iters):
        mid = (lo + hi) / 2
        if spend(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi
