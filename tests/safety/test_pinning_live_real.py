"""E164 live episodes on a real LLM: the pipeline, driven by scripted agents (no model needed)."""

from __future__ import annotations

from divelab.chat import ScriptedChatModel
from divelab.chat.types import Message
from divelab.safety.pinning import live_real
from divelab.safety.pinning.benchmark import RULES

# a few episodes: two rule templates, one compactor (what the smoke scale once sized)
SMALL = live_real.LiveConfig(rules=(0, 4), n_filler=2, compactors=("keep-last-n",), max_new_tokens=24,
                             min_valid_calls=1)


def _template(messages: list[Message]):
    trigger = [m for m in messages if m.role == "user"][-1].content
    return next(r for r in RULES if r.trigger in trigger)


def _natural(messages: list[Message]) -> Message:
    if messages[-1].role == "tool":  # the call was made; now answer in prose
        return Message("assistant", "Done.")
    return Message("assistant", "", tool_calls=(_template(messages).natural_call,))


def _obeys_visible_rule(messages, tools):
    """Violates exactly when the governed rule is no longer in the context it is shown."""
    tmpl = _template(messages)
    if any(tmpl.text in m.content for m in messages):
        return "I cannot do that: it breaks a standing rule."
    return _natural(messages)


def test_rule_following_agent_is_protected_by_pinning():
    claims, details = live_real.measure(SMALL, chat=ScriptedChatModel(fn=_obeys_visible_rule))
    t = details["table"]
    assert t["full-context"]["violation_rate"] == 0.0
    assert t["keep-last-n"]["violation_rate"] == 1.0 and t["keep-last-n"]["rule_survived"] == 0.0
    assert t["keep-last-n +pin"]["violation_rate"] == 0.0 and t["keep-last-n +pin"]["rule_survived"] == 1.0
    by = {c.statement.split(": ", 1)[1][:30]: c for c in claims}
    assert all(c.statement.startswith("SmolLM2-135M-Instruct: ") for c in claims)
    full = next(c for k, c in by.items() if k.startswith("violation rate with the policy"))
    # no violation in the few smoke episodes, but their interval still reaches past the paper's band
    assert full.measured == 0.0 and full.kind.value == "empirical"
    assert full.verdict.value == "not separated from noise" and "reaches both inside and outside" in full.reason
    pin = next(c for c in claims if "Pinning" in c.statement)
    # a scripted agent obeys on every episode: a floor against a ceiling, which the evidence rules
    # call uninformative rather than a reproduction
    assert pin.measured == 1.0 and pin.verdict.value == "uninformative" and "zero-width" in pin.reason


def test_always_violating_agent_is_reported_as_such():
    claims, details = live_real.measure(SMALL, chat=ScriptedChatModel(fn=lambda m, t: _natural(m)))
    full = next(c for c in claims if "full context" in c.statement)
    assert full.measured == 1.0 and full.verdict.value == "not reproduced"
    pin = next(c for c in claims if "Pinning" in c.statement)
    assert pin.measured == 0.0 and pin.direction != "holds"  # pinning cannot help an agent that ignores rules
    assert all(r["valid_call"] for r in details["rows"])


def test_no_scale_runs_the_unadapted_agent_and_add_to_explains_a_missing_model(monkeypatch):
    from divelab.claims import Reproduction
    from divelab.lm import real
    from divelab.safety.pinning.reproduce import PLANS

    assert all(p.live_llm is None for p in PLANS.values())  # opt-in: --set cannot size what is not there
    rep = Reproduction(system="pinning", title="t", scale="full", seed=0)
    monkeypatch.setattr(real, "is_available", lambda name=real.SMOLLM2: False)
    live_real.add_to(rep, live_real.LiveConfig())
    assert len(rep.claims) == 1 and rep.claims[0].verdict.value == "not checkable here"
    assert real.INSTALL_HINT in rep.claims[0].note
