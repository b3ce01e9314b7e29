"""Metis: the memory, the desire-path gate, validation, demotion, persistence, distillers (no game needed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from divelab.chat import ScriptedChatModel
from divelab.selfimprove.metis import (
    ChatCodifier,
    ChatDistiller,
    CodifyRequest,
    Entry,
    Episode,
    MemoryStore,
    Metis,
    MetisConfig,
    NoisyCodifier,
    Step,
    TemplateCodifier,
    normalise,
)

PLAN = ["go east", "open chest", "take {e1} from chest", "go west", "put {e1} on {e2}"]


def episode(i: int, obj: str, sup: str, won: bool = True, env: str = "w0") -> Episode:
    pat = normalise(f"Put the {obj} on the {sup}.", env)
    acts = [("look", "kitchen", "kitchen", False), ("go east", "kitchen", "pantry", True),
            ("open chest", "pantry", "pantry", True), (f"take {obj} from chest", "pantry", "pantry", True),
            ("go west", "pantry", "kitchen", True), (f"put {obj} on {sup}", "kitchen", "kitchen", True)]
    if not won:
        acts = acts[:3]
    steps = [Step(a, f"SECRET-OBSERVATION-{i}-{j} you see a {obj}", rb, ra, ch) for j, (a, rb, ra, ch) in enumerate(acts)]
    return Episode(f"ep{i}", env, f"Put the {obj} on the {sup}.", pat.key, pat.slots, steps, won,
                   first_observation=f"SECRET-FIRST-{i}")


OBJS = [("blue mug", "steel table"), ("old book", "oak bench"), ("tin cup", "steel table"), ("red ball", "oak bench")]


class Recorder:
    """A codifier that records exactly what it was given."""

    def __init__(self) -> None:
        self.requests: list[CodifyRequest] = []

    def __call__(self, request: CodifyRequest) -> str:
        self.requests.append(request)
        return TemplateCodifier()(request)


def test_pattern_masks_entities() -> None:
    p = normalise("Put the blue mug on the steel table.", "w0")
    assert p.key == "w0|put <e1> on <e2>" and p.slots == {"e1": "blue mug", "e2": "steel table"}
    assert normalise("Put the old book on the oak bench.", "w0").key == p.key
    assert normalise("Eat the carrot.", "w0").key != p.key
    with pytest.raises(ValueError, match="non-empty"):
        normalise("  ")


@pytest.mark.parametrize("k", [1, 2, 3])
def test_gate_fires_exactly_at_k_and_counts_failures(k: int) -> None:
    rec = Recorder()
    m = Metis(codifier=rec, config=MetisConfig(k=k))
    # the first episode fails: it still counts toward the recurrence tally
    eps = [episode(0, *OBJS[0], won=False)] + [episode(i, *OBJS[i % 4]) for i in range(1, 5)]
    fired_at = None
    for n, ep in enumerate(eps, start=1):
        ev = m.observe(ep)
        if ev is not None and fired_at is None:
            fired_at = n
    # a plan first exists after episode 2 (episode 1 failed), so the gate fires at max(k, 2)
    assert fired_at == max(k, 2)
    assert len(rec.requests) == 1
    assert m.registry.active_for(eps[1].pattern) is not None


def test_codifier_input_never_contains_trajectory_text() -> None:
    rec = Recorder()
    m = Metis(codifier=rec, config=MetisConfig(k=2))
    eps = [episode(i, *OBJS[i]) for i in range(3)]
    for ep in eps:
        m.observe(ep)
    assert rec.requests
    for req in rec.requests:
        text = req.render() + json.dumps(req.__dict__, default=list)
        assert "SECRET" not in text
        for ep in eps:
            for s in ep.steps:
                assert s.observation not in text
    # and a chat codifier sees only the rendered request
    chat = ScriptedChatModel(fn=lambda msgs, tools: "```python\ndef tool(e1, e2):\n    return []\n```")
    ChatCodifier(chat)(rec.requests[0])
    assert all("SECRET" not in msg.content for msg in chat.calls[0])


def test_buggy_tool_fails_validation_and_is_never_exposed() -> None:
    bugs = NoisyCodifier(TemplateCodifier(), leak=1.0, drop=0.0, seed=0)
    m = Metis(codifier=bugs, config=MetisConfig(k=3))
    for i in range(4):
        m.observe(episode(i, *OBJS[i]))
    assert bugs.bugs and bugs.bugs[0][1].startswith("leak")
    assert m.registry.active() == []
    assert any(e.outcome == "rejected" for e in m.events)
    assert any("failed validation" in e.text for e in m.store.entries(kind="pitfall"))
    # the same buggy codifier without validation exposes the tool, and it fails callers with other entities
    u = Metis(codifier=NoisyCodifier(TemplateCodifier(), leak=1.0, drop=0.0, seed=0),
              config=MetisConfig(k=3, validate=False))
    for i in range(3):
        u.observe(episode(i, *OBJS[i]))
    tool = u.registry.active()[0]
    prog = tool.run({"e1": "red ball", "e2": "oak bench"})["program"]
    assert prog != [s.replace("{e1}", "red ball").replace("{e2}", "oak bench") for s in PLAN]


def test_dropped_step_is_caught_even_with_one_example() -> None:
    m = Metis(codifier=NoisyCodifier(TemplateCodifier(), leak=0.0, drop=1.0, seed=1), config=MetisConfig(k=1))
    m.observe(episode(0, *OBJS[0]))
    assert m.registry.active() == [] and m.events[0].outcome == "rejected"


def test_good_tool_runs_in_sandbox_and_generalises() -> None:
    m = Metis(codifier=TemplateCodifier(), config=MetisConfig(k=2))
    for i in range(2):
        m.observe(episode(i, *OBJS[i]))
    adv = m.advise("Put the silver coin on the oak bench.", "w0")
    assert adv.tool is not None
    assert adv.tool.run(adv.pattern.slots)["program"][-1] == "put silver coin on oak bench"
    assert adv.plan == [s.replace("{e1}", "silver coin").replace("{e2}", "oak bench") for s in PLAN]
    bad = "def tool(e1, e2):\n    raise RuntimeError('boom')\n"
    from divelab.selfimprove.metis.tools import run_tool_source

    assert "boom" in run_tool_source(bad, [{"e1": "a", "e2": "b"}])[0]["error"]


def test_demotion_after_repeated_failures() -> None:
    m = Metis(codifier=TemplateCodifier(), config=MetisConfig(k=1, demote_after=2))
    m.observe(episode(0, *OBJS[0]))
    tool = m.registry.active()[0]
    m.report_tool(tool, False, "x")
    m.report_tool(tool, True)
    m.report_tool(tool, False, "y")
    assert tool.active  # failures must be consecutive
    m.report_tool(tool, False, "z")
    assert not tool.active and tool.calls == 4 and tool.failures == 3
    adv = m.advise("Put the old book on the oak bench.", "w0")
    assert adv.tool is None and adv.plan  # back to text
    assert any("demoted" in e.text for e in m.store.entries(kind="pitfall"))


def test_registry_counts_never_invoked_tools() -> None:
    m = Metis(codifier=TemplateCodifier(), config=MetisConfig(k=1))
    m.observe(episode(0, *OBJS[0]))
    m.observe(episode(1, *OBJS[1], env="w9"))
    assert len(m.registry.never_invoked()) == 2
    m.report_tool(m.registry.active()[0], True)
    assert len(m.registry.never_invoked()) == 1
    assert {s.name for s in m.registry.specs()} == {t.name for t in m.registry.active()}


def test_bm25_retrieval_and_bad_kind(tmp_path) -> None:
    s = MemoryStore()
    s.put(Entry("a", "fact", "w0", "the blue mug is in the wooden chest"))
    s.put(Entry("b", "fact", "w0", "the key lies on the book rack"))
    s.put(Entry("c", "plan", "w0|eat <e1>", "take {e1}; eat {e1}"))
    hits = s.search("where is the key", kinds=("fact",))
    assert hits[0][0].id == "b"
    assert s.search("zebra", kinds=("fact",)) == []
    with pytest.raises(ValueError, match="unknown memory kind"):
        s.search("x", kinds=("nope",))
    with pytest.raises(ValueError, match="unknown memory kind"):
        Entry("x", "nope", "k", "t")


def test_persistence_round_trip_and_torn_line(tmp_path) -> None:
    path = tmp_path / "mem.jsonl"
    m = Metis(MemoryStore(path), codifier=TemplateCodifier(), config=MetisConfig(k=2))
    for i in range(3):
        m.observe(episode(i, *OBJS[i]))
    with open(path, "ab") as f:
        f.write(b'{"op": "put", "entry": {"id": "torn", "ki')  # a write cut short
    again = Metis(MemoryStore(path), codifier=TemplateCodifier(), config=MetisConfig(k=2))
    assert again.store.skipped_lines == 1
    assert len(again.registry.active()) == 1 and again.recurrence[episode(0, *OBJS[0]).pattern] == 3
    assert again.advise("Put the red ball on the oak bench.", "w0").tool is not None
    again.store.put(Entry("after", "fact", "w0", "written after the torn line"))
    assert MemoryStore(path).get("after") is not None


def test_persistence_survives_kill_mid_write(tmp_path) -> None:
    path = tmp_path / "mem.jsonl"
    code = (f"from divelab.selfimprove.metis import MemoryStore, Entry\ns = MemoryStore({str(path)!r})\n"
            "i = 0\nwhile True:\n    s.put(Entry(f'e{i}', 'fact', 'w0', 'x' * 5000 + str(i)))\n    i += 1\n")
    proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ})
    deadline = time.time() + 20
    while (not path.exists() or path.stat().st_size < 200_000) and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = MemoryStore(path)
    n = len(store)
    assert n > 10 and store.skipped_lines <= 1
    assert all(e.text.endswith(e.id[1:]) for e in store.entries())  # every loaded record is whole


def test_rule_and_chat_distillers() -> None:
    from divelab.selfimprove.metis import RuleDistiller

    d = RuleDistiller()(episode(0, *OBJS[0]))
    assert d.plan == PLAN
    assert any("blue mug" in f and "chest" in f for f in d.facts)
    assert RuleDistiller()(episode(1, *OBJS[1], won=False)).pitfalls
    reply = json.dumps({"plan": ["go east", "take blue mug from chest"], "facts": ["the chest is east"],
                        "pitfalls": ["open the chest first"]})
    chat = ScriptedChatModel(replies=[f"Here you go:\n```json\n{reply}\n```", "not json at all"])
    cd = ChatDistiller(chat)
    out = cd(episode(0, *OBJS[0]))
    assert out.plan == ["go east", "take {e1} from chest"] and out.facts == ["the chest is east"]
    assert "blue mug" in chat.calls[0][1].content  # the distiller (unlike the codifier) reads the trajectory
    assert cd(episode(1, *OBJS[1])).plan == [] and cd.rejected == 1
    m = Metis(distiller=ChatDistiller(ScriptedChatModel(replies=[f"```json\n{reply}\n```"])),
              config=MetisConfig(codify=False))
    m.observe(episode(0, *OBJS[0]))
    assert m.store.entries(kind="pitfall")[0].text == "open the chest first"


def test_config_errors() -> None:
    with pytest.raises(ValueError, match="k must be >= 1"):
        MetisConfig(k=0)
    with pytest.raises(ValueError, match="needs a codifier"):
        Metis(config=MetisConfig())
    with pytest.raises(ValueError, match="probability"):
        NoisyCodifier(leak=2.0)
