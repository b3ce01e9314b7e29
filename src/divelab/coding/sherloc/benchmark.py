"""A SWE-bench-Lite-shaped task set built from real packages, never by hand.

For each repository: run its own suite once with coverage (which lines do tests execute, which
tests already fail on this machine); for functions with executed lines, plant one mutation
(:mod:`.mutate`) on an executed line; run the suite on the mutant in the sandbox, with per-test
coverage; keep the mutant if at least one test that passed before now fails and most tests still
pass (a bug, not a broken import). The task's issue text is generated from the first failing
test's output; the gold location is the planted edit; the gold patch is its inverse. The per-test
coverage of the mutant run is kept for spectrum-based fault localization.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from divelab.cache import atomic_write_text, entry_path, stable_hash
from divelab.coding.sherloc.mutate import Mutant, functions, mutants_of
from divelab.coding.sherloc.repos import RepoSpec, get_spec, materialize, source_files
from divelab.coding.sherloc.runner import TestRun, expand_test_names, read_repo_files, run_tests
from divelab.progress import track

_VERSION = 1
CACHE_KIND = "sherloc/bench"  # planted tasks per package, under the divelab cache
_SBX = re.compile(r"/tmp/divelab-sbx-[^/\s]+/")


@dataclass
class Task:
    """One localization/repair task over a repository with one planted bug."""

    id: str
    repo: str
    file: str
    function: str
    span: tuple[int, int]
    operator: str
    issue: str
    failing_tests: list[str]
    n_passing: int
    mutated: str  # the buggy file's text (the repository = the clean files with this one swapped in)
    gold_patch: str
    spectrum: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)
    original: str = ""  # the clean file (for the repair agent's check only; localizers never see it)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["spectrum"] = {f: {str(n): list(v) for n, v in by.items()} for f, by in self.spectrum.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Task:
        d = dict(d)
        d["span"] = tuple(d["span"])
        d["spectrum"] = {f: {int(n): tuple(v) for n, v in by.items()} for f, by in d["spectrum"].items()}
        return cls(**d)


@dataclass
class Repo:
    """A materialised repository: its spec, root directory, clean files and test names."""

    spec: RepoSpec
    root: Path
    files: dict[str, str]
    tests: list[str]
    sources: list[str]
    wall_s: float = 20.0  # per suite run; a mutant that loops forever is cut off here

    def with_task(self, task: Task) -> dict[str, str]:
        return {**self.files, task.file: task.mutated}

    def run(self, files: dict[str, str], names: list[str] | None = None, cover: bool = False) -> TestRun:
        return run_tests(files, names or self.tests, purge=self.spec.purge, overlay=self.spec.test_overlay,
                         cover=self.sources if cover else None, wall_s=self.wall_s)


def open_repo(spec: RepoSpec | str, root: Path | None = None) -> Repo:
    spec = get_spec(spec) if isinstance(spec, str) else spec
    root = materialize(spec, root)
    return Repo(spec, root, read_repo_files(root), expand_test_names(root, spec.test_modules),
                source_files(spec, root))


def issue_text(repo: str, run: TestRun, failing: list[str]) -> str:
    """An issue written from the failing test's output, the way a user reports a failing check."""
    first = failing[0]
    tb = _SBX.sub("", run.details.get(first, "")).rstrip().splitlines()
    tb = tb[-25:]
    more = f" ({len(failing) - 1} other test(s) fail too)" if len(failing) > 1 else ""
    short = first.rsplit(".", 2)
    name = ".".join(short[-2:])
    return (f"{name} fails in {repo}\n\nRunning the {repo} test suite, `{first}` fails{more}:\n\n"
            + "\n".join(tb) + "\n")


def _try_mutant(repo: Repo, m: Mutant, baseline_fail: set[str], n_baseline_pass: int) -> Task | None:
    run = repo.run({**repo.files, m.file: m.mutated}, cover=True)
    if run.status != "completed" or run.load_error or run.coverage_error:
        return None
    new_fail = [t for t in run.failing if t not in baseline_fail]
    if not new_fail or len(run.passing) < 0.5 * n_baseline_pass:
        return None
    tid = f"{repo.spec.name}-{stable_hash([m.file, m.qualname, m.span, m.mutated], 8)}"
    return Task(tid, repo.spec.name, m.file, m.qualname, m.span, m.operator, issue_text(repo.spec.name, run, new_fail),
                new_fail, len(run.passing), m.mutated, m.gold_patch(), run.coverage, m.original)


def build_tasks(repo: Repo, n: int, seed: int = 0, max_tries: int | None = None) -> list[Task]:
    """Up to ``n`` tasks for one repository (one planted bug per function)."""
    base = repo.run(repo.files, cover=True)
    if base.status != "completed" or not base.passing:
        raise RuntimeError(f"the {repo.spec.name} test suite does not run here: {base.load_error[-500:]}")
    if base.coverage_error:  # a spectrum from a broken run would point anywhere
        raise RuntimeError(f"coverage of the {repo.spec.name} test suite failed: {base.coverage_error}")
    baseline_fail = set(base.failing)
    repo.wall_s = max(10.0, 5 * base.wall_s)
    rng = random.Random(seed)
    candidates: list[tuple[str, object, set[int]]] = []
    for f in repo.sources:
        covered = {ln for ln, (_, ep) in base.coverage.get(f, {}).items() if ep > 0}
        for fn in functions(repo.files[f]):
            lines = {ln for ln in covered if fn.start < ln <= fn.end}
            if lines:
                candidates.append((f, fn, lines))
    rng.shuffle(candidates)
    tasks: list[Task] = []
    tries = 0
    max_tries = max_tries or 4 * n
    for f, fn, lines in candidates:
        if len(tasks) >= n or tries >= max_tries:
            break
        ms = mutants_of(repo.files[f], f, fn, lines=lines)  # type: ignore[arg-type]
        if not ms:
            continue
        tries += 1
        task = _try_mutant(repo, rng.choice(ms), baseline_fail, len(base.passing))
        if task is not None:
            tasks.append(task)
    return tasks


def build_benchmark(repos: list[str], n_per_repo: int, seed: int = 0) -> list[Task]:
    """Tasks for several repositories, cached on disk (same inputs -> same tasks)."""
    tasks: list[Task] = []
    for name in track(repos, "SHERLOC: planting bugs"):
        key = stable_hash({"repo": name, "n": n_per_repo, "seed": seed, "v": _VERSION})
        path = entry_path(CACHE_KIND, f"{name}-{key}.json")
        if path.exists():
            tasks += [Task.from_dict(d) for d in json.loads(path.read_text())]
            continue
        got = build_tasks(open_repo(name), n_per_repo, seed=seed)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps([t.to_dict() for t in got]))
        tasks += got
    return tasks
