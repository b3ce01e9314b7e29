"""SPS(B): the target's verification steps per second when one forward carries B tokens.

The paper's scheduler (Alg. 1) maximises Θ = τ·SPS(B). SPS is a property of the hardware, so the
engine *profiles* it at start-up on the real target (``measure_sps``). For simulating an
accelerator on this CPU, ``SPSCurve.synthetic_accelerator`` gives a flat-then-linear (optionally
staircase) curve; such curves carry ``synthetic=True`` and a label saying so, and every output that
uses one repeats the label.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class SPSCurve:
    """Steps per second at B verified tokens, tabulated at ``batch_sizes`` and interpolated linearly
    in step *time* between them (time, not rate, is what adds up); beyond the table the last
    per-token slope is extrapolated."""

    batch_sizes: np.ndarray
    steps_per_s: np.ndarray
    label: str = "measured"
    synthetic: bool = False
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.batch_sizes = np.asarray(self.batch_sizes, dtype=np.float64)
        self.steps_per_s = np.asarray(self.steps_per_s, dtype=np.float64)
        if self.batch_sizes.ndim != 1 or len(self.batch_sizes) != len(self.steps_per_s) or len(self.batch_sizes) == 0:
            raise ValueError("SPSCurve needs equal-length 1-D batch_sizes and steps_per_s")
        if np.any(np.diff(self.batch_sizes) <= 0):
            raise ValueError("SPSCurve batch_sizes must be strictly increasing")
        if np.any(self.steps_per_s <= 0):
            raise ValueError("SPSCurve steps_per_s must be positive")
        if self.synthetic and "SYNTHETIC" not in self.label.upper():
            self.label = f"SYNTHETIC {self.label}"

    def step_time(self, b: float | np.ndarray) -> np.ndarray | float:
        t = 1.0 / self.steps_per_s
        bs = self.batch_sizes
        b_arr = np.asarray(b, dtype=np.float64)
        out = np.interp(b_arr, bs, t)
        if len(bs) >= 2:
            slope = max((t[-1] - t[-2]) / (bs[-1] - bs[-2]), 0.0)
            out = np.where(b_arr > bs[-1], t[-1] + slope * (b_arr - bs[-1]), out)
        return out if out.ndim else float(out)

    def __call__(self, b: float | np.ndarray) -> np.ndarray | float:
        st = self.step_time(b)
        return 1.0 / st

    @classmethod
    def synthetic_accelerator(cls, step_s: float = 0.02, flat_until: int = 64, tile: int = 0,
                              max_b: int = 1024) -> SPSCurve:
        """An accelerator-shaped curve: memory-bound (flat step time) up to ``flat_until`` tokens,
        compute-bound (step time ∝ B) beyond; ``tile > 0`` rounds B up to a multiple of ``tile``
        (the jagged staircase real kernels show). Not measured anywhere: a labelled assumption."""
        if flat_until < 1 or step_s <= 0:
            raise ValueError("synthetic_accelerator needs flat_until >= 1 and step_s > 0")
        bs = np.arange(1, max_b + 1, dtype=np.float64)
        eff = np.ceil(bs / tile) * tile if tile > 0 else bs
        t = step_s * np.maximum(1.0, eff / flat_until)
        label = f"SYNTHETIC accelerator-shaped curve (flat to B={flat_until}, then linear" + (
            f", tile {tile})" if tile else ")")
        return cls(bs, 1.0 / t, label=label, synthetic=True,
                   meta={"step_s": step_s, "flat_until": flat_until, "tile": tile})


def fit_sps(batch_sizes: list[int] | np.ndarray, times: np.ndarray, label: str = "measured",
            meta: dict | None = None, outlier: float = 1.5) -> SPSCurve:
    """Robust SPS(B) from raw timings ``times`` (len(B) × repeats, seconds per verify step).

    1. the median of each B's repeats (one slow sample cannot set a point);
    2. noise on a shared machine only ever *adds* time, and a bigger verify batch is never faster,
       so a point slower than ``outlier`` × some larger B's median is a burst, not the model: it is
       clipped to that larger B's median;
    3. an isotonic (non-decreasing in B) least-squares fit of the remaining mild wiggles, weighted
       by the inverse relative spread of the repeats.

    The old rule (fastest repeat, then a running minimum of *rates*) let one slow small-B point
    cap every larger B, which once collapsed Algorithm 1's τ from 8.69 to 1.97."""
    from sklearn.isotonic import IsotonicRegression

    bs = np.asarray(batch_sizes, dtype=np.float64)
    t = np.asarray(times, dtype=np.float64)
    if t.ndim == 1:
        t = t[:, None]
    if t.shape[0] != len(bs) or t.shape[1] < 1 or np.any(~np.isfinite(t)) or np.any(t <= 0):
        raise ValueError(f"fit_sps needs positive finite times of shape (len(batch_sizes)={len(bs)}, repeats), "
                         f"got shape {t.shape}")
    med = np.median(t, axis=1)
    later_min = np.append(np.minimum.accumulate(med[::-1])[::-1][1:], np.inf)  # min over larger B
    clipped = np.where(med > outlier * later_min, later_min, med)
    mad = np.median(np.abs(t - med[:, None]), axis=1) / med
    w = 1.0 / (mad + 0.02)
    fit = IsotonicRegression(increasing=True).fit(bs, clipped, sample_weight=w).predict(bs)
    return SPSCurve(bs, 1.0 / fit, label=label,
                    meta={**(meta or {}), "median_step_s": med.tolist(), "repeats": int(t.shape[1]),
                          "clipped": np.nonzero(clipped != med)[0].tolist()})


@torch.no_grad()
def measure_sps(target: torch.nn.Module, batch_sizes: list[int] | None = None, context: int = 64,
                tokens_per_request: int = 5, repeats: int = 7, vocab_size: int | None = None,
                seed: int = 0) -> SPSCurve:
    """Profile the real target: one cached verify forward carrying B tokens in total, split into
    rows of ``tokens_per_request`` (as batched verification does) over a ``context``-token cache.
    ``repeats`` timed forwards per B after one warm-up, interleaved across B (a burst of load hits
    every B alike), then :func:`fit_sps` (median + monotone fit)."""
    from transformers import DynamicCache

    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    batch_sizes = batch_sizes or [1, 2, 4, 8, 16, 32, 64]
    cfg = target.config
    vocab_size = vocab_size or cfg.vocab_size
    g = torch.Generator().manual_seed(seed)
    dev = next(target.parameters()).device
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    setups = []
    for b in batch_sizes:
        rows = max(1, math.ceil(b / tokens_per_request))
        cols = max(1, math.ceil(b / rows))
        ctx = torch.randint(0, vocab_size, (rows, context), generator=g).to(dev)
        new = torch.randint(0, vocab_size, (rows, cols), generator=g).to(dev)
        cache = DynamicCache(config=cfg)
        target(ctx, cache=cache, use_cache=True)
        base = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
        pos = torch.arange(context, context + cols, device=dev).expand(rows, -1)
        setups.append((new, base, pos))
    times = np.zeros((len(batch_sizes), repeats))
    for i in range(repeats + 1):
        for j, (new, base, pos) in enumerate(setups):
            c = DynamicCache(config=cfg)
            for li, (k, v) in enumerate(base):
                c.update(k.clone(), v.clone(), li)
            sync()
            t0 = time.perf_counter()
            target(new, cache=c, use_cache=True, position_ids=pos, output_hidden_states=True)
            sync()
            if i:  # the first round is warm-up
                times[j, i - 1] = time.perf_counter() - t0
    return fit_sps(batch_sizes, times,
                   label=f"measured on this machine ({dev.type}, context {context}, {torch.get_num_threads()} threads)",
                   meta={"context": context, "tokens_per_request": tokens_per_request})
