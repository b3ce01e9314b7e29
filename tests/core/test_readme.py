"""The README's papers table must say what the code says: every system, its status, its command."""

import re
from pathlib import Path

from divelab import registry
from script_modules import load_script

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
    tool = load_script("tools/readme_results.py")
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
    proc = subprocess.run([mkdocs, "build", "--strict", "-d", str(tmp_path / "site")], cwd=README.parent, env=env,
                          capture_output=True, text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "WARNING" not in log, log[-3000:]
    assert (tmp_path / "site" / "systems" / "backtrack" / "index.html").exists()
    for s in registry.SYSTEMS:  # every component's API page rendered its members
        page = (tmp_path / "site" / "api" / s.key / "index.html").read_text()
        assert page.count('class="doc doc-heading"') >= 2, f"api/{s.key}.md rendered no API"
        if f"::: {s.plan}\n" in (DOCS / "api" / f"{s.key}.md").read_text():
            assert f'id="{s.plan}"' in page, f"api/{s.key}.md did not render {s.plan}"


DOCS = README.parent / "docs"


def _mkdocs_config() -> dict:
    import yaml

    return yaml.safe_load((README.parent / "mkdocs.yml").read_text())


def test_every_list_in_the_docs_renders_as_a_list():
    """Python-Markdown needs a blank line before a list; without one, '- a - b' runs on in a paragraph."""
    import markdown

    extensions = [e if isinstance(e, str) else next(iter(e)) for e in _mkdocs_config()["markdown_extensions"]]
    run_ons = []
    for page in sorted(DOCS.rglob("*.md")):
        html = markdown.markdown(page.read_text(), extensions=extensions)
        for para in re.findall(r"<p>(.*?)</p>", html, re.S):
            run_ons += [f"{page.relative_to(DOCS)}: {line.strip()[:60]}" for line in para.splitlines()[1:]
                        if re.match(r"\s*(?:[-*+]|\d+\.)\s", line)]
    assert not run_ons, "list items rendered inside a paragraph (add a blank line before the list):\n" + \
        "\n".join(run_ons)


def test_navigation_lists_systems_and_their_api_pages_by_e_number():
    nav = {next(iter(item)): next(iter(item.values())) for item in _mkdocs_config()["nav"]}
    systems = [next(iter(x.values())) for x in nav["Systems"]]
    assert systems == [f"systems/{s.key}.md" for s in registry.SYSTEMS]
    titles = [next(iter(x)) for x in nav["Systems"]]
    assert titles == [f"{s.alias.upper()} · {s.key}" for s in registry.SYSTEMS]
    api = [next(iter(x.values())) for x in nav["API reference"]][1:]
    assert api == [f"api/{s.key}.md" for s in registry.SYSTEMS]
    for s in registry.SYSTEMS:
        assert f"::: {s.module}\n" in (DOCS / "api" / f"{s.key}.md").read_text()
    listed = set(re.findall(r"[\w/-]+\.md", (README.parent / "mkdocs.yml").read_text()))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages <= listed, f"pages missing from the nav: {sorted(pages - listed)}"


def test_system_pages_share_one_header():
    for s in registry.SYSTEMS:
        lines = (DOCS / "systems" / f"{s.key}.md").read_text().splitlines()
        assert lines[0] == f"# {s.alias.upper()} · {s.name}", lines[0]
        assert lines[2] == (f"**Paper:** [arXiv {s.arxiv}](https://arxiv.org/abs/{s.arxiv}) · **Theme:** {s.theme} · "
                            f"**Reproduce:** `divelab reproduce {s.key}` · **API:** [`{s.module}`](../api/{s.key}.md)")


def test_home_page_has_install_first_command_headline_and_every_system():
    home = (DOCS / "index.md").read_text()
    for must in ("make install", "divelab reproduce fugu --scale smoke", "<!-- results:tally -->",
                 "<!-- results:headline -->", "img/report-top.png"):
        assert must in home, must
    for s in registry.SYSTEMS:
        assert f"](systems/{s.key}.md)" in home, s.key


def test_readme_first_screen_gives_a_first_result_and_speaks_to_a_newcomer():
    text = README.read_text()
    first_screen = text.split("## How a claim earns its verdict", 1)[0]
    assert "divelab reproduce fugu --scale smoke" in first_screen and "make demo" in first_screen
    assert "docs/img/report-top.png" in first_screen and "docs/index.md" in first_screen
    words = re.compile(r"\b(lent|the brief|the notes|the issue's|this task|issue #\d+|engineer [A-Z])\b", re.I)
    for page in [README, *DOCS.rglob("*.md")]:
        prose = "\n".join(x for x in page.read_text().splitlines() if not x.startswith("|"))  # tables are generated
        assert not words.search(prose), f"{page.name}: {words.search(prose).group(0)!r}"


def test_readme_links_point_at_files_that_exist():
    """Every relative link in the README (docs pages, screenshots) resolves in the repository."""
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [x for x in links if not x.startswith(("http://", "https://", "mailto:"))]
    assert local, "README has no relative links"
    missing = [x for x in local if not (README.parent / x).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_screenshots_are_current():
    """docs/img/report-top.png shows the saved results' tally (tools/screenshots.py regenerates it and
    records what it shows); the docs home and a system page are there at 1280 px."""
    import json
    import struct

    tool = load_script("tools/screenshots.py")
    stamp = json.loads((DOCS / "img" / "report-top.json").read_text())
    assert stamp == json.loads(json.dumps(tool.what_the_report_shows(tool.saved_reps()))), \
        "docs/img/report-top.png no longer shows the saved results: run tools/screenshots.py report"
    for name in ("report-top.png", "docs-home.png", "docs-system.png"):
        head = (DOCS / "img" / name).read_bytes()[:24]
        assert head[:4] == b"\x89PNG" and struct.unpack(">I", head[16:20])[0] == tool.WIDTH, name


def test_claims_on_public_games_are_listed_and_a_benchmark_merely_named_is_not():
    """The README's "Measured on public games" table lists every saved full-scale claim measured on a public
    substrate, and none that only names a benchmark it could not run."""
    from divelab.claims import Claim, Kind, Reproduction, not_checkable
    from divelab.verdicts import direction

    tool = load_script("tools/readme_results.py")
    rep = Reproduction(system="infotree", title="t", scale="full", seed=0)

    def measured(statement: str, x: float) -> Claim:
        return Claim(statement=statement, paper_value="x", measured=x, ci=(x - 0.05, x + 0.05), kind=Kind.EMPIRICAL,
                     ruling=direction(x, (x - 0.05, x + 0.05), why="t"))

    rep.claims = [
        measured("Success after training (TextWorldExpress coin collector, held-out games): tree vs flat", 0.1),
        measured("Success after training (E163 mazes): tree vs flat", -0.3),
        measured("Success after training (TextWorld): tree vs flat", -0.2),
        not_checkable("best-of-8 on BFCLv4 / WebShop", "38.8%", "no weights here"),
        not_checkable("accuracy on BFCL v4 questions", "9 points", "bfcl-eval is not installed"),
        measured("agent accuracy on BFCL v4 questions", 0.05)]
    text = tool.public_claims({"infotree": rep})
    assert "TextWorldExpress coin collector" in text and "BFCLv4" not in text
    assert "`divelab reproduce infotree --scale full`" in text
    assert "No saved full-scale run" in tool.public_claims({})
    # beside each, the same comparison on our own games (TextWorld preferred), or a dash where there is none
    row = next(line for line in text.splitlines() if "TextWorldExpress" in line)
    assert "-0.2" in row and "-0.3" not in row
    assert "not checkable" not in text  # a claim that could not run is not a measurement on public data
    bfcl_row = next(line for line in text.splitlines() if "agent accuracy on BFCL v4" in line)
    assert "| — |" in bfcl_row
