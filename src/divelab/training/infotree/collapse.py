"""The collapse law: how often a GRPO group of independent rollouts is all-same.

A group of ``G`` independent rollouts of a prompt whose success probability is ``p`` carries no
gradient when every reward agrees, which happens with probability ``p**G + (1-p)**G``. If success
needs ``d`` correct decisions, each right with probability ``q``, then ``p = q**d``: the mixed
probability ``1 - C`` grows at most linearly in ``G`` (``<= G*p``) while difficulty shrinks ``p``
exponentially in ``d``. The closed forms here are checked against Monte Carlo in the tests; the
derivation is the notes' reconstruction (training-rl.md §1, tagged [R]), not the paper's text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def _check_prob(name: str, x: np.ndarray) -> None:
    if np.any(~np.isfinite(x)) or np.any(x < 0) or np.any(x > 1):
        raise ValueError(f"{name} must lie in [0, 1]; got {x!r}")


def _check_budget(G: np.ndarray) -> None:
    if np.any(G < 1) or np.any(np.asarray(G) != np.round(G)):
        raise ValueError(f"group size G must be a positive integer; got {G!r}")


def success_probability(q: float | np.ndarray, d: int | np.ndarray) -> np.ndarray:
    """``p = q**d``: success needs ``d`` independent correct decisions of probability ``q``."""
    q = np.asarray(q, dtype=float)
    d = np.asarray(d, dtype=float)
    _check_prob("q", q)
    if np.any(d < 0):
        raise ValueError(f"difficulty d must be >= 0 decisions; got {d!r}")
    return q**d


def collapse_probability(p: float | np.ndarray, G: int | np.ndarray) -> np.ndarray:
    """P(all ``G`` binary rewards agree) = ``p**G + (1-p)**G`` (zero GRPO advantage)."""
    p = np.asarray(p, dtype=float)
    G = np.asarray(G, dtype=float)
    _check_prob("p", p)
    _check_budget(G)
    return p**G + (1.0 - p) ** G


def mixed_probability(p: float | np.ndarray, G: int | np.ndarray) -> np.ndarray:
    """P(a group of ``G`` independent rollouts has both outcomes) = ``1 - collapse``."""
    return 1.0 - collapse_probability(p, G)


def mixed_upper_bound(p: float | np.ndarray, G: int | np.ndarray) -> np.ndarray:
    """``min(1, G*min(p, 1-p))``: the union bound, linear in the budget ``G``."""
    p = np.asarray(p, dtype=float)
    return np.minimum(1.0, np.asarray(G, dtype=float) * np.minimum(p, 1.0 - p))


def hard_tail_collapse_bound(G: int) -> float:
    """Lower bound on collapse for any prompt with ``p <= 1/G``: ``(1 - 1/G)**G`` (>= 1/4 for G >= 2)."""
    _check_budget(np.asarray(G))
    return float((1.0 - 1.0 / G) ** G)


def simulate_collapse(q: float, d: int, G: int, n_groups: int, rng: np.random.Generator) -> float:
    """Monte Carlo collapse rate: ``n_groups`` groups of ``G`` rollouts, each making ``d`` decisions."""
    if n_groups < 1:
        raise ValueError(f"n_groups must be >= 1; got {n_groups}")
    _check_budget(np.asarray(G))
    decisions = rng.random((n_groups, G, max(d, 0))) < q
    success = decisions.all(axis=2) if d > 0 else np.ones((n_groups, G), dtype=bool)
    agree = success.all(axis=1) | (~success).all(axis=1)
    return float(agree.mean())


@dataclass(frozen=True)
class DifficultyMix:
    """A population of prompts: each needs ``d`` decisions (uniform in ``d_range``), each right with
    probability ``q`` (uniform in ``q_range``). Mass near ``p = 0`` is what makes the curve flatline."""

    d_range: tuple[int, int] = (1, 16)
    q_range: tuple[float, float] = (0.5, 0.95)

    def __post_init__(self) -> None:
        lo, hi = self.d_range
        if lo < 0 or hi < lo:
            raise ValueError(f"d_range must be 0 <= lo <= hi; got {self.d_range}")
        qlo, qhi = self.q_range
        if not (0 <= qlo <= qhi <= 1):
            raise ValueError(f"q_range must satisfy 0 <= lo <= hi <= 1; got {self.q_range}")

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        d = rng.integers(self.d_range[0], self.d_range[1] + 1, size=n)
        q = rng.uniform(self.q_range[0], self.q_range[1], size=n)
        return q, d

    def mixed_ratio(self, G: int, n_quad: int = 64) -> float:
        """Exact population mixed ratio ``E_{q,d}[1 - C(q**d, G)]`` (Gauss-Legendre over q)."""
        x, w = np.polynomial.legendre.leggauss(n_quad)
        qlo, qhi = self.q_range
        q = 0.5 * (qhi - qlo) * x + 0.5 * (qhi + qlo)
        w = w / w.sum()
        ds = np.arange(self.d_range[0], self.d_range[1] + 1)
        p = q[None, :] ** ds[:, None]
        return float((mixed_probability(p, G) * w[None, :]).sum(axis=1).mean())


def mixed_ratio_curve(mix: DifficultyMix, budgets: Sequence[int]) -> np.ndarray:
    """The population mixed ratio at each budget ``G`` (closed form)."""
    return np.array([mix.mixed_ratio(int(G)) for G in budgets])


def simulate_mixed_ratio(mix: DifficultyMix, G: int, n_prompts: int, rng: np.random.Generator) -> float:
    """Monte Carlo of :meth:`DifficultyMix.mixed_ratio`: draw prompts, roll ``G`` times each."""
    q, d = mix.sample(n_prompts, rng)
    p = q**d
    succ = rng.random((n_prompts, G)) < p[:, None]
    mixed = succ.any(axis=1) & (~succ).any(axis=1)
    return float(mixed.mean())


def budget_for_mixed(p: float, target: float) -> int:
    """Smallest ``G`` with mixed probability >= ``target`` (``Theta(1/p)`` for small p)."""
    if not (0 < target < 1):
        raise ValueError(f"target must be in (0, 1); got {target}")
    if not (0 < p < 1):
        raise ValueError(f"p must be in (0, 1) for a finite budget; got {p}")
    G = 1
    while 1.0 - (p**G + (1 - p) ** G) < target:
        G *= 2
    lo, hi = G // 2, G
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if 1.0 - (p**mid + (1 - p) ** mid) >= target:
            hi = mid
        else:
            lo = mid
    return max(hi, 1)
