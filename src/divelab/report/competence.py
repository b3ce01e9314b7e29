"""Where each system's saved full-scale run records the real LLM's task competence.

A claim about what SmolLM2 does as an agent or a subject means little when the model cannot do the
task at all (every answer malformed, every episode failed): the README's real-LLM table therefore shows,
beside each claim, how competent the adapted model was in the same run. This module names, per system,
the claim or the ``details`` entry of the saved reproduction that measures that competence, and renders
it; a test checks that every system with SmolLM2 claims has an entry and that each entry resolves in
its saved file, so a renamed claim cannot silently drop the column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Measure:
    """One competence figure: ``label`` says what was measured; the value comes from the one claim whose
    statement contains ``claim`` (its measured value and interval), or from the ``details`` entry at the
    '/'-separated path ``details`` (with its interval at ``ci``, or the count it is out of at ``of``, when the
    run recorded one)."""

    label: str
    claim: str = ""
    details: str = ""
    ci: str = ""
    of: str = ""

    def __post_init__(self) -> None:
        if bool(self.claim) == bool(self.details):
            raise ValueError(f"competence measure {self.label!r}: give exactly one of claim= or details=")


COMPETENCE: dict[str, tuple[Measure, ...]] = {
    "bayes-control": (Measure("coder's first-attempt pass@1", details="smollm2_generated/competence/pass_at_1",
                              ci="smollm2_generated/competence/ci"),),
    "cliff-tokens": (Measure("held-out word problems solved", claim="competence on held-out word problems"),),
    "crosscoder": (Measure("tool sibling's correct tool calls", claim="the LoRA tool sibling emits the strict call"),),
    "first-token-probe": (Measure("refusal rate, held-out harmful minus benign", claim="the tuning took"),),
    "forensics": (Measure("valid actions, motive adapter", claim="motive adapter (LoRA SFT): competence"),
                  Measure("valid actions, format-only adapter", claim="format-only control adapter (LoRA SFT): competence"),
                  Measure("valid actions, untuned", claim="(untuned): competence")),
    "fugu": (Measure("untuned SmolLM2's multiple-choice accuracy", claim="as a worker: 4-way multiple-choice accuracy"),
             Measure("family-wise best worker minus best single worker", claim="task competence on SmolLM2"),),
    "metis": (Measure("schema-valid distilled records", details="smollm2/distiller/valid",
                      of="smollm2/distiller/episodes"),),
    "pinning": (Measure("correct tool calls, held out", claim="correct tool calls on held-out benchmark requests"),
                Measure("correct calls on public BFCL v4 questions", details="live_agent/bfcl/accuracy/agent",
                        ci="live_agent/bfcl/ci/agent")),
    "progress-advantage": (Measure("held-out reward after tuning", details="smollm2/reward_after"),
                           Measure("well-formed answers after tuning", details="smollm2/well_formed_after")),
    "red-queen": (Measure("judge's accuracy on fresh items", details="smollm2_judge/before/accuracy"),),
    "sherloc": (Measure("adapted diagnostician's pick accuracy, gold shortlisted",
                        claim="picks the buggy function from the SBFL shortlist"),
                Measure("loop runs ending without a valid case file", claim="mostly ends without a valid case file")),
    "world-model": (Measure("exact next state, held-out games",
                            claim="next-state exact match on held-out games of the SmolLM2 world model"),),
}


def _at(details: dict[str, Any], path: str) -> Any:
    node: Any = details
    for part in path.split("/"):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(f"details has no entry {path!r} (missing {part!r})")
        node = node[part]
    return node


def _number(x: Any) -> str:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    return str(x) if isinstance(x, int) else f"{x:.2f}"


def value(m: Measure, rep: Any) -> str:
    """``m``'s value in the reproduction ``rep`` as text (``0.19 [0.13, 0.26]``); KeyError when it is missing."""
    if m.claim:
        hits = [c for c in rep.claims if m.claim in c.statement]
        if len(hits) != 1:
            raise KeyError(f"{rep.system}: {len(hits)} claims contain {m.claim!r} (need exactly one)")
        c = hits[0]
        measured, ci = c.measured, c.ci
    else:
        measured = _at(rep.details, m.details)
        ci = _at(rep.details, m.ci) if m.ci else None
    text = _number(measured)
    if ci is not None:
        text += f" [{_number(ci[0])}, {_number(ci[1])}]"
    if m.of:
        text += f" of {_number(_at(rep.details, m.of))}"
    return text


def competence_text(key: str, rep: Any) -> str:
    """Every competence figure of system ``key`` in ``rep``, '; '-joined, or 'not recorded'."""
    measures = COMPETENCE.get(key, ())
    if not measures:
        return "not recorded"
    return "; ".join(f"{m.label}: {value(m, rep)}" for m in measures)
