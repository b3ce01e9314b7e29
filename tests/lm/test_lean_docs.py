"""The lean-decoding page: its measured blocks are the benchmarks' own renderings of their saved JSON,
and its code examples run as pasted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from script_modules import load_script

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "lean-decoding.md"
KEYS = ("lean-verify-curve", "lean-decoding")


def _tool():
    return load_script("tools/readme_results.py")


def test_measured_blocks_match_the_saved_benchmarks() -> None:
    """Every lean benchmark with a saved JSON has its block on the page, rendered from that JSON."""
    tool = _tool()
    blocks = {m.group("key"): m.group("body") for m in tool.BLOCK.finditer(PAGE.read_text())}
    saved = [k for k in KEYS if (ROOT / "benchmarks" / f"{tool.BENCHMARK_BLOCKS[k]}.json").exists()]
    assert set(saved) <= set(blocks), f"docs/lean-decoding.md lacks the results blocks of {set(saved) - set(blocks)}"
    for key in blocks:
        assert key in saved, f"docs/lean-decoding.md has a results:{key} block but no saved benchmark JSON"
        assert blocks[key] == tool.render_block(key, {}, {}), "run tools/readme_results.py write"


def test_page_examples_run(capsys: pytest.CaptureFixture[str]) -> None:
    from divelab.lm.real import ModelNotInstalledError, gguf_path

    try:
        gguf_path()
    except ModelNotInstalledError as exc:
        pytest.skip(str(exc))
    examples = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert len(examples) == 4
    for code in examples:
        exec(compile(code, str(PAGE), "exec"), {})
    out = capsys.readouterr().out
    assert "draft tokens accepted; cache holds" in out
    assert "identical to plain greedy: True" in out
    assert re.search(r"^\[\d+, \d+, \d+\]$", out, re.M), out  # the three sequences' cache lengths
