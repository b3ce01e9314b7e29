"""Cliff detection end to end: sample responses, compute their potentials, find and classify the cliffs.

>>> from divelab.interp.cliff_tokens import detect, RolloutConfig, Problem          # doctest: +SKIP
>>> model, tok = divelab.lm.load_model("path/to/checkpoint")                        # doctest: +SKIP
>>> found = detect(model, tok, [Problem("2+3*4=", "14")], checker="last-number",
...                config=RolloutConfig(n=64), per_problem=4)                       # doctest: +SKIP
>>> found.table()                                                                     # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from divelab.interp.cliff_tokens.cliff_test import find_cliffs
from divelab.interp.cliff_tokens.potential import (
    RolloutConfig,
    Rollouts,
    Trace,
    estimate_potentials,
    sample_traces,
    token_stats,
)
from divelab.interp.cliff_tokens.task import Checker, Problem
from divelab.interp.cliff_tokens.taxonomy import classify


@dataclass(frozen=True)
class Cliff:
    trace: int  # index into Detection.traces
    token: int  # 1-based response token (the cliff token with dense potentials)
    start: int  # previous computed prefix (token - 1 with dense potentials)
    p_prev: float
    p_curr: float
    token_id: int
    text: str
    rank: int
    entropy: float
    kind: str  # deterministic / uncertain / sampled-off
    first: bool  # the first cliff of its trace

    @property
    def drop(self) -> float:
        return self.p_prev - self.p_curr


@dataclass
class Detection:
    traces: list[Trace]
    cliffs: list[Cliff]
    rollouts: Rollouts

    def by_trace(self) -> dict[int, list[Cliff]]:
        out: dict[int, list[Cliff]] = {}
        for c in self.cliffs:
            out.setdefault(c.trace, []).append(c)
        return out

    def table(self) -> list[dict]:
        """One row per cliff (JSON-serialisable)."""
        return [{"trace": c.trace, "token": c.token, "text": c.text, "p_prev": round(c.p_prev, 4),
                 "p_curr": round(c.p_curr, 4), "drop": round(c.drop, 4), "type": c.kind, "rank": c.rank,
                 "entropy": round(c.entropy, 4), "first": c.first,
                 "context": self.rollouts.decode(self.traces[c.trace].response_ids[:c.token - 1])[-40:]}
                for c in self.cliffs]


def cliffs_of(rollouts: Rollouts, traces: Sequence[Trace]) -> list[Cliff]:
    out: list[Cliff] = []
    for i, tr in enumerate(traces):
        for j, span in enumerate(tr.cliffs):
            t = span.token  # 1-based; its statistics sit at index t-1
            rank, ent = tr.ranks[t - 1], tr.entropies[t - 1]
            tid = tr.response_ids[t - 1]
            out.append(Cliff(i, t, span.start, span.k_prev / tr.n, span.k_curr / tr.n, tid,
                             rollouts.tokenizer.decode([tid]), int(rank), float(ent), classify(rank, ent), j == 0))
    return out


def detect(model: torch.nn.Module, tokenizer, problems: Sequence[Problem], *, checker: str | Checker = "last-number",
           config: RolloutConfig | None = None, per_problem: int = 1, every: int = 1, zero_patience: int = 2,
           chat: bool = False, traces: Sequence[Trace] | None = None) -> Detection:
    """Sample ``per_problem`` responses per problem (or take ``traces``), estimate token-wise potentials with
    ``config.n`` continuations per prefix, and return every cliff with its type."""
    if not problems and traces is None:
        raise ValueError("detect() needs at least one problem")
    rollouts = Rollouts(model, tokenizer, checker, config)
    if traces is None:
        traces = sample_traces(rollouts, problems, per_problem, chat=chat, seed=rollouts.config.seed)
    traces = list(traces)
    for tr in traces:
        token_stats(model, tr)
    estimate_potentials(rollouts, traces, every=every, zero_patience=zero_patience)
    return Detection(traces, cliffs_of(rollouts, traces), rollouts)


def refine(det: Detection) -> Detection:
    """Localise every cliff of a sparse detection (``every`` > 1) to one token: the potentials inside each cliff
    span are computed too, and the cliffs are found again on the denser trace. A sparse scan then costs N
    continuations per computed prefix plus ``every - 1`` prefixes per cliff, instead of every prefix. A span whose
    drop is spread over its tokens may no longer hold a single-token cliff: it is then dropped, as the test says."""
    items, where = [], []
    for i, tr in enumerate(det.traces):
        for span in tr.cliffs:
            for t in range(span.start + 1, span.end):
                if tr.ks[t] is None:
                    items.append((tr.prompt_ids, tr.response_ids[:t], tr.problem.answer))
                    where.append((i, t))
    if not items:
        return det
    for (i, t), k in zip(where, det.rollouts.success_counts(items), strict=True):
        det.traces[i].ks[t] = k
    for tr in det.traces:
        tr.cliffs = find_cliffs(tr.ks, tr.n)
    return Detection(det.traces, cliffs_of(det.rollouts, det.traces), det.rollouts)
