"""The divelab source files a package runs: its own files plus every ``divelab`` module they import, followed
transitively (imports inside functions included, read statically with :mod:`ast`, nothing is executed).

    >>> files = divelab_files("divelab.training.g2po")      # paths relative to the repository root

A saved result stands for the current code only if none of these files changed since its run: a system's
package can be untouched while a shared engine it calls (``divelab.stats``, ``divelab.lm``, ...) moved on.
Importing ``a.b.c`` also runs ``a/__init__.py`` and ``a/b/__init__.py``, so parent packages are included.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def module_file(name: str) -> Path | None:
    """The file behind a dotted module name under ``src/``, or None when it is not a divelab module."""
    base = SRC.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Dotted names a file imports (absolute, with relative imports resolved against its package)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            # ``from pkg import mod`` imports a submodule when ``mod`` is one
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {n for n in found if n == "divelab" or n.startswith("divelab.")}


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def divelab_files(package: str) -> list[str]:
    """Every divelab file the package's modules run, as sorted repository-relative paths."""
    start = module_file(package)
    if start is None:
        raise ValueError(f"{package!r} is not a module under {SRC}")
    pending = list(start.parent.rglob("*.py")) if start.name == "__init__.py" else [start]
    pending += [f for n in _with_parents(package) if (f := module_file(n))]
    seen: set[Path] = set()
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imports(path):
            pending += [f for n in _with_parents(name) if (f := module_file(n)) and f not in seen]
    return sorted(str(p.relative_to(ROOT)) for p in seen)
