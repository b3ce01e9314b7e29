"""Interventions at the first cliff of a trace, scored by pass@N from fresh continuations.

- **cliff-del**: drop the cliff token and resample from just before it (prefix ``t-1``);
- **cliff-keep**: keep it and resample after it (prefix ``t``).

Note that cliff-del resamples from the very prefix whose potential the cliff test required to be high
(``p_{t-1} > 0.1 + 1.645 SE``), so with N = 64 its pass@N is close to 1 by construction: the informative number
is cliff-keep's.
"""

from __future__ import annotations

from dataclasses import dataclass

from divelab.interp.cliff_tokens.detector import Detection


@dataclass(frozen=True)
class Intervention:
    trace: int
    token: int
    kind: str
    k_del: int
    k_keep: int
    n: int

    @property
    def pass_del(self) -> float:
        return float(self.k_del > 0)

    @property
    def pass_keep(self) -> float:
        return float(self.k_keep > 0)


def cliff_del_keep(det: Detection, n: int | None = None) -> list[Intervention]:
    """cliff-del and cliff-keep at the first cliff of every trace that has one (fresh samples)."""
    firsts = [c for c in det.cliffs if c.first]
    items = []
    for c in firsts:
        tr = det.traces[c.trace]
        items.append((tr.prompt_ids, tr.response_ids[:c.token - 1], tr.problem.answer))
        items.append((tr.prompt_ids, tr.response_ids[:c.token], tr.problem.answer))
    counts = det.rollouts.success_counts(items, n=n) if items else []
    n = det.rollouts.config.n if n is None else n
    return [Intervention(c.trace, c.token, c.kind, counts[2 * i], counts[2 * i + 1], n)
            for i, c in enumerate(firsts)]
