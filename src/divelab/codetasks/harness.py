"""Run a candidate against its docstring examples and tests, inside the sandbox, test by test.

One sandboxed process loads the candidate, runs the docstring's ``>>>`` examples (doctest), then
each selected test statement of HumanEval's ``check`` with its own time limit, and prints one
JSON line per result (on a private copy of stdout, so the candidate's prints cannot interleave).
After two test timeouts the remaining tests are not run and count as failed: a program that hangs
twice is wrong, and this keeps labelling a pool of mutants (many loop forever) fast.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from divelab.codetasks.humaneval import Task
from divelab.sandbox import Limits, run_python

HARNESS_VERSION = 3
MARK = "@@divelab-harness@@"

_PROGRAM = r'''
import io, json, os, signal, sys
_out = os.fdopen(os.dup(1), "w")
sys.stdout = io.StringIO()
def _emit(d):
    _out.write(MARK + json.dumps(d) + "\n"); _out.flush()
class _Timeout(BaseException):
    pass
def _alarm(signum, frame):
    raise _Timeout()
signal.signal(signal.SIGALRM, _alarm)
def _timed(fn, seconds):
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
ns = {"__name__": "candidate"}
try:
    _timed(lambda: exec(compile(CANDIDATE, "candidate.py", "exec"), ns), PER_TEST)
    cand = ns[ENTRY]
except BaseException as e:
    _emit({"phase": "load", "ok": False, "err": type(e).__name__})
    sys.exit(0)
_emit({"phase": "load", "ok": True})
if RUN_DOC and EXAMPLES:
    # doctest's own runner imports pdb and unittest (slow to start); the examples were parsed by
    # doctest.DocTestParser in the parent, and are checked here with NORMALIZE_WHITESPACE semantics.
    g = dict(ns)
    failed, report = 0, ""
    for src, want in EXAMPLES:
        buf = io.StringIO()
        sys.stdout = buf
        try:
            _timed(lambda: exec(compile(src, "docstring", "single"), g), PER_TEST)
            got = buf.getvalue()
            ok = " ".join(got.split()) == " ".join(want.split())
        except _Timeout:
            got, ok = "timeout", False
        except Exception as e:
            got = "Traceback: " + type(e).__name__
            ok = want.startswith("Traceback") and type(e).__name__ in want
        finally:
            sys.stdout = io.StringIO()
        if not ok:
            failed += 1
            report += "Failed example: " + src.strip() + "\nExpected: " + want.strip() + "\nGot: " + got.strip()[:200] + "\n"
    _emit({"phase": "doc", "attempted": len(EXAMPLES), "failed": failed, "report": report[-600:]})
tns = dict(ns)  # HumanEval runs its tests in the candidate's namespace
tns["__name__"] = "tests"
exec(compile(TEST_MODULE, "tests.py", "exec"), tns)
tns["candidate"] = cand
timeouts = 0
for src, idx in STEPS:
    if idx is not None and idx not in SELECTED:
        continue
    if timeouts >= 2:
        if idx is not None:
            _emit({"phase": "test", "i": idx, "ok": False, "err": "skipped-after-timeouts"})
        continue
    try:
        _timed(lambda: exec(compile(src, "check.py", "exec"), tns), PER_TEST)
        ok, err = True, ""
    except _Timeout:
        ok, err = False, "timeout"
        timeouts += 1
    except BaseException as e:
        ok, err = False, type(e).__name__
    if idx is not None:
        _emit({"phase": "test", "i": idx, "ok": ok, "err": err})
'''


@dataclass
class Evaluation:
    """What running the harness on one candidate found."""

    loaded: bool
    doc_attempted: int  # >0: examples ran; 0: no examples (critic abstains); -1: crashed/timed out
    doc_failed: int
    doc_report: str
    tests: dict[int, bool] = field(default_factory=dict)  # test index -> passed
    status: str = ""  # the sandbox status of the whole run
    wall_s: float = 0.0

    def passed_tests(self, indices: list[int] | range) -> bool:
        return all(self.tests.get(i, False) for i in indices)

    def n_failed(self, n_tests: int) -> int:
        return sum(1 for i in range(n_tests) if not self.tests.get(i, False))

    @property
    def doc_passed(self) -> bool | None:
        if self.doc_attempted == 0:
            return None
        return self.doc_attempted > 0 and self.doc_failed == 0

    def to_dict(self) -> dict:
        return {"loaded": self.loaded, "doc_attempted": self.doc_attempted, "doc_failed": self.doc_failed,
                "doc_report": self.doc_report, "tests": {str(k): v for k, v in self.tests.items()},
                "status": self.status, "wall_s": self.wall_s}

    @classmethod
    def from_dict(cls, d: dict) -> Evaluation:
        return cls(loaded=d["loaded"], doc_attempted=d["doc_attempted"], doc_failed=d["doc_failed"],
                   doc_report=d["doc_report"], tests={int(k): v for k, v in d["tests"].items()},
                   status=d["status"], wall_s=d.get("wall_s", 0.0))


def build_program(task: Task, code: str, *, run_doc: bool = True, tests: list[int] | None = None,
                  per_test_s: float = 0.5) -> str:
    selected = list(range(task.n_tests)) if tests is None else list(tests)
    header = (
        f"MARK = {MARK!r}\nCANDIDATE = {code!r}\nENTRY = {task.entry_point!r}\n"
        f"EXAMPLES = {task.doc_examples!r}\nRUN_DOC = {run_doc!r}\nTEST_MODULE = {task.test!r}\n"
        f"STEPS = {list(task.steps)!r}\nSELECTED = set({selected!r})\nPER_TEST = {per_test_s!r}\n"
    )
    return header + _PROGRAM


def evaluate(task: Task, code: str, *, run_doc: bool = True, tests: list[int] | None = None,
             per_test_s: float = 0.5, limits: Limits | None = None) -> Evaluation:
    """Run ``code`` (a full module defining the entry point) on the task's checks in the sandbox."""
    limits = limits or Limits(wall_s=8.0, cpu_s=8, memory_mb=512, processes=8)
    r = run_python(build_program(task, code, run_doc=run_doc, tests=tests, per_test_s=per_test_s), limits=limits)
    ev = Evaluation(loaded=False, doc_attempted=0, doc_failed=0, doc_report="", status=r.status.value,
                    wall_s=r.wall_s)
    doc_seen = False
    for line in r.stdout.splitlines():
        if not line.startswith(MARK):
            continue
        d = json.loads(line[len(MARK):])
        if d["phase"] == "load":
            ev.loaded = d["ok"]
        elif d["phase"] == "doc":
            doc_seen = True
            ev.doc_attempted, ev.doc_failed, ev.doc_report = d["attempted"], d["failed"], d["report"]
        elif d["phase"] == "test":
            ev.tests[d["i"]] = d["ok"]
    if run_doc and task.n_doc_examples > 0 and not doc_seen:
        ev.doc_attempted, ev.doc_failed, ev.doc_report = -1, -1, f"run ended early: {r.status.value}"
    return ev
