"""The guard probe file: one JSON object a probe training run writes and ``divelab serve --guard`` reads.

It holds everything scoring needs and nothing else: the hidden layer and the position it is read at, a
linear map ``score = h · w + b`` (the scaler → PCA → logistic-regression pipeline the probe is trained as
is affine, so it collapses to one weight vector without changing a score beyond float rounding), the
threshold above which a request is flagged, the text a ``redirect`` answers with, and the identity of
the model it was trained on (:mod:`divelab.guard.identity`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from divelab.guard.identity import check_identity

FORMAT = "divelab-guard-probe"
VERSION = 1
POSITIONS = ("prompt_last", "first")
"""``prompt_last``: the last prompt token (read from the prefill, before any token is chosen);
``first``: the first generated token (the first thinking token of a prompt that opens the trace)."""
DEFAULT_REFUSAL = "I'm sorry, but I can't help with that."


@dataclass(frozen=True)
class GuardProbe:
    layer: int
    """index into the model's ``hidden_states`` (0: embeddings, L: after the final norm)"""
    position: str
    """one of :data:`POSITIONS`"""
    weights: tuple[float, ...]
    bias: float
    threshold: float
    """a request whose score is at or above it is flagged (likely refusal territory)"""
    model: dict[str, Any]
    """:func:`divelab.guard.identity.model_identity` of the model the probe was trained on"""
    refusal: str = DEFAULT_REFUSAL
    """the answer ``redirect`` gives a flagged request"""
    meta: dict[str, Any] = field(default_factory=dict)
    """how it was trained (prompt format, sizes, out-of-fold AUROC): recorded, never read by scoring"""

    def __post_init__(self) -> None:
        if self.position not in POSITIONS:
            raise ValueError(f"position must be one of {', '.join(POSITIONS)}, got {self.position!r}")
        if self.layer < 0:
            raise ValueError(f"layer must be >= 0, got {self.layer}")
        if not np.isfinite(self.threshold) or not np.all(np.isfinite(self.weights)):
            raise ValueError("the probe's weights and threshold must be finite numbers")

    @property
    def w(self) -> np.ndarray:
        return np.asarray(self.weights, dtype=np.float64)

    def scores(self, hidden: np.ndarray) -> np.ndarray:
        """Scores of hidden states ``(n, d)``, in float64 whatever their dtype (so every caller agrees)."""
        h = np.asarray(hidden, dtype=np.float64)
        if h.ndim != 2 or h.shape[1] != len(self.weights):
            raise ValueError(f"hidden states must be (n, {len(self.weights)}), got {h.shape}")
        return h @ self.w + self.bias

    def flagged(self, score: float) -> bool:
        return bool(score >= self.threshold)

    def save(self, path: str | Path) -> Path:
        from divelab.cache import atomic_write_text

        body = {"format": FORMAT, "version": VERSION, **asdict(self), "weights": list(map(float, self.weights))}
        atomic_write_text(Path(path), json.dumps(body, indent=1))
        return Path(path)

    @classmethod
    def read(cls, path: str | Path) -> GuardProbe:
        path = Path(path)
        try:
            body = json.loads(path.read_text())
        except FileNotFoundError:
            raise ValueError(f"no guard probe at {path}; write one with divelab first-token-probe "
                             f"probe-first-token --save-guard {path}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path} is not a guard probe file (not JSON: {exc})") from None
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            raise ValueError(f"{path} is not a guard probe file (no \"format\": {FORMAT!r})")
        if body.get("version") != VERSION:
            raise ValueError(f"{path} is a guard probe of version {body.get('version')}; this divelab reads {VERSION}")
        keys = {"layer", "position", "weights", "bias", "threshold", "model", "refusal", "meta"}
        missing = {"layer", "position", "weights", "bias", "threshold", "model"} - body.keys()
        if missing:
            raise ValueError(f"{path} lacks {', '.join(sorted(missing))}")
        kw = {k: v for k, v in body.items() if k in keys}
        return cls(**{**kw, "weights": tuple(float(x) for x in kw["weights"])})


def load_guard(path: str | Path, model: Any) -> GuardProbe:
    """Read a probe file and check it was trained on ``model`` (ValueError, with the reason, if not)."""
    probe = GuardProbe.read(path)
    n = int(model.config.num_hidden_layers)
    if probe.layer > n:
        raise ValueError(f"the probe in {path} reads layer {probe.layer}; the served model has 0..{n}")
    check_identity(probe.model, model, where=f"the probe in {path}")
    return probe


def from_sklearn(pipe: Any, *, layer: int, position: str, threshold: float, model: dict[str, Any],
                 refusal: str = DEFAULT_REFUSAL, meta: dict[str, Any] | None = None) -> GuardProbe:
    """Collapse a fitted ``StandardScaler → PCA → LogisticRegression`` pipeline to ``h · w + b``.

    ``(h - μ)/σ`` then ``(· - m) Cᵀ`` then ``· c + c₀`` is affine: ``w = Cᵀc / σ``, ``b = c₀ - μ·w - m·Cᵀc``."""
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    steps = [s for _, s in pipe.steps]
    kinds = [type(s) for s in steps]
    if kinds != [StandardScaler, PCA, LogisticRegression]:
        raise ValueError(f"expected a StandardScaler → PCA → LogisticRegression pipeline, got "
                         f"{' → '.join(k.__name__ for k in kinds)}")
    scaler, pca, lr = steps
    if pca.whiten:
        raise ValueError("a whitened PCA is not supported")
    v = pca.components_.T.astype(np.float64) @ lr.coef_.ravel().astype(np.float64)
    sigma = scaler.scale_ if scaler.scale_ is not None else np.ones_like(v)
    mu = scaler.mean_ if scaler.mean_ is not None else np.zeros_like(v)
    w = v / sigma
    b = float(lr.intercept_[0] - mu @ w - pca.mean_ @ v)
    return GuardProbe(layer=layer, position=position, weights=tuple(map(float, w)), bias=b,
                      threshold=float(threshold), model=model, refusal=refusal, meta=dict(meta or {}))
