"""Verification-length schedulers: how many drafted tokens each request sends to the target.

Inputs per engine step: conditional confidences ``c[r, k]`` (probability draft token k survives
given tokens < k survived; ``c[r, k]`` may depend on the sampled draft token k−1 but never on token
k) and the profiled curve SPS(B). Output: ``ell[r]`` in 0..γ. Losslessness needs the decision "send
token k" to be *non-anticipating*: made from information available before token k was sampled.

* ``FixedK`` (k = 1 is the MTP-1 analogue), ``StaticThreshold``: causal by construction.
* ``ConfidenceScheduler`` (Algorithm 1): greedy admission by survival a = cumprod(c), stopping at
  the first non-improvement of Θ = τ·SPS(B). Causal: a candidate is reached only through
  candidates that rank above it, none of which depends on its own token.
* ``StaleKScheduler``: production variant; the budget K comes from confidences two steps old
  (a global search, no break), the allocation is the top-K of the fresh survival scores.
* ``GlobalArgmaxScheduler``: the retrospective argmax over the whole Θ curve without the break.
  It looks at a[r, k+1] (which depends on token k) when deciding whether to send token k, so it
  is **lossy**; kept only to demonstrate the paper's counterexample.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from divelab.serving.dspark.sps import SPSCurve


def survival(conf: np.ndarray) -> np.ndarray:
    """a[r, j] = Π_{i ≤ j} c[r, i]."""
    return np.cumprod(np.clip(np.asarray(conf, dtype=np.float64), 0.0, 1.0), axis=-1)


def ranked_candidates(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All (r, j) with a > 0, sorted by a descending; ties go to the smaller j (then smaller r),
    which keeps every request's admitted set a prefix and keeps the order non-anticipating."""
    r_idx, j_idx = np.nonzero(a > 0)
    vals = a[r_idx, j_idx]
    order = np.lexsort((r_idx, j_idx, -vals))
    return r_idx[order], j_idx[order], vals[order]


def theta_curve(a: np.ndarray, sps: SPSCurve) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Θ(m) = (R + Σ top-m a)·SPS(R + m) for m = 0..M, with the ranked candidates."""
    n_req = a.shape[0]
    r_idx, j_idx, vals = ranked_candidates(a)
    tau = n_req + np.concatenate([[0.0], np.cumsum(vals)])
    b = n_req + np.arange(len(vals) + 1)
    return tau * np.asarray(sps(b)), r_idx, j_idx, vals


def lengths_from_top(n_req: int, r_idx: np.ndarray, j_idx: np.ndarray, m: int) -> np.ndarray:
    ell = np.zeros(n_req, dtype=np.int64)
    if m > 0:
        np.maximum.at(ell, r_idx[:m], j_idx[:m] + 1)
    return ell


class Scheduler:
    name: str = "scheduler"
    causal: bool = True
    needs_confidence: bool = True

    def __call__(self, conf: np.ndarray, sps: SPSCurve | None = None) -> np.ndarray:
        raise NotImplementedError

    def reset(self) -> None:  # schedulers with state (stale-K) forget their history
        pass


@dataclass
class FixedK(Scheduler):
    k: int = 1
    needs_confidence = False

    def __post_init__(self) -> None:
        if self.k < 0:
            raise ValueError(f"fixed-k needs k >= 0, got {self.k}")
        self.name = f"fixed-{self.k}"

    def __call__(self, conf: np.ndarray, sps: SPSCurve | None = None) -> np.ndarray:
        conf = np.asarray(conf)
        avail = (conf > 0).cumprod(axis=1).sum(axis=1)  # positions actually drafted
        return np.minimum(self.k, avail).astype(np.int64)


@dataclass
class StaticThreshold(Scheduler):
    """Send the leading drafts whose survival a[r, j] ≥ threshold (load-blind; SpecDec++/DeepSpec style)."""

    threshold: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {self.threshold}")
        self.name = f"threshold-{self.threshold:g}"

    def __call__(self, conf: np.ndarray, sps: SPSCurve | None = None) -> np.ndarray:
        a = survival(conf)
        return ((a >= self.threshold) & (a > 0)).cumprod(axis=1).sum(axis=1).astype(np.int64)


@dataclass
class ConfidenceScheduler(Scheduler):
    """Algorithm 1: greedy admission by survival with the early-stopping break (lossless)."""

    name: str = "dspark-alg1"

    def __call__(self, conf: np.ndarray, sps: SPSCurve | None = None) -> np.ndarray:
        if sps is None:
            raise ValueError("the confidence scheduler needs an SPS curve")
        a = survival(conf)
        theta, r_idx, j_idx, _ = theta_curve(a, sps)
        # first m with Θ(m) <= Θ(m-1) stops admission: the break keeps the rule non-anticipating
        worse = np.nonzero(theta[1:] <= theta[:-1])[0]
        m = int(worse[0]) if len(worse) else len(theta) - 1
        return lengths_from_top(a.shape[0], r_idx, j_idx, m)


@dataclass
class GlobalArgmaxScheduler(Scheduler):
    """No-break global argmax of Θ(m) over fresh confidences. LOSSY — demonstration only."""

    name: str = "global-argmax (lossy)"
    causal: bool = False

    def __call__(self, conf: np.ndarray, sps: SPSCurve | None = None) -> np.ndarray:
        if sps is None:
            raise ValueError("the global-argmax scheduler needs an SPS curve")
        a = survival(conf)
        theta, r_idx, j_idx, _ = theta_curve(a, sps)
        return lengths_from_top(a.shape[0], r_idx, j_idx, int(np.argmax(theta)))


@dataclass
class StaleKScheduler(Scheduler):
    """Production variant: the token budget K = argmax_m Θ(m) is computed from confidences
    ``delay`` steps old (global search, no break: K cannot depend on the current drafts), then
    the current step admits the top-K fresh survival scores."""

    delay: int = 2
    initial_budget: int | None = None  # K before any history exists; default: one per request
    name: str = "stale-K"
    history: deque = field(default_factory=deque, repr=False)

    def __post_init__(self) -> None:
        if self.delay < 1:
            raise ValueError(f"stale-K needs delay >= 1 (delay 0 would be the lossy global argmax), got {self.delay}")
        self.name = f"stale-K (d={self.delay})"

    def reset(self) -> None:
        self.history.clear()

    def budget(self, n_req: int, sps: SPSCurve) -> int:
        if len(self.history) >= self.delay:
            old = self.history[-self.delay]
            theta, _, _, _ = theta_curve(survival(old), sps)
            return int(np.argmax(theta))
        return n_req if self.initial_budget is None else self.initial_budget

    def __call__(self, conf: np.ndarray, sps: SPSCurve | None = None) -> np.ndarray:
        if sps is None:
            raise ValueError("the stale-K scheduler needs an SPS curve")
        conf = np.asarray(conf, dtype=np.float64)
        k_budget = self.budget(conf.shape[0], sps)
        a = survival(conf)
        r_idx, j_idx, _ = ranked_candidates(a)
        ell = lengths_from_top(conf.shape[0], r_idx, j_idx, min(k_budget, len(r_idx)))
        self.history.append(conf.copy())
        while len(self.history) > self.delay:
            self.history.popleft()
        return ell


SCHEDULERS = ("fixed", "threshold", "dspark", "stale-k", "global-argmax")


def make_scheduler(name: str, gamma: int | None = None, **kwargs: float) -> Scheduler:
    """Build a scheduler by name: ``fixed-K`` (e.g. ``fixed-1``; ``fixed`` = γ), ``threshold[-T]``,
    ``dspark`` (Algorithm 1), ``stale-k[-D]``, ``global-argmax`` (lossy)."""
    key = name.strip().lower()
    if key == "fixed" or key.startswith("fixed-"):
        k = gamma if key == "fixed" else int(key.split("-", 1)[1])
        if k is None:
            raise ValueError("scheduler 'fixed' needs gamma (or name it fixed-K)")
        return FixedK(k=int(k))
    if key == "threshold" or key.startswith("threshold-"):
        t = float(kwargs.get("threshold", 0.5)) if key == "threshold" else float(key.split("-", 1)[1])
        return StaticThreshold(threshold=t)
    if key in ("dspark", "alg1", "confidence"):
        return ConfidenceScheduler()
    if key == "stale-k" or key.startswith("stale-k-"):
        d = 2 if key == "stale-k" else int(key.rsplit("-", 1)[1])
        return StaleKScheduler(delay=d)
    if key in ("global-argmax", "argmax"):
        return GlobalArgmaxScheduler()
    raise ValueError(f"unknown scheduler {name!r}; allowed: fixed-K (e.g. fixed-1), fixed, threshold-T, "
                     "dspark, stale-k[-D], global-argmax")
