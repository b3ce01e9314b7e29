"""Generate, from the registry (``divelab.registry.SYSTEMS``), everything that lists the systems:

* mkdocs.yml's Systems and API-reference navigation (between ``# registry:KEY`` comments), by E-number;
* an API page per system, ``docs/api/KEY.md`` (the package and its reproduction's ``Plan``, via mkdocstrings);
* the README's papers table (between ``<!-- registry:papers -->`` and ``<!-- /registry:papers -->``).

These are never edited by hand: change the registry (or the code it derives from), then

    .venv/bin/python tools/registry_docs.py write    # rewrite the generated files
    .venv/bin/python tools/registry_docs.py check    # exit 1, naming the files, if any is out of date

A test runs ``check``.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from divelab import registry
from divelab.registry import System

ROOT = Path(__file__).resolve().parents[1]
NAV_INDENT = " " * 6
NAV_BLOCK = re.compile(r"(?P<head>^\s*# registry:(?P<key>[\w-]+)\n)(?P<body>.*?)(?P<tail>^\s*# /registry:(?P=key)\n)",
                       re.S | re.M)
README_BLOCK = re.compile(r"(<!-- registry:papers -->\n)(.*?)(<!-- /registry:papers -->)", re.S)
GENERATED_NOTE = "<!-- generated from divelab.registry by tools/registry_docs.py write: edit the registry -->\n"


def has_plan(s: System) -> bool:
    """Whether the reproduction defines or imports ``Plan`` at its top level (read from the source, not
    imported: importing a reproduction pulls in torch). The API page shows the plan once it exists."""
    path = registry.module_file(f"{s.module}.reproduce")
    if path is None:
        return False
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef) and node.name == "Plan":
            return True
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == "Plan" for a in node.names):
            return True
    return False


def nav_items(key: str, systems: Sequence[System]) -> str:
    """The nav entries of one block: ``systems`` (the system pages) or ``api`` (their API pages)."""
    folder = {"systems": "systems", "api": "api"}.get(key)
    if folder is None:
        raise SystemExit(f"mkdocs.yml has a block '# registry:{key}'; allowed: systems, api")
    ordered = sorted(systems, key=lambda s: s.e_number)
    return "".join(f'{NAV_INDENT}- "{s.alias.upper()} · {s.key}": {folder}/{s.key}.md\n' for s in ordered)


def api_page(s: System) -> str:
    """The API reference page of one system."""
    commands = ([f"divelab reproduce {s.key}"] if s.implemented else []) + list(s.cli_commands())
    lines = [
        GENERATED_NOTE,
        f"# {s.alias.upper()} · {s.key}: API\n",
        f"The public API of `{s.module}` ({s.name}, [arXiv {s.arxiv}](https://arxiv.org/abs/{s.arxiv})). "
        f"How to use it, and what was measured: [the {s.key} page](../systems/{s.key}.md).\n",
        "**The paper's values come from:** " + "; ".join(s.sources) + ".\n",
        "**Commands:** " + (" · ".join(f"`{c}`" for c in commands) or "none yet") + "\n",
        f"::: {s.module}\n",
    ]
    if has_plan(s):
        lines += [f"**The reproduction's plan** (`{s.plan}`): what each scale sizes; "
                  f"`divelab reproduce {s.key} --set FIELD=VALUE` changes one field for a run.\n",
                  f"::: {s.plan}\n"]
    return "\n".join(lines)


def papers_table(systems: Sequence[System]) -> str:
    rows = ["| E | System | arXiv | Package | Status | Run it |", "|---|---|---|---|---|---|"]
    for s in sorted(systems, key=lambda s: s.e_number):
        run = f"`divelab reproduce {s.key}`" if s.implemented else "—"
        rows.append(f"| E{s.e_number} | [{s.name}]({s.docs_page}) | {s.arxiv} | `{s.module}` | {s.status} | {run} |")
    return "\n".join(rows) + "\n"


def _replace_blocks(text: str, pattern: re.Pattern, render, where: str) -> str:  # noqa: ANN001
    new, n = pattern.subn(render, text)
    if n == 0:
        raise SystemExit(f"{where} has no generated block ({pattern.pattern[:40]}...); add its marker comments")
    return new


def expected(root: Path = ROOT, systems: Sequence[System] = registry.SYSTEMS) -> dict[Path, str | None]:
    """What each generated file should hold (None: the file should not exist)."""
    mkdocs, readme = root / "mkdocs.yml", root / "README.md"
    out: dict[Path, str | None] = {
        mkdocs: _replace_blocks(mkdocs.read_text(), NAV_BLOCK,
                                lambda m: m["head"] + nav_items(m["key"], systems) + m["tail"], "mkdocs.yml"),
        readme: _replace_blocks(readme.read_text(), README_BLOCK,
                                lambda m: m.group(1) + papers_table(systems) + m.group(3), "README.md"),
    }
    for page in sorted((root / "docs" / "api").glob("*.md")):
        out[page] = None  # an API page of a system the registry no longer has
    for s in systems:
        out[root / s.api_page] = api_page(s)
    return out


def stale(root: Path = ROOT, systems: Sequence[System] = registry.SYSTEMS) -> dict[Path, str | None]:
    """The generated files that differ from what the registry says, with what they should hold."""
    out = {}
    for path, text in expected(root, systems).items():
        now = path.read_text() if path.is_file() else None
        if now != text:
            out[path] = text
    return out


def write(root: Path = ROOT, systems: Sequence[System] = registry.SYSTEMS) -> list[str]:
    """Bring every generated file in line with the registry; what was written or removed."""
    done = []
    for path, text in stale(root, systems).items():
        if text is None:
            path.unlink()
        else:
            path.write_text(text)
        done.append(f"{'removed' if text is None else 'wrote'} {path.relative_to(root)}")
    return done


def main(argv: list[str]) -> int:
    if argv not in (["write"], ["check"]):
        print(__doc__)
        return 2
    if argv[0] == "write":
        print("\n".join(write()) or "all generated files were up to date")
        return 0
    todo = stale()
    if todo:
        names = ", ".join(str(p.relative_to(ROOT)) for p in todo)
        print(f"generated from the registry but out of date: {names}; run tools/registry_docs.py write")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
