"""Confidence calibration: ECE, ROC-AUC, reliability curves and Sequential Temperature Scaling.

The scheduler needs *absolute* survival probabilities a_k = Π_{i≤k} c_i, not just a ranking, so
DSpark calibrates the confidence head post hoc with STS (paper §2.6): for k = 1..γ in order, a
scalar temperature T_k (ĉ_k = σ(z_k / T_k)) is grid-searched to minimise the ECE of the
cumulative product against the realised "prefix survived up to k" label, with T_1..T_{k−1}
frozen. Labels are realised binary prefix survival from full-γ verification; training labels were
the soft 1 − TV.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(z, dtype=np.float64)))


def ece(pred: np.ndarray, label: np.ndarray, bins: int = 20) -> float:
    """Expected calibration error with equal-width bins (Naeini et al. 2015; 20 bins as DeepSpec)."""
    pred, label = np.asarray(pred, dtype=np.float64), np.asarray(label, dtype=np.float64)
    if len(pred) == 0:
        return float("nan")
    idx = np.clip((pred * bins).astype(int), 0, bins - 1)
    cnt = np.bincount(idx, minlength=bins)
    sp = np.bincount(idx, weights=pred, minlength=bins)
    sl = np.bincount(idx, weights=label, minlength=bins)
    nz = cnt > 0
    return float(np.sum(np.abs(sp[nz] - sl[nz])) / len(pred))


def roc_auc(pred: np.ndarray, label: np.ndarray) -> float:
    """ROC-AUC (:func:`divelab.stats.auroc`); NaN when only one class is present."""
    from divelab import stats

    label = np.asarray(label).astype(bool)
    if label.all() or not label.any():
        return float("nan")
    return stats.auroc(label.astype(int), np.asarray(pred, dtype=float))


def reliability(pred: np.ndarray, label: np.ndarray, bins: int = 10) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean predicted, observed frequency, count) per equal-width bin (empty bins dropped)."""
    idx = np.clip((np.asarray(pred) * bins).astype(int), 0, bins - 1)
    cnt = np.bincount(idx, minlength=bins)
    mp = np.bincount(idx, weights=pred, minlength=bins)
    ml = np.bincount(idx, weights=np.asarray(label, dtype=np.float64), minlength=bins)
    nz = cnt > 0
    return mp[nz] / cnt[nz], ml[nz] / cnt[nz], cnt[nz]


def survival_labels(accepted: np.ndarray, gamma: int) -> np.ndarray:
    """labels[n, k] = 1 when drafts 1..k+1 were all accepted in round n (full-γ verification)."""
    return (np.asarray(accepted)[:, None] > np.arange(gamma)[None, :]).astype(np.float64)


@dataclass
class STSCalibration:
    """Per-position temperatures; ``apply`` maps raw logits (R, γ) to calibrated c (R, γ)."""

    temperatures: np.ndarray

    def apply(self, z: np.ndarray) -> np.ndarray:
        z = np.asarray(z, dtype=np.float64)
        t = np.asarray(self.temperatures, dtype=np.float64)
        g = z.shape[-1]
        if g > len(t):  # positions beyond the fitted ones reuse the last temperature
            t = np.concatenate([t, np.full(g - len(t), t[-1])])
        return sigmoid(z / t[:g])

    def to_dict(self) -> dict:
        return {"temperatures": [float(x) for x in self.temperatures]}

    @classmethod
    def identity(cls, gamma: int) -> STSCalibration:
        return cls(np.ones(gamma))


def fit_sts(z: np.ndarray, labels: np.ndarray, grid: np.ndarray | None = None, bins: int = 20) -> STSCalibration:
    """Sequential Temperature Scaling, left to right, each T_k minimising the cumprod ECE."""
    z = np.asarray(z, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64)
    if z.shape != labels.shape or z.ndim != 2:
        raise ValueError(f"fit_sts needs logits and labels of the same (N, γ) shape, got {z.shape} and {labels.shape}")
    grid = np.logspace(np.log10(0.2), np.log10(10.0), 200) if grid is None else grid
    temps = np.ones(z.shape[1])
    prefix = np.ones(z.shape[0])
    for k in range(z.shape[1]):
        errs = [ece(prefix * sigmoid(z[:, k] / t), labels[:, k], bins) for t in grid]
        temps[k] = grid[int(np.argmin(errs))]
        prefix = prefix * sigmoid(z[:, k] / temps[k])
    return STSCalibration(temps)


def calibration_report(z: np.ndarray, labels: np.ndarray, cal: STSCalibration | None, bins: int = 20) -> dict:
    """Per-position ECE and AUC of the cumulative-product predictions."""
    c = cal.apply(z) if cal is not None else sigmoid(z)
    a = np.cumprod(c, axis=1)
    e = [ece(a[:, k], labels[:, k], bins) for k in range(a.shape[1])]
    u = [roc_auc(a[:, k], labels[:, k]) for k in range(a.shape[1])]
    return {"ece": e, "auc": u, "mean_ece": float(np.mean(e)),
            "mean_auc": float(np.nanmean(u)) if not np.all(np.isnan(u)) else float("nan"),
            "mean_pred": a.mean(0).tolist(), "mean_label": labels.mean(0).tolist()}
