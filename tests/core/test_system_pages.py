"""Every system page reads the same way: header, then the same five sections in the same order."""

from pathlib import Path

from divelab import registry

SYSTEMS_DIR = Path(__file__).resolve().parents[2] / "docs" / "systems"
SECTIONS = [
    "What it is",
    "Use it on your own model",
    "What was measured",
    "Ours vs the paper",
    "Honest seams",
]


def second_level_headings(text: str) -> list[str]:
    """`## ` headings outside fenced code blocks (a `## ` inside a shell example is not a heading)."""
    headings, in_code = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("## "):
            headings.append(line[3:].strip())
    return headings


def test_every_system_has_a_page():
    pages = {p.stem for p in SYSTEMS_DIR.glob("*.md")}
    missing = sorted(s.key for s in registry.SYSTEMS if s.key not in pages)
    assert not missing, f"systems without a page in docs/systems/: {missing}"


def test_every_system_page_has_the_five_sections_in_order():
    pages = sorted(SYSTEMS_DIR.glob("*.md"))
    assert pages
    wrong = {
        p.name: second_level_headings(p.read_text())
        for p in pages
        if second_level_headings(p.read_text()) != SECTIONS
    }
    assert not wrong, f"pages whose '## ' sections are not exactly {SECTIONS}: {wrong}"


def test_heading_reader_skips_code_blocks():
    text = "## What it is\n```bash\n## not a heading\n```\n## Honest seams\n"
    assert second_level_headings(text) == ["What it is", "Honest seams"]
