"""The statistics of the protocol: rates with Wilson intervals, two-arm tests, dose-response, power.

Every interval comes from :mod:`divelab.stats` or scipy: Wilson intervals (``stats.proportion_ci``),
Fisher's exact test and the risk ratio with its interval (``scipy.stats.fisher_exact``,
``scipy.stats.contingency.relative_risk``), Holm's correction (``stats.holm``), Spearman's rho, and a
logistic dose-response fitted by maximum likelihood (statsmodels) whose 5 %-crossing point gets a
bootstrap interval (``stats.bootstrap_ci``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats as st
from scipy.stats.contingency import relative_risk

from divelab import stats


@dataclass(frozen=True)
class Rate:
    k: int
    n: int

    @property
    def p(self) -> float:
        return self.k / self.n

    @property
    def ci(self) -> tuple[float, float]:
        return stats.proportion_ci(self.k, self.n)


@dataclass(frozen=True)
class TwoArm:
    """Control vs edited arm: rates, Fisher exact p (two-sided), risk ratio edited/control with 95 % CI."""

    control: Rate
    edited: Rate
    p_value: float
    odds_ratio: float
    risk_ratio: float
    rr_ci: tuple[float, float]

    @property
    def diff(self) -> float:
        return self.edited.p - self.control.p


def two_arm(k_control: int, n_control: int, k_edited: int, n_edited: int) -> TwoArm:
    for name, k, n in (("control", k_control, n_control), ("edited", k_edited, n_edited)):
        if n <= 0 or not 0 <= k <= n:
            raise ValueError(f"{name} arm needs 0 <= k <= n and n > 0, got k={k}, n={n}")
    table = [[k_edited, n_edited - k_edited], [k_control, n_control - k_control]]
    odds, p = st.fisher_exact(table)
    if k_control == 0 and k_edited == 0:
        rr, ci = float("nan"), (float("nan"), float("nan"))
    elif k_control == 0:
        rr, ci = float("inf"), (float("nan"), float("inf"))
    else:
        res = relative_risk(k_edited, n_edited, k_control, n_control)
        lo, hi = res.confidence_interval(0.95)
        rr, ci = float(res.relative_risk), (float(lo), float(hi))
    return TwoArm(Rate(k_control, n_control), Rate(k_edited, n_edited), float(p), float(odds), rr, ci)


@dataclass(frozen=True)
class DoseResponse:
    doses: tuple[float, ...]
    rates: tuple[Rate, ...]
    intercept: float
    slope: float  # per log(dose)
    crossing: float  # dose at which the fitted rate crosses `level`
    crossing_ci: tuple[float, float]
    level: float
    rho: float  # Spearman rho of rate vs dose, per rollout
    rho_p: float

    def fitted(self, dose: float) -> float:
        return 1.0 / (1.0 + math.exp(-(self.intercept + self.slope * math.log(dose))))


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    import statsmodels.api as sm

    if y.min() == y.max():
        raise ValueError("dose-response needs both outcomes among the rollouts")
    model = sm.GLM(y, sm.add_constant(np.log(x)), family=sm.families.Binomial())
    res = model.fit()
    return float(res.params[0]), float(res.params[1])


def _log_crossing(b0: float, b1: float, level: float) -> float:
    """log(dose) at which the fitted rate equals ``level`` (clipped to +-30 for flat or separated fits)."""
    if b1 == 0:
        return 30.0
    return float(np.clip((math.log(level / (1 - level)) - b0) / b1, -30.0, 30.0))


def dose_response(doses: list[float], outcomes: list[list[int]], *, level: float = 0.05, seed: int = 0,
                  n_resamples: int = 400) -> DoseResponse:
    """Logistic fit of P(behaviour) on log(dose); ``outcomes[i]`` are the 0/1 results at ``doses[i]``."""
    if len(doses) != len(outcomes) or len(doses) < 2:
        raise ValueError(f"need >= 2 doses with one outcome list each, got {len(doses)} doses, {len(outcomes)} lists")
    if any(d <= 0 for d in doses):
        raise ValueError(f"doses must be positive (the fit is on log dose), got {doses}")
    x = np.concatenate([np.full(len(o), float(d)) for d, o in zip(doses, outcomes, strict=True)])
    y = np.concatenate([np.asarray(o, dtype=float) for o in outcomes])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b0, b1 = _fit(x, y)
    idx = np.arange(len(y))

    def stat(sample: np.ndarray) -> float:
        s = sample.astype(int)
        try:
            a, b = (b0, b1) if y[s].min() == y[s].max() else _fit(x[s], y[s])
        except Exception:  # noqa: BLE001 - a separated resample keeps the full-data fit
            a, b = b0, b1
        return _log_crossing(a, b, level)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lo, hi = stats.bootstrap_ci(idx, stat, n_resamples=n_resamples, seed=seed, method="percentile")
    rho, rho_p = st.spearmanr(x, y)
    rates = tuple(Rate(int(sum(o)), len(o)) for o in outcomes)
    return DoseResponse(tuple(float(d) for d in doses), rates, b0, b1, math.exp(_log_crossing(b0, b1, level)),
                        (math.exp(lo), math.exp(hi)), level, float(rho), float(rho_p))


def fisher_power(p_control: float, p_edited: float, n: int, *, alpha: float = 0.05, sims: int = 400,
                 seed: int = 0) -> float:
    """Power of a two-sided Fisher exact test with ``n`` rollouts per arm (simulated)."""
    if not (0 <= p_control <= 1 and 0 <= p_edited <= 1) or n < 1:
        raise ValueError(f"need rates in [0, 1] and n >= 1, got {p_control}, {p_edited}, n={n}")
    rng = np.random.default_rng(seed)
    a = rng.binomial(n, p_control, sims)
    b = rng.binomial(n, p_edited, sims)
    cache: dict[tuple[int, int], float] = {}
    hits = 0
    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        if (x, y) not in cache:
            cache[(x, y)] = st.fisher_exact([[y, n - y], [x, n - x]])[1]
        hits += cache[(x, y)] < alpha
    return hits / sims


def rollouts_for_power(p_control: float, p_edited: float, *, power: float = 0.8, alpha: float = 0.05,
                       n_max: int = 2000, sims: int = 400, seed: int = 0) -> int:
    """Smallest rollouts per arm (doubling, then bisection) with simulated Fisher power >= ``power``."""
    lo, hi = 1, 4
    while fisher_power(p_control, p_edited, hi, alpha=alpha, sims=sims, seed=seed) < power:
        lo, hi = hi, hi * 2
        if hi > n_max:
            return n_max
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fisher_power(p_control, p_edited, mid, alpha=alpha, sims=sims, seed=seed) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def posterior_misaligned(prior: float, sensitivity: float, false_positive: float) -> float:
    """P(misaligned | the test says misaligned) by Bayes' rule."""
    num = prior * sensitivity
    den = num + (1 - prior) * false_positive
    return num / den if den > 0 else 0.0
