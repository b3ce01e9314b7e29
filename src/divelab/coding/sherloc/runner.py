"""Run a repository's own test suite inside ``divelab.sandbox``, optionally with per-test coverage.

The repository's files (with any edited file swapped in) are written into the sandbox's fresh
work directory and imported in the repository's own layout: its import roots (``src/`` when the
code lives there, and the repository root) come first on ``sys.path``, and every top-level name
the repository defines (packages, modules, and test directories without ``__init__.py``) resolves
inside the repository only. That last part matters because Python prefers a regular package
anywhere on the path over a namespace directory earlier on it: without it, an installed top-level
``tests`` package (several wheels ship one) shadows a repository's ``tests/`` directory. Test
modules in a directory without ``__init__.py`` also get that directory on the path (as pytest's
default import mode does), and pytest-style tests (plain ``test_*`` functions and ``Test*``
classes) run beside ``unittest`` ones. With ``coverage=True`` coverage.py is imported from its own
directory alone (never the whole environment's site-packages) and every test is its own coverage
context (``Coverage.switch_context``), which is what spectrum-based fault localization needs: for
each line, which passing and which failing tests executed it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from divelab.sandbox import Limits, run_python

_MARK = "@@SHERLOC-RESULT@@"

_DRIVER = r'''
import importlib, importlib.abc, importlib.machinery, importlib.util, inspect, json, os, sys, unittest
cfg = json.load(open("__sherloc_cfg.json"))
here = os.getcwd()
roots = [os.path.join(here, r) if r else here for r in cfg["roots"]]
own = set(cfg["own"])
for name in set(cfg["purge"]) | own:
    for k in list(sys.modules):
        if k == name or k.startswith(name + "."):
            del sys.modules[k]
sys.path[:] = roots + [p for p in sys.path if p not in roots and p not in ("", here)]


class RepoFirst(importlib.abc.MetaPathFinder):
    """The repository's top-level names are found in its import roots and nowhere else."""

    def find_spec(self, name, path=None, target=None):
        if "." in name or name not in own:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, roots)
        if spec is None:
            raise ModuleNotFoundError(f"{name!r} is part of the repository but was not found in {roots}")
        if spec.loader is None:  # a directory without __init__.py: only the repository's portions
            spec.submodule_search_locations = list(spec.submodule_search_locations)
        return spec


sys.meta_path.insert(0, RepoFirst())
if cfg["overlay"]:
    import test
    test.__path__.insert(0, os.path.join(here, "test"))
for d in cfg["test_dirs"]:  # pytest's rootdir-style imports: a test directory without __init__.py
    d = os.path.join(here, d)
    if d not in sys.path:
        sys.path.insert(len(roots), d)
cov = None
if cfg["coverage"]:
    # coverage.py from its own directory only: appending that directory to sys.path would expose
    # every package installed beside it (a top-level `tests` among them) to the repository's tests
    spec = importlib.machinery.PathFinder.find_spec("coverage", [cfg["coverage_path"]])
    if spec is None:
        raise ImportError(f"coverage.py is not under {cfg['coverage_path']}")
    coverage = importlib.util.module_from_spec(spec)
    sys.modules["coverage"] = coverage
    spec.loader.exec_module(coverage)
    cov = coverage.Coverage(data_file=None, include=[os.path.join(here, f) for f in cfg["cover"]])
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


class PlainTest(unittest.FunctionTestCase):
    """A pytest-style test (a plain function, or a method of a plain Test* class) with a unittest id."""

    def __init__(self, fn, test_id, owner=None):
        needs = [p.name for p in inspect.signature(fn).parameters.values() if p.default is p.empty][1 if owner else 0:]

        def run():
            if needs:  # fixtures are pytest's; say so instead of a confusing TypeError
                raise TypeError(f"{test_id} takes pytest fixtures {needs}, which this runner does not provide")
            if owner is None:
                return fn()
            obj = owner()
            for hook in ("setup_method", "teardown_method"):
                if not hasattr(obj, hook):
                    setattr(obj, hook, lambda m: None)
            obj.setup_method(fn)
            try:
                return fn(obj)
            finally:
                obj.teardown_method(fn)
        super().__init__(run)
        self._id = test_id

    def id(self):
        return self._id

    def __str__(self):
        return self._id


def plain_tests(mod):
    """pytest-style tests of a module that has no unittest ones (a unittest module's plain Test*
    classes are mixins, e.g. CPython's test_json, not tests)."""
    if hasattr(mod, "load_tests") or any(inspect.isclass(o) and issubclass(o, unittest.TestCase)
                                         and o.__module__ == mod.__name__ for o in vars(mod).values()):
        return []
    out = []
    for name, obj in sorted(vars(mod).items()):
        if getattr(obj, "__module__", None) != mod.__name__:
            continue
        if name.startswith("test") and inspect.isfunction(obj):
            out.append(PlainTest(obj, f"{mod.__name__}.{name}"))
        elif name.startswith("Test") and inspect.isclass(obj) and not issubclass(obj, unittest.TestCase):
            for m in sorted(k for k in vars(obj) if k.startswith("test") and inspect.isfunction(vars(obj)[k])):
                out.append(PlainTest(vars(obj)[m], f"{mod.__name__}.{name}.{m}", owner=obj))
    return out


def load(name):
    """A module (its unittest and pytest-style tests), a TestCase id, or a pytest-style test id."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
            break
        except ModuleNotFoundError as e:  # only "this prefix is no module" moves on to a shorter one
            prefix = ".".join(parts[:i])
            if i == 1 or not e.name or not (prefix == e.name or prefix.startswith(e.name + ".")):
                raise
    mod, owner = obj, None
    for p in parts[i:]:
        owner, obj = obj, getattr(obj, p)
    if inspect.ismodule(obj):
        return unittest.TestSuite([loader.loadTestsFromModule(obj), *plain_tests(obj)])
    if inspect.isclass(obj) and not issubclass(obj, unittest.TestCase):
        return unittest.TestSuite([t for t in plain_tests(mod) if t.id().startswith(name + ".")])
    if inspect.isfunction(obj) and not (inspect.isclass(owner) and issubclass(owner, unittest.TestCase)):
        return PlainTest(obj, name, owner if inspect.isclass(owner) else None)
    return loader.loadTestsFromName(name)


loader = unittest.TestLoader()
load_error = ""
suite = unittest.TestSuite()
for name in cfg["names"]:
    try:
        suite.addTest(load(name))
    except Exception:
        import traceback
        load_error += f"could not load {name}:\n" + traceback.format_exc()
import io
unittest.TextTestRunner(stream=io.StringIO(), resultclass=R, verbosity=0).run(suite)
for e in getattr(loader, "errors", []):
    load_error += e
lines = {}
if cov is not None:
    cov.stop()
    data = cov.get_data()
    for f in cfg["cover"]:
        by_line = data.contexts_by_lineno(os.path.join(here, f)) or {}
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
    # why the per-test coverage cannot be trusted ("" when it can, or when none was asked for)
    coverage_error: str = ""

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
    """The directory holding coverage.py, as this interpreter reached it (not resolved: when the
    environment is a symlink, the sandbox makes the path behind it readable, see divelab.sandbox)."""
    import coverage

    return str(Path(coverage.__file__).parent.parent)


def import_roots(files: dict[str, str] | list[str]) -> list[str]:
    """Where the repository's imports start: ``src`` (a src layout) before the root, or the root alone."""
    src = any(f.startswith("src/") and f.endswith(".py") for f in files) and "src/__init__.py" not in files
    return ["src", ""] if src else [""]


def top_level_names(files: dict[str, str] | list[str], roots: list[str]) -> list[str]:
    """Top-level import names the repository defines under its roots: modules, packages, and
    directories of Python files without ``__init__.py`` (namespace directories such as ``tests/``)."""
    names = set()
    for f in files:
        if not f.endswith(".py"):
            continue
        for r in roots:
            if r and not f.startswith(r + "/"):
                continue
            rel = f[len(r) + 1:] if r else f
            head = rel.split("/", 1)[0].removesuffix(".py")
            if head.isidentifier():
                names.add(head)
            break
    return sorted(names)


def test_dirs(files: dict[str, str] | list[str], names: list[str] | tuple[str, ...]) -> list[str]:
    """Directories of the named test modules that are not packages (pytest's rootdir-style imports)."""
    out = []
    for n in names:
        parts = n.split(".")
        for i in range(len(parts), 0, -1):
            path = "/".join(parts[:i])
            if f"{path}.py" in files or f"{path}/__init__.py" in files:
                d = path.rsplit("/", 1)[0] if "/" in path else ""
                if d and f"{d}/__init__.py" not in files and d not in out:
                    out.append(d)
                break
    return out


def run_tests(files: dict[str, str], names: list[str] | tuple[str, ...], *, purge: tuple[str, ...] = (),
              overlay: bool = False, cover: list[str] | None = None, wall_s: float = 60.0) -> TestRun:
    """Run test ``names`` (modules, unittest ids or pytest-style ids) over the repository ``files``
    in the sandbox, in the repository's own layout (see the module docstring).

    ``cover`` lists the files (relative paths) to trace per test with coverage.py; None = no coverage.
    When coverage was asked for and cannot be trusted (the suite did not run, a test module failed
    to import, or no line was traced), ``TestRun.coverage_error`` says why.
    """
    if not names:
        raise ValueError("run_tests needs at least one test module or test id")
    roots = import_roots(files)
    # the stdlib suites extend CPython's own `test` package (overlay): the repository must not own it
    own = [n for n in top_level_names(files, roots) if not (overlay and n == "test")]
    cfg = {"names": list(names), "purge": list(purge), "overlay": overlay, "coverage": cover is not None,
           "cover": list(cover or []), "max_details": 20, "coverage_path": _coverage_path() if cover is not None else "",
           "roots": roots, "own": own, "test_dirs": test_dirs(files, names)}
    all_files = {**files, "__sherloc_cfg.json": json.dumps(cfg)}
    limits = Limits(wall_s=wall_s, cpu_s=int(wall_s), memory_mb=1024, processes=32, file_size_mb=64.0)
    r = run_python(_DRIVER, limits=limits, files=all_files, output_bytes=4_000_000)
    payload = None
    for line in r.stdout.splitlines():
        if line.startswith(_MARK):
            payload = json.loads(line[len(_MARK):])
    if payload is None:
        err = r.stderr[-2000:] or r.reason
        return TestRun({}, {}, load_error=err, status=r.status.value, wall_s=r.wall_s, stderr_tail=r.stderr[-2000:],
                       coverage_error=f"the test run did not complete ({r.status.value}: {r.reason})"
                       if cover is not None else "")
    cov = {f: {int(n): (v[0], v[1]) for n, v in by.items()} for f, by in payload["coverage"].items()}
    run = TestRun(payload["outcomes"], payload["details"], payload["load_error"], "completed", r.wall_s, cov,
                  r.stderr[-2000:])
    if cover is not None:
        run.coverage_error = _coverage_problem(run)
    return run


def _coverage_problem(run: TestRun) -> str:
    if run.load_error:
        return "some tests could not be loaded, so the spectrum misses them: " + run.load_error.strip()[-600:]
    if not run.outcomes:
        return "no test ran"
    if not any(run.coverage.values()):
        return "the tests ran but executed no line of the covered files"
    return ""
