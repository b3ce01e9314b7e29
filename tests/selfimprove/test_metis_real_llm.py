"""The Metis SmolLM2 path (distiller, codifier, agent through a chat model), with a scripted chat model."""

from __future__ import annotations

import json
import re

from divelab.chat import ScriptedChatModel
from divelab.claims import Kind
from divelab.selfimprove.metis.real_llm import LiveConfig, claims_from, measure

# a short live run (what the smoke scale once sized)
SMALL = LiveConfig(n_experience=4, n_test=1, budget=4, k=1)


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
    cfg = SMALL
    assert d["distiller"]["episodes"] == len(d["distiller"]["rows"]) > 0
    assert d["distiller"]["valid"] == d["distiller"]["episodes"]  # every scripted reply passes the schema
    assert d["distiller"]["rejected"] == 0
    for name in ("rule-records", "llm-records"):
        c = d["codifier"][name]
        assert c["registered"] == 0 and c["rejected"] == c["calls"]  # empty programs never validate
        assert c["unvalidated_active"] == 0 and c["inputs_with_trajectory_text"] == 0
    assert d["codifier"]["rule-records"]["calls"] >= 1  # the gate fired at k on the rule plans
    ag = d["agent"]
    assert ag["chat/none"]["model_decisions"] > 0 and len(ag["chat/none"]["won"]) == cfg.n_test
    kinds = {c.statement.split(":")[0]: c.kind for c in claims}
    assert Kind.CHECK in kinds.values() and Kind.EMPIRICAL in kinds.values()
    again = claims_from(d)
    assert [c.measured for c in again] == [c.measured for c in claims]
