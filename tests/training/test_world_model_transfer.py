"""World-modeling transfer to BFCL (divelab.training.world_model.transfer): the synthetic tool tasks and rows it
trains on, the claim read from measured dicts (strongest baseline, sham control, silent positive control, floor),
and a real smoke run of both stages when SmolLM2 and bfcl-eval are installed."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from divelab.claims import Kind, Verdict
from divelab.envs.tool_families import FAMILIES, family
from divelab.envs.tool_tasks import tasks
from divelab.training.world_model import transfer


def test_tool_tasks_are_seeded_executable_and_sometimes_unanswerable() -> None:
    a, b = tasks(200, 3), tasks(200, 3)
    assert [(t.question, t.call) for t in a] == [(t.question, t.call) for t in b]
    assert [t.question for t in tasks(20, 4)] != [t.question for t in a[:20]]
    none = [t for t in a if t.call is None]
    assert 0 < len(none) < 80 and all(t.result is None for t in none)
    for t in a:
        names = [x.name for x in t.tools]
        assert all("." not in n for n in names) and len(names) == len(set(names)) >= 1
        if t.call is not None:
            assert t.call.name in names and t.result == family(t.family).run(dict(t.call.arguments))
            json.dumps(t.result)  # a JSON observation
    assert len({f.key for f in FAMILIES}) == len(FAMILIES)
    with pytest.raises(ValueError, match="unknown tool family"):
        family("nope")
    with pytest.raises(ValueError, match="max_tools"):
        tasks(3, 0, max_tools=0)


def test_family_functions_follow_their_rules() -> None:
    assert family("temperature").run({"value": 100, "from_unit": "celsius", "to_unit": "fahrenheit"})["value"] == 212
    assert family("days_between").run({"start_date": "2026-01-01", "end_date": "2026-02-01"}) == {"days": 31}
    assert family("recipes").run({"ingredient": "eggs", "max_minutes": 30}) == {"recipes": ["omelette", "shakshuka"]}


class _Tok:
    """A chat-template stand-in: renders role/content lines (enough to check where prompts end)."""

    def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=False):
        text = "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")


def test_rows_end_where_the_model_speaks_and_the_sham_only_moves_results() -> None:
    from divelab.lm.tool_rows import NO_TOOL, call_rows, result_rows

    items = tasks(40, 1)
    calls = call_rows(items, _Tok())
    assert all(r["prompt"].endswith("<assistant>") for r in calls)
    assert {r["completion"] for r, t in zip(calls, items, strict=True) if t.call is None} == {NO_TOOL}
    real, sham = result_rows(items, _Tok()), result_rows(items, _Tok(), shuffle_seed=0)
    assert len(real) == sum(t.call is not None for t in items)
    assert all(r["prompt"].endswith("[tool result]\n") for r in real)
    assert [r["prompt"] for r in real] == [r["prompt"] for r in sham]
    assert sorted(r["completion"] for r in real) == sorted(r["completion"] for r in sham)
    assert sum(a["completion"] != b["completion"] for a, b in zip(real, sham, strict=True)) > len(real) // 2


def _agent(n: int, agent_acc: float, untuned: float = 0.0) -> dict:
    cats = ["simple"] * n + ["irrelevance"] * 4
    k = int(agent_acc * n)
    return {"ids": [str(i) for i in range(n + 4)], "categories": cats,
            "untuned": {"bfcl": {"correct": [int(i < untuned * n) for i in range(n)] + [1] * 4}, "own": [0, 0]},
            "agent": {"bfcl": {"correct": [int(i < k) for i in range(n)] + [0] * 4}, "own": [1, 0]}}


def _run(n: int, world: float, sham: float, res_world: float, res_sham: float, shift: int = 0) -> dict:
    def arm(acc: float, res: float) -> dict:
        k = int(acc * n)
        return {"bfcl": {"correct": [int((i + shift) % n < k) for i in range(n)] + [0] * 4},
                "results": [int(i < res * 10) for i in range(10)]}
    return {"world": arm(world, res_world), "sham": arm(sham, res_sham), "seconds": 1.0}


def test_transfer_claim_against_the_strongest_baseline_with_its_sham_control() -> None:
    agent = _agent(100, 0.20)
    runs = [_run(100, w, s, 0.6, 0.1, shift=j) for j, (w, s) in enumerate([(0.31, 0.25), (0.33, 0.24), (0.30, 0.26)])]
    claim, check = transfer.claims(agent, runs, 0)
    assert claim.kind == Kind.EMPIRICAL and check.kind == Kind.CHECK
    assert claim.compared_with == "sham"  # the sham (0.25) beats the agent (0.20): it is the baseline
    assert claim.measured == pytest.approx(np.mean([0.31 - 0.25, 0.33 - 0.24, 0.30 - 0.26]))
    assert claim.replication["unit"] == "training runs" and claim.replication["n"] == 3
    assert "sham is itself the strongest baseline" in claim.rule["args"]["control"]["none"]
    assert claim.verdict not in (Verdict.UNINFORMATIVE, Verdict.NOT_CHECKABLE)
    assert check.measured == pytest.approx(0.5)
    assert "competence: the agent answers 20/100" in claim.note


def test_against_the_agent_the_sham_is_the_negative_control() -> None:
    runs = [_run(100, w, s, 0.6, 0.1, shift=j) for j, (w, s) in enumerate([(0.31, 0.15), (0.33, 0.16), (0.30, 0.14)])]
    claim, _ = transfer.claims(_agent(100, 0.20), runs, 0)
    assert claim.compared_with == "agent"
    ctl = claim.rule["args"]["control"]
    assert ctl["name"].startswith("the shuffled-result sham") and ctl["effect"] == pytest.approx(-0.05)


def test_silent_positive_control_or_a_floor_makes_the_claim_uninformative() -> None:
    agent = _agent(50, 0.2)
    silent = [_run(50, 0.3, 0.2, 0.1, 0.1, shift=j) for j in range(3)]
    claim, _ = transfer.claims(agent, silent, 0)
    assert claim.verdict == Verdict.UNINFORMATIVE and "positive control is silent" in claim.reason
    floor = [_run(50, 0.0, 0.0, 0.6, 0.1, shift=j) for j in range(3)]
    claim, _ = transfer.claims(_agent(50, 0.0), floor, 0)
    assert claim.verdict == Verdict.UNINFORMATIVE and "floor" in claim.reason


def test_not_measured_names_why() -> None:
    claims = transfer.not_measured("measured at the full scale only")
    assert [c.verdict for c in claims] == [Verdict.NOT_CHECKABLE] * 2


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None, reason="needs bfcl-eval: make install")
def test_smoke_stages_run_on_the_real_model() -> None:
    from divelab.lm import real

    if not real.is_available():
        pytest.skip(f"needs the real model; install with: {real.INSTALL_HINT}")
    tp = transfer.SMOKE
    su = transfer.setup(tp, 0)
    agent = transfer.measure_agent(tp, su)
    runs = [transfer.measure_run(tp, su, 0, r) for r in range(tp.runs)]
    assert len(agent["ids"]) == sum(n for _, n in tp.bfcl)
    assert all(len(r["world"]["results"]) == sum(t.call is not None for t in tasks(tp.held_out, 900)) for r in runs)
    claims = transfer.claims(agent, runs, 0)
    assert len(claims) == 2 and all(c.verdict is not None for c in claims)
    comp = transfer.summary(agent, runs)["agent_competence"]
    answerable = [i for i, c in enumerate(agent["categories"]) if c != "irrelevance"]
    assert comp["n"] == len(answerable) and comp["ci"][0] <= comp["accuracy"] <= comp["ci"][1]
