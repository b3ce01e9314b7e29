"""One place for the statistics behind every claim: intervals and AUROC on scipy / scikit-learn.

Every reproduction uses these, so an interval means the same thing in every row of the report:
a two-sided 95% interval unless ``confidence`` says otherwise, bootstrap intervals are BCa
(scipy's default) with a fixed seed, and a proportion's interval is Wilson's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats as _st

DEFAULT_RESAMPLES = 2000


def _arr(x: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=float).ravel()
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    if np.isnan(a).any():
        raise ValueError(f"{name} contains NaN")
    return a


def _finite(lo: float, hi: float, point: float) -> tuple[float, float]:
    # BCa is undefined when every resample gives the same value (a constant sample); the
    # interval is then the point itself.
    if not np.isfinite(lo) or not np.isfinite(hi):
        return (point, point)
    return (float(lo), float(hi))


def bootstrap_ci(x: Sequence[float] | np.ndarray, statistic: Callable[[np.ndarray], float] = np.mean, *,
                 confidence: float = 0.95, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                 method: str = "BCa") -> tuple[float, float]:
    """Bootstrap interval of ``statistic`` over one sample (scipy.stats.bootstrap)."""
    a = _arr(x, "sample")
    point = float(statistic(a))
    if a.size < 2 or np.ptp(a) == 0:
        return (point, point)
    res = _st.bootstrap((a,), lambda s, axis=-1: np.apply_along_axis(statistic, axis, s),
                        confidence_level=confidence, n_resamples=n_resamples, method=method,
                        random_state=np.random.default_rng(seed))
    return _finite(res.confidence_interval.low, res.confidence_interval.high, point)


def mean_ci(x: Sequence[float] | np.ndarray, *, confidence: float = 0.95) -> tuple[float, float]:
    """Student-t interval of the mean (scipy.stats.t.interval); for a handful of seeds."""
    a = _arr(x, "sample")
    m = float(a.mean())
    if a.size < 2 or np.ptp(a) == 0:
        return (m, m)
    lo, hi = _st.t.interval(confidence, a.size - 1, loc=m, scale=_st.sem(a))
    return (float(lo), float(hi))


def paired_diff_ci(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *,
                   confidence: float = 0.95, method: str = "t", seed: int = 0) -> tuple[float, float, float]:
    """Mean of ``a - b`` over paired units, with its interval ("t" or "bootstrap")."""
    x, y = _arr(a, "a"), _arr(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in size: {x.size} vs {y.size}")
    d = x - y
    lo, hi = mean_ci(d, confidence=confidence) if method == "t" else bootstrap_ci(d, confidence=confidence, seed=seed)
    return float(d.mean()), lo, hi


def diff_ci(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, confidence: float = 0.95,
            n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> tuple[float, float, float]:
    """Difference of means of two independent samples, with a bootstrap interval."""
    x, y = _arr(a, "a"), _arr(b, "b")
    point = float(x.mean() - y.mean())
    if (x.size < 2 or np.ptp(x) == 0) and (y.size < 2 or np.ptp(y) == 0):
        return point, point, point
    res = _st.bootstrap((x, y), lambda p, q, axis=-1: p.mean(axis=axis) - q.mean(axis=axis),
                        confidence_level=confidence, n_resamples=n_resamples, method="percentile",
                        random_state=np.random.default_rng(seed))
    lo, hi = _finite(res.confidence_interval.low, res.confidence_interval.high, point)
    return point, lo, hi


def proportion_ci(k: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson interval of a proportion k/n (scipy.stats.binomtest(...).proportion_ci)."""
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
    ci = _st.binomtest(int(k), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return (float(ci.low), float(ci.high))


def _auc_from_ranks(pos: np.ndarray, neg: np.ndarray, axis: int = -1) -> np.ndarray:
    """AUROC by the Mann-Whitney identity on scipy's ranks (ties count one half, as in
    sklearn's roc_auc_score); vectorised over leading axes, which is what makes bootstraps cheap."""
    x = np.concatenate([pos, neg], axis=axis)
    ranks = _st.rankdata(x, axis=axis)
    n1, n0 = pos.shape[axis], neg.shape[axis]
    return (np.take(ranks, np.arange(n1), axis=axis).sum(axis=axis) - n1 * (n1 + 1) / 2) / (n1 * n0)


def _split(labels: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y, s = np.asarray(labels).ravel(), _arr(scores, "scores")
    if y.shape != s.shape:
        raise ValueError(f"labels and scores differ in size: {y.size} vs {s.size}")
    classes = np.unique(y)
    if len(classes) != 2:
        raise ValueError(f"AUROC needs both classes in labels, got {sorted(set(y.tolist()))}")
    return s[y == classes[1]], s[y == classes[0]]


def auroc(labels: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray) -> float:
    """Area under the ROC curve (equal to sklearn.metrics.roc_auc_score; a test checks it, ties
    included); the positive class is the larger label. Both classes must be present."""
    pos, neg = _split(labels, scores)
    return float(_auc_from_ranks(pos, neg))


def auroc_ci(labels: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray, *,
             confidence: float = 0.95, n_resamples: int = DEFAULT_RESAMPLES,
             seed: int = 0) -> tuple[float, float, float]:
    """AUROC with a stratified percentile bootstrap interval: positives and negatives are
    resampled separately (scipy.stats.bootstrap over the two samples), so every resample has
    both classes and the class balance is kept."""
    pos, neg = _split(labels, scores)
    point = float(_auc_from_ranks(pos, neg))
    if pos.size < 2 or neg.size < 2:
        return point, point, point
    res = _st.bootstrap((pos, neg), _auc_from_ranks, vectorized=True, confidence_level=confidence,
                        n_resamples=n_resamples, method="percentile", random_state=np.random.default_rng(seed))
    lo, hi = _finite(res.confidence_interval.low, res.confidence_interval.high, point)
    return point, lo, hi


def auroc_diff_ci(y1: Sequence[int] | np.ndarray, s1: Sequence[float] | np.ndarray, y2: Sequence[int] | np.ndarray,
                  s2: Sequence[float] | np.ndarray, *, confidence: float = 0.95,
                  n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> tuple[float, float, float]:
    """AUROC(y1, s1) − AUROC(y2, s2) with a percentile bootstrap over item indices: paired when both score the
    same items (two scorers of one set of prompts), a valid resampling of two independent equal-size samples
    otherwise. A resample that loses a class counts as no difference."""
    y1, s1, y2, s2 = (np.asarray(v) for v in (y1, s1, y2, s2))
    if not y1.size == s1.size == y2.size == s2.size:
        raise ValueError(f"auroc_diff_ci needs equal-size inputs, got {y1.size}, {s1.size}, {y2.size}, {s2.size}")

    def stat(idx: np.ndarray) -> float:
        ii = idx.astype(int)
        if np.unique(y1[ii]).size < 2 or np.unique(y2[ii]).size < 2:
            return 0.0
        return auroc(y1[ii], s1[ii]) - auroc(y2[ii], s2[ii])

    point = auroc(y1, s1) - auroc(y2, s2)
    lo, hi = bootstrap_ci(np.arange(y1.size), stat, confidence=confidence, n_resamples=n_resamples, seed=seed,
                          method="percentile")
    return point, lo, hi


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p-values (statsmodels' multipletests)."""
    from statsmodels.stats.multitest import multipletests

    return multipletests(_arr(pvalues, "p-values"), method="holm")[1]


def cluster_diff_ci(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
                    clusters: Sequence[object], *, confidence: float = 0.95,
                    n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> tuple[float, float, float]:
    """Mean of paired ``a - b`` with a cluster bootstrap interval: whole clusters (tasks, problems)
    are resampled, so runs within one task do not count as independent evidence."""
    x, y = _arr(a, "a"), _arr(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in size: {x.size} vs {y.size}")
    labels = np.asarray(list(clusters), dtype=object)
    if labels.size != x.size:
        raise ValueError(f"clusters has {labels.size} labels for {x.size} pairs")
    d = x - y
    keys = list(dict.fromkeys(labels.tolist()))
    sums = np.array([d[labels == k].sum() for k in keys])
    sizes = np.array([(labels == k).sum() for k in keys], dtype=float)
    point = float(d.mean())
    if len(keys) < 2:
        return point, point, point
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(keys), size=(n_resamples, len(keys)))
    means = sums[idx].sum(axis=1) / sizes[idx].sum(axis=1)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return point, float(lo), float(hi)


def mde_from_ci(lo: float, hi: float, *, confidence: float = 0.95, power: float = 0.8) -> float:
    """Smallest true effect a design detects with ``power``, read off its ``confidence`` interval: the
    interval's half-width is z·SE, and a two-sided test at the same level detects (z + z_power)·SE (the
    normal approximation). For claims whose interval came from a bootstrap or a rank statistic, where no
    per-unit standard deviation is at hand."""
    from scipy.stats import norm

    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        raise ValueError(f"mde_from_ci needs a finite interval with lo <= hi, got [{lo}, {hi}]")
    z = float(norm.ppf(0.5 + confidence / 2))
    return (z + float(norm.ppf(power))) * (hi - lo) / (2 * z)


def mde_two_sample(sd: float, n: int, *, alpha: float = 0.05, power: float = 0.8, paired: bool = True) -> float:
    """Smallest effect (in the data's unit) a design of ``n`` units detects with ``power``
    (statsmodels' t-test power solver, two-sided): what an under-powered null can rule out."""
    from statsmodels.stats.power import TTestIndPower, TTestPower

    if n < 2 or sd <= 0:
        return float("inf") if sd > 0 else 0.0
    if paired:
        d = TTestPower().solve_power(effect_size=None, nobs=n, alpha=alpha, power=power, alternative="two-sided")
    else:
        d = TTestIndPower().solve_power(effect_size=None, nobs1=n, alpha=alpha, power=power, ratio=1.0,
                                        alternative="two-sided")
    return float(d) * sd
