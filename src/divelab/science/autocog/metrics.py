"""Behavioural metrics: what counts as evidence about a theory.

A metric maps one experiment's data to one value per participant (``NaN`` where it is undefined
for the design, e.g. a design with no conflict trials). The library (``LIBRARY``) is fixed; the
*adaptive* metrics are built from the two theories being compared (``prefers``: on trials where
the theories' predictions fall on opposite sides of 1/2, how often does a participant choose
the option theory X prefers?), the programmatic stand-in for the paper's LLM-proposed metrics.

:func:`jsd` is the fixed-distance ablation: the Jensen–Shannon divergence between per-pair choice
distributions (it cannot see anything sequential, such as perseveration).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from divelab.science.autocog import strategies as S
from divelab.science.autocog.simulate import Data, static_prob_a
from divelab.science.autocog.task import Design
from divelab.science.autocog.theory import Theory


@dataclass(frozen=True)
class Metric:
    name: str
    fn: Callable[[Data], np.ndarray]
    spec: dict

    def __call__(self, data: Data) -> np.ndarray:
        return np.asarray(self.fn(data), dtype=float)


def _pair_scores(design: Design, rule: Callable) -> np.ndarray:
    arr = design.array.astype(float)
    return rule(arr[:, 0], arr[:, 1], design.task)


def _follow_rate(data: Data, favoured_a: np.ndarray, mask_pairs: np.ndarray) -> np.ndarray:
    """Per participant: fraction of trials on ``mask_pairs`` where the ``favoured_a`` option was chosen."""
    trial_mask = mask_pairs[data.trials.pair]
    if not trial_mask.any():
        return np.full(data.n, np.nan)
    follow = data.chose_a == favoured_a[data.trials.pair]
    return np.where(trial_mask, follow, 0).sum(axis=1) / trial_mask.sum(axis=1)


def _consistency(rule: Callable) -> Callable[[Data], np.ndarray]:
    def fn(data: Data) -> np.ndarray:
        s = _pair_scores(data.design, rule)
        return _follow_rate(data, s > 0, s != 0)
    return fn


def _conflict_ttb(data: Data) -> np.ndarray:
    t = _pair_scores(data.design, S.ttb)
    y = _pair_scores(data.design, S.tallying)
    return _follow_rate(data, t > 0, (t != 0) & (y != 0) & (np.sign(t) != np.sign(y)))


def _repeat_rate(data: Data) -> np.ndarray:
    c = data.chose_left
    if c.shape[1] < 2:
        return np.full(data.n, np.nan)
    return (c[:, 1:] == c[:, :-1]).mean(axis=1)


LIBRARY: dict[str, Metric] = {
    "ttb_consistency": Metric("ttb_consistency", _consistency(S.ttb), {"kind": "library", "name": "ttb_consistency"}),
    "tallying_consistency": Metric("tallying_consistency", _consistency(S.tallying),
                                   {"kind": "library", "name": "tallying_consistency"}),
    "wadd_consistency": Metric("wadd_consistency", _consistency(S.wadd),
                               {"kind": "library", "name": "wadd_consistency"}),
    "conflict_ttb_rate": Metric("conflict_ttb_rate", _conflict_ttb, {"kind": "library", "name": "conflict_ttb_rate"}),
    "repeat_rate": Metric("repeat_rate", _repeat_rate, {"kind": "library", "name": "repeat_rate"}),
}


def prefers(x: Theory, y: Theory, margin: float = 0.05, n_draws: int = 200) -> Metric:
    """Adaptive metric: on pairs where X and Y predict opposite choices, the rate of choosing X's option."""
    memo: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}

    def fn(data: Data) -> np.ndarray:
        k = (data.design.task, data.design.pairs)
        if k not in memo:  # the theories' predictions depend on the design only
            rng = np.random.default_rng(12345)
            px = static_prob_a(x, data.design.array, data.design.task, n_draws, rng)
            py = static_prob_a(y, data.design.array, data.design.task, n_draws, rng)
            memo[k] = (px > 0.5, ((px - 0.5) * (py - 0.5) < 0) & (np.abs(px - py) > margin))
        favoured, split = memo[k]
        return _follow_rate(data, favoured, split)
    name = f"prefers[{x.name} vs {y.name}]"
    return Metric(name, fn, {"kind": "prefers", "x": x.to_dict(), "y": y.to_dict(), "margin": margin})


def metric_from_spec(spec: dict) -> Metric:
    kind = spec.get("kind")
    if kind == "library":
        if spec.get("name") not in LIBRARY:
            raise ValueError(f"unknown library metric {spec.get('name')!r}; allowed: {', '.join(LIBRARY)}")
        return LIBRARY[spec["name"]]
    if kind == "prefers":
        return prefers(Theory.from_dict(spec["x"]), Theory.from_dict(spec["y"]), spec.get("margin", 0.05))
    raise ValueError(f"unknown metric kind {kind!r}; allowed: library, prefers")


def pair_rates(data: Data) -> np.ndarray:
    """Pooled P(choose A) per design pair."""
    n_pairs = len(data.design.pairs)
    hits = np.bincount(data.trials.pair.ravel(), weights=data.chose_a.ravel().astype(float), minlength=n_pairs)
    counts = np.bincount(data.trials.pair.ravel(), minlength=n_pairs)
    return hits / np.maximum(counts, 1)


def jsd(p: np.ndarray, q: np.ndarray) -> float:
    """Mean over pairs of the Jensen–Shannon divergence (nats) between Bernoulli(p) and Bernoulli(q)."""
    from scipy.spatial.distance import jensenshannon

    P = np.stack([p, 1 - p], axis=0)
    Q = np.stack([q, 1 - q], axis=0)
    return float(np.mean(jensenshannon(P, Q, axis=0) ** 2))
