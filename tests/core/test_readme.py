"""The README's papers table must say what the code says: every system, its status, its command."""

import re
from pathlib import Path

from divelab import registry

README = Path(__file__).resolve().parents[2] / "README.md"


def table_rows() -> dict[int, list[str]]:
    rows = {}
    for line in README.read_text().splitlines():
        m = re.match(r"\|\s*E(\d{3})\s*\|", line)
        if m:
            rows[int(m.group(1))] = [c.strip() for c in line.strip().strip("|").split("|")]
    return rows


def test_papers_table_lists_all_systems_with_true_status():
    rows = table_rows()
    assert sorted(rows) == [s.e_number for s in registry.SYSTEMS]
    for s in registry.SYSTEMS:
        cells = rows[s.e_number]
        assert s.arxiv in cells, f"E{s.e_number}: arXiv id missing"
        assert f"`{s.module}`" in cells, f"E{s.e_number}: package missing"
        assert s.status in cells, f"E{s.e_number}: README says otherwise than the code ({s.status})"
        if s.implemented:
            assert f"`divelab reproduce {s.key}`" in cells


def test_readme_first_python_example_runs(capsys):
    """The usage example is real: run the first Python block of "Using divelab" as written."""
    usage = README.read_text().split("## Using divelab", 1)[1]
    block = usage.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(block, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.count("| ours ") >= 4


def test_measured_tables_are_generated_from_saved_results():
    """The README's measured tables are rendered from docs/results/*.json, never copied by hand."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_results", README.parent / "tools" / "readme_results.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert README.read_text().count("<!-- results:tally -->") == 1, "README has no generated tally"
    for page in tool.pages():
        text = page.read_text()
        assert tool.rendered(text) == text, f"{page.name}: tables differ from docs/results; run tools/readme_results.py write"


def test_documentation_site_builds_strictly(tmp_path):
    """The docs site (a page per system, API pages from docstrings) builds with no warning."""
    import shutil
    import subprocess
    import sys

    mkdocs = shutil.which("mkdocs") or str(Path(sys.executable).with_name("mkdocs"))
    env = {**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([mkdocs, "build", "--strict", "-q", "-d", str(tmp_path / "site")], cwd=README.parent, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tmp_path / "site" / "systems" / "backtrack" / "index.html").exists()


def test_readme_links_point_at_files_that_exist():
    """Every relative link in the README (docs pages, screenshots) resolves in the repository."""
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [x for x in links if not x.startswith(("http://", "https://", "mailto:"))]
    assert local, "README has no relative links"
    missing = [x for x in local if not (README.parent / x).exists()]
    assert not missing, f"README links to missing files: {missing}"
