"""The live agent's tool-call competence on public data: BFCL v4 questions nobody here wrote.

The agent's own competence check (:func:`.live_agent.run_competence`) uses held-out scenarios of our
benchmark: its seven tools, our wordings. Here the same agent (SmolLM2-135M-Instruct with its tool-call
adapter) is asked a seeded sample of the Berkeley Function Calling Leaderboard's single-turn questions
(:mod:`divelab.envs.bfcl`, read from the ``bfcl-eval`` wheel; asked through the chat protocol by
:mod:`divelab.envs.bfcl_run`), and so is the untuned SmolLM2 on the same questions: does the call format the
adapter learned on seven tools carry over to functions it never saw? Answers are scored by BFCL's AST rules.
The violation claims do not depend on it; it says how far the agent's competence reaches beyond our data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from divelab import stats, verdicts
from divelab.claims import Claim, Kind, not_checkable
from divelab.envs import bfcl
from divelab.envs.bfcl_run import BFCLRun, ask
from divelab.safety.pinning.agent_claims import AGENT_LABEL, MODEL_LABEL

STATEMENT = (f"{AGENT_LABEL}: correct calls on public function-calling questions (BFCL v4 simple and multiple, "
             "AST match) over the untuned model")
PAPER = "(a competence check of ours on public data, not a paper number)"
SRC = "BFCL v4 (bfcl-eval 2026.3.23), Berkeley Function Calling Leaderboard"
ANSWERABLE = ("simple", "multiple")
SALT = 164  # this sample's own draw: apart from other experiments' BFCL samples with the same seed


def _summary(run: BFCLRun) -> dict[str, Any]:
    return {"by_category": {k: round(v, 4) for k, v in run.by_category().items()},
            "called": round(run.called(), 4), "seconds": round(run.seconds, 1),
            "sources": {s: sum(a.source == s for a in run.answers) for s in ("tool_calls", "text", "none")}}


def measure(agent: Any, untuned: Any, sizes: Sequence[tuple[str, int]], seed: int, batch_size: int = 8,
            root: str | None = None) -> dict[str, Any]:
    """Both models' answers to the same sample: per-question correctness, per-category accuracy, examples."""
    records = bfcl.sample(sizes, seed, SALT, root)
    runs = {k: ask(m, records, batch_size=batch_size, label=f"BFCL questions: {k} model")
            for k, m in (("agent", agent), ("untuned", untuned))}
    answerable = [i for i, r in enumerate(records) if r.category in ANSWERABLE]
    right = {k: sum(r.correct[i] for i in answerable) for k, r in runs.items()}
    return {"n": len(records), "ids": [r.id for r in records], "categories": [r.category for r in records],
            "correct": {k: [int(c) for c in r.correct] for k, r in runs.items()},
            # the competence figure: share of the answerable questions called right, with its Wilson interval
            "accuracy": {k: round(v / len(answerable), 4) if answerable else None for k, v in right.items()},
            "ci": {k: [round(x, 4) for x in stats.proportion_ci(v, len(answerable))] if answerable else None
                   for k, v in right.items()},
            "summary": {k: _summary(r) for k, r in runs.items()},
            "examples": {k: [a.reply for a in r.answers[:6]] for k, r in runs.items()}}


def claim(d: dict[str, Any], seed: int) -> Claim:
    """Adapted minus untuned accuracy on the answerable questions, paired by question (bootstrap)."""
    keep = [i for i, c in enumerate(d["categories"]) if c in ANSWERABLE]
    a = np.array([d["correct"]["agent"][i] for i in keep], dtype=float)
    b = np.array([d["correct"]["untuned"][i] for i in keep], dtype=float)
    diff, lo, hi = stats.paired_diff_ci(a, b, method="bootstrap", seed=seed)
    k, n = int(a.sum()), len(a)
    ci = stats.proportion_ci(k, n)
    irr = [i for i, c in enumerate(d["categories"]) if c == "irrelevance"]
    abstain = {m: float(np.mean([d["correct"][m][i] for i in irr])) if irr else float("nan") for m in ("agent", "untuned")}
    counts = ", ".join(f"{c} {d['categories'].count(c)}" for c in ANSWERABLE)
    floor = a.max(initial=0) == 0 and b.max(initial=0) == 0
    ruling = (verdicts.uninformative("neither model answered any question correctly: both at the 0 floor") if floor
              else verdicts.direction(diff, (lo, hi), expected_sign=1, why="a competence check of ours; the paper "
                                      "reports no function-calling benchmark"))
    return Claim(STATEMENT, PAPER, diff, ci=(lo, hi), unit="share of questions", kind=Kind.CHECK, source=SRC,
                 ruling=ruling, baseline=f"untuned {MODEL_LABEL} {b.mean():.3f}; adapted {k}/{n} = {k / n:.3f} "
                                         f"[{ci[0]:.3f}, {ci[1]:.3f}]",
                 falsifier="adapted accuracy no higher than the untuned model's on the same public questions would show "
                           "the adapter's call format does not reach functions outside our benchmark",
                 replication={"unit": "BFCL questions (one adapter)", "n": n, "clustered_by": ""},
                 note=f"{n} BFCL v4 questions ({counts}; a "
                      f"seeded sample), scored by BFCL's AST rules; irrelevance questions answered without a call: "
                      f"adapted {abstain['agent']:.2f}, untuned {abstain['untuned']:.2f} ({len(irr)} questions). "
                      "Replies read as calls: adapted "
                      f"{d['summary']['agent']['called']:.2f}, untuned {d['summary']['untuned']['called']:.2f}. "
                      "Paired by question, bootstrap interval.")


def not_measured(why: str) -> Claim:
    return not_checkable(STATEMENT, PAPER, why, source=SRC, kind=Kind.CHECK)
