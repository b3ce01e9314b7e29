"""`divelab sherloc localize --llm URL`: a model that never answered is an error (exit 2), not a quiet
lexical guess; --allow-fallback turns it into a warning; the model id defaults to the server's only one."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from typer.testing import CliRunner

from divelab.cli import app

runner = CliRunner()
CASE = {"findings": [{"file": "calc.py", "symbol": "add", "line_span": [1, 2], "location_description": "add",
                      "root_cause_hypothesis": "subtracts", "solution_idea": "add", "dependencies": [],
                      "testing_impact": "test_add", "confidence": 0.9}]}


class _Handler(BaseHTTPRequestHandler):
    models = ["tiny"]
    asked: list[str] = []

    def log_message(self, *args: object) -> None:  # keep test output clean
        pass

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]})
        else:
            self._send(404, {"error": "no route"})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        type(self).asked.append(body["model"])
        if body["model"] not in self.models:
            self._send(404, {"error": {"message": f"model {body['model']} not found"}})
            return
        self._send(200, {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": json.dumps(CASE)}}],
                         "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}})


@pytest.fixture
def server():
    _Handler.asked = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()


@pytest.fixture
def down_url() -> str:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (tmp_path / "issue.txt").write_text("add(2, 2) returns 0, expected 4\n")
    return tmp_path


def _localize(repo, url, *extra):
    return runner.invoke(app, ["sherloc", "localize", "--repo", str(repo), "--issue", str(repo / "issue.txt"),
                               "--llm", url, *extra])


def test_endpoint_down_is_an_error_not_a_silent_guess(repo, down_url):
    res = _localize(repo, down_url)
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith("error:") and down_url in res.stderr and "--allow-fallback" in res.stderr
    assert "Traceback" not in res.output and res.stdout == ""


def test_allow_fallback_prints_the_guess_with_a_warning(repo, down_url):
    res = _localize(repo, down_url, "--allow-fallback")
    assert res.exit_code == 0, res.output
    assert "warning:" in res.stderr and "never answered" in res.stderr
    assert json.loads(res.stdout)["fallback"] is True


def test_a_model_id_the_server_does_not_serve_is_an_error_listing_its_ids(repo, server):
    res = _localize(repo, server, "--model", "default")
    assert res.exit_code == 2, res.output
    assert "error:" in res.stderr and "'default'" in res.stderr and "tiny" in res.stderr
    assert _Handler.asked == []  # refused before any request


def test_the_model_id_defaults_to_the_servers_only_model(repo, server):
    res = _localize(repo, server)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["fallback"] is False and out["findings"][0]["file"] == "calc.py"
    assert set(_Handler.asked) == {"tiny"}


def test_several_models_and_no_model_id_is_an_error_listing_them(repo, server, monkeypatch):
    monkeypatch.setattr(_Handler, "models", ["a", "b"])
    res = _localize(repo, server)
    assert res.exit_code == 2 and "choose one with --model: a, b" in res.stderr
