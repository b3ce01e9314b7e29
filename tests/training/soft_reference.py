"""An independent solver for the progress-advantage tests: soft value iteration in extended precision.

``np.longdouble`` (80-bit on x86) rounds about 2000 times finer than float64, and the loop runs until the
gamma-contraction bound ``gamma |V_k - V_{k-1}| / (1 - gamma)`` is below 1e-15 of the value scale, far past
anything float64 resolves. The bound holds from any start, so a caller may start from a float64 answer to
save iterations without making the reference depend on it.
"""

from __future__ import annotations

import numpy as np


def extended_soft_values(mdp, log_ref: np.ndarray, beta: float, start: np.ndarray | None = None,
                         max_iter: int = 400_000) -> tuple[np.ndarray, np.ndarray]:
    """``(Q*, V*)`` in ``np.longdouble``; raises AssertionError if ``max_iter`` steps are not enough."""
    ld = np.longdouble
    P, g, b = mdp.P.astype(ld), ld(mdp.gamma), ld(beta)
    base = log_ref.astype(ld) + mdp.R.astype(ld) / b
    V = np.zeros(mdp.n_states, dtype=ld) if start is None else np.asarray(start).astype(ld)
    for _ in range(max_iter):
        x = base + (g / b) * (P @ V)
        m = x.max(axis=1)
        V_new = b * (m + np.log(np.exp(x - m[:, None]).sum(axis=1)))
        change = np.abs(V_new - V).max()
        V = V_new
        if g / (1 - g) * change < 1e-15 * max(ld(1), np.abs(V).max()):
            return mdp.R.astype(ld) + g * (P @ V), V
    raise AssertionError("the extended-precision reference did not converge")
