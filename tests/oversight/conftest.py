"""Shared fixtures of the first-token-probe CLI tests: the smoke toy checkpoint and a prompts file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def tiny_ckpt() -> Path:
    """The smoke-scale toy model, trained once per session and saved as an HF checkpoint directory (the
    smoke reproduction reuses it from the session's cache)."""
    from divelab.oversight.first_token.reproduce import PLANS
    from divelab.oversight.first_token.toy import trained_toy

    _, _, path = trained_toy(PLANS["smoke"].toy)
    assert (path / "config.json").exists() and (path / "tokenizer.json").exists()
    return path


@pytest.fixture
def toy_prompts(tmp_path: Path) -> Callable[[int], Path]:
    """``toy_prompts(n)`` writes ``n`` synthetic toy prompts as a JSONL file the CLI reads and returns its path."""

    def write(n: int) -> Path:
        from divelab.oversight.first_token.synthetic import make_prompts

        f = tmp_path / f"prompts-{n}.jsonl"
        rows = [{"prompt": "fast " + " ".join(e.content), "harm": e.harm} for e in make_prompts(n, 3, "fast")]
        f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        return f

    return write
