"""The task: choose between two products A and B rated by experts of known validity.

Each option has ``n_features`` integer ratings in ``0..rating_max`` (one per expert); the experts'
validities (in [0.5, 1]) are shown to participants. A *design* is a small set of unique pairs,
each repeated ``K = max(1, n_trials // n_pairs)`` times in a random order per participant (the
Hilbig & Moshagen protocol the paper follows, ~96 trials). Sides are counterbalanced: each trial
shows the pair as designed or mirrored with probability 1/2, so "repeat the last key" (a history
strategy) is not confounded with "choose the same product".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class Task:
    """Validities of the experts (one per feature) and the rating scale."""

    validities: tuple[float, ...] = (0.9, 0.8, 0.7, 0.6)
    rating_max: int = 10

    def __post_init__(self) -> None:
        v = np.asarray(self.validities, dtype=float)
        if v.ndim != 1 or v.size < 2:
            raise ValueError(f"need at least 2 validities, got {self.validities!r}")
        if np.any(v < 0.5) or np.any(v > 1.0):
            raise ValueError(f"validities must lie in [0.5, 1], got {self.validities!r}")
        if int(self.rating_max) < 1:
            raise ValueError(f"rating_max must be >= 1, got {self.rating_max!r}")

    @property
    def n_features(self) -> int:
        return len(self.validities)

    @property
    def v(self) -> np.ndarray:
        return np.asarray(self.validities, dtype=float)

    def to_dict(self) -> dict:
        return {"validities": list(self.validities), "rating_max": int(self.rating_max)}

    @classmethod
    def from_dict(cls, d: dict) -> Task:
        return cls(tuple(float(x) for x in d["validities"]), int(d["rating_max"]))


@dataclass(frozen=True)
class Design:
    """Unique pairs (``pairs[k] = (A ratings, B ratings)``) and the trial count per participant."""

    task: Task
    pairs: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]
    n_trials: int = 96
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.pairs:
            raise ValueError("a design needs at least one pair")
        F, R = self.task.n_features, self.task.rating_max
        for k, (a, b) in enumerate(self.pairs):
            if len(a) != F or len(b) != F:
                raise ValueError(f"pair {k}: each option needs {F} ratings, got {len(a)} and {len(b)}")
            for x in (*a, *b):
                if not (0 <= int(x) <= R) or int(x) != x:
                    raise ValueError(f"pair {k}: ratings must be integers in 0..{R}, got {x!r}")
            if tuple(a) == tuple(b):
                raise ValueError(f"pair {k}: options A and B are identical ({list(a)})")
        if self.n_trials < 1:
            raise ValueError(f"n_trials must be >= 1, got {self.n_trials}")

    @classmethod
    def from_arrays(cls, task: Task, pairs: np.ndarray, n_trials: int = 96, label: str = "") -> Design:
        p = np.asarray(pairs, dtype=int)
        return cls(task, tuple((tuple(int(x) for x in row[0]), tuple(int(x) for x in row[1])) for row in p),
                   n_trials=n_trials, label=label)

    @cached_property
    def array(self) -> np.ndarray:
        """``(n_pairs, 2, n_features)`` ratings (read-only)."""
        a = np.asarray(self.pairs, dtype=int)
        a.flags.writeable = False
        return a

    @property
    def repeats(self) -> int:
        return max(1, self.n_trials // len(self.pairs))

    def to_dict(self) -> dict:
        return {"task": self.task.to_dict(), "pairs": [[list(a), list(b)] for a, b in self.pairs],
                "n_trials": self.n_trials, "label": self.label}

    @classmethod
    def from_dict(cls, d: dict) -> Design:
        return cls.from_arrays(Task.from_dict(d["task"]), np.asarray(d["pairs"]), int(d["n_trials"]),
                               d.get("label", ""))


@dataclass
class Trials:
    """The trial sequences of ``n`` participants: what they saw, in order."""

    pair: np.ndarray  # (n, T) index into design.pairs
    swapped: np.ndarray  # (n, T) bool: shown mirrored (B on the left)
    pairs_array: np.ndarray  # (n_pairs, 2, F) the design's pairs

    @property
    def left(self) -> np.ndarray:
        """(n, T, F) ratings of the option shown on the left."""
        a, b = self.pairs_array[self.pair, 0], self.pairs_array[self.pair, 1]
        return np.where(self.swapped[..., None], b, a)

    @property
    def right(self) -> np.ndarray:
        a, b = self.pairs_array[self.pair, 0], self.pairs_array[self.pair, 1]
        return np.where(self.swapped[..., None], a, b)


def trial_sequences(design: Design, n: int, rng: np.random.Generator) -> Trials:
    """Each participant sees every pair ``repeats`` times in a random order, sides counterbalanced."""
    base = np.repeat(np.arange(len(design.pairs)), design.repeats)
    order = base[np.argsort(rng.random((n, base.size)), axis=1)]  # an independent shuffle per participant
    swapped = rng.random(order.shape) < 0.5
    return Trials(order, swapped, design.array)


def candidate_pool(task: Task, n_random: int, rng: np.random.Generator) -> np.ndarray:
    """Candidate pairs for the design optimiser: random pairs plus structured conflict pairs.

    Structured pairs put one large rating on one cue against moderate ratings spread over the
    others (``[R,0,0,0]`` vs ``[0,k,k,k]``: where linear and concave utilities disagree) and the
    best cue against a majority (``[1,0,0,0]`` vs ``[0,1,1,1]`` scaled: where TTB and tallying
    disagree). Returns unique ``(m, 2, F)`` pairs with A != B.
    """
    F, R = task.n_features, task.rating_max
    out = [rng.integers(0, R + 1, size=(n_random, 2, F))]
    struct = []
    for c in range(F):
        for k in range(1, R + 1):
            a = np.zeros(F, int)
            a[c] = R
            b = np.full(F, k)
            b[c] = 0
            struct.append((a, b))
            lo = max(0, R // 2 - 1)
            for hi in range(lo + 1, R + 1):
                a2 = np.full(F, lo)
                a2[c] = hi
                b2 = np.full(F, min(R, lo + 1))
                b2[c] = max(0, hi - k)
                struct.append((a2, b2))
    out.append(np.asarray(struct, dtype=int))
    pool = np.concatenate(out)
    pool = pool[np.any(pool[:, 0] != pool[:, 1], axis=1)]
    _, idx = np.unique(pool.reshape(len(pool), -1), axis=0, return_index=True)
    return pool[np.sort(idx)]
