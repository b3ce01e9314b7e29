"""SVF (singular-value fine-tuning): the paper's only backbone adaptation for the router.

A weight W = U diag(σ) Vᵀ becomes U diag(σ̃) Vᵀ with σ̃_k = (1 + δ_k) σ_k, rescaled so that
Σσ̃ = Σσ (energy renormalisation). Only δ is trainable: one offset per singular value. The paper
applies it to 9 matrices of Qwen3-0.6B (9,216 offsets); here :func:`apply_svf` adapts any torch
``Linear``/``Embedding`` weights you name.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class SVF:
    """The SVD of one weight matrix and its offsets ``delta`` (zeros = the original weight)."""

    def __init__(self, weight: np.ndarray) -> None:
        w = np.asarray(weight, dtype=np.float64)
        if w.ndim != 2:
            raise ValueError(f"SVF needs a 2-D weight, got shape {w.shape}")
        self.u, self.s, self.vt = np.linalg.svd(w, full_matrices=False)
        self.delta = np.zeros_like(self.s)

    @property
    def n_params(self) -> int:
        return int(self.s.size)

    def weight(self, delta: np.ndarray | None = None) -> np.ndarray:
        d = self.delta if delta is None else np.asarray(delta, dtype=np.float64)
        if d.shape != self.s.shape:
            raise ValueError(f"delta must have shape {self.s.shape}, got {d.shape}")
        st = (1.0 + d) * self.s
        total = st.sum()
        if total <= 0:
            raise ValueError("SVF offsets drove the singular-value sum to <= 0; use offsets > -1")
        st = st * (self.s.sum() / total)
        return (self.u * st) @ self.vt


def apply_svf(model: Any, names: list[str], deltas: dict[str, np.ndarray] | None = None) -> dict[str, SVF]:
    """Wrap the named parameters of a torch model with SVF; set their offsets from ``deltas`` (in place).

    Returns the SVF objects (their ``n_params`` sum is the trainable size). Unknown names raise.
    """
    import torch

    params = dict(model.named_parameters())
    missing = [n for n in names if n not in params]
    if missing:
        raise ValueError(f"unknown parameter names {missing}; e.g. {sorted(params)[:5]}")
    out: dict[str, SVF] = {}
    for n in names:
        p = params[n]
        svf = SVF(p.detach().cpu().numpy())
        if deltas and n in deltas:
            svf.delta = np.asarray(deltas[n], dtype=np.float64)
        with torch.no_grad():
            p.copy_(torch.from_numpy(svf.weight()).to(p.dtype))
        out[n] = svf
    return out
