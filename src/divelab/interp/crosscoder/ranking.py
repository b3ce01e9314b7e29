"""Feature ranking by model-specificity: Cohen's d (and AUROC) of each feature between two behaviour classes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from divelab import stats
from divelab.interp.crosscoder.dfc import Crosscoder


def cohens_d(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """d_i = (μ_pos − μ_neg) / sqrt((σ²_pos + σ²_neg) / 2) per column (0 where both variances are 0)."""
    num = pos.mean(0) - neg.mean(0)
    den = np.sqrt((pos.var(0, ddof=1) + neg.var(0, ddof=1)) / 2)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


@dataclass
class RankedFeature:
    index: int
    partition: str
    cohens_d: float
    auroc: float
    mean_pos: float
    rel_norm: float


def is_dead(f: RankedFeature) -> bool:
    """A feature that separates nothing: the same activation on both classes (d = 0, AUROC 0.5), most often
    because it never fires on these rows."""
    return f.cohens_d == 0.0 and f.auroc == 0.5


@torch.no_grad()
def rank_features(cc: Crosscoder, acts_a: torch.Tensor, acts_b: torch.Tensor, labels: np.ndarray,
                  partition: str | None = "A", top: int = 20) -> list[RankedFeature]:
    """Features ranked by Cohen's d between ``labels == 1`` and ``labels == 0`` (paired encoding of both models);
    ``partition`` restricts to 'A', 'B' or 'shared' features (None: all)."""
    labels = np.asarray(labels).astype(int)
    if set(np.unique(labels)) != {0, 1}:
        raise ValueError(f"labels must contain both classes 0 and 1, got {sorted(set(labels.tolist()))}")
    f = cc.encode(acts_a, acts_b).numpy()
    d = cohens_d(f[labels == 1], f[labels == 0])
    parts = cc.partition()
    cand = [i for i in range(len(parts)) if partition is None or parts[i] == partition]
    if not cand:
        raise ValueError(f"the crosscoder has no {partition!r} features ({cc.config.label()})")
    rel = relative_decoder_norm(cc)
    order = sorted(cand, key=lambda i: -d[i])[:top]
    return [RankedFeature(i, parts[i], float(d[i]), stats.auroc(labels, f[:, i]) if f[:, i].std() > 0 else 0.5,
                          float(f[labels == 1, i].mean()), float(rel[i])) for i in order]


@torch.no_grad()
def relative_decoder_norm(cc: Crosscoder) -> np.ndarray:
    """‖W_dec,A‖ / (‖W_dec,A‖ + ‖W_dec,B‖) per feature (1 ⇒ A-only, 0 ⇒ B-only, 0.5 ⇒ shared)."""
    na = torch.stack([cc.direction(i, 0).norm() for i in range(cc.config.dict_size)])
    nb = torch.stack([cc.direction(i, 1).norm() for i in range(cc.config.dict_size)])
    return (na / (na + nb).clamp(min=1e-12)).numpy()


@torch.no_grad()
def latent_scaling(cc: Crosscoder, acts_a: torch.Tensor, acts_b: torch.Tensor, feature: int) -> dict[str, float]:
    """Latent Scaling (Minder et al. 2025): how much of feature ``feature``'s A-decoder direction, scaled by its
    activation, is present in each model's activation: β_m = Σ<f·d, x_m> / Σ‖f·d‖². ν = β_B / β_A near 0 ⇒
    genuinely A-specific; near 1 ⇒ the feature is present in B too (complete shrinkage / latent decoupling)."""
    f = cc.encode(acts_a, acts_b)[:, feature]
    on = f > 0
    if not bool(on.any()):
        return {"beta_a": float("nan"), "beta_b": float("nan"), "nu": float("nan"), "active": 0}
    v = f[on, None] * cc.direction(feature, 0)[None]
    den = (v * v).sum()
    ba = float((v * (acts_a[on] - acts_a.mean(0))).sum() / den)
    bb = float((v * (acts_b[on] - acts_b.mean(0))).sum() / den)
    return {"beta_a": ba, "beta_b": bb, "nu": bb / ba if ba else float("nan"), "active": int(on.sum())}


@torch.no_grad()
def exclusive_liveness(cc, acts_a: torch.Tensor, acts_b: torch.Tensor, labels: np.ndarray) -> dict[str, float]:
    """How alive the A-exclusive block is on ``acts``: the share of its latents that fire on at least one row,
    the mean activation of a latent when it fires, and the share of tool / generic rows where any of them fires."""
    f = cc.encode(acts_a, acts_b)[:, cc.a_slice]
    on = f > 0
    any_on = on.any(1).numpy()
    return {"alive": float(on.any(0).float().mean()) if cc.n_a else 0.0,
            "mean_when_on": float(f[on].mean()) if bool(on.any()) else 0.0,
            "fire_tool": float(any_on[labels == 1].mean()), "fire_generic": float(any_on[labels == 0].mean())}
