"""The code blocks of docs/engines/integrations.md, so the tests run exactly what the docs show."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[2] / "docs" / "engines" / "integrations.md"


def example(name: str) -> str:
    """The ```python block right after ``<!-- example:NAME -->``."""
    m = re.search(rf"<!-- example:{re.escape(name)} -->\s*```python\n(.*?)```", DOC.read_text(), re.S)
    if m is None:
        raise KeyError(f"no example {name!r} in {DOC}")
    return m.group(1)


def run_examples(*names: str, ns: dict[str, Any] | None = None) -> dict[str, Any]:
    ns = {} if ns is None else ns
    for name in names:
        exec(compile(example(name), f"{DOC.name}:{name}", "exec"), ns)  # noqa: S102
    return ns
