"""No measured number typed into the prose of README.md or docs/.

A measured number belongs in a saved results file and reaches the pages only through a generated block
(between ``<!-- results:KEY -->`` and ``<!-- /results:KEY -->``, written by tools/readme_results.py and kept in
sync by tests/core/test_readme.py). Typed into prose it goes stale the next time the run is saved. This test
scans the prose (generated blocks, fenced code, inline code and HTML comments removed) for the shapes that
hand-typed results took most often: an AUROC value, a confidence interval in brackets, a "CI lo..hi" range,
a pass@k fraction, a "value ± spread" and a runtime ("took 561 s", "Runtime **997 s**"). The list is short on
purpose: configuration constants, definitions, tolerances ("±50 %") and the papers' own numbers do not match.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

GENERATED = re.compile(r"<!-- (?P<tag>[\w-]+:[\w-]+) -->.*?<!-- /(?P=tag) -->", re.S)
FENCED = re.compile(r"^```.*?^```", re.S | re.M)
COMMENT = re.compile(r"<!--.*?-->", re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")

_NUM = r"[−+-]?\d+(?:\.\d+)?\s*%?"
PATTERNS = {
    "AUROC value": re.compile(r"\bAUROC\b(?: of| =| ≈| is)?(?: only)? \*{0,2}0\.\d{2,}"),
    "interval in brackets": re.compile(r"\[\s*" + _NUM + r"\s*,\s*" + _NUM + r"\s*\]"),
    "CI as lo..hi": re.compile(r"\bCI\s+[−+-]?\d+(?:\.\d+)?\s*\.\.\s*[−+-]?\d"),
    "pass@k fraction": re.compile(r"pass@\d+\b[^\n]{0,40}?\b\d+\s*/\s*\d+\b"),
    "value ± spread": re.compile(r"\d\s*±\s*\d"),
    "runtime": re.compile(r"(?i)\b(?:took|runtime|wall time|wall-clock time)\b[^.\n|]{0,25}?\*{0,2}\d[\d,.]*\*{0,2}"
                          r"\s?(?:s|min|ms|seconds|minutes)\b"),
}

# The papers' own numbers, quoted with attribution (page, exact text of the match's line).
PAPER_QUOTES = {
    ("docs/systems/first-token-probe.md", "(AUROC 0.84–0.95)"),
}

# Pages whose owners are rewriting their measured prose right now; each entry names what still matches.
# Remove an entry once its page passes.
NOT_YET_CONVERTED: dict[str, str] = {}


def prose(text: str) -> str:
    """The text a reader takes as prose: generated blocks, code and comments removed."""
    for pattern in (GENERATED, FENCED, COMMENT, INLINE_CODE):
        text = pattern.sub("", text)
    return text


def hand_typed_numbers(text: str, page: str = "") -> list[tuple[str, str]]:
    """(pattern name, matched text) for every measured-looking number in the prose of ``text``."""
    hits = []
    for line in prose(text).splitlines():
        for name, pattern in PATTERNS.items():
            for m in pattern.finditer(line):
                if name == "interval in brackets" and "." not in m.group(0):
                    continue  # [0, 1], [-2, 5]: ranges and clip bounds, not intervals of a run
                if any(page == p and quote in line for p, quote in PAPER_QUOTES):
                    continue
                hits.append((name, m.group(0)))
    return hits


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_no_measured_number_in_prose():
    found = {}
    for path in pages():
        page = path.relative_to(ROOT).as_posix()
        if page in NOT_YET_CONVERTED:
            continue
        hits = hand_typed_numbers(path.read_text(), page)
        if hits:
            found[page] = hits
    assert not found, ("measured numbers typed into prose (put them in a saved results file and a generated "
                       f"block, or say the finding in words and point to the table): {found}")


def test_the_scan_catches_hand_typed_results():
    """Sentences of the kind the pages used to carry; every pattern must fire on its own example."""
    old = {
        "AUROC value": "- **AUROC: reproduced.** 0.93 (deterministic); the command-level ratio gives AUROC 0.94.",
        "interval in brackets": "| 4-way MC accuracy | **0.41** [0.32, 0.51] (chance 0.25) |",
        "CI as lo..hi": "the difference −15 points, bootstrap CI −23.8..−7.5",
        "pass@k fraction": "- **SmolLM2-135M-Instruct pass@1 on HumanEval: 0/10 [0%, 28%]**",
        "value ± spread": "the router reaches 0.412 ± 0.031 over seeds",
        "runtime": "The run was done once, seed 0. It took **561 s**: most of it sampling.",
    }
    for name, sentence in old.items():
        assert name in {n for n, _ in hand_typed_numbers(sentence)}, f"{name} missed: {sentence}"


def test_the_scan_leaves_constants_definitions_and_generated_blocks_alone():
    fine = "\n".join([
        "Training: 20 GRPO iterations, lr 1e-2, γ 0.95, seeds 0-4, budget 8; a tolerance wider than ±50 % says why.",
        "Rewards are clipped to [-2, 5]; a bound such as \"at most 5 % false alarms\" reads the far end.",
        "The paper reports +22 points on ALFWorld and an AUROC band the table compares with.",
        "<!-- results:fugu -->",
        "| router | 0.41 [0.32, 0.51] | AUROC 0.93 | took 561 s |",
        "<!-- /results:fugu -->",
        "```python",
        "res = run(cfg)   # AUROC 0.93 [0.88, 0.96]",
        "```",
        "`auroc_ci(y, s)` returns e.g. `(0.93, [0.88, 0.96])`.",
    ])
    assert hand_typed_numbers(fine) == []


def test_paper_quotes_are_exempt_only_on_their_page():
    line = "reports that the decision is readable (AUROC 0.84–0.95)."
    assert hand_typed_numbers(line, "docs/systems/first-token-probe.md") == []
    assert hand_typed_numbers(line, "docs/systems/fugu.md") == [("AUROC value", "AUROC 0.84")]
