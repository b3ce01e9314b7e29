"""Reading JSON Lines input files (one JSON object a line), with errors that name the file and the line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_objects(path: str | Path, what: str = "rows") -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of ``path``. A missing file, a line that is not
    JSON or not an object, or a file with no objects raises ``ValueError`` naming ``what`` it should hold."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{what} file {path} does not exist")
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{n} is not valid JSON: {exc.msg}") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{n}: a JSON object per line is needed, got {type(row).__name__}")
        out.append((n, row))
    if not out:
        raise ValueError(f"{path} holds no {what}")
    return out
