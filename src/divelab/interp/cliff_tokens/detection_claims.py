"""The two detection claims every cliff study makes (the tiny chain model's and a real LLM's): cliffs concentrate in
wrong traces, and the taxonomy of their types. One builder each, so both studies are judged by the same rules."""

from __future__ import annotations

from collections import Counter

import numpy as np

from divelab import stats, verdicts
from divelab.claims import Claim, Kind, not_checkable
from divelab.interp.cliff_tokens.detector import Detection
from divelab.interp.cliff_tokens.taxonomy import TYPES

WRONG_STATEMENT = "cliffs occur more often in incorrect traces (share with >= 1 cliff, wrong - right)"
TAXONOMY_STATEMENT = "the taxonomy: all three cliff types (deterministic / uncertain / sampled-off) occur"

# With continuations drawn from the distribution the tokens were scored under, a token of probability >= 0.99 moves
# the true potential by at most 0.01 (V(prefix) <= 0.99 V(prefix + token) + 0.01), far below any drop the test
# can flag: a "deterministic" cliff is then a Monte Carlo false positive, so whether the type occurs says nothing.
ON_POLICY_WHY = ("continuations come from the distribution the cliff tokens' probabilities are read from, where a "
                 "token of probability >= 0.99 can lower the true potential by at most 0.01: any deterministic cliff "
                 "is Monte Carlo noise, so whether all three types occur cannot speak to the paper's taxonomy")


def with_cliff(det: Detection) -> np.ndarray:
    """1.0 for every trace with at least one detected cliff, else 0.0."""
    idx = det.by_trace()
    return np.array([1.0 if i in idx else 0.0 for i in range(len(det.traces))])


def wrong_vs_right(det: Detection, *, label: str = "", where: str = "", baseline: str = "", source: str = "",
                   seed: int = 0) -> Claim:
    """Share of wrong traces with a cliff minus the share of right ones; the negative control is the same difference
    with the correctness labels shuffled among the traces (seeded)."""
    stmt = f"{label}: {WRONG_STATEMENT}" if label else WRONG_STATEMENT
    correct = np.array([t.correct for t in det.traces], dtype=bool)
    has = with_cliff(det)
    wrong, right = has[~correct], has[correct]
    if wrong.size < 2 or right.size < 2:
        return not_checkable(stmt, "more often in incorrect traces", f"needs >= 2 right and >= 2 wrong traces; got "
                                                                     f"{right.size} right, {wrong.size} wrong"
                             + (f" ({where})" if where else ""), source=source)
    d, lo, hi = stats.diff_ci(wrong, right, seed=seed)
    shuffled = np.random.default_rng(seed).permutation(correct)
    cd, clo, chi = stats.diff_ci(has[~shuffled], has[shuffled], seed=seed)
    return Claim(statement=stmt, paper_value="more often in incorrect traces", measured=d, ci=(lo, hi),
                 kind=Kind.EMPIRICAL, source=source, baseline=baseline or f"right traces: {right.mean():.2f}",
                 ruling=verdicts.direction(d, (lo, hi), why="the paper reports the direction, not one rate",
                                           control=verdicts.control("correctness labels shuffled among the traces",
                                                                    cd, (clo, chi))),
                 falsifier="Had the wrong traces lost their starting potential a little at a time (no single-token "
                           "drop the test can see) they would carry cliffs no more often than the right ones, and "
                           "the interval would reach 0.",
                 replication={"unit": "sampled responses", "n": int(len(has)), "clustered_by": ""},
                 note=f"wrong traces: {wrong.mean():.2f} of {wrong.size} have a cliff; right: {right.mean():.2f} of "
                      f"{right.size}; labels shuffled: {cd:+.2f} [{clo:+.2f}, {chi:+.2f}]. A wrong trace must lose "
                      "its starting potential and a right one ends at 1, so what the claim tests is whether the loss "
                      "comes at single tokens; bootstrap over responses (two per problem, not clustered)"
                      + (f"; {where}" if where else ""))


def taxonomy(det: Detection, *, label: str = "", on_policy: bool, paper_value: str, measured_text: str,
             baseline: str = "", note: str = "", source: str = "") -> Claim:
    """Whether each of the three types occurs among the detected cliffs; uninformative when the continuations are
    on-policy (``on_policy``: sampled at T = 1 from the distribution the types are read from)."""
    stmt = f"{label}: {TAXONOMY_STATEMENT}" if label else TAXONOMY_STATEMENT
    if not det.cliffs:
        return not_checkable(stmt, "three types", "no cliff was found", source=source)
    kinds = Counter(c.kind for c in det.cliffs)
    ruling = (verdicts.uninformative(ON_POLICY_WHY) if on_policy else
              verdicts.outcome(all(kinds.get(k, 0) > 0 for k in TYPES), test="each type has >= 1 cliff"))
    return Claim(statement=stmt, paper_value=paper_value, measured=measured_text, kind=Kind.EMPIRICAL, source=source,
                 baseline=baseline, ruling=ruling, note=note)
