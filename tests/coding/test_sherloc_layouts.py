"""SHERLOC (E169) stays inside the repository: its tests run in the repository's own layout (src/ or
flat, unittest or pytest-style, tests with or without ``__init__.py``) even when an installed top-level
``tests`` package is on the path; a failed coverage run is said, not silently empty; no localizer
answers with a file outside the repository; same-named methods of one file are told apart."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from sherloc_repo import CLAMP, COUNTER, module

from divelab.chat import ScriptedChatModel
from divelab.coding.sherloc import (
    HeuristicDiagnostician,
    RepoSpec,
    RepoTools,
    SherlocLocalizer,
    build_tasks,
    ochiai_localize,
    open_repo,
    run_tests,
)
from divelab.coding.sherloc import runner as sherloc_runner
from divelab.coding.sherloc.finding import Location
from divelab.coding.sherloc.scoring import hit

OPS = module(CLAMP, COUNTER, '''\
class Timer:
    def __init__(self):
        self.t = 0

    def bump(self, k=1):
        self.t = self.t + 2 * k
        return self.t
''')  # two methods named bump in one file

UNITTEST = '''\
import unittest
from calc.ops import Counter, Timer, clamp


class TestOps(unittest.TestCase):
    def test_clamp_low(self):
        self.assertEqual(clamp(-5, 0, 10), 0)

    def test_clamp_high(self):
        self.assertEqual(clamp(50, 0, 10), 10)

    def test_counter(self):
        self.assertEqual(Counter().bump(2), 2)

    def test_timer(self):
        self.assertEqual(Timer().bump(2), 4)
'''

# pytest style: plain functions, a plain Test* class, and a sibling helper imported the way pytest's
# default import mode allows (the test directory itself is on the path)
PYTEST = '''\
from calc.ops import Counter, Timer, clamp
from helpers import LOW


def test_clamp_low():
    assert clamp(-5, LOW, 10) == LOW


def test_clamp_high():
    assert clamp(50, 0, 10) == 10


class TestBump:
    def setup_method(self, method):
        self.c = Counter()

    def test_counter(self):
        assert self.c.bump(2) == 2

    def test_timer(self):
        assert Timer().bump(2) == 4
'''

UNITTEST_IDS = {f"tests.test_ops.TestOps.{t}" for t in ("test_clamp_low", "test_clamp_high", "test_counter",
                                                        "test_timer")}
PYTEST_IDS = {"tests.test_ops.test_clamp_low", "tests.test_ops.test_clamp_high", "tests.test_ops.TestBump.test_counter",
              "tests.test_ops.TestBump.test_timer"}

# (source root, tests are a package, test style)
LAYOUTS = {
    "flat, tests package": ("", True, "unittest"),
    "flat, tests without __init__": ("", False, "unittest"),
    "src, tests without __init__": ("src", False, "unittest"),
    "src, tests package": ("src", True, "unittest"),
    "flat, pytest style": ("", False, "pytest"),
    "src, pytest style": ("src", False, "pytest"),
}


def make_repo(root: Path, src: str, package_tests: bool, style: str) -> tuple[list[str], set[str]]:
    """Write a small repository; returns its source files and the ids of its tests."""
    pkg = root / src / "calc" if src else root / "calc"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text(OPS)
    (root / "tests").mkdir()
    if package_tests:
        (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "test_ops.py").write_text(UNITTEST if style == "unittest" else PYTEST)
    if style == "pytest":
        (root / "tests" / "helpers.py").write_text("LOW = 0\n")
    prefix = f"{src}/" if src else ""
    return [f"{prefix}calc/__init__.py", f"{prefix}calc/ops.py"], UNITTEST_IDS if style == "unittest" else PYTEST_IDS


@pytest.fixture
def shadowing_site(monkeypatch) -> dict[str, str]:
    """A directory beside coverage.py that also holds an installed top-level ``tests`` package and an
    installed ``calc`` (as many environments do), written into the sandbox with the repository."""
    import coverage

    cov_dir = Path(coverage.__file__).parent
    files = {f"shadow-site/coverage/{p.relative_to(cov_dir)}": p.read_text(encoding="utf-8")
             for p in cov_dir.rglob("*.py") if "__pycache__" not in p.parts}
    files["shadow-site/tests/__init__.py"] = "INSTALLED = True\n"
    files["shadow-site/tests/test_ops.py"] = "raise ImportError('the installed tests package ran')\n"
    files["shadow-site/calc/__init__.py"] = "raise ImportError('the installed calc package was imported')\n"
    monkeypatch.setattr(sherloc_runner, "_coverage_path", lambda: "shadow-site")
    return files


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_tests_run_in_the_repository_layout_despite_a_shadowing_tests_package(layout, tmp_path, shadowing_site):
    src, package_tests, style = LAYOUTS[layout]
    sources, ids = make_repo(tmp_path, src, package_tests, style)
    files = {**sherloc_runner.read_repo_files(tmp_path), **shadowing_site}
    run = run_tests(files, ["tests.test_ops"], cover=sources)
    assert run.status == "completed" and not run.load_error, run.load_error
    assert set(run.passing) == ids and not run.failing
    assert run.coverage_error == ""
    ops = next(f for f in sources if f.endswith("ops.py"))
    assert run.coverage[ops][2][1] == 2  # `if x < lo:` ran under both clamp tests, each its own context

    # a planted bug: the spectrum points into the repository at the bug
    buggy = {**files, ops: OPS.replace("if x < lo:", "if x <= lo - 1 and x > lo:")}
    bad = run_tests(buggy, ["tests.test_ops"], cover=sources)
    assert bad.failing == sorted(i for i in ids if "clamp_low" in i) and not bad.coverage_error
    top = ochiai_localize(buggy, bad.coverage, len(bad.failing))[0]
    assert top.file == ops and top.symbol == "clamp"


def test_single_test_ids_of_either_style_run(tmp_path, shadowing_site):
    sources, _ = make_repo(tmp_path, "src", False, "pytest")
    files = {**sherloc_runner.read_repo_files(tmp_path), **shadowing_site}
    run = run_tests(files, ["tests.test_ops.TestBump.test_timer", "tests.test_ops.test_clamp_low"])
    assert run.passing == ["tests.test_ops.TestBump.test_timer", "tests.test_ops.test_clamp_low"]


def test_a_failed_coverage_run_is_said_not_silently_empty(tmp_path):
    sources, _ = make_repo(tmp_path, "", False, "unittest")
    (tmp_path / "tests" / "test_ops.py").write_text("import not_installed_anywhere\n" + UNITTEST)
    files = sherloc_runner.read_repo_files(tmp_path)
    run = run_tests(files, ["tests.test_ops"], cover=sources)
    assert "could not be loaded" in run.coverage_error and "not_installed_anywhere" in run.coverage_error
    assert not any(run.coverage.values()) and ochiai_localize(files, run.coverage, 1) == []
    spec = RepoSpec("calc", str(tmp_path), sources=tuple(sources), tests=("tests",), test_modules=("tests.test_ops",),
                    purge=("calc",))
    repo = open_repo(spec, tmp_path / "materialized")
    with pytest.raises(RuntimeError, match="does not run here|coverage of the calc test suite failed"):
        build_tasks(repo, 1)
    assert run_tests(files, ["tests.test_ops"]).coverage_error == ""  # no coverage asked, nothing to flag


def test_benchmark_tasks_on_a_repository_whose_tests_are_no_package(tmp_path, shadowing_site, monkeypatch):
    sources, _ = make_repo(tmp_path, "src", False, "unittest")
    spec = RepoSpec("calc", str(tmp_path), sources=tuple(sources), tests=("tests",), test_modules=("tests.test_ops",),
                    purge=())
    repo = open_repo(spec, tmp_path / "materialized")
    real_run = sherloc_runner.run_tests
    monkeypatch.setattr("divelab.coding.sherloc.benchmark.run_tests",
                        lambda files, *a, **kw: real_run({**files, **shadowing_site}, *a, **kw))
    tasks = build_tasks(repo, 2, seed=0)
    assert tasks and all(t.file in sources and t.spectrum for t in tasks)


# -- the localizer never leaves the repository ---------------------------------------------------
STDLIB_ISSUE = """test_ops fails in calc

Running the calc test suite, `tests.test_ops.TestOps.test_timer` fails:

Traceback (most recent call last):
  File "/usr/lib/python3.11/unittest/loader.py", line 154, in loadTestsFromName
    module = __import__(module_name)
  File "/usr/lib/python3.11/importlib/__init__.py", line 126, in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
ModuleNotFoundError: No module named 'tests.test_ops'
"""


def test_localizers_never_answer_outside_the_repository(tmp_path):
    make_repo(tmp_path, "", True, "unittest")
    tools = RepoTools(tmp_path)
    res = SherlocLocalizer(HeuristicDiagnostician()).localize(tools, STDLIB_ISSUE)
    assert res.case.findings and all((tmp_path / f.file).is_file() for f in res.case.findings)
    assert all(not Path(loc.file).is_absolute() for loc in res.locations)

    from divelab.coding.sherloc.cli import localize_cmd

    issue = tmp_path / "issue.txt"
    issue.write_text(STDLIB_ISSUE)
    out = localize_cmd(tmp_path, issue, None, "heuristic", "default", 8)
    assert out["findings"] and all((tmp_path / f["file"]).is_file() for f in out["findings"])

    # any model: a finding outside the repository is dropped (and counted), an absolute path inside it
    # becomes repository-relative, and an answer with nothing inside is re-asked
    base = {"symbol": "bump", "line_span": [23, 23], "location_description": "x", "root_cause_hypothesis": "x",
            "solution_idea": "x", "dependencies": [], "testing_impact": "x", "confidence": 0.5}
    model = ScriptedChatModel(replies=[
        json.dumps({"findings": [{**base, "file": "/usr/lib/python3.11/unittest/loader.py"}]}),
        json.dumps({"findings": [{**base, "file": "/usr/lib/python3.11/importlib/__init__.py"},
                                 {**base, "file": str(tmp_path / "calc" / "ops.py")}]}),
    ])
    res = SherlocLocalizer(model).localize(tools, STDLIB_ISSUE)
    assert res.recoveries["reask"] == 1 and res.recoveries["outside_repo"] == 1
    assert [(f.file, f.symbol) for f in res.case.findings] == [("calc/ops.py", "Timer.bump")]


def test_same_named_methods_are_class_qualified(tmp_path):
    make_repo(tmp_path, "", True, "unittest")
    line = OPS.splitlines().index("        self.t = self.t + 2 * k") + 1
    issue = ("test_timer fails in calc\n\nRunning the calc test suite, `tests.test_ops.TestOps.test_timer` fails:\n\n"
             "Traceback (most recent call last):\n"
             '  File "tests/test_ops.py", line 16, in test_timer\n    self.assertEqual(Timer().bump(2), 4)\n'
             f'  File "calc/ops.py", line {line}, in bump\n    self.t = self.t + 2 * k\nAssertionError: 3 != 4\n')
    res = SherlocLocalizer(HeuristicDiagnostician()).localize(RepoTools(tmp_path), issue)
    assert res.locations[0].file == "calc/ops.py" and res.locations[0].symbol == "Timer.bump"

    class _Task:  # what hit() reads of a task
        file, function, span = "calc/ops.py", "Timer.bump", (line, line)

    assert hit(res.locations, _Task, "function", 1)
    assert not hit([Location("calc/ops.py", "bump", (line, line))], _Task, "function", 1)  # ambiguous: no credit
    assert not hit([Location("calc/ops.py", "Counter.bump", (13, 13))], _Task, "function", 1)


# -- a virtualenv reached through a symlink ----------------------------------------------------------
def test_coverage_runs_with_the_environment_behind_a_symlink(tmp_path, monkeypatch):
    """The environment's files live under /tmp (which the sandbox replaces with a private tmpfs) and
    are reached through a symlink elsewhere: the resolved path must stay readable inside."""
    import coverage

    real = tmp_path / "real-env"
    shutil.copytree(Path(coverage.__file__).parent, real / "site" / "coverage",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for d, _, names in os.walk(real):
        os.chmod(d, 0o755)
        for n in names:
            os.chmod(os.path.join(d, n), 0o644)
    # the link must sit outside the directories the sandbox hides, somewhere any uid can traverse
    outside = Path(tempfile.mkdtemp(prefix=".sherloc-link-", dir=Path(__file__).resolve().parent))
    try:
        outside.chmod(0o755)
        link = outside / "venv"
        link.symlink_to(real, target_is_directory=True)
        monkeypatch.setattr(sys, "prefix", str(link))
        monkeypatch.setattr(sherloc_runner, "_coverage_path", lambda: str(link / "site"))
        sources, ids = make_repo(tmp_path / "repo", "", False, "unittest")
        run = run_tests(sherloc_runner.read_repo_files(tmp_path / "repo"), ["tests.test_ops"], cover=sources)
        assert run.status == "completed" and set(run.passing) == ids, run.load_error
        assert run.coverage_error == "" and run.coverage["calc/ops.py"]
    finally:
        shutil.rmtree(outside)
