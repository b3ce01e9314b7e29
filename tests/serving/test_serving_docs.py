"""docs/serving.md's "Choose the target engine and weight format" examples run as pasted (on the smoke model)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "serving.md"
SECTION = "## Choose the target engine and weight format"


def _section() -> str:
    text = PAGE.read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start:end]


def test_engine_section_examples_run(capsys: pytest.CaptureFixture[str]) -> None:
    examples = re.findall(r"```python\n(.*?)```", _section(), re.S)
    assert len(examples) == 2
    for code in examples:
        exec(compile(code, str(PAGE), "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "bf16"
    assert out[-3:] == ["fp32 True", "bf16 True", "int8 True"]


def test_engine_section_names_every_choice() -> None:
    from divelab.lm.lean import FORMATS
    from divelab.serving.dspark.lean_target import ENGINES

    text = _section()
    assert all(f"`{e}`" in text for e in ENGINES) and all(f"`{f}`" in text for f in FORMATS)
