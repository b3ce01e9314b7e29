"""The small ``calc`` repository SHERLOC's tests plant bugs in, localize and repair: a package of modules and a
unittest module, written to a folder and opened the way SHERLOC opens a real package."""

from __future__ import annotations

from pathlib import Path

from divelab.coding.sherloc import RepoSpec, open_repo
from divelab.coding.sherloc.benchmark import Repo


def write_calc(root: Path, modules: dict[str, str], tests: str) -> Path:
    """``root`` holding ``calc/__init__.py``, ``calc/NAME`` for each of ``modules`` and ``tests/test_ops.py``."""
    (root / "calc").mkdir(parents=True, exist_ok=True)
    (root / "calc" / "__init__.py").write_text("")
    for name, text in modules.items():
        (root / "calc" / name).write_text(text)
    (root / "tests").mkdir(exist_ok=True)
    (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "test_ops.py").write_text(tests)
    return root


def calc_spec(root: Path, modules: dict[str, str]) -> RepoSpec:
    """The repository at ``root`` as SHERLOC describes a package: its sources, its tests, what to purge."""
    return RepoSpec("calc", str(root), sources=("calc/__init__.py", *(f"calc/{name}" for name in modules)),
                    tests=("tests",), test_modules=("tests.test_ops",), purge=("calc", "tests"))


def open_calc(root: Path, modules: dict[str, str], tests: str, materialized: Path) -> Repo:
    """Write the repository at ``root`` and open it (its copy goes to ``materialized``)."""
    write_calc(root, modules, tests)
    return open_repo(calc_spec(root, modules), materialized)


# Building blocks of the ``calc`` package's source (tests pin line numbers, so each module is spelled out by
# the blocks it joins).
CLAMP = '''\
def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x
'''

TOTAL = '''\
def total(xs):
    s = 0
    for x in xs:
        s += x
    return s
'''

COUNTER = '''\
class Counter:
    def __init__(self):
        self.n = 0

    def bump(self, k=1):
        self.n = self.n + k
        return self.n
'''


def module(*definitions: str) -> str:
    """Top-level definitions joined into one module's source, two blank lines apart."""
    return "\n\n".join(definitions)
