"""The registry is each system's one descriptor: the docs navigation, the API pages and the README's
papers table are generated from it (tools/registry_docs.py), and what it derives matches the code."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from divelab import registry
from script_modules import load_script

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    return load_script("tools/registry_docs.py")


@pytest.fixture
def copy_root(tmp_path: Path) -> Path:
    """The generated files, copied, so a test can change them and the registry without touching the tree."""
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "docs" / "api", tmp_path / "docs" / "api")
    # in step with the code as it is now (a reproduction that gains a Plan changes its API page)
    _tool().write(tmp_path)
    return tmp_path


def test_generated_files_match_the_registry():
    stale = _tool().stale()
    assert not stale, ("generated from the registry but out of date: "
                       f"{sorted(str(p.relative_to(ROOT)) for p in stale)}; run tools/registry_docs.py write")


def test_a_new_system_makes_nav_api_page_and_papers_table_stale(copy_root):
    tool = _tool()
    new = registry.System(180, "nineteenth", "A nineteenth system", "2607.00001", "training",
                          "divelab.training.nineteenth", ("abstract",))
    # listed out of order on purpose: the navigation is ordered by E-number, not by listing order
    stale = tool.stale(copy_root, (new, *registry.SYSTEMS))
    assert set(stale) == {copy_root / "mkdocs.yml", copy_root / "README.md", copy_root / "docs/api/nineteenth.md"}
    nav = re.findall(r'"E(\d+) · [\w-]+": systems/', stale[copy_root / "mkdocs.yml"])
    assert nav == [str(s.e_number) for s in registry.SYSTEMS] + ["180"]
    assert "| E180 | [A nineteenth system](docs/systems/nineteenth.md) | 2607.00001 |" in stale[copy_root / "README.md"]
    assert "::: divelab.training.nineteenth\n" in stale[copy_root / "docs/api/nineteenth.md"]


def test_a_removed_system_removes_its_api_page(copy_root):
    tool = _tool()
    tool.write(copy_root, registry.SYSTEMS[1:])
    assert not (copy_root / "docs/api" / f"{registry.SYSTEMS[0].key}.md").exists()
    assert f"systems/{registry.SYSTEMS[0].key}.md" not in (copy_root / "mkdocs.yml").read_text()


def test_write_repairs_a_hand_edit_and_check_then_passes(copy_root):
    tool = _tool()
    mkdocs = copy_root / "mkdocs.yml"
    first, second = (f'      - "{s.alias.upper()} · {s.key}": systems/{s.key}.md\n' for s in registry.SYSTEMS[:2])
    mkdocs.write_text(mkdocs.read_text().replace(first + second, second + first))
    page = copy_root / registry.SYSTEMS[0].api_page
    page.write_text(page.read_text() + "edited by hand\n")
    assert set(tool.stale(copy_root)) == {mkdocs, page}
    tool.write(copy_root)
    assert tool.stale(copy_root) == {}
    assert (copy_root / "mkdocs.yml").read_text() == (ROOT / "mkdocs.yml").read_text()


def test_a_file_without_its_markers_is_an_error_that_names_it(copy_root):
    readme = copy_root / "README.md"
    readme.write_text(readme.read_text().replace("<!-- registry:papers -->", ""))
    with pytest.raises(SystemExit, match="README.md has no generated block"):
        _tool().stale(copy_root)


def test_api_page_shows_the_package_and_its_plan_once_the_reproduction_has_one():
    tool = _tool()
    for s in registry.SYSTEMS:
        page = (ROOT / s.api_page).read_text()
        assert f"::: {s.module}\n" in page and f"](../systems/{s.key}.md)" in page
        assert (f"::: {s.plan}\n" in page) == tool.has_plan(s), s.key
        for command in s.cli_commands():
            assert f"`{command}`" in page, f"{s.api_page} does not list {command}"
    assert tool.has_plan(registry.get("backtrack"))  # its reproduce.py defines Plan


def test_derived_fields_follow_the_code():
    for s in registry.SYSTEMS:
        assert (ROOT / s.docs_page).is_file(), s.docs_page
        assert s.plan == f"{s.module}.reproduce.Plan"
        assert s.api_page == f"docs/api/{s.key}.md"
    # derived, never stored: a new field of System would have to be written into all eighteen entries
    stored = {f.name for f in dataclasses.fields(registry.System)}
    assert stored == {"e_number", "key", "name", "arxiv", "theme", "module", "sources"}


def test_sources_name_parts_of_the_paper_not_files():
    unshipped = re.compile(r"\.(md|txt)\b|\bnotes?\b|\bepisode\b|\breview\b|\bpodcast\b|\bweek-in-review\b", re.I)
    for s in registry.SYSTEMS:
        assert s.sources and isinstance(s.sources, tuple), f"{s.key}: no sources"
        assert len(set(s.sources)) == len(s.sources), f"{s.key}: a source listed twice"
        for src in s.sources:
            assert src.strip() == src and src, f"{s.key}: blank source"
            assert not unshipped.search(src), f"{s.key}: {src!r} cites a document divelab does not ship"


def test_cli_commands_are_the_commands_the_cli_registers():
    import typer

    from divelab.cli import make_app

    root = typer.main.get_command(make_app(plugins=True))

    def walk(group, prefix: str) -> set[str]:  # noqa: ANN001 - a click group
        out = set()
        for name, cmd in group.commands.items():
            out |= walk(cmd, f"{prefix} {name}") if hasattr(cmd, "commands") else {f"{prefix} {name}"}
        return out

    with_commands = 0
    for s in registry.SYSTEMS:
        registered = walk(root.commands[s.key], f"divelab {s.key}") if s.key in root.commands else set()
        assert set(s.cli_commands()) == registered, s.key
        with_commands += bool(registered)
    assert with_commands >= 10  # most systems have commands: the comparison above is not vacuous


def test_listing_and_reading_descriptors_imports_no_system_package():
    probe = ("import sys\n"
             "from divelab import registry\n"
             "from divelab.cli import main\n"
             "[(s.status, s.docs_page, s.plan, s.sources) for s in registry.SYSTEMS]\n"
             "try:\n    main(['list'])\nexcept SystemExit:\n    pass\n"
             "heavy = [m for m in sys.modules if m == 'torch' or any(m == s.module or m.startswith(s.module + '.')"
             " for s in registry.SYSTEMS)]\n"
             "print('IMPORTED', heavy)\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert "IMPORTED []" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_contributing_page_walks_through_adding_a_system():
    from test_system_pages import SECTIONS  # tests/core is on the path (pytest prepends it)

    page = (ROOT / "docs" / "contributing.md").read_text()
    for must in ("reproduce.py", "`Plan`", "`PLANS`", "run(plan: Plan, seed: int)", "src/divelab/registry.py",
                 "tools/registry_docs.py write", "tools/readme_results.py write", "docs/systems/KEY.md", "cli.py"):
        assert must in page, must
    for section in SECTIONS:
        assert f"*{section}*" in page, f"the page does not name the system-page section {section!r}"
    assert "contributing.md" in (ROOT / "mkdocs.yml").read_text()


def test_readme_architecture_picture_names_every_layer_and_where_changes_go():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Architecture", 1)[1].split("\n## ", 1)[0]
    picture = section.split("```", 2)[1]
    layers = ["report/", "cli.py", "serving/server/", "plans.py", "scaleout/", "cache.py", "registry.py",
              "lm/", "rl/", "envs/", "chat/", "sandbox/", "claims.py", "verdicts.py", "stats.py", "comparisons.py"]
    for layer in layers:
        assert layer in picture, f"the architecture picture does not show {layer}"
        assert (ROOT / "src" / "divelab" / layer).exists(), f"the picture names {layer}, which divelab does not have"
    assert picture.count("→") >= 5, "each layer should say which changes go there"
