"""Real repositories for the benchmark: a package's source files next to its own test suite.

A :class:`RepoSpec` names where the files come from (CPython's standard library on this machine,
or a pure-Python package installed in the environment) and how its tests run. ``materialize``
copies them into one directory, SWE-bench style: ``<root>/<package files>`` beside
``<root>/test/...`` (stdlib tests keep CPython's ``test.`` package layout, because their imports
say ``from test.test_json import ...``).
"""

from __future__ import annotations

import importlib.util
import shutil
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from divelab.cache import entry_path, stable_hash

CACHE_KIND = "sherloc/repos"  # materialized copies of the packages, under the divelab cache
ALL_REPOS = ("json", "tomllib", "textlib", "html", "pyflakes")  # every package a bug can be planted into


@dataclass(frozen=True)
class RepoSpec:
    """One repository: ``sources`` and ``tests`` are (origin path, path inside the repo) pairs.

    ``origin`` is ``"stdlib"`` (paths relative to the stdlib directory), the name of an installed
    top-level package (paths relative to its parent directory), or an absolute directory (your own repo). ``test_modules`` are the unittest
    names the suite runs; ``purge`` are the top-level module names the repo's copy must shadow;
    ``test_overlay`` says the tests live in CPython's ``test`` package.
    """

    name: str
    origin: str
    sources: tuple[str, ...]
    tests: tuple[str, ...]
    test_modules: tuple[str, ...]
    purge: tuple[str, ...]
    test_overlay: bool = False
    data_globs: tuple[str, ...] = field(default=())

    def origin_dir(self) -> Path:
        if self.origin == "stdlib":
            return Path(sysconfig.get_paths()["stdlib"])
        if Path(self.origin).is_absolute():
            if not Path(self.origin).is_dir():
                raise FileNotFoundError(f"repository {self.name!r}: origin directory {self.origin} does not exist")
            return Path(self.origin)
        spec = importlib.util.find_spec(self.origin)
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(f"repository {self.name!r} needs the installed package {self.origin!r}")
        return Path(next(iter(spec.submodule_search_locations))).parent


# Which packages: pure-Python code whose tests run in about a second, with no C accelerator that
# would hide a bug (json has one, but its tests run the pure-Python path too), split so that some
# files are in the divelab LM's training split and some are not (see divelab.lm.corpus.split_of).
STDLIB_REPOS: dict[str, RepoSpec] = {
    "json": RepoSpec(
        "json", "stdlib",
        sources=("json/__init__.py", "json/decoder.py", "json/encoder.py", "json/scanner.py", "json/tool.py"),
        tests=("test/test_json",), test_modules=("test.test_json.*",), purge=("json",), test_overlay=True),
    "tomllib": RepoSpec(
        "tomllib", "stdlib",
        sources=("tomllib/__init__.py", "tomllib/_parser.py", "tomllib/_re.py", "tomllib/_types.py"),
        tests=("test/test_tomllib",), test_modules=("test.test_tomllib.*",), purge=("tomllib",),
        test_overlay=True),
    "html": RepoSpec(
        "html", "stdlib",
        sources=("html/__init__.py", "html/parser.py", "html/entities.py", "_markupbase.py"),
        tests=("test/test_html.py", "test/test_htmlparser.py"),
        test_modules=("test.test_html", "test.test_htmlparser"), purge=("html", "_markupbase"), test_overlay=True),
    "textlib": RepoSpec(
        "textlib", "stdlib",
        sources=("textwrap.py", "shlex.py", "fractions.py", "difflib.py"),
        tests=("test/test_textwrap.py", "test/test_shlex.py", "test/test_fractions.py", "test/test_difflib.py",
               "test/test_difflib_expect.html"),
        test_modules=("test.test_textwrap", "test.test_shlex", "test.test_fractions", "test.test_difflib"),
        purge=("textwrap", "shlex", "fractions", "difflib"), test_overlay=True),
}

THIRD_PARTY_REPOS: dict[str, RepoSpec] = {
    "pyflakes": RepoSpec(
        "pyflakes", "pyflakes",
        sources=("pyflakes/__init__.py", "pyflakes/checker.py", "pyflakes/messages.py", "pyflakes/reporter.py",
                 "pyflakes/api.py"),
        tests=("pyflakes/test",),
        test_modules=("pyflakes.test.test_imports", "pyflakes.test.test_other", "pyflakes.test.test_undefined_names"),
        purge=("pyflakes",)),
}

REPOS: dict[str, RepoSpec] = {**STDLIB_REPOS, **THIRD_PARTY_REPOS}


def get_spec(name: str) -> RepoSpec:
    if name not in REPOS:
        raise ValueError(f"unknown benchmark repository {name!r}; allowed: {', '.join(REPOS)}")
    return REPOS[name]


def _expand(base: Path, rel: str) -> list[str]:
    p = base / rel
    if p.is_dir():
        return sorted(str(f.relative_to(base)) for f in p.rglob("*")
                      if f.is_file() and "__pycache__" not in f.parts)
    if not p.is_file():
        raise FileNotFoundError(f"{p} is missing (needed by the benchmark repository)")
    return [rel]


def materialize(spec: RepoSpec, dest: Path | None = None) -> Path:
    """Copy the repository's files into ``dest`` (default: the divelab cache) and return the root.

    Files are made world-readable: the sandbox runs tests as an unprivileged uid.
    """
    base = spec.origin_dir()
    files = [f for rel in (*spec.sources, *spec.tests) for f in _expand(base, rel)]
    if dest is None:
        key = stable_hash({"spec": spec.name, "files": [(f, (base / f).stat().st_size) for f in files]})
        dest = entry_path(CACHE_KIND, f"{spec.name}-{key}")
        if (dest / ".complete").exists():
            return dest
    dest.mkdir(parents=True, exist_ok=True)
    for f in files:
        target = dest / f
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(base / f, target)
    for d in [dest, *[p for p in dest.rglob("*") if p.is_dir()]]:
        d.chmod(0o755)
    for p in dest.rglob("*"):
        if p.is_file():
            p.chmod(0o644)
    (dest / ".complete").write_text("ok")
    return dest


def source_files(spec: RepoSpec, root: Path) -> list[str]:
    """The repository's source files (relative paths), where bugs are planted."""
    return [f for rel in spec.sources for f in _expand(root, rel) if f.endswith(".py")]
