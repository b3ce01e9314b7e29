"""SHERLOC (E169): tools, case-file schema, self-recovery, SBFL, the benchmark builder, repair, smoke run."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from sherloc_repo import calc_spec, write_calc

from divelab.chat import ScriptedChatModel, ToolCall, assistant
from divelab.coding.sherloc import (
    HeuristicDiagnostician,
    RepairAgent,
    RepoSpec,
    RepoTools,
    SherlocLocalizer,
    bm25_localize,
    build_tasks,
    functions,
    mutants_of,
    ochiai_localize,
    open_repo,
    parse_case_file,
    render,
)
from divelab.coding.sherloc.finding import CaseFile, Finding, Location
from divelab.coding.sherloc.scoring import hit

OPS = '''\
"""Small arithmetic helpers."""


def clamp(x, lo, hi):
    # keep x inside [lo, hi]
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def total(xs):
    s = 0
    for x in xs:
        s += x
    return s


class Counter:
    def __init__(self):
        self.n = 0

    def bump(self, k=1):
        self.n = self.n + k
        return self.n
'''

UTIL = '''\
from calc.ops import clamp


def percent(x):
    return clamp(x, 0, 100)
'''

TESTS = '''\
import unittest
from calc.ops import Counter, clamp, total
from calc.util import percent


class TestOps(unittest.TestCase):
    def test_clamp_low(self):
        self.assertEqual(clamp(-5, 0, 10), 0)

    def test_clamp_high(self):
        self.assertEqual(clamp(50, 0, 10), 10)

    def test_clamp_inside(self):
        self.assertEqual(clamp(5, 0, 10), 5)

    def test_total(self):
        self.assertEqual(total([1, 2, 3]), 6)

    def test_counter(self):
        c = Counter()
        c.bump()
        self.assertEqual(c.bump(2), 3)

    def test_percent(self):
        self.assertEqual(percent(120), 100)
'''


MODULES = {"ops.py": OPS, "util.py": UTIL}


@pytest.fixture(scope="module")
def fixture_repo(tmp_path_factory) -> Path:
    return write_calc(tmp_path_factory.mktemp("calcrepo"), MODULES, TESTS)


@pytest.fixture(scope="module")
def spec(fixture_repo) -> RepoSpec:
    return calc_spec(fixture_repo, MODULES)


@pytest.fixture(scope="module")
def repo(spec, tmp_path_factory):
    return open_repo(spec, tmp_path_factory.mktemp("materialized"))


# -- tools --------------------------------------------------------------------------------------
def test_tools_on_fixture_repo(fixture_repo):
    t = RepoTools(fixture_repo)
    view = t.view_file("calc/ops.py", 4, 6)
    assert view.splitlines()[0].split()[0] == "4" and "def clamp" in view and len(view.splitlines()) == 3
    hits = t.search_code(r"def clamp\b")
    assert hits.splitlines() == ["calc/ops.py:4: def clamp(x, lo, hi):"]
    assert "no match" in t.search_code("nothing_like_this")
    tree = t.repo_tree(".", depth=2)
    assert "calc/ops.py" in tree and "tests/test_ops.py" in tree
    g = json.loads(t.import_graph("calc.ops"))
    assert "calc.util" in g["imported_by"] and "tests.test_ops" in g["imported_by"]
    assert json.loads(t.import_graph("calc.util"))["imports"] == ["calc.ops"]
    # errors are structured, never raised
    for name, args in [("view_file", {"path": "nope.py"}), ("search_code", {"pattern": "("}),
                       ("import_graph", {"module": "zzz"}), ("rm_rf", {}), ("view_file", {"bad": 1})]:
        out = json.loads(t.call(name, args))
        assert "error" in out and "view_file" in out["allowed"]
    assert t.calls == 5 and t.chars_read > 0
    with pytest.raises(NotADirectoryError):
        RepoTools(fixture_repo / "missing")


# -- finding schema ------------------------------------------------------------------------------
GOOD = {"file": "calc/ops.py", "symbol": "clamp", "line_span": [5, 5], "location_description": "clamp's lower check",
        "root_cause_hypothesis": "wrong comparison", "solution_idea": "flip the comparison", "dependencies": [],
        "testing_impact": "test_clamp_low", "confidence": 0.8}


def test_case_file_schema():
    case = parse_case_file("here:\n```json\n" + json.dumps({"findings": [GOOD]}) + "\n```")
    assert case.findings[0].line_span == (5, 5) and case.findings[0].symbol == "clamp"
    assert parse_case_file(json.dumps(GOOD)).findings[0].file == "calc/ops.py"  # a bare finding is accepted
    with pytest.raises(ValueError, match="invalid JSON"):
        parse_case_file('{"findings": [}')
    with pytest.raises(ValueError, match="confidence"):
        parse_case_file(json.dumps({"findings": [{**GOOD, "confidence": 3}]}))
    with pytest.raises(ValueError, match="root_cause_hypothesis"):
        parse_case_file(json.dumps({"findings": [{k: v for k, v in GOOD.items() if k != "root_cause_hypothesis"}]}))
    with pytest.raises(ValueError, match="line_span"):
        parse_case_file(json.dumps({"findings": [{**GOOD, "line_span": [9, 2]}]}))
    text = render(case, location_only=True)
    assert "root_cause" not in text and "calc/ops.py" in text


# -- the loop and its self-recovery ---------------------------------------------------------------
ISSUE = "test_clamp_low fails\n\n`tests.test_ops.TestOps.test_clamp_low` fails:\nAssertionError: -5 != 0\n"


def test_recovery_paths_with_scripted_model(fixture_repo):
    model = ScriptedChatModel(replies=[
        "I think the bug is in clamp {not json",  # invalid JSON -> re-ask
        assistant("", [ToolCall("view_file", {"path": "calc/nope.py"}, id="a")]),  # tool error -> structured
        '{"tool": "search_code", "arguments": {"pattern": "def clamp"}}',  # a text tool call
        json.dumps({"findings": [{**GOOD, "confidence": 2.0}]}),  # schema error -> re-ask
        json.dumps({"findings": [GOOD]}),
    ])
    res = SherlocLocalizer(model, max_turns=8).localize(RepoTools(fixture_repo), ISSUE)
    assert res.recoveries == {"reask": 2, "tool_error": 1}
    assert not res.fallback and res.locations[0] == Location("calc/ops.py", "clamp", (5, 5), 0.8)
    assert res.tool_calls == 2 and res.turns == 5
    assert "not a valid case file" in model.calls[1][-1].content  # the validator's error was shown
    assert '"error"' in model.calls[2][-1].content


def test_budget_exhausted_then_fallback(fixture_repo):
    model = ScriptedChatModel(fn=lambda m, t: assistant("", [ToolCall("repo_tree", {}, id="x")]) if t else "no idea")
    res = SherlocLocalizer(model, max_turns=3, max_retries=1).localize(RepoTools(fixture_repo), ISSUE)
    assert res.recoveries["forced_finalise"] == 1 and res.recoveries["fallback"] == 1 and res.fallback
    assert res.case.findings and res.locations[0].file.startswith("calc/")  # lexical fallback, no test files

    def boom(m, t):
        raise ConnectionError("server down")
    res = SherlocLocalizer(ScriptedChatModel(fn=boom)).localize(RepoTools(fixture_repo), ISSUE)
    assert res.fallback and res.recoveries["model_error:ConnectionError"] == 1
    with pytest.raises(ValueError, match="empty"):
        SherlocLocalizer(model).localize(RepoTools(fixture_repo), "  ")


def test_heuristic_diagnostician_finds_the_function(fixture_repo):
    res = SherlocLocalizer(HeuristicDiagnostician()).localize(RepoTools(fixture_repo), ISSUE)
    assert not res.fallback and res.tool_calls >= 3
    assert res.locations[0].file == "calc/ops.py" and res.locations[0].symbol == "clamp"
    f = res.case.findings[0]
    assert f.root_cause_hypothesis and f.solution_idea and f.testing_impact and f.location_description


# -- mutation, benchmark builder, SBFL, repair (real tests in the sandbox) -------------------------
def test_planted_mutant_is_a_minimal_edit():
    fn = next(f for f in functions(OPS) if f.qualname == "clamp")
    ms = mutants_of(OPS, "calc/ops.py", fn)
    assert ms and {m.operator for m in ms} >= {"comparison-flip", "negate-condition"}
    for m in ms:
        a, b = m.original.splitlines(), m.mutated.splitlines()
        changed = [i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y]
        assert "# keep x inside [lo, hi]" in m.mutated  # the comment survives: only one node was rewritten
        if m.operator != "drop-statement":
            assert len(a) == len(b) and changed == [m.span[0] - 1]
    meth = next(f for f in functions(OPS) if f.qualname == "Counter.bump")
    assert any(m.operator == "arithmetic-swap" for m in mutants_of(OPS, "calc/ops.py", meth))


def test_benchmark_sbfl_and_repair(repo):
    tasks = build_tasks(repo, 2, seed=1)
    assert len(tasks) == 2
    for t in tasks:
        assert t.failing_tests and t.file.startswith("calc/") and t.function in {f.qualname for f in
                                                                                  functions(t.original)}
        assert t.failing_tests[0] in t.issue
        fixed = repo.run({**repo.with_task(t), t.file: t.original})  # the gold patch makes the tests pass
        assert fixed.ok
        ochiai = ochiai_localize(repo.with_task(t), t.spectrum, len(t.failing_tests))
        assert hit(ochiai, t, "function", 3)
    t = tasks[0]
    good = CaseFile(findings=[Finding(file=t.file, symbol=t.function, line_span=t.span, location_description="x",
                                      root_cause_hypothesis="x", solution_idea="x", testing_impact="x",
                                      confidence=0.9)])
    agent = RepairAgent(repo, budget=30)
    assert agent.repair(t, t.issue + "\n\n" + render(good)).resolved
    assert not RepairAgent(repo, budget=1).repair(t, t.issue + "\n\n" + render(CaseFile(findings=[Finding(
        file="calc/util.py", symbol="percent", line_span=(5, 5), location_description="x",
        root_cause_hypothesis="x", solution_idea="x", testing_impact="x", confidence=0.9)]))).resolved


def test_sbfl_ochiai_ranks_the_line_only_failing_tests_run():
    files = {"m.py": textwrap.dedent("""\
        def f(x):
            a = 1
            if x:
                return 2
            return a
        """)}
    spectrum = {"m.py": {2: (1, 3), 3: (1, 3), 4: (1, 0), 5: (0, 3)}}
    locs = ochiai_localize(files, spectrum, 1)
    assert locs[0].span == (4, 4) and locs[0].symbol == "f" and locs[0].score == pytest.approx(1.0)
    assert locs[1].score == pytest.approx(0.5)


def test_bm25_hierarchy(fixture_repo, repo):
    locs = bm25_localize(repo.files, "Counter bump returns the wrong count after bump(2)")
    assert locs[0].file == "calc/ops.py" and locs[0].symbol == "Counter.bump"


def test_spectrum_diagnostician_breaks_sbfl_ties_with_the_failing_tests_calls(fixture_repo):
    from divelab.coding.sherloc.spectrum_policy import SpectrumDiagnostician

    issue = "test_counter fails\n\n`tests.test_ops.TestOps.test_counter` fails:\nAssertionError: 4 != 3\n"
    files = {f: (fixture_repo / f).read_text() for f in ("calc/__init__.py", "calc/ops.py", "calc/util.py")}
    # total's line 16 and Counter.bump's line 25 tie at Ochiai 1.0; SBFL's own order (file, line) puts total first
    spectrum = {"calc/ops.py": {16: (1, 0), 25: (1, 0), 26: (1, 3), 6: (0, 3)}}
    sbfl = ochiai_localize(files, spectrum, 1)
    assert sbfl[0].symbol == "total"
    diag = SpectrumDiagnostician(files=files, spectrum=spectrum, n_failing=1)
    res = SherlocLocalizer(diag).localize(RepoTools(fixture_repo), issue)
    assert not res.fallback and res.tool_calls >= 3  # it read the test and looked up what the test calls
    assert [(loc.symbol, loc.span) for loc in res.locations[:2]] == [("Counter.bump", (25, 25)), ("total", (16, 16))]
    assert res.case.findings[0].confidence == pytest.approx(1.0)
    with pytest.raises(ValueError, match="spectrum"):
        SpectrumDiagnostician(files=files, spectrum={})


def test_repair_agent_localizing_with_sbfl_resolves_without_a_report(repo):
    t = build_tasks(repo, 2, seed=1)[0]
    with pytest.raises(ValueError, match="localizer"):
        RepairAgent(repo, localizer="grep")
    out = RepairAgent(repo, budget=30, localizer="sbfl").repair(t, t.issue)
    assert out.resolved and out.localization_chars > 0
