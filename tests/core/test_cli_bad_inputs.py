"""One obviously bad input per command that takes an endpoint or a path: an `error:` line and exit 2, never a
traceback (found by running each command once with such an input)."""

from __future__ import annotations

import socket

from typer.testing import CliRunner

from divelab.cli import app

runner = CliRunner()


def _down_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def _error(args: list[str]) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert "error:" in res.stderr and "Traceback" not in res.output, res.output
    return res.stderr


def test_audit_compaction_with_a_server_that_is_down():
    url = _down_url()
    assert url in _error(["pinning", "audit-compaction", "--base-url", url, "--model", "x", "--seeds", "1"])


def test_autocog_run_with_a_trace_it_cannot_create(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert "--trace" in _error(["autocog", "run", "--trace", str(blocker / "trace"), "--cycles", "1"])


def test_diff_models_with_a_missing_prompts_file(tmp_path):
    assert "--prompts" in _error(["crosscoder", "diff-models", "--base", "smoke", "--sibling", "smoke",
                                  "--prompts", str(tmp_path / "none.jsonl")])
