"""Measurements: hitting times with bootstrap CIs (``divelab.stats``), linear-vs-exponential growth fits, and probes of
what each policy does at backward-facing states."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from divelab import stats
from divelab.envs.maze import Maze
from divelab.training.backtrack.policy import (
    DEFAULT_WINDOW,
    VOCAB,
    Episode,
    build_action_batch,
    legal_log_probs,
    rollout,
)


@dataclass
class HittingTime:
    """Steps to the goal over walks; a walk that hits the cap counts as the cap (so ``mean`` is a
    lower bound when ``success`` < 1)."""

    mean: float
    ci: tuple[float, float]
    success: float
    n: int
    steps: tuple[float, ...] = ()  # steps of each walk, in the order of the mazes walked


def hitting_time(episodes: list[Episode], seed: int = 0, n_boot: int = 1000) -> HittingTime:
    """Mean steps over walks with a percentile bootstrap interval (:func:`divelab.stats.bootstrap_ci`)."""
    steps = np.array([e.steps for e in episodes], dtype=float)
    return HittingTime(
        mean=float(steps.mean()),
        ci=stats.bootstrap_ci(steps, n_resamples=n_boot, seed=seed, method="percentile"),
        success=float(np.mean([e.success for e in episodes])),
        n=len(steps),
        steps=tuple(float(x) for x in steps),
    )


@dataclass
class GrowthFit:
    """Linear T = a + b K against exponential T = A r^K, both judged by squared error of log T
    (so large and small K weigh alike). ``preferred`` is the smaller error."""

    slope: float  # b, steps per extra level (linear model)
    intercept: float
    ratio: float  # r, growth factor per extra level (exponential model)
    rss_linear: float
    rss_exponential: float

    @property
    def preferred(self) -> str:
        return "linear" if self.rss_linear < self.rss_exponential else "exponential"


def fit_growth(K: list[int] | np.ndarray, T: list[float] | np.ndarray) -> GrowthFit:
    K = np.asarray(K, dtype=float)
    T = np.asarray(T, dtype=float)
    if len(K) < 3 or len(K) != len(T):
        raise ValueError(f"need >= 3 (K, T) pairs of equal length, got {len(K)} and {len(T)}")
    if np.any(T <= 0):
        raise ValueError("hitting times must be positive")
    b, a = np.polyfit(K, T, 1)
    lin = np.maximum(a + b * K, 1e-9)
    d, c = np.polyfit(K, np.log(T), 1)
    rss_lin = float(np.sum((np.log(lin) - np.log(T)) ** 2))
    rss_exp = float(np.sum((c + d * K - np.log(T)) ** 2))
    return GrowthFit(slope=float(b), intercept=float(a), ratio=float(np.exp(d)), rss_linear=rss_lin,
                     rss_exponential=rss_exp)


def evaluate(
    model: torch.nn.Module, mazes_by_K: dict[int, list[Maze]], cap: int, seed: int, window: int = DEFAULT_WINDOW
) -> dict[int, HittingTime]:
    """Hitting time per K (one batch per K, so short walks do not wait on long ones)."""
    out = {}
    for K in sorted(mazes_by_K):
        eps = rollout(model, mazes_by_K[K], cap=cap, seed=seed + 1000 * K, window=window)
        out[K] = hitting_time(eps, seed=seed + K)
    return out


@dataclass
class StateProbe:
    """Each policy's behaviour on a fixed set of real decision states."""

    back_at_dead_end: float  # mean P(B | dead end)
    tv_backward: float  # mean total-variation distance to the base at backward-facing states
    tv_forward: float  # the same at forward-facing states
    n_backward: int
    n_forward: int


@torch.no_grad()
def probe_states(model: torch.nn.Module, base: torch.nn.Module, episodes: list[Episode],
                 window: int = DEFAULT_WINDOW) -> StateProbe:
    """Compare ``model`` with ``base`` on the decision states of ``episodes`` (e.g. exploratory
    walks, which visit both kinds of state)."""
    batch = build_action_batch(episodes)
    back = torch.tensor([b for e in episodes for b in e.backward_flags()], dtype=torch.bool)
    p = legal_log_probs(model, batch, window).exp()
    q = legal_log_probs(base, batch, window).exp()
    tv = 0.5 * (p - q).abs().sum(-1)
    dead = batch.obs == VOCAB.index("D")
    return StateProbe(
        back_at_dead_end=float(p[dead, VOCAB.index("B")].mean()) if dead.any() else float("nan"),
        tv_backward=float(tv[back].mean()) if back.any() else 0.0,
        tv_forward=float(tv[~back].mean()) if (~back).any() else 0.0,
        n_backward=int(back.sum()),
        n_forward=int((~back).sum()),
    )
