"""The cliff test, as the authors' code defines it: a one-sided two-proportion z-test with an unpooled SE.

With ``k_prev`` and ``k_curr`` successes out of ``N`` continuations at two consecutive (computed) prefixes,
``p = k/N``::

    drop = p_prev - p_curr
    SE   = sqrt(p_prev (1 - p_prev) / N + p_curr (1 - p_curr) / N)
    cliff  iff  drop > delta0 + z_alpha * SE            (delta0 = 0.1, alpha = 0.05 -> z = 1.645)

Near p = 0.5 the binomial noise is largest, so the drop needed to call a cliff is largest there. Like the
authors' code, the test is a precomputed ``(N+1) x (N+1)`` boolean matrix ``M[k_prev, k_curr]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.stats import norm

DELTA0 = 0.1
ALPHA = 0.05


def z_alpha(alpha: float = ALPHA) -> float:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return float(norm.ppf(1 - alpha))


def _check_n(n: int) -> None:
    if int(n) != n or n < 1:
        raise ValueError(f"N (continuations per prefix) must be a positive integer, got {n}")


def is_cliff(k_prev: int, k_curr: int, n: int, delta0: float = DELTA0, alpha: float = ALPHA) -> bool:
    """The test for one pair of counts, computed directly from the formula."""
    _check_n(n)
    for name, k in (("k_prev", k_prev), ("k_curr", k_curr)):
        if not 0 <= k <= n:
            raise ValueError(f"{name} must be in [0, N={n}], got {k}")
    pp, pc = k_prev / n, k_curr / n
    se = np.sqrt(pp * (1 - pp) / n + pc * (1 - pc) / n)
    return bool(pp - pc > delta0 + z_alpha(alpha) * se)


@lru_cache(maxsize=32)
def _matrix(n: int, delta0: float, alpha: float) -> np.ndarray:
    p = np.arange(n + 1) / n
    pp, pc = p[:, None], p[None, :]
    se = np.sqrt(pp * (1 - pp) / n + pc * (1 - pc) / n)
    m = (pp - pc) > delta0 + z_alpha(alpha) * se
    m.setflags(write=False)
    return m


def cliff_matrix(n: int, delta0: float = DELTA0, alpha: float = ALPHA) -> np.ndarray:
    """``M[k_prev, k_curr]``: True where the drop from ``k_prev/N`` to ``k_curr/N`` is a cliff."""
    _check_n(n)
    if delta0 < 0:
        raise ValueError(f"delta0 must be >= 0, got {delta0}")
    return _matrix(int(n), float(delta0), float(alpha))


def required_drop(p_prev: float, n: int, delta0: float = DELTA0, alpha: float = ALPHA) -> float:
    """The smallest ``k_prev/N - k_curr/N`` that is a cliff from ``k_prev = round(p_prev N)`` (inf if none)."""
    m = cliff_matrix(n, delta0, alpha)
    kp = int(round(p_prev * n))
    hits = np.flatnonzero(m[kp])
    return float("inf") if hits.size == 0 else (kp - int(hits.max())) / n


@dataclass(frozen=True)
class CliffSpan:
    """A cliff between two consecutive computed prefixes: tokens ``start+1 .. end`` (1-based response tokens).

    With dense potentials (every token) ``start + 1 == end`` and ``end`` is the cliff token itself.
    """

    start: int
    end: int
    k_prev: int
    k_curr: int

    @property
    def token(self) -> int:
        """The (1-based) cliff token; for a sparse span, its last token."""
        return self.end


def find_cliffs(ks: Sequence[int | None], n: int, delta0: float = DELTA0, alpha: float = ALPHA) -> list[CliffSpan]:
    """Cliffs along one trace. ``ks[t]`` = successes after response token ``t`` (``ks[0]``: the prompt alone);
    ``None`` marks a prefix that was not computed (sparse or stopped early): consecutive non-null prefixes are
    compared, as in the authors' code."""
    m = cliff_matrix(n, delta0, alpha)
    out: list[CliffSpan] = []
    prev: int | None = None
    for t, k in enumerate(ks):
        if k is None:
            continue
        if not 0 <= k <= n:
            raise ValueError(f"ks[{t}] = {k} is outside [0, N={n}]")
        if prev is not None and m[ks[prev], k]:
            out.append(CliffSpan(prev, t, int(ks[prev]), int(k)))
        prev = t
    return out
