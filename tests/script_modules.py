"""Import a repository script (``tools/*.py``, ``benchmarks/*.py``) as a module, for tests that call its
functions: those folders are not packages."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(relpath: str, name: str | None = None) -> ModuleType:
    """The module of ``ROOT / relpath`` (e.g. ``"tools/readme_results.py"``), executed afresh."""
    path = ROOT / relpath
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module
