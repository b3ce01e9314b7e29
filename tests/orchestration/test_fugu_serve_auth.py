"""`divelab fugu serve --api-key` / `DIVELAB_API_KEY` and its TLS options, with a scripted chat model in place
of the router (the key check is the server's, not the router's): OpenAI-shaped 401s, /health open, /metrics
closed unless `--public-metrics`, the official `openai` client, and the command's checks."""

from __future__ import annotations

import ssl

import httpx
import openai
import pytest
import uvicorn
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from auth_helpers import (
    KEY,
    WRONG,
    assert_refused,
    bearer,
    captured_logs,
    check_tls_reaches_uvicorn,
    needs_openssl,
    self_signed_cert,
)
from divelab.chat import ScriptedChatModel
from divelab.orchestration.fugu import serve
from divelab.serving.server import BackgroundServer
from divelab.serving.server.auth import ENV_VAR

ASK = {"model": "fugu", "messages": [{"role": "user", "content": "Reverse the word 'sakana'."}]}


def scripted() -> ScriptedChatModel:
    return ScriptedChatModel(fn=lambda messages, tools: "ANSWER: anakas")


def test_missing_or_wrong_key_is_an_openai_401_and_the_right_one_passes():
    client = TestClient(serve.create_app(scripted(), "fugu", api_key=KEY))
    assert_refused(client.post("/v1/chat/completions", json=ASK))
    assert_refused(client.post("/v1/chat/completions", json=ASK, headers=bearer(WRONG)))
    assert_refused(client.get("/v1/models", headers={"Authorization": KEY}))  # no scheme
    r = client.post("/v1/chat/completions", json=ASK, headers=bearer(KEY))
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "ANSWER: anakas"
    assert client.get("/health").json()["status"] == "ok"
    assert_refused(client.get("/metrics"))
    assert 'status="401"' in client.get("/metrics", headers=bearer(KEY)).text
    public = TestClient(serve.create_app(scripted(), "fugu", api_key=KEY, public_metrics=True))
    assert public.get("/metrics").status_code == 200
    assert_refused(public.get("/v1/models"))
    assert TestClient(serve.create_app(scripted(), "fugu")).post("/v1/chat/completions", json=ASK).status_code == 200


def test_openai_client_with_the_key_and_the_key_absent_from_logs():
    app = serve.create_app(scripted(), "fugu", api_key=KEY)
    with captured_logs("uvicorn.access", "uvicorn.error", "divelab.fugu.serve") as lines, \
            BackgroundServer(app, log_level="info", log_config=None) as srv:
        sdk = openai.OpenAI(base_url=srv.base_url, api_key=KEY, max_retries=0)
        r = sdk.chat.completions.create(**ASK)
        assert r.choices[0].message.content == "ANSWER: anakas"
        with pytest.raises(openai.AuthenticationError) as e:
            openai.OpenAI(base_url=srv.base_url, api_key=WRONG, max_retries=0).chat.completions.create(**ASK)
        assert e.value.status_code == 401 and e.value.code == "invalid_api_key"
    text = "\n".join(lines)
    assert '"POST /v1/chat/completions HTTP/1.1" 200' in text and "401 incorrect API key" in text
    assert KEY not in text and WRONG not in text


@needs_openssl
def test_https_with_a_self_signed_certificate(tmp_path):
    keyfile, certfile = self_signed_cert(tmp_path)
    trust = ssl.create_default_context(cafile=str(certfile))
    app = serve.create_app(scripted(), "fugu", api_key=KEY)
    with BackgroundServer(app, ssl_keyfile=str(keyfile), ssl_certfile=str(certfile)) as srv, \
            httpx.Client(verify=trust) as http:
        assert http.get(srv.base_url.replace("/v1", "/health")).json()["status"] == "ok"
        sdk = openai.OpenAI(base_url=srv.base_url, api_key=KEY, max_retries=0, http_client=http)
        assert sdk.chat.completions.create(**ASK).choices[0].message.content == "ANSWER: anakas"


# ------------------------------------------------------------------------------------------- the command
@pytest.fixture
def launched(monkeypatch):
    """Run `divelab fugu serve ...` with a scripted router, up to uvicorn.run, which records its arguments."""
    from divelab.cli import app as cli

    seen: dict = {}
    monkeypatch.setattr(serve, "demo_router", lambda seed: scripted())
    monkeypatch.setattr(uvicorn, "run", lambda application, **kw: seen.update(app=application, **kw))

    def launch(*args: str):
        return CliRunner().invoke(cli, ["fugu", "serve", *args]), seen

    return launch


def test_fugu_serve_takes_the_key_from_the_environment_or_the_option(launched, monkeypatch):
    monkeypatch.setenv(ENV_VAR, KEY)
    result, seen = launched()
    assert result.exit_code == 0, result.output
    assert "serving 'fugu' on http://127.0.0.1:8000/v1 (API key required)" in result.stderr
    assert KEY not in result.output
    client = TestClient(seen["app"])
    assert_refused(client.get("/v1/models"))
    assert client.get("/v1/models", headers=bearer(KEY)).status_code == 200
    result, seen = launched("--api-key", "option-key", "--public-metrics")
    client = TestClient(seen["app"])
    assert client.get("/v1/models", headers=bearer("option-key")).status_code == 200
    assert_refused(client.get("/v1/models", headers=bearer(KEY)))  # the option wins
    assert client.get("/metrics").status_code == 200 and "option-key" not in result.output


def test_fugu_serve_warns_when_reachable_without_a_key(launched, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    result, _ = launched("--host", "0.0.0.0")
    assert result.exit_code == 0 and "warning: serving on 0.0.0.0 without an API key" in result.stderr


@pytest.mark.parametrize("args, needle", [
    (["--ssl-keyfile", "k.pem"], "--ssl-keyfile was given without --ssl-certfile"),
    (["--ssl-certfile", "c.pem"], "--ssl-certfile was given without --ssl-keyfile"),
    (["--ssl-keyfile", "none.pem", "--ssl-certfile", "c.pem"], "--ssl-keyfile none.pem: no such file"),
])
def test_fugu_serve_refuses_bad_tls_options(tmp_path, monkeypatch, args, needle):
    from divelab.cli import app as cli

    (tmp_path / "c.pem").write_text("not a certificate")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(serve, "demo_router", lambda seed: pytest.fail("the router trained before the check"))
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("served despite bad TLS options"))
    result = CliRunner().invoke(cli, ["fugu", "serve", *args])
    assert result.exit_code == 2 and result.stderr.startswith("error: ") and needle in result.stderr


@needs_openssl
def test_fugu_serve_passes_tls_files_to_uvicorn(launched, tmp_path):
    check_tls_reaches_uvicorn(launched, tmp_path)


def test_fugu_serve_sends_the_worker_key_to_its_workers_not_its_own(monkeypatch):
    """Workers behind `divelab serve --api-key` refuse a router that sends no key: --worker-api-key (or
    DIVELAB_WORKER_API_KEY) is what the router sends them; its own --api-key never leaves this server."""
    import divelab.orchestration.fugu.real_workers as real_workers
    from divelab.cli import app as cli

    sent: list = []
    monkeypatch.setattr(real_workers, "build", lambda cfg: "recorded pool")
    monkeypatch.setattr(serve, "routed_pool", lambda urls, pool, *, seed, api_key: sent.append(api_key) or scripted())
    monkeypatch.setattr(uvicorn, "run", lambda application, **kw: None)
    worker = ["--worker", "smol-add=http://127.0.0.1:9/v1"]
    result = CliRunner().invoke(cli, ["fugu", "serve", *worker, "--api-key", KEY, "--worker-api-key", WRONG])
    assert result.exit_code == 0, result.output
    monkeypatch.setenv("DIVELAB_WORKER_API_KEY", "from-env")
    assert CliRunner().invoke(cli, ["fugu", "serve", *worker]).exit_code == 0
    monkeypatch.delenv("DIVELAB_WORKER_API_KEY")
    assert CliRunner().invoke(cli, ["fugu", "serve", *worker, "--api-key", KEY]).exit_code == 0
    assert sent == [WRONG, "from-env", None]


def test_export_workers_refuses_an_unwritable_folder_before_training(tmp_path, monkeypatch):
    import divelab.orchestration.fugu.real_workers as real_workers
    from divelab.cli import app as cli

    monkeypatch.setattr(real_workers, "train_worker", lambda *a: pytest.fail("trained before the folder check"))
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    result = CliRunner().invoke(cli, ["fugu", "export-workers", str(blocked / "out")])
    assert result.exit_code == 2
    assert "error: cannot write worker checkpoints" in result.output
