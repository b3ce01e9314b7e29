"""`divelab forensics run`: bad input is one `error:` line and exit 2 (never a traceback), and a run
shows its progress off a terminal."""

from __future__ import annotations

import json
import socket

from typer.testing import CliRunner

import divelab.progress
from divelab.cli import app
from divelab.oversight.forensics.agents import PlantedAgent
from divelab.oversight.forensics.protocol import investigate

runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, ["forensics", "run", *args])


def _error_line(res) -> None:
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith("error:") and "Traceback" not in res.output, res.output


def test_unknown_env_is_an_error_naming_the_allowed_ones():
    res = _run("--env", "nope", "--agent", "planted:effort", "--n", "2")
    _error_line(res)
    assert "precommit" in res.stderr


def test_unreachable_agent_is_an_error_before_any_rollout(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = _run("--agent", f"http://127.0.0.1:{port}/v1", "--n", "2", "--out", str(tmp_path / "f.json"))
    _error_line(res)
    assert f"127.0.0.1:{port}" in res.stderr and not (tmp_path / "f.json").exists()


def test_bad_hypothesis_file_and_unknown_motive_are_errors(tmp_path):
    bad = tmp_path / "h.json"
    bad.write_text("{not json")
    _error_line(_run("--agent", "planted:effort", "--hypothesis", str(bad), "--n", "2"))
    bad.write_text(json.dumps(["no-such-motive"]))
    _error_line(_run("--agent", "planted:effort", "--hypothesis", str(bad), "--n", "2"))
    _error_line(_run("--agent", "planted:nope", "--n", "2"))


def test_investigate_reports_progress_off_a_terminal(monkeypatch, capsys):
    monkeypatch.setenv("DIVELAB_QUIET", "0")
    monkeypatch.setattr(divelab.progress, "HEARTBEAT_S", 0.0)
    investigate("precommit", PlantedAgent(motive="effort", seed=0), n=4, hypotheses=["effort"], controls=False,
                progress=True)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "agent transcripts" in ln]
    # base rollouts and the rewound arm, transcript by transcript: 4 + 4
    assert lines and lines[-1].split(": ")[-1].startswith("8/8"), lines
