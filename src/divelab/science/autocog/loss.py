"""The normalised generative loss (the paper's ``aggregate_loss``).

For each observation ``o`` with observed metric value ``r_o`` and the candidate's *simulated*
value ``s_o``: ``d_o = |s_o - r_o| / spread_o``, where ``spread_o`` is max - min over {observed,
candidate, every previous theory's simulated value}; the loss is the mean of ``d_o``. A failed
simulation (NaN) scores 1. No likelihood is fitted: a theory improves only by generating
behaviour like *all* the data so far.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def normalised_loss(simulated: Sequence[float], observed: Sequence[float],
                    previous: Sequence[Sequence[float]] = ()) -> tuple[float, list[float]]:
    """``(loss, per-observation distances)``; ``previous[j][o]`` is theory j's value on observation o."""
    s = np.asarray(simulated, dtype=float)
    r = np.asarray(observed, dtype=float)
    if s.shape != r.shape:
        raise ValueError(f"simulated and observed differ in length: {s.size} vs {r.size}")
    if s.size == 0:
        raise ValueError("no observations to score")
    prev = np.asarray(previous, dtype=float).reshape(-1, s.size) if len(previous) else np.zeros((0, s.size))
    d = []
    for o in range(s.size):
        if np.isnan(s[o]):
            d.append(1.0)
            continue
        vals = np.r_[r[o], s[o], prev[:, o][~np.isnan(prev[:, o])]]
        spread = float(vals.max() - vals.min())
        d.append(abs(s[o] - r[o]) / spread if spread > 0 else 0.0)
    return float(np.mean(d)), [float(x) for x in d]
