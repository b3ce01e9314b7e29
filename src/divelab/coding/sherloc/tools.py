"""The four compact repository tools, over any local directory, as OpenAI tool schemas.

``view_file(path, start, end)``, ``search_code(pattern, glob)``, ``repo_tree(path, depth)`` and
``import_graph(module)`` (stdlib ``ast``: what a module imports and which modules import it).
Every call returns text; a bad call returns a structured error (``{"error": ..., "allowed": ...}``)
instead of raising, so an agent can recover. ``chars_read`` counts what the tools returned (the
cost of localizing, in characters; ~4 characters per token).
"""

from __future__ import annotations

import ast
import fnmatch
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from divelab.chat import ToolSpec

MAX_VIEW_LINES = 120
MAX_HITS = 40


class ToolError(ValueError):
    """A tool was called with bad arguments (the message says what is allowed)."""


@dataclass
class RepoTools:
    """The tools over one repository; ``overrides`` swaps in file texts (e.g. a buggy file)."""

    root: Path
    overrides: dict[str, str] = field(default_factory=dict)
    calls: int = 0
    chars_read: int = 0

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        if not self.root.is_dir():
            raise NotADirectoryError(f"repository root {self.root} is not a directory")

    # -- files ---------------------------------------------------------------------------------
    def files(self) -> list[str]:
        out = {str(p.relative_to(self.root)) for p in self.root.rglob("*.py")
               if "__pycache__" not in p.parts and not any(x.startswith(".") for x in p.relative_to(self.root).parts)}
        return sorted(out | {f for f in self.overrides if f.endswith(".py")})

    def read(self, path: str) -> str:
        if path in self.overrides:
            return self.overrides[path]
        p = (self.root / path).resolve()
        if self.root.resolve() not in p.parents or not p.is_file():
            raise ToolError(f"no file {path!r} in the repository (use repo_tree to list files)")
        return p.read_text(encoding="utf-8", errors="replace")

    def relpath(self, path: str) -> str | None:
        """``path`` as the repository-relative name of one of its files, or None when it names
        nothing inside the repository (a standard-library frame, a file elsewhere on disk)."""
        if not path:
            return None
        if path in self.overrides:
            return path
        p = Path(path)
        root = self.root.resolve()
        full = (p if p.is_absolute() else root / p).resolve()
        if root not in full.parents or not full.is_file():
            return None
        rel = str(full.relative_to(root))
        return None if any(x.startswith(".") or x == "__pycache__" for x in Path(rel).parts) else rel

    # -- the four tools ------------------------------------------------------------------------
    def view_file(self, path: str, start: int = 1, end: int | None = None) -> str:
        lines = self.read(path).splitlines()
        start = max(1, int(start))
        end = min(len(lines), int(end) if end is not None else start + MAX_VIEW_LINES - 1)
        if end < start:
            raise ToolError(f"empty range {start}-{end} for {path!r} ({len(lines)} lines)")
        end = min(end, start + MAX_VIEW_LINES - 1)
        return "\n".join(f"{i:5d} {lines[i - 1]}" for i in range(start, end + 1))

    def search_code(self, pattern: str, glob: str = "*.py") -> str:
        if not pattern:
            raise ToolError("search_code needs a non-empty pattern (a regex or an identifier)")
        try:
            rx = re.compile(pattern)
        except re.error as e:
            raise ToolError(f"invalid regex {pattern!r}: {e}") from None
        hits = []
        for f in self.files():
            if not fnmatch.fnmatch(f, glob) and not fnmatch.fnmatch(Path(f).name, glob):
                continue
            for i, line in enumerate(self.read(f).splitlines(), 1):
                if rx.search(line):
                    hits.append(f"{f}:{i}: {line.strip()[:160]}")
                    if len(hits) >= MAX_HITS:
                        return "\n".join(hits) + f"\n... (stopped at {MAX_HITS} hits; narrow the pattern)"
        return "\n".join(hits) if hits else f"no match for {pattern!r}"

    def repo_tree(self, path: str = ".", depth: int = 2) -> str:
        base = (self.root / path).resolve()
        if not base.is_dir():
            raise ToolError(f"{path!r} is not a directory of the repository")
        out = []
        for f in self.files():
            rel = Path(f)
            try:
                sub = (self.root / rel).resolve().relative_to(base)
            except ValueError:
                continue
            if len(sub.parts) <= int(depth):
                out.append(f"{f}  ({len(self.read(f).splitlines())} lines)")
        return "\n".join(out) if out else "(no Python files)"

    def module_of(self, path: str) -> str:
        return path[:-3].replace("/", ".").removesuffix(".__init__")

    def import_graph(self, module: str) -> str:
        mods = {self.module_of(f): f for f in self.files()}
        if module not in mods:
            close = [m for m in mods if module.split(".")[-1] in m][:8]
            raise ToolError(f"unknown module {module!r}; similar: {close or sorted(mods)[:8]}")
        imports: dict[str, set[str]] = {}
        for m, f in mods.items():
            try:
                tree = ast.parse(self.read(f))
            except SyntaxError:
                continue
            deps = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    deps |= {a.name for a in node.names}
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        pkg = m.split(".")[:-node.level] if not f.endswith("__init__.py") else m.split(".")[
                            :len(m.split(".")) - node.level + 1]
                        base = ".".join([*pkg, base] if base else pkg)
                    deps.add(base)
                    deps |= {f"{base}.{a.name}" for a in node.names}
            imports[m] = {d for d in deps if d in mods and d != m}
        importers = sorted(m for m, d in imports.items() if module in d)
        return json.dumps({"module": module, "file": mods[module], "imports": sorted(imports.get(module, ())),
                           "imported_by": importers})

    # -- dispatch ------------------------------------------------------------------------------
    def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Run a tool by name; errors come back as a JSON object, never as an exception."""
        self.calls += 1
        fn = {"view_file": self.view_file, "search_code": self.search_code, "repo_tree": self.repo_tree,
              "import_graph": self.import_graph}.get(name)
        try:
            if fn is None:
                raise ToolError(f"unknown tool {name!r}")
            if not isinstance(arguments, dict):
                raise ToolError(f"arguments must be a JSON object, got {type(arguments).__name__}")
            out = fn(**arguments)
        except (ToolError, TypeError, ValueError) as e:
            out = json.dumps({"error": str(e), "tool": name, "allowed": [s.name for s in TOOL_SPECS]})
        self.chars_read += len(out)
        return out


TOOL_SPECS: list[ToolSpec] = [
    ToolSpec("view_file", "Show lines start..end of a file (at most 120 lines), numbered.",
             {"type": "object", "properties": {"path": {"type": "string"}, "start": {"type": "integer"},
                                               "end": {"type": "integer"}}, "required": ["path"]}),
    ToolSpec("search_code", "Search Python files for a regex or identifier; returns file:line: text.",
             {"type": "object", "properties": {"pattern": {"type": "string"}, "glob": {"type": "string"}},
              "required": ["pattern"]}),
    ToolSpec("repo_tree", "List the repository's Python files (with line counts) under path, to a depth.",
             {"type": "object", "properties": {"path": {"type": "string"}, "depth": {"type": "integer"}}}),
    ToolSpec("import_graph", "A module's imports and the modules that import it (dotted name, e.g. json.decoder).",
             {"type": "object", "properties": {"module": {"type": "string"}}, "required": ["module"]}),
]
