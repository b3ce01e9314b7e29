"""The code on docs/engines/substrates.md runs as pasted, top to bottom in one session (the checks of
tests/docs_snippets.py: no placeholders, no undefined names, no errors)."""

from __future__ import annotations

import importlib.util
import re
import shutil

import pytest

import docs_snippets as ds

PAGE = ds.ROOT / "docs" / "engines" / "substrates.md"
NEEDS = ("scienceworld", "textworld_express", "bfcl_eval")

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in NEEDS) or shutil.which("java") is None,
    reason="the page uses ScienceWorld, TextWorldExpress (both on Java) and bfcl-eval; install them with "
           "`make install`")


def page_snippets() -> list[ds.Snippet]:
    text = PAGE.read_text()
    return [ds.Snippet("engines/substrates", i, text.count("\n", 0, m.start()) + 1, m.group(1))
            for i, m in enumerate(re.finditer(r"^```python[ \t]*\n(.*?)^```[ \t]*$", text, re.S | re.M))]


def test_page_code_runs_as_pasted(tmp_path) -> None:
    items = page_snippets()
    assert len(items) >= 4
    run = ds.run_snippets(items, tmp_path)
    assert run.ran == [s.index for s in items]
    ns = run.namespace
    # the BFCL block's answers: the reference passes, the call missing a parameter fails
    assert ns["bfcl"].score(ns["r"], ns["bfcl"].reference_calls(ns["r"])).correct
    assert not ns["bfcl"].score(ns["r"], "[calculate_triangle_area(base=10)]").correct


def test_bfcl_chat_block_reads_what_the_models_did(tmp_path) -> None:
    ns = ds.run_snippets(page_snippets(), tmp_path).namespace
    assert ns["prose"].by_category() == {"simple": 0.0, "irrelevance": 1.0} and ns["prose"].called() == 0.0
    assert ns["first"].called() == 1.0 and ns["first"].by_category()["irrelevance"] == 0.0
