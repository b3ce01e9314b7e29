"""Theories as executable programs in a small grammar for multi-cue two-option choice.

A :class:`Theory` is a point in a grammar of cue-based choice rules; its ``score`` is the
predict function (with :func:`.simulate.choice_prob` it gives choice probabilities), and its
parameter *ranges* are sampled per simulated participant (the loop never fits them). Terms:

- ``cue_use``: whether the cues are used at all (off: a pure history / noise model);
- ``order``: search/weight cues from the best (``"best"``) or the worst (``"worst"``) validity;
- ``gamma``: validity power, weights ``w_i = (v_i / v_max) ** gamma`` (0 = unit weights);
- ``alpha``: magnitude exponent, utilities ``u(x) = (x + 1) ** alpha`` (1 = linear; < 1 = diminishing);
- ``tau``: difference exponent, ``d_i = sign(du_i) * |du_i| ** tau`` (0 = signs only: the tallying switch);
- ``lexicographic``: decide by the first discriminating cue (the TTB switch) instead of the
  weighted mean ``sum_i w_i d_i / sum_i w_i`` over discriminating cues;
- ``kappa``: history term, the weight of "repeat the last response";
- ``beta``, ``eps``: softmax sensitivity and lapse.

The dial: (gamma=1, tau=1, alpha=1) is WADD, (gamma=0, tau=0) is tallying, and gamma -> inf with
tau=0 is take-the-best (``lexicographic=True`` is that limit, reached exactly); alpha < 1 is
diminishing-returns WADD. :func:`neighbours` is the reviser's local move set.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace

import numpy as np

from divelab.science.autocog.task import Task

Range = tuple[float, float]

GAMMAS = (0.0, 1.0, 3.0, 10.0)
TAUS = (0.0, 0.5, 1.0)
ALPHAS = (0.3, 0.5, 0.7, 1.0, 1.5)
BETAS: tuple[Range, ...] = ((0.5, 2.0), (2.0, 6.0), (4.0, 12.0), (10.0, 30.0))
EPSS: tuple[Range, ...] = ((0.0, 0.1), (0.1, 0.3), (0.3, 0.6), (1.0, 1.0))
KAPPAS: tuple[Range, ...] = ((0.0, 0.0), (0.5, 1.5), (1.5, 2.5), (2.5, 4.0))
ORDERS = ("best", "worst")


def _range(x: object, name: str, lo: float, hi: float) -> Range:
    if isinstance(x, int | float):
        x = (x, x)
    try:
        a, b = (float(v) for v in x)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number or a [lo, hi] pair, got {x!r}") from None
    if not (lo <= a <= b <= hi):
        raise ValueError(f"{name} must satisfy {lo} <= lo <= hi <= {hi}, got [{a}, {b}]")
    return (a, b)


@dataclass(frozen=True)
class Theory:
    """One program of the grammar (see the module docstring for the terms)."""

    name: str = "theory"
    cue_use: bool = True
    order: str = "best"
    gamma: float = 1.0
    alpha: float = 1.0
    tau: float = 1.0
    lexicographic: bool = False
    kappa: Range = (0.0, 0.0)
    beta: Range = (4.0, 12.0)
    eps: Range = (0.0, 0.1)
    verbal: str = ""

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {self.order!r}")
        for k, lo, hi in (("gamma", 0.0, 1e4), ("alpha", 0.05, 3.0), ("tau", 0.0, 3.0)):
            v = getattr(self, k)
            if not isinstance(v, int | float) or not (lo <= float(v) <= hi):
                raise ValueError(f"{k} must be a number in [{lo}, {hi}], got {v!r}")
            object.__setattr__(self, k, float(v))
        object.__setattr__(self, "kappa", _range(self.kappa, "kappa", -10.0, 10.0))
        object.__setattr__(self, "beta", _range(self.beta, "beta", 0.0, 100.0))
        object.__setattr__(self, "eps", _range(self.eps, "eps", 0.0, 1.0))
        object.__setattr__(self, "cue_use", bool(self.cue_use))
        object.__setattr__(self, "lexicographic", bool(self.lexicographic))
        object.__setattr__(self, "_key", json.dumps(self.structure(), sort_keys=True))

    shared_score = True  # the score depends on the stimulus only (no per-participant cue parameters)

    # ---- the program
    def draw(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"beta": rng.uniform(*self.beta, size=n), "eps": rng.uniform(*self.eps, size=n),
                "kappa": rng.uniform(*self.kappa, size=n)}

    def score(self, params: dict[str, np.ndarray], left: np.ndarray, right: np.ndarray,
              task: Task) -> np.ndarray:
        left, right = np.asarray(left, dtype=float), np.asarray(right, dtype=float)
        if not self.cue_use:
            return np.zeros(left.shape[:-1])
        a, R = self.alpha, float(task.rating_max)
        du = ((left + 1.0) ** a - (right + 1.0) ** a) / ((R + 1.0) ** a - 1.0)
        d = np.sign(du) * np.abs(du) ** self.tau
        disc = left != right
        v = task.v if self.order == "best" else task.v.max() + task.v.min() - task.v
        if self.lexicographic:
            first = np.argmax(np.where(disc, v + 1e-9 * np.arange(v.size)[::-1], -np.inf), axis=-1)
            out = np.take_along_axis(d, first[..., None], axis=-1)[..., 0]
            return np.where(disc.any(axis=-1), out, 0.0)
        w = (v / v.max()) ** self.gamma * disc
        tot = w.sum(axis=-1)
        return np.where(tot > 0, (w * d).sum(axis=-1) / np.where(tot > 0, tot, 1.0), 0.0)

    # ---- identity and (de)serialisation
    def structure(self) -> dict:
        """The program without its name and verbal gloss: two theories with one structure are one theory."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in
                ((f, getattr(self, f)) for f in self.__dataclass_fields__) if k not in ("name", "verbal")}

    @property
    def key(self) -> str:
        return self._key  # type: ignore[attr-defined]

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("kappa", "beta", "eps"):
            d[k] = list(d[k])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Theory:
        allowed = set(cls.__dataclass_fields__)
        extra = set(d) - allowed
        if extra:
            raise ValueError(f"unknown theory field(s) {sorted(extra)}; allowed: {sorted(allowed)}")
        d = dict(d)
        for k in ("kappa", "beta", "eps"):
            if k in d:
                d[k] = _range(d[k], k, -100.0, 100.0)
        return cls(**d)

    def describe(self) -> str:
        if not self.cue_use:
            hist = f"repeat-last-response (kappa {self.kappa[0]:g}..{self.kappa[1]:g})" if self.kappa[1] else ""
            return hist or "coin flip"
        rule = ("lexicographic" if self.lexicographic
                else f"compensatory gamma={self.gamma:g}")
        parts = [rule, f"tau={self.tau:g}", f"alpha={self.alpha:g}", f"order={self.order}",
                 f"beta {self.beta[0]:g}..{self.beta[1]:g}", f"eps {self.eps[0]:g}..{self.eps[1]:g}"]
        if self.kappa[1]:
            parts.append(f"kappa {self.kappa[0]:g}..{self.kappa[1]:g}")
        return ", ".join(parts)

    def in_starting_family(self) -> bool:
        """Inside the TTB-tallying-WADD dial the loop starts from (linear, cue-based, no history)."""
        return (self.cue_use and self.order == "best" and self.alpha == 1.0 and self.kappa == (0.0, 0.0)
                and self.eps[1] <= 0.3)


# ---- named points of the grammar
def ttb_theory() -> Theory:
    return Theory("TTB", lexicographic=True, tau=0.0, verbal="take the best discriminating cue")


def tallying_theory() -> Theory:
    return Theory("Tallying", gamma=0.0, tau=0.0, verbal="count cues favouring each option")


def wadd_theory() -> Theory:
    return Theory("WADD", gamma=1.0, tau=1.0, verbal="validity-weighted sum of ratings")


def drwadd_theory(alpha: float = 0.5) -> Theory:
    return Theory("DR-WADD", alpha=alpha, verbal="validity-weighted sum of concave utilities (x+1)^alpha")


def coin_theory() -> Theory:
    return Theory("coin flip", cue_use=False, eps=(1.0, 1.0), verbal="choose at random")


def dial(gamma: float, tau: float, alpha: float = 1.0) -> Theory:
    """The continuous dial through TTB (gamma -> inf, tau = 0), tallying (0, 0) and WADD (1, 1)."""
    return Theory(f"dial(gamma={gamma:g}, tau={tau:g}, alpha={alpha:g})", gamma=gamma, tau=tau, alpha=alpha)


SEEDS = {
    "ttb": ttb_theory, "tallying": tallying_theory, "wadd": wadd_theory,
    # neutral seeds, inside the dial but equal to no ground truth: every recovery needs revisions
    "weighted-tally": lambda: Theory("weighted tally", gamma=1.0, tau=0.0, verbal="validity-weighted count"),
    "unit-add": lambda: Theory("unit-weight add", gamma=0.0, tau=1.0, verbal="unweighted sum of ratings"),
}


def _adjacent(grid: tuple, value: object) -> list:
    if value in grid:
        i = grid.index(value)
        return [grid[j] for j in (i - 1, i + 1) if 0 <= j < len(grid)]
    return list(grid)


def neighbours(t: Theory) -> list[Theory]:
    """Theories one local edit away: toggle one switch, or move one term to an adjacent grid value."""
    out = [replace(t, cue_use=not t.cue_use), replace(t, lexicographic=not t.lexicographic),
           replace(t, order="worst" if t.order == "best" else "best")]
    for field, grid in (("gamma", GAMMAS), ("tau", TAUS), ("alpha", ALPHAS), ("beta", BETAS),
                        ("eps", EPSS), ("kappa", KAPPAS)):
        out += [replace(t, **{field: v}) for v in _adjacent(grid, getattr(t, field))]
    seen, uniq = {t.key}, []
    for c in out:
        if c.key not in seen:
            seen.add(c.key)
            uniq.append(c)
    return uniq
