"""The Metis SmolLM2 path (distiller, codifier, agent through a chat model), with a scripted chat model."""

from __future__ import annotations

import json
import re

import pytest

from divelab import stats
from divelab.chat import ScriptedChatModel
from divelab.claims import Kind, Verdict
from divelab.selfimprove.metis.real_llm import (
    LiveConfig,
    claims_from,
    fallback_reason,
    floor_reason,
    measure,
    tasks_for_power,
)

# a short live run (what the smoke scale once sized)
SMALL = LiveConfig(k=1, budget=4, pilot_tasks=2, max_tasks=3)


def _reply(msgs, tools):
    sys_, usr = msgs[0].content, msgs[-1].content
    if "reusable experience" in sys_:  # distiller: a schema-valid record, plan = the episode's last command
        last = [ln[2:] for ln in usr.splitlines() if ln.startswith("> ")][-1:]
        return json.dumps({"plan": last, "facts": ["rooms exist"], "pitfalls": []})
    if "Python function" in sys_:  # codifier: a tool that returns nothing (fails validation)
        return "```python\ndef tool(e1, e2=''):\n    return []\n```"
    adm = re.search(r"Admissible commands: (.*)\n", usr).group(1).split(", ")
    return "nonsense" if len(msgs) > 5 else adm[0]


def test_live_path_with_scripted_chat():
    chat = ScriptedChatModel(fn=_reply)
    claims, d = measure(SMALL, seed=0, chat=chat)
    assert d["distiller"]["episodes"] == len(d["distiller"]["rows"]) > 0
    assert d["distiller"]["valid"] == d["distiller"]["episodes"]  # every scripted reply passes the schema
    assert d["distiller"]["rejected"] == 0
    for name in ("rule-records", "llm-records"):
        c = d["codifier"][name]
        assert c["registered"] == 0 and c["rejected"] == c["calls"]  # empty programs never validate
        assert c["unvalidated_active"] == 0 and c["inputs_with_trajectory_text"] == 0
    assert d["codifier"]["rule-records"]["calls"] >= 1  # the gate fired at k on the rule plans
    ag = d["agent"]
    assert ag["chat/none"]["model_decisions"] > 0 and len(ag["chat/none"]["won"]) == d["design"]["tasks"]
    kinds = {c.statement.split(":")[0]: c.kind for c in claims}
    assert Kind.CHECK in kinds.values() and Kind.EMPIRICAL in kinds.values()
    again = claims_from(d)
    assert [c.measured for c in again] == [c.measured for c in claims]
    # the scripted distiller grounds every plan in its own episode, and never in one of another template
    dist = next(c for c in claims if "distiller" in c.statement)
    assert dist.verdict is Verdict.REPRODUCED and dist.rule["args"]["control"]["count"] == 0
    # the scripted codifier's empty tools never pass: a floor, uninformative, not evidence against the paper
    for c in (c for c in claims if "codifier (" in c.statement):
        assert c.verdict is Verdict.UNINFORMATIVE and c.reason.startswith("competence floor"), c.statement
    for c in claims:
        if c.kind is Kind.EMPIRICAL:
            assert c.replication["n"] >= 1, c.statement


def _mute(msgs, tools):
    """A model that never writes a record, code or a command: every rate at the floor."""
    return "I am not sure."


def test_floors_and_the_gate_are_detected_from_the_measured_rates():
    claims, d = measure(SMALL, seed=0, chat=ScriptedChatModel(fn=_mute))
    # every common pattern recurred k + 1 times whatever the model wrote: the gate's workload is its own
    assert d["config"]["recurrences"] == SMALL.k + 1
    for name in ("rule-records", "llm-records"):
        assert min(d["gate"][name]["recurrence"].values()) == SMALL.k + 1
    gate = next(c for c in claims if "fewest recurrences" in c.statement)
    assert gate.measured >= SMALL.k and gate.verdict is Verdict.REPRODUCED
    # no plan from the model: its codifier memory was never called, and says so with the k it reached
    own = next(c for c in claims if "its own distilled records" in c.statement)
    assert own.verdict is Verdict.UNINFORMATIVE and f"reached k={SMALL.k}" in own.reason and own.measured is None
    for c in claims:
        if c.kind is Kind.EMPIRICAL:
            assert c.verdict is Verdict.UNINFORMATIVE, (c.statement, c.verdict)  # never "not reproduced"
    agent = next(c for c in claims if "(no memory) vs" in c.statement)
    assert "floor" in agent.reason or "fallback" in agent.reason


def test_floor_and_fallback_reasons():
    assert floor_reason(0, 8, "did it").startswith("competence floor") and "0 of 8" in floor_reason(0, 8, "did it")
    assert floor_reason(1, 8, "did it") == "" and "never attempted" in floor_reason(0, 0, "did it")
    assert fallback_reason({"model_decisions": 36, "invalid_replies": 35}).startswith("fallback")
    assert fallback_reason({"model_decisions": 36, "invalid_replies": 3}) == ""
    assert fallback_reason({"model_decisions": 0, "invalid_replies": 0}) == ""  # the harness decided


def test_tasks_for_power_is_the_fewest_that_detect_the_effect():
    n = tasks_for_power(0.5, 0.206, 20, 500)
    assert stats.mde_two_sample(0.5, n) <= 0.206 < stats.mde_two_sample(0.5, n - 1)
    assert tasks_for_power(0.0, 0.206, 20, 500) == 20  # no spread: the pilot already resolves it
    assert tasks_for_power(0.7, 0.206, 20, 50) == 50  # capped
    assert tasks_for_power(0.1, 0.206, 20, 500) == 20  # never fewer than the pilot
    with pytest.raises(ValueError):
        tasks_for_power(0.5, 0.2, 30, 20)
    with pytest.raises(ValueError):
        LiveConfig(k=0)
