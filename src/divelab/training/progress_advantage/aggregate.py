"""Token and step aggregations of the progress advantage, and failure localisation.

A step's score is ``beta * (agg_tok(logp_policy) - agg_tok(logp_reference))`` over the step's action
tokens; a trajectory's score is ``agg_step`` over its step scores. The paper tunes both choices per
backbone and task, so every one is offered here and the reproduction reports all of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

TOKEN_AGGREGATIONS = ("mean", "sum", "last", "min", "max")
STEP_AGGREGATIONS = ("mean", "sum", "last", "min", "max", "bottom10")


def _check(name: str, allowed: tuple[str, ...], kind: str) -> str:
    if name not in allowed:
        raise ValueError(f"unknown {kind} aggregation {name!r}; allowed: {', '.join(allowed)}")
    return name


def aggregate_tokens(values: Sequence[float] | np.ndarray, how: str = "mean") -> float:
    """One number from a step's per-token values (``mean``, ``sum``, ``last``, ``min``, ``max``)."""
    _check(how, TOKEN_AGGREGATIONS, "token")
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        raise ValueError("cannot aggregate an empty action span (a step must have at least one token)")
    if how == "mean":
        return float(v.mean())
    if how == "sum":
        return float(v.sum())
    if how == "last":
        return float(v[-1])
    if how == "min":
        return float(v.min())
    return float(v.max())


def bottom_fraction_mean(values: Sequence[float] | np.ndarray, fraction: float = 0.1) -> float:
    """Mean of the lowest ``ceil(fraction * n)`` values (at least one): the worst steps dominate."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    v = np.sort(np.asarray(values, dtype=np.float64))
    if v.size == 0:
        raise ValueError("cannot aggregate an empty trajectory (no steps)")
    k = max(1, math.ceil(fraction * v.size))
    return float(v[:k].mean())


def aggregate_steps(values: Sequence[float] | np.ndarray, how: str = "mean") -> float:
    """One trajectory score from its step scores (``mean``, ``sum``, ``last``, ``min``, ``max``,
    ``bottom10`` = mean of the lowest 10% of steps, at least one)."""
    _check(how, STEP_AGGREGATIONS, "step")
    if how == "bottom10":
        return bottom_fraction_mean(values, 0.1)
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        raise ValueError("cannot aggregate an empty trajectory (no steps)")
    return aggregate_tokens(v, how)


def failure_step(step_scores: Sequence[float] | np.ndarray) -> int:
    """The step blamed for a failure: the index minimising the running sum of step advantages.

    The running sum is the progress made so far; its minimum is where progress bottomed out, so
    the step that drove it there is where things went wrong. Ties go to the earliest step.
    """
    v = np.asarray(step_scores, dtype=np.float64)
    if v.size == 0:
        raise ValueError("cannot localise a failure in an empty trajectory (no steps)")
    return int(np.argmin(np.cumsum(v)))


def best_of_n(scores: Sequence[float] | np.ndarray) -> int:
    """Index of the highest-scoring candidate (ties go to the first)."""
    v = np.asarray(scores, dtype=np.float64)
    if v.size == 0:
        raise ValueError("best_of_n needs at least one candidate score")
    if np.isnan(v).any():
        raise ValueError("best_of_n got a NaN score")
    return int(np.argmax(v))


def auroc(scores: Sequence[float] | np.ndarray, labels: Sequence[bool] | np.ndarray) -> float:
    """Area under the ROC curve of ``scores`` for binary ``labels`` (ties count one half).

    Equal to the probability that a random positive outscores a random negative; computed by
    :func:`divelab.stats.auroc` (scikit-learn), with the arguments in this module's order.
    """
    from divelab import stats

    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    if s.shape != y.shape:
        raise ValueError(f"scores and labels differ in shape: {s.shape} vs {y.shape}")
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"AUROC needs both classes; got {n_pos} positives and {n_neg} negatives")
    return stats.auroc(y.astype(int), s)
