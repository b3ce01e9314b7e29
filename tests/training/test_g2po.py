"""The G2PO reproduction at smoke scale computes its claims."""

from __future__ import annotations

from divelab.claims import Verdict
from divelab.training.g2po.reproduce import reproduce


def test_reproduce_smoke_computes_claims() -> None:
    rep = reproduce(scale="smoke", seed=0)
    assert rep.system == "g2po" and len(rep.claims) >= 5
    measured = [c for c in rep.claims if c.verdict is not Verdict.NOT_CHECKABLE]
    assert len(measured) >= 5 and all(isinstance(c.measured, float) for c in measured)
    assert rep.figures and rep.setup
    runs = rep.details["runs"]
    assert {r["method"] for r in runs} == {"grpo", "gigpo", "g2po"}
    assert {r["condition"] for r in runs} == {"repeat", "control"}
    # same seed and same start: the first iteration's rollouts are identical across methods
    first = {r["success"][0] for r in runs if r["condition"] == "repeat"}
    assert len(first) == 1
    # the control's states never repeat, the real games' do
    rep_states = [r for r in runs if r["condition"] == "repeat"][0]
    ctl_states = [r for r in runs if r["condition"] == "control"][0]
    assert rep_states["distinct_states"][0] < rep_states["n_steps"][0]
    assert ctl_states["distinct_states"][0] == ctl_states["n_steps"][0]
    # with no repeated state every g2po/gigpo TD/anchor term is 0, so they train exactly like grpo
    ctl = {r["method"]: r for r in runs if r["condition"] == "control"}
    assert ctl["g2po"]["success"] == ctl["grpo"]["success"] == ctl["gigpo"]["success"]
    assert ctl["g2po"]["kl"] == ctl["grpo"]["kl"]
    shares = [r["within_decision_share"] for r in runs if r["condition"] == "repeat"][0]
    assert set(shares) == {"grpo", "gigpo", "g2po", "g2po-edge-only"}
