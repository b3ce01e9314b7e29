"""A synthetic cost model with a planted optimum (for testing search, no compiler involved).

Per seed, one edit is a *trap* (an immediate gain into a plateau: every further edit makes it
worse) and a pair of edits ``(a, b)`` is the planted optimum: each alone makes the kernel slower,
together 10x faster. Greedy hill-climbing takes the trap and stays; a search that explores can
find the pair. Same interface as :class:`~divelab.coding.kernelpro.evaluate.Evaluator`.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from divelab.coding.kernelpro.evaluate import Candidate
from divelab.coding.kernelpro.program import Config, edit_names

CAPS = frozenset({"order", "tile"})


def features(c: Config) -> set[str]:
    f = {n for n in ("avx2", "restrict", "simd", "fast_math") if getattr(c, n)}
    if c.opt != "-O1":
        f.add("opt_up")
    if c.unroll > 1:
        f.add("unroll4")
    if c.order == "ikj":
        f.add("interchange")
    if c.tile:
        f.add("tile32")
    return f


@dataclass
class _P:
    name: str = "synthetic"
    capabilities: frozenset[str] = CAPS


@dataclass
class SyntheticEvaluator:
    seed: int = 0
    problem: _P = field(default_factory=_P)

    def __post_init__(self):
        rng = random.Random(self.seed)
        names = [e for e in edit_names(CAPS) if e not in ("drop_tail", "tile32")]
        self.trap = rng.choice(names)
        self.pair = tuple(rng.sample([e for e in names if e != self.trap], 2))
        self.memo: dict[Config, Candidate] = {}

    @property
    def evaluations(self) -> int:
        return len(self.memo)

    def cost(self, c: Config) -> float:
        f = features(c)
        a, b = self.pair
        if self.trap in f:
            return 80.0 + 5.0 * (len(f) - 1)
        if a in f and b in f:
            return 10.0 + 2.0 * (len(f) - 2)
        if a in f or b in f:
            return 120.0 + 2.0 * len(f)
        return 100.0 + 3.0 * len(f)

    def evaluate(self, c: Config) -> Candidate:
        if c not in self.memo:
            ok = not c.drop_tail
            self.memo[c] = Candidate(c, True, ok, self.cost(c) * (0.5 if c.drop_tail else 1.0),
                                     error=0.0 if ok else math.inf)
        return self.memo[c]
