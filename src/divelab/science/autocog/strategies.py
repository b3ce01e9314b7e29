"""Ground-truth decision strategies for simulated participants, each written out directly.

These are the *participants* whose strategy the loop must recover; they are deliberately coded
independently of the theory grammar (:mod:`.theory`), so the "dial" claim — that the grammar's
limits equal these strategies — compares two implementations.

Scores are in [-1, 1] (positive favours the left option) and normalised over the cues that
discriminate, so one softmax sensitivity ``beta`` means the same thing for every strategy:

- ``ttb`` take-the-best: the sign of the first discriminating cue, in descending validity.
- ``tallying``: (#cues favouring left - #cues favouring right) / #discriminating cues.
- ``wadd``: validity-weighted mean rating difference / rating_max over discriminating cues.
- ``drwadd`` diminishing-returns WADD: as WADD on utilities u(x) = (x + 1)^alpha, 0 < alpha < 1,
  rescaled by u(R) - u(0) (the paper's u; the rescaling only changes beta's unit).
- ``ttw`` take-the-worst: the first discriminating cue in *ascending* validity (non-canonical).
- ``perseveration``: ignores the cues and repeats its last response (kappa > 0; non-canonical).
- ``random``: a coin flip (the noise control).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from divelab.science.autocog.task import Task

Range = tuple[float, float]


def _ttb_score(left: np.ndarray, right: np.ndarray, order: np.ndarray) -> np.ndarray:
    out = np.zeros(left.shape[:-1])
    decided = np.zeros(left.shape[:-1], dtype=bool)
    for i in order:  # cues in the search order; stop at the first that discriminates
        d = np.sign(left[..., i] - right[..., i])
        take = (~decided) & (d != 0)
        out = np.where(take, d, out)
        decided |= take
    return out


def ttb(left: np.ndarray, right: np.ndarray, task: Task, **_: np.ndarray) -> np.ndarray:
    return _ttb_score(left, right, np.argsort(-task.v, kind="stable"))


def ttw(left: np.ndarray, right: np.ndarray, task: Task, **_: np.ndarray) -> np.ndarray:
    return _ttb_score(left, right, np.argsort(task.v, kind="stable"))


def tallying(left: np.ndarray, right: np.ndarray, task: Task, **_: np.ndarray) -> np.ndarray:
    d = np.sign(left - right)
    n_disc = np.sum(d != 0, axis=-1)
    return np.where(n_disc > 0, d.sum(axis=-1) / np.maximum(n_disc, 1), 0.0)


def wadd(left: np.ndarray, right: np.ndarray, task: Task, **_: np.ndarray) -> np.ndarray:
    diff = (left - right) / task.rating_max
    w = task.v * (diff != 0)
    tot = w.sum(axis=-1)
    return np.where(tot > 0, (w * diff).sum(axis=-1) / np.where(tot > 0, tot, 1.0), 0.0)


def drwadd(left: np.ndarray, right: np.ndarray, task: Task, *, alpha: np.ndarray,
           **_: np.ndarray) -> np.ndarray:
    a = np.asarray(alpha, dtype=float)  # a scalar, or broadcastable against left (e.g. (n, 1, 1))
    R = task.rating_max
    u = lambda x: (x + 1.0) ** a  # noqa: E731  (the paper's utility)
    diff = (u(left) - u(right)) / (u(float(R)) - 1.0)
    w = task.v * (left != right)
    tot = w.sum(axis=-1)
    return np.where(tot > 0, (w * diff).sum(axis=-1) / np.where(tot > 0, tot, 1.0), 0.0)


def no_cues(left: np.ndarray, right: np.ndarray, task: Task, **_: np.ndarray) -> np.ndarray:
    return np.zeros(left.shape[:-1])


@dataclass(frozen=True)
class Strategy:
    """A ground-truth strategy with per-participant parameter ranges (uniform draws)."""

    name: str
    beta: Range = (4.0, 12.0)
    eps: Range = (0.0, 0.1)
    kappa: Range = (0.0, 0.0)
    alpha: Range = (1.0, 1.0)
    canonical: bool = True
    description: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.name not in SCORES:
            raise ValueError(f"unknown strategy {self.name!r}; allowed: {', '.join(SCORES)}")

    @property
    def shared_score(self) -> bool:
        """Whether the score depends on the stimulus only (DR-WADD's alpha is drawn per participant)."""
        return self.name != "drwadd"

    def draw(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {k: rng.uniform(*getattr(self, k), size=n) for k in ("beta", "eps", "kappa", "alpha")}

    def score(self, params: dict[str, np.ndarray], left: np.ndarray, right: np.ndarray,
              task: Task) -> np.ndarray:
        if self.name == "drwadd":
            a = np.asarray(params["alpha"], dtype=float)
            a = a.reshape(a.shape + (1,) * (left.ndim - 1))  # (n, 1, ..., 1) against (n, T, F)
            return drwadd(left, right, task, alpha=a)
        return SCORES[self.name](left, right, task)


SCORES = {"ttb": ttb, "tallying": tallying, "wadd": wadd, "drwadd": drwadd, "ttw": ttw,
          "perseveration": no_cues, "random": no_cues}

STRATEGIES: dict[str, Strategy] = {
    "ttb": Strategy("ttb", description="take-the-best"),
    "tallying": Strategy("tallying", description="tallying (unit weights, signs)"),
    "wadd": Strategy("wadd", description="weighted additive"),
    "drwadd": Strategy("drwadd", alpha=(0.2, 0.5), description="diminishing-returns WADD, u=(x+1)^alpha"),
    "ttw": Strategy("ttw", canonical=False, description="take-the-worst"),
    "perseveration": Strategy("perseveration", kappa=(1.5, 2.5), canonical=False,
                              description="repeats its last key press, ignores the cues"),
    "random": Strategy("random", eps=(1.0, 1.0), canonical=False, description="coin flip"),
}


def get_strategy(name: str) -> Strategy:
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; allowed: {', '.join(STRATEGIES)}")
    return STRATEGIES[name]
