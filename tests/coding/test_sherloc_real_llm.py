"""SHERLOC on a real LLM (E169): the SmolLM2 slice's code path, driven here by a scripted chat model."""

from __future__ import annotations

import json

import pytest

from divelab.chat import ScriptedChatModel
from divelab.claims import Kind
from divelab.coding.sherloc import RepoSpec, open_repo
from divelab.coding.sherloc.benchmark import Task
from divelab.coding.sherloc.real_llm import RealConfig, measure, slice_indices

OPS = '''\
def clamp(x, lo, hi):
    if x > lo:
        return lo
    if x > hi:
        return hi
    return x


def total(xs):
    s = 0
    for x in xs:
        s += x
    return s
'''

GOOD = {"file": "calc/ops.py", "symbol": "clamp", "line_span": [2, 2], "location_description": "the lower check",
        "root_cause_hypothesis": "wrong comparison", "solution_idea": "flip it", "dependencies": [],
        "testing_impact": "test_clamp_low", "confidence": 0.8}


@pytest.fixture()
def repo(tmp_path):
    root = tmp_path / "calcrepo"
    (root / "calc").mkdir(parents=True)
    (root / "calc" / "__init__.py").write_text("")
    (root / "calc" / "ops.py").write_text(OPS.replace("x > lo", "x < lo"))
    (root / "tests").mkdir()
    (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "test_ops.py").write_text("import unittest\n")
    spec = RepoSpec("calc", str(root), sources=("calc/__init__.py", "calc/ops.py"), tests=("tests",),
                    test_modules=("tests.test_ops",), purge=("calc", "tests"))
    return open_repo(spec, tmp_path / "mat")


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


def test_add_to_runs_at_full_scale_only(repo, monkeypatch):
    from divelab.claims import Reproduction
    from divelab.coding.sherloc import real_llm
    from divelab.coding.sherloc.finding import Location
    from divelab.lm import real

    monkeypatch.setattr(real, "is_available", lambda *a, **k: True)
    monkeypatch.setattr(real_llm, "load_chat", lambda cfg: ScriptedChatModel(fn=lambda m, t: "no idea"))
    tasks = [_task(0), _task(1)]
    preds = {k: [[Location("calc/ops.py", "clamp", (2, 2))]] * 2 for k in ("sherloc", "bm25", "ochiai", "surprisal",
                                                                            "sherloc-heuristic")}
    rep = Reproduction("sherloc", "t", "quick", 0)
    real_llm.add_to(rep, "quick", 0, tasks, {"calc": repo}, preds)
    assert not rep.claims and "smollm2" not in rep.details
    rep = Reproduction("sherloc", "t", "full", 0)
    real_llm.add_to(rep, "full", 0, tasks, {"calc": repo}, preds)
    d = rep.details["smollm2"]
    assert d["n_tasks"] == 2 and set(d["acc@1"]) == {"smollm2", "heuristic", "spectrum", "bm25", "ochiai",
                                                           "surprisal"}
    assert d["runs_where_path_fired"]["fallback"] == 2 and len(rep.claims) == 4
