"""Simulating participants: one choice rule shared by strategies and theories.

A model gives each (left, right) stimulus a *score* in [-1, 1] (positive favours the left
option). With per-participant softmax sensitivity ``beta``, lapse ``eps`` and history weight
``kappa``, the probability of choosing left on a trial is

    P(left) = (1 - eps) * sigmoid(beta * score + kappa * h) + eps / 2,

where ``h`` is +1 if the previous response was "left", -1 if "right", 0 on the first trial.
``kappa = 0`` models are static and are simulated in one vectorised step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from divelab.science.autocog.task import Design, Task, Trials, trial_sequences


@runtime_checkable
class ChoiceModel(Protocol):
    """Anything that can be simulated: a canonical strategy or a theory from the grammar."""

    name: str

    def draw(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Per-participant parameters: ``beta``, ``eps``, ``kappa`` and any the score needs."""
        ...

    def score(self, params: dict[str, np.ndarray], left: np.ndarray, right: np.ndarray,
              task: Task) -> np.ndarray:
        """Scores in [-1, 1] of shape ``left.shape[:-1]``; params broadcast over the first axis."""
        ...


@dataclass
class Data:
    """Responses of ``n`` participants to one design."""

    design: Design
    trials: Trials
    chose_left: np.ndarray  # (n, T) bool

    @property
    def chose_a(self) -> np.ndarray:
        """(n, T) bool: chose option A as designed (undoing the side counterbalancing)."""
        return self.chose_left ^ self.trials.swapped

    @property
    def n(self) -> int:
        return int(self.chose_left.shape[0])

    def to_dict(self) -> dict:
        return {"pair": self.trials.pair.tolist(), "swapped": self.trials.swapped.astype(int).tolist(),
                "chose_left": self.chose_left.astype(int).tolist()}

    @classmethod
    def from_dict(cls, design: Design, d: dict) -> Data:
        pair = np.asarray(d["pair"], dtype=int).reshape(len(d["pair"]), -1)
        swapped = np.asarray(d["swapped"], dtype=bool).reshape(pair.shape)
        return cls(design, Trials(pair, swapped, design.array),
                   np.asarray(d["chose_left"], dtype=bool).reshape(pair.shape))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def choice_prob(params: dict[str, np.ndarray], score: np.ndarray, h: np.ndarray | float = 0.0) -> np.ndarray:
    """P(left) from a score, with the lapse and history terms (``params`` of shape (n,))."""
    beta, eps, kappa = (np.asarray(params[k], dtype=float) for k in ("beta", "eps", "kappa"))
    extra = (1,) * (np.ndim(score) - 1)
    beta, eps, kappa = (x.reshape(x.shape + extra) for x in (beta, eps, kappa))
    return (1.0 - eps) * _sigmoid(beta * score + kappa * h) + eps / 2.0


def simulate(model: ChoiceModel, design: Design, n: int, rng: np.random.Generator) -> Data:
    """``n`` participants drawn from ``model`` respond to ``design``."""
    if n < 1:
        raise ValueError(f"need at least one participant, got n={n}")
    trials = trial_sequences(design, n, rng)
    params = model.draw(n, rng)
    if getattr(model, "shared_score", False):
        # the score depends on the stimulus only: compute it once per pair and orientation
        arr = trials.pairs_array.astype(float)
        s_ab = np.asarray(model.score(params, arr[:, 0], arr[:, 1], design.task), dtype=float)
        s_ba = np.asarray(model.score(params, arr[:, 1], arr[:, 0], design.task), dtype=float)
        score = np.where(trials.swapped, s_ba[trials.pair], s_ab[trials.pair])
    else:
        score = np.asarray(model.score(params, trials.left, trials.right, design.task), dtype=float)
    u = rng.random(score.shape)
    kappa = np.asarray(params["kappa"], dtype=float)
    if not np.any(kappa != 0):
        chose = u < choice_prob(params, score)
        return Data(design, trials, chose)
    chose = np.zeros(score.shape, dtype=bool)
    beta, eps = np.asarray(params["beta"], dtype=float), np.asarray(params["eps"], dtype=float)
    bs = beta[:, None] * score
    h = np.zeros(n)
    for t in range(score.shape[1]):  # the same rule as choice_prob, unrolled for speed
        p = (1.0 - eps) * 0.5 * (1.0 + np.tanh(0.5 * (bs[:, t] + kappa * h))) + eps / 2.0
        c = u[:, t] < p
        chose[:, t] = c
        h = 2.0 * c - 1.0
    return Data(design, trials, chose)


def static_prob_a(model: ChoiceModel, pairs: np.ndarray, task: Task, n_draws: int,
                  rng: np.random.Generator) -> np.ndarray:
    """Mean P(choose A) per pair over ``n_draws`` parameter draws, A on the left, no history."""
    pairs = np.asarray(pairs)
    params = model.draw(n_draws, rng)
    left = np.broadcast_to(pairs[None, :, 0], (n_draws, *pairs[:, 0].shape))
    right = np.broadcast_to(pairs[None, :, 1], (n_draws, *pairs[:, 1].shape))
    s = np.asarray(model.score(params, left, right, task), dtype=float)
    return choice_prob(params, s).mean(axis=0)
