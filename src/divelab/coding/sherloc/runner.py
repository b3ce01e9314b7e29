"""Run a repository's own test suite inside ``divelab.sandbox``, optionally with per-test coverage.

The repository's files (with any edited file swapped in) are written into the sandbox's fresh
work directory, the repository's top-level modules are purged from ``sys.modules`` so the copy
shadows anything the interpreter has already imported, and ``unittest`` runs the suite (or
chosen test ids). With ``coverage=True`` the run is traced by ``coverage.py`` and every test is its
own coverage context (``Coverage.switch_context``), which is what spectrum-based fault
localization needs: for each line, which passing and which failing tests executed it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from divelab.sandbox import Limits, run_python

_MARK = "@@SHERLOC-RESULT@@"

_DRIVER = r'''
import json, os, sys, unittest
cfg = json.load(open("__sherloc_cfg.json"))
for name in cfg["purge"]:
    for k in list(sys.modules):
        if k == name or k.startswith(name + "."):
            del sys.modules[k]
if cfg["overlay"]:
    import test
    test.__path__.insert(0, os.path.join(os.getcwd(), "test"))
cov = None
if cfg["coverage"]:
    sys.path.append(cfg["coverage_path"])
    import coverage
    cov = coverage.Coverage(data_file=None, include=[os.path.join(os.getcwd(), f) for f in cfg["cover"]])
    cov.start()
outcomes, details = {}, {}
class R(unittest.TextTestResult):
    def startTest(self, t):
        if cov is not None:
            cov.switch_context(t.id())
        super().startTest(t)
    def addSuccess(self, t):
        super().addSuccess(t); outcomes[t.id()] = "pass"
    def addFailure(self, t, err):
        super().addFailure(t, err); outcomes[t.id()] = "fail"; details[t.id()] = self._exc_info_to_string(err, t)
    def addError(self, t, err):
        super().addError(t, err); outcomes[t.id()] = "error"; details[t.id()] = self._exc_info_to_string(err, t)
    def addSkip(self, t, reason):
        super().addSkip(t, reason); outcomes[t.id()] = "skip"
    def addExpectedFailure(self, t, err):
        super().addExpectedFailure(t, err); outcomes[t.id()] = "pass"
    def addUnexpectedSuccess(self, t):
        super().addUnexpectedSuccess(t); outcomes[t.id()] = "fail"; details[t.id()] = "unexpected success"
loader = unittest.TestLoader()
load_error = ""
try:
    suite = loader.loadTestsFromNames(cfg["names"])
except Exception as e:
    import traceback
    load_error = traceback.format_exc()
    suite = unittest.TestSuite()
import io
unittest.TextTestRunner(stream=io.StringIO(), resultclass=R, verbosity=0).run(suite)
for e in getattr(loader, "errors", []):
    load_error += e
lines = {}
if cov is not None:
    cov.stop()
    data = cov.get_data()
    for f in cfg["cover"]:
        by_line = data.contexts_by_lineno(os.path.join(os.getcwd(), f)) or {}
        spectrum = {}
        for n, ctx in by_line.items():
            ef = sum(1 for c in ctx if outcomes.get(c) in ("fail", "error"))
            ep = sum(1 for c in ctx if outcomes.get(c) == "pass")
            if ef or ep:
                spectrum[str(n)] = [ef, ep]
        lines[f] = spectrum
details = dict(sorted(details.items())[:cfg["max_details"]])
details = {k: v[-3000:] for k, v in details.items()}
print("''' + _MARK + r'''" + json.dumps({"outcomes": outcomes, "details": details, "load_error": load_error[-4000:],
                                         "coverage": lines}))
'''


@dataclass
class TestRun:
    """What one run of the suite found: per-test outcome (pass/fail/error/skip) and tracebacks."""

    outcomes: dict[str, str]
    details: dict[str, str]
    load_error: str = ""
    status: str = "passed"
    wall_s: float = 0.0
    # file -> line -> (failing tests, passing tests) that executed it: the program spectrum
    coverage: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)
    stderr_tail: str = ""

    @property
    def failing(self) -> list[str]:
        return sorted(t for t, o in self.outcomes.items() if o in ("fail", "error"))

    @property
    def passing(self) -> list[str]:
        return sorted(t for t, o in self.outcomes.items() if o == "pass")

    @property
    def ok(self) -> bool:
        """The run completed and every collected test passed (or was skipped)."""
        return self.status == "completed" and not self.load_error and not self.failing and bool(self.outcomes)


def read_repo_files(root: Path) -> dict[str, str]:
    """All text files of a repository (relative path -> text); undecodable files are skipped."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.name != ".complete":
            try:
                out[str(p.relative_to(root))] = p.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
    return out


def expand_test_names(root: Path, names: tuple[str, ...]) -> list[str]:
    """Unittest names, with ``pkg.sub.*`` expanded to the ``test_*.py`` modules found in ``root``."""
    out: list[str] = []
    for n in names:
        if n.endswith(".*"):
            d = root.joinpath(*n[:-2].split("."))
            mods = sorted(p.stem for p in d.glob("test_*.py"))
            if not mods:
                raise FileNotFoundError(f"no test_*.py modules under {d} for {n!r}")
            out += [f"{n[:-2]}.{m}" for m in mods]
        else:
            out.append(n)
    return out


def _coverage_path() -> str:
    import coverage

    return str(Path(coverage.__file__).resolve().parent.parent)


def run_tests(files: dict[str, str], names: list[str] | tuple[str, ...], *, purge: tuple[str, ...] = (),
              overlay: bool = False, cover: list[str] | None = None, wall_s: float = 60.0) -> TestRun:
    """Run unittest ``names`` (modules or test ids) over the repository ``files`` in the sandbox.

    ``cover`` lists the files (relative paths) to trace per test with coverage.py; None = no coverage.
    """
    if not names:
        raise ValueError("run_tests needs at least one test module or test id")
    cfg = {"names": list(names), "purge": list(purge), "overlay": overlay, "coverage": cover is not None,
           "cover": list(cover or []), "max_details": 20, "coverage_path": _coverage_path() if cover is not None else ""}
    all_files = {**files, "__sherloc_cfg.json": json.dumps(cfg)}
    limits = Limits(wall_s=wall_s, cpu_s=int(wall_s), memory_mb=1024, processes=32, file_size_mb=64.0)
    r = run_python(_DRIVER, limits=limits, files=all_files, output_bytes=4_000_000)
    payload = None
    for line in r.stdout.splitlines():
        if line.startswith(_MARK):
            payload = json.loads(line[len(_MARK):])
    if payload is None:
        return TestRun({}, {}, load_error=r.stderr[-2000:] or r.reason, status=r.status.value, wall_s=r.wall_s,
                       stderr_tail=r.stderr[-2000:])
    cov = {f: {int(n): (v[0], v[1]) for n, v in by.items()} for f, by in payload["coverage"].items()}
    return TestRun(payload["outcomes"], payload["details"], payload["load_error"], "completed", r.wall_s, cov,
                   r.stderr[-2000:])
