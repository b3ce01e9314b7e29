"""SHERLOC on a real LLM (E169): the SmolLM2 slice's code path, driven here by a scripted chat model."""

from __future__ import annotations

import json

import pytest
from sherloc_repo import CLAMP, TOTAL, module, open_calc

from divelab.chat import ScriptedChatModel
from divelab.claims import Kind
from divelab.coding.sherloc.benchmark import Task
from divelab.coding.sherloc.real_llm import RealConfig, measure, slice_indices

OPS = module(CLAMP, TOTAL).replace("x < lo", "x > lo")  # the bug: the lower bound's comparison flipped

GOOD = {"file": "calc/ops.py", "symbol": "clamp", "line_span": [2, 2], "location_description": "the lower check",
        "root_cause_hypothesis": "wrong comparison", "solution_idea": "flip it", "dependencies": [],
        "testing_impact": "test_clamp_low", "confidence": 0.8}


@pytest.fixture()
def repo(tmp_path):
    return open_calc(tmp_path / "calcrepo", {"ops.py": OPS.replace("x > lo", "x < lo")}, "import unittest\n",
                     tmp_path / "mat")


def _task(i: int) -> Task:
    return Task(f"calc-{i}", "calc", "calc/ops.py", "clamp", (2, 2), "flip", "test_clamp_low fails: clamp(-5, 0, 9) "
                "returned 0 != -5 in total", ["tests.test_ops.T.test_clamp_low"], 3, OPS, "", {}, "")


def test_slice_indices():
    ts = [Task(str(i), r, "f.py", "g", (1, 1), "op", "x", [], 0, "", "") for i, r in enumerate("aabbbc")]
    assert slice_indices(ts, 1) == [0, 2, 5] and slice_indices(ts, 2) == [0, 1, 2, 3, 5]
    with pytest.raises(ValueError, match="per_repo"):
        slice_indices(ts, 0)


def test_measure_counts_recoveries_and_scores_beside_baselines(repo):
    calls = {"n": 0}

    def reply(messages, tools):
        calls["n"] += 1
        first_task = "T1" in messages[1].content
        if first_task and calls["n"] == 1:
            return "the bug is in clamp {not json"                       # -> reask
        if first_task:
            return json.dumps({"findings": [GOOD]})                       # valid case file
        return '{"tool": "view_file", "arguments": {"path": "nope.py"}}' if tools else "I do not know"

    tasks = [_task(0), _task(1)]
    tasks[0].issue = "T1 " + tasks[0].issue
    cfg = RealConfig(max_turns=2, max_retries=1)
    claims, d = measure(ScriptedChatModel(fn=reply), tasks, {"calc": repo}, cfg, seed=0)
    assert d["n_tasks"] == 2 and d["n_valid_case_files"] == 1
    assert d["runs_where_path_fired"] == {"reask": 2, "tool_error": 1, "forced_finalise": 1, "fallback": 1}
    assert d["acc@1"]["smollm2"]["function"] >= 0.5 and d["acc@1_model_written_only"]["function"] == 1.0
    assert set(d["acc@1"]) == {"smollm2", "bm25", "ochiai", "heuristic"}
    assert [c.kind for c in claims] == [Kind.EMPIRICAL, Kind.EMPIRICAL, Kind.EMPIRICAL, Kind.CHECK]
    assert claims[0].measured == 0.5 and claims[-1].verdict.value == "reproduced"
    assert all(c.compared_with and len(c.baselines) == 3 for c in claims[1:3])  # judged on the strongest


def test_the_plan_runs_the_slice_at_full_scale_only():
    from divelab import plans
    from divelab.coding.sherloc import reproduce

    assert reproduce.PLANS["smoke"].real_llm is None and reproduce.PLANS["quick"].real_llm is None
    assert reproduce.PLANS["full"].real_llm == RealConfig(per_repo=2)
    plan = plans.resolve(reproduce, "full", {"real_llm.max_turns": "5", "real_diagnostician.adapt.steps": "3"})
    assert plan.real_llm.max_turns == 5 and plan.real_diagnostician.adapt.steps == 3
    recorded = plans.to_dict(plan)
    assert recorded["real_llm"]["max_turns"] == 5 and recorded["real_diagnostician"]["adapt"]["steps"] == 3


def test_add_to_runs_the_sub_plan_it_is_given(repo, monkeypatch):
    from divelab.claims import Reproduction
    from divelab.coding.sherloc import real_llm
    from divelab.coding.sherloc.finding import Location
    from divelab.lm import real

    monkeypatch.setattr(real, "is_available", lambda *a, **k: True)
    monkeypatch.setattr(real_llm, "load_chat", lambda cfg: ScriptedChatModel(fn=lambda m, t: "no idea"))
    tasks = [_task(0), _task(1)]
    preds = {k: [[Location("calc/ops.py", "clamp", (2, 2))]] * 2 for k in ("sherloc", "bm25", "ochiai", "surprisal",
                                                                            "sherloc-heuristic")}
    rep = Reproduction("sherloc", "t", "full", 0)
    real_llm.add_to(rep, RealConfig(per_repo=2), 0, tasks, {"calc": repo}, preds)
    d = rep.details["smollm2"]
    assert d["n_tasks"] == 2 and set(d["acc@1"]) == {"smollm2", "heuristic", "spectrum", "bm25", "ochiai",
                                                           "surprisal"}
    assert d["runs_where_path_fired"]["fallback"] == 2 and len(rep.claims) == 4
