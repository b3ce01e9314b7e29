"""A comparative claim is judged against the strongest baseline measured in the same run.

A method can look good against a weak alternative while a stronger one, measured in the very same
run, ties or wins. :func:`against_strongest` takes the method's per-unit scores and every
baseline's, picks the strongest baseline by its mean, and returns the effect of the method over it
with an interval over the units (paired by unit, or clustered when units sit inside tasks). The
result fills a :class:`~divelab.claims.Claim`'s ``baselines``, ``better`` and ``compared_with``, so
the saved claim shows every baseline and a test can check the verdict used the strongest.

    >>> cmp = against_strongest([0.9, 0.8, 0.7], {"random": [0.1, 0.2, 0.3], "kNN": [0.8, 0.8, 0.6]})
    >>> cmp.strongest
    'kNN'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from divelab import stats
from divelab.claims import strongest


@dataclass(frozen=True)
class Comparison:
    effect: float  # method minus the strongest baseline, in the scores' unit
    ci: tuple[float, float]
    strongest: str
    better: str  # "higher" | "lower"
    baselines: list[dict[str, Any]] = field(default_factory=list)
    mde: float | None = None  # the smallest effect this design detects with 80 % power (stats.mde_two_sample)

    @property
    def expected_sign(self) -> int:
        """The sign the effect has when the method wins: pass to ``verdicts.direction``."""
        return 1 if self.better == "higher" else -1

    def claim_fields(self, *, measures_effect: bool = True) -> dict[str, Any]:
        """``baselines``, ``better``, ``compared_with`` and ``mde`` for a Claim(...). ``mde`` is in the unit of
        ``effect``: pass ``measures_effect=False`` when the claim's ``measured`` is something else (a ratio, a
        share derived from it), and the claim reads its detectable effect off its own interval instead."""
        fields = {"baselines": self.baselines, "better": self.better, "compared_with": self.strongest}
        return {**fields, "mde": self.mde} if measures_effect else fields


def baseline_records(baselines: Mapping[str, Sequence[float] | float], *, seed: int = 0,
                     interval: str = "bootstrap") -> list[dict[str, Any]]:
    """``{"name", "value", "ci"}`` per baseline; a bare number (one exact value) has no interval.
    ``interval="t"``: a Student-t interval of the mean (a handful of seeds) instead of a bootstrap."""
    out = []
    for name, x in baselines.items():
        a = np.atleast_1d(np.asarray(x, dtype=float))
        ci = None if a.size < 2 else stats.mean_ci(a) if interval == "t" else stats.bootstrap_ci(a, seed=seed)
        out.append({"name": str(name), "value": float(a.mean()), "ci": list(ci) if ci else None})
    return out


def against_strongest(method: Sequence[float], baselines: Mapping[str, Sequence[float]], *,
                      better: str = "higher", paired: bool = True, clusters: Sequence[object] | None = None,
                      interval: str = "bootstrap", seed: int = 0) -> Comparison:
    """The method's effect over the strongest baseline, with its interval.

    ``method`` and each baseline are per-unit scores (a unit: a seed, a task, a prompt). ``paired``
    uses a paired interval (the units are the same for every arm); ``clusters`` gives each unit's
    cluster (e.g. its task) for a cluster bootstrap; otherwise the arms are independent samples.
    ``interval="t"`` makes the paired interval a Student-t one: for a handful of units (training
    seeds), where a bootstrap over three values is far too narrow.
    """
    if better not in ("higher", "lower"):
        raise ValueError(f"better must be 'higher' or 'lower', got {better!r}")
    if not baselines:
        raise ValueError("against_strongest() needs at least one baseline")
    if interval not in ("bootstrap", "t"):
        raise ValueError(f"interval must be 'bootstrap' or 't', got {interval!r}")
    records = baseline_records(baselines, seed=seed, interval=interval)
    best = strongest(records, better)["name"]
    m, b = np.asarray(method, dtype=float), np.asarray(baselines[best], dtype=float)
    if clusters is not None:
        effect, lo, hi = stats.cluster_diff_ci(m, b, clusters, seed=seed)
        # the clusters are the independent units: the design's power is that of their mean differences
        keys = np.asarray([str(c) for c in clusters])
        per = np.array([(m[keys == k] - b[keys == k]).mean() for k in dict.fromkeys(keys)])
        mde = stats.mde_two_sample(float(np.std(per, ddof=1)), per.size) if per.size > 1 else float("inf")
    elif paired:
        if m.shape != b.shape:
            raise ValueError(f"paired comparison: method has {m.size} units, {best!r} has {b.size}")
        effect, lo, hi = stats.paired_diff_ci(m, b, method=interval, seed=seed)
        mde = stats.mde_two_sample(float(np.std(m - b, ddof=1)), m.size) if m.size > 1 else float("inf")
    else:
        effect, lo, hi = stats.diff_ci(m, b, seed=seed)
        n = min(m.size, b.size)
        pooled = float(np.sqrt((np.var(m, ddof=1) + np.var(b, ddof=1)) / 2)) if n > 1 else 0.0
        mde = stats.mde_two_sample(pooled, n, paired=False) if n > 1 else float("inf")
    return Comparison(float(effect), (float(lo), float(hi)), best, better, records, mde)
