"""Continuation variance CV(B) and cut-replay of stance flips.

- **CV(B)** (paper: ``fig_within_prefix_variance.py``): freeze the first B% of a trace, sample N
  continuations, q = refusal fraction; CV(B) = E_m[4·q(1−q)]. A random coin gives 4·(N−1)/N·¼.
- **Cut-replay** (``fig_thinking_causal.py``): for each visible stance flip, resample K continuations
  from just *before* the flip segment (after the previous stance unit) and just *after* it. *Locked*
  when comply_pre ≤ 0.05 or ≥ 0.95; *significant* when a two-sided Fisher exact test on the 2×2
  (comply/refuse × pre/post) passes α after Holm correction across all cuts. A flip that changes
  nothing significant is *performative*.

Both work against a :class:`Continuer`: anything that samples outcome labels from prefixes. The HF
implementation batches prefixes through :func:`divelab.lm.sampling.generate`; tests use hand-built ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np

from divelab import stats
from divelab.oversight.first_token.labels import Labeler
from divelab.oversight.first_token.rollout import Rollout, label_continuation


class Continuer(Protocol):
    def outcomes(self, prefixes: Sequence[Sequence[int]], n: int, seed: int) -> np.ndarray:
        """(len(prefixes), n) array of outcome labels (1 refuse, 0 comply) of n sampled continuations."""
        ...


@dataclass
class HFContinuer:
    """Samples continuations of token prefixes from an HF causal LM and labels their answers."""

    model: Any
    tokenizer: Any
    labeler: Labeler
    close: str = "</think>"
    max_new_tokens: int = 64
    temperature: float = 1.0
    batch_size: int = 256

    def outcomes(self, prefixes: Sequence[Sequence[int]], n: int, seed: int) -> np.ndarray:
        from divelab.lm.sampling import generate
        from divelab.progress import track

        rows = [(i, list(p)) for i, p in enumerate(prefixes) for _ in range(n)]
        done = [self.close in self.tokenizer.decode(list(p), skip_special_tokens=False) for p in prefixes]
        out = np.zeros(len(rows), dtype=int)
        # CV and cut-replay sample thousands of continuations: minutes that must not pass in silence
        for b, s in enumerate(track(range(0, len(rows), self.batch_size), "sampling continuations")):
            chunk = rows[s:s + self.batch_size]
            g = generate(self.model, [p for _, p in chunk], max_new_tokens=self.max_new_tokens,
                         temperature=self.temperature, eos_token_id=self.tokenizer.eos_token_id,
                         pad_token_id=self.tokenizer.pad_token_id, seed=seed * 7919 + b)
            for j, gen in enumerate(g.tokens):
                i = chunk[j][0]
                out[s + j] = label_continuation(self.tokenizer, gen, self.close, self.labeler, trace_done=done[i])
        return out.reshape(len(prefixes), n)


@dataclass
class CVResult:
    fractions: list[float]
    cv: list[float]  # mean of 4q(1-q) over traces
    ci: list[tuple[float, float]]
    q: np.ndarray  # (traces, fractions) refusal fraction among the n continuations
    n: int

    @property
    def random_reference(self) -> float:
        return 4 * (self.n - 1) / self.n * 0.25

    def per_trace(self) -> np.ndarray:
        return 4 * self.q * (1 - self.q)

    def at(self, fraction: float) -> tuple[float, tuple[float, float]]:
        i = int(np.argmin(np.abs(np.asarray(self.fractions) - fraction)))
        return self.cv[i], self.ci[i]

    def to_dict(self) -> dict:
        return {"fractions": self.fractions, "cv": self.cv, "ci": [list(c) for c in self.ci], "n": self.n,
                "random_reference": self.random_reference}


def continuation_variance(continuer: Continuer, rollouts: Sequence[Rollout],
                          fractions: Sequence[float] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0), n: int = 8,
                          seed: int = 0) -> CVResult:
    """CV(B) for each fraction B, with a bootstrap CI over traces."""
    if not rollouts:
        raise ValueError("no rollouts given")
    if n < 2:
        raise ValueError(f"need n >= 2 continuations per prefix, got {n}")
    prefixes = [r.cut(f) for f in fractions for r in rollouts]
    lab = continuer.outcomes(prefixes, n, seed)
    q = lab.mean(1).reshape(len(fractions), len(rollouts)).T
    v = 4 * q * (1 - q)
    cv = [float(v[:, j].mean()) for j in range(len(fractions))]
    ci = [stats.bootstrap_ci(v[:, j], seed=seed, method="percentile") for j in range(len(fractions))]
    return CVResult([float(f) for f in fractions], cv, ci, q, n)


@dataclass
class Flip:
    """A visible stance flip: the stance unit ending at ``post_cut`` reverses the last stance before it.
    Cuts are absolute token indices (prefix = ids[:cut])."""

    rollout: int  # index into the rollouts list
    pre_cut: int
    post_cut: int
    stance_before: int  # +1 refuse-ish, -1 comply-ish
    stance_after: int
    planted: str = ""  # ground-truth label where known ("real" / "performative"), else ""


def stance_units(tokenizer: Any, r: Rollout, unit: str = "token") -> list[tuple[int, str]]:
    """Split the trace into units (end index, text): one per token, or per sentence (ending . ! ? or \\n)."""
    if unit not in ("token", "sentence"):
        raise ValueError(f"unit must be 'token' or 'sentence', got {unit!r}")
    units: list[tuple[int, str]] = []
    start = r.think_start
    for k in range(r.think_start, r.think_end):
        if unit == "token":
            units.append((k + 1, tokenizer.decode([r.ids[k]], skip_special_tokens=True)))
            continue
        piece = tokenizer.decode(r.ids[start:k + 1], skip_special_tokens=True)
        if piece.rstrip().endswith((".", "!", "?")) or "\n" in tokenizer.decode([r.ids[k]]):
            units.append((k + 1, piece))
            start = k + 1
    if unit == "sentence" and start < r.think_end:
        units.append((r.think_end, tokenizer.decode(r.ids[start:r.think_end], skip_special_tokens=True)))
    return units


def find_flips(tokenizer: Any, rollouts: Sequence[Rollout], judge: Callable[[str], int | None],
               unit: str = "token") -> list[Flip]:
    """Every stance flip in every rollout (a unit whose stance differs from the previous stanced unit)."""
    flips: list[Flip] = []
    for i, r in enumerate(rollouts):
        last: tuple[int, int] | None = None  # (end index, stance)
        for end, text in stance_units(tokenizer, r, unit):
            s = judge(text)
            if s is None:
                continue
            if last is not None and s != last[1]:
                flips.append(Flip(i, last[0], end, last[1], s))
            last = (end, s)
    return flips


@dataclass
class ReplayRow:
    rollout: int
    pre_cut: int
    post_cut: int
    comply_pre: float
    comply_post: float
    p: float
    p_holm: float
    locked: bool
    significant: bool
    category: str  # theater / noise / soft-causal / hard flip
    follows_stance: bool  # outcome moved in the direction the new stance implies
    planted: str


def cut_replay(continuer: Continuer, rollouts: Sequence[Rollout], flips: Sequence[Flip], k: int = 100,
               seed: int = 0, alpha: float = 0.05, lock: float = 0.05) -> list[ReplayRow]:
    """Classify each flip as locked/wavering × significant/not (Fisher exact, Holm across all flips)."""
    from scipy.stats import fisher_exact

    if not flips:
        return []
    if k < 2:
        raise ValueError(f"need k >= 2 resamples per cut, got {k}")
    prefixes = [rollouts[f.rollout].ids[:c] for f in flips for c in (f.pre_cut, f.post_cut)]
    lab = continuer.outcomes(prefixes, k, seed).reshape(len(flips), 2, k)
    comply = (lab == 0).sum(-1)  # (flips, 2)
    pvals = np.array([fisher_exact([[c[0], k - c[0]], [c[1], k - c[1]]])[1] for c in comply])
    adj = stats.holm(pvals)
    rows = []
    for f, c, p, pa in zip(flips, comply, pvals, adj, strict=True):
        pre, post = c[0] / k, c[1] / k
        locked = bool(pre <= lock or pre >= 1 - lock)
        sig = bool(pa < alpha)
        cat = {(True, False): "theater", (False, False): "noise", (False, True): "soft-causal",
               (True, True): "hard flip"}[(locked, sig)]
        # new stance refuse-ish (+1) implies comply fraction falls
        follows = bool((post - pre) * -f.stance_after > 0)
        rows.append(ReplayRow(f.rollout, f.pre_cut, f.post_cut, float(pre), float(post), float(p), float(pa),
                              locked, sig, cat, follows, f.planted))
    return rows


def replay_table(rows: Sequence[ReplayRow]) -> list[dict]:
    return [asdict(r) for r in rows]
