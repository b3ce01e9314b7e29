"""`divelab serve --api-key` / `DIVELAB_API_KEY` and `--ssl-keyfile/--ssl-certfile`: OpenAI-shaped 401s,
/health open, /metrics closed unless `--public-metrics`, the official `openai` client over HTTP and HTTPS,
the key kept out of logs and printed lines, and the CLI's checks (the `model` fixture is in conftest.py)."""

from __future__ import annotations

import ssl

import httpx
import openai
import pytest
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
from divelab.serving.server import BackgroundServer, create_app
from divelab.serving.server.auth import ENV_VAR, is_loopback, open_host_warning, resolve_api_key
from divelab.serving.server.tls import tls_options


def app_for(model, **kw):
    target, tok = model
    return create_app(target, tok, "smoke", max_batch=2, max_queue=4, **kw)


@pytest.fixture(scope="module")
def keyed(model):
    with TestClient(app_for(model, api_key=KEY)) as client:
        yield client


def test_missing_or_wrong_key_is_an_openai_401(keyed):
    assert_refused(keyed.get("/v1/models"))
    assert_refused(keyed.post("/v1/completions", json={"model": "smoke", "prompt": "x", "max_tokens": 2}))
    assert_refused(keyed.get("/v1/models", headers=bearer(WRONG)))
    assert_refused(keyed.get("/v1/models", headers={"Authorization": f"Basic {KEY}"}))  # only Bearer counts
    assert_refused(keyed.get("/v1/models", headers={"Authorization": "Bearer "}))
    assert_refused(keyed.get("/v1/models", headers=bearer(KEY + "x")))
    assert_refused(keyed.get("/docs"))  # FastAPI's own pages are closed too
    assert_refused(keyed.get("/no-such-route"))  # a 401, not a 404 that maps the routes


def test_the_right_key_is_let_through(keyed):
    assert keyed.get("/v1/models", headers=bearer(KEY)).json()["data"][0]["id"] == "smoke"
    assert keyed.get("/v1/models", headers={"authorization": f"bearer {KEY}"}).status_code == 200  # RFC 7235
    r = keyed.post("/v1/completions", headers=bearer(KEY),
                   json={"model": "smoke", "prompt": "def add(a, b):", "max_tokens": 2, "temperature": 0})
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] >= 1
    assert keyed.get("/no-such-route", headers=bearer(KEY)).status_code == 404


def test_health_is_open_and_metrics_need_the_key_unless_public(model, keyed):
    assert keyed.get("/health").json()["status"] == "ok"
    assert_refused(keyed.get("/metrics"))
    scraped = keyed.get("/metrics", headers=bearer(KEY))
    assert scraped.status_code == 200
    # refused requests are counted (the key check runs inside the metrics middleware)
    assert 'divelab_requests_total{endpoint="/v1/models",status="401"}' in scraped.text
    public = TestClient(app_for(model, api_key=KEY, public_metrics=True))
    assert public.get("/metrics").status_code == 200
    assert_refused(public.get("/v1/models"))
    # without a key the server is as open as it always was
    assert TestClient(app_for(model)).get("/v1/models").status_code == 200


def test_key_resolution_and_the_open_host_warning(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert resolve_api_key(None) is None and resolve_api_key("") is None
    monkeypatch.setenv(ENV_VAR, "from-env")
    assert resolve_api_key(None) == "from-env" and resolve_api_key("given") == "given"  # the option wins
    monkeypatch.setenv(ENV_VAR, "")
    assert resolve_api_key(None) is None
    assert all(is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "127.0.0.2"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.5", "example.org"))
    assert open_host_warning("127.0.0.1", None) is None and open_host_warning("0.0.0.0", "k") is None
    warning = open_host_warning("0.0.0.0", None)
    assert warning.startswith("warning:") and "\n" not in warning and ENV_VAR in warning


def test_openai_client_with_the_key_and_the_key_absent_from_logs(model):
    app = app_for(model, api_key=KEY)
    with captured_logs("uvicorn.access", "uvicorn.error", "divelab.serve") as lines, \
            BackgroundServer(app, log_level="info", log_config=None) as srv:
        sdk = openai.OpenAI(base_url=srv.base_url, api_key=KEY, max_retries=0)
        assert [m.id for m in sdk.models.list().data] == ["smoke"]
        r = sdk.completions.create(model="smoke", prompt="import os\n", max_tokens=3, temperature=0)
        assert r.usage.completion_tokens >= 1
        with pytest.raises(openai.AuthenticationError) as e:
            openai.OpenAI(base_url=srv.base_url, api_key=WRONG, max_retries=0).models.list()
        assert e.value.status_code == 401 and e.value.code == "invalid_api_key"
        assert httpx.get(srv.base_url.replace("/v1", "/health")).status_code == 200
    text = "\n".join(lines)
    assert '"GET /v1/models HTTP/1.1" 200' in text and '"GET /v1/models HTTP/1.1" 401' in text  # logs were seen
    assert "401 incorrect API key" in text
    assert KEY not in text and WRONG not in text


@needs_openssl
def test_https_with_a_self_signed_certificate(model, tmp_path):
    keyfile, certfile = self_signed_cert(tmp_path)
    assert tls_options(keyfile, certfile) == {"ssl_keyfile": str(keyfile), "ssl_certfile": str(certfile)}
    trust = ssl.create_default_context(cafile=str(certfile))
    with BackgroundServer(app_for(model, api_key=KEY), **tls_options(keyfile, certfile)) as srv:
        assert srv.base_url.startswith("https://127.0.0.1:")
        assert httpx.get(srv.base_url.replace("/v1", "/health"), verify=trust).json()["status"] == "ok"
        with httpx.Client(verify=trust) as http:
            sdk = openai.OpenAI(base_url=srv.base_url, api_key=KEY, max_retries=0, http_client=http)
            assert [m.id for m in sdk.models.list().data] == ["smoke"]
        with pytest.raises(httpx.ConnectError):  # the certificate is not trusted by default
            httpx.get(srv.base_url.replace("/v1", "/health"))


# ------------------------------------------------------------------------------------------- the command
@pytest.fixture
def launched(monkeypatch):
    """Run `divelab serve ...` up to uvicorn.run, which records its app and arguments instead of serving."""
    import uvicorn

    from divelab.cli import app as cli

    seen: dict = {}
    monkeypatch.setattr(uvicorn, "run", lambda application, **kw: seen.update(app=application, **kw))

    def launch(*args: str):
        result = CliRunner().invoke(cli, ["serve", "--model", "smoke", "--drafter", "none", *args])
        return result, seen

    return launch


def test_serve_command_takes_the_key_from_the_environment(launched, monkeypatch):
    monkeypatch.setenv(ENV_VAR, KEY)
    result, seen = launched()
    assert result.exit_code == 0, result.output
    assert "API key required" in result.stderr and KEY not in result.output
    client = TestClient(seen["app"])
    assert_refused(client.get("/v1/models"))
    assert client.get("/v1/models", headers=bearer(KEY)).status_code == 200
    assert "ssl_certfile" not in seen  # plain HTTP unless asked for
    # the option wins over the variable
    result, seen = launched("--api-key", "option-key", "--public-metrics")
    client = TestClient(seen["app"])
    assert client.get("/v1/models", headers=bearer("option-key")).status_code == 200
    assert_refused(client.get("/v1/models", headers=bearer(KEY)))
    assert client.get("/metrics").status_code == 200
    assert "option-key" not in result.output


def test_serve_command_warns_when_reachable_without_a_key(launched, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    result, _ = launched("--host", "0.0.0.0")
    assert result.exit_code == 0 and "warning: serving on 0.0.0.0 without an API key" in result.stderr
    assert "no API key" in result.stderr
    result, _ = launched("--host", "0.0.0.0", "--api-key", KEY)
    assert "warning" not in result.stderr and KEY not in result.output


@pytest.mark.parametrize("args, needle", [
    (["--ssl-keyfile", "KEY"], "--ssl-keyfile was given without --ssl-certfile"),
    (["--ssl-certfile", "CERT"], "--ssl-certfile was given without --ssl-keyfile"),
    (["--ssl-keyfile", "KEY", "--ssl-certfile", "missing.pem"], "--ssl-certfile missing.pem: no such file"),
    (["--ssl-keyfile", "CERT", "--ssl-certfile", "CERT"], "cannot load"),
])
def test_serve_command_refuses_bad_tls_options(tmp_path, monkeypatch, args, needle):
    import uvicorn

    from divelab.cli import app as cli
    from divelab.serving.server import runner

    keyfile, certfile = tmp_path / "key.pem", tmp_path / "cert.pem"
    keyfile.write_text("not a key")
    certfile.write_text("not a certificate")
    args = [{"KEY": str(keyfile), "CERT": str(certfile)}.get(a, a) for a in args]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(runner, "build_app", lambda *a, **k: pytest.fail("the model loaded before the check"))
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("served despite bad TLS options"))
    result = CliRunner().invoke(cli, ["serve", "--model", "smoke", *args])
    assert result.exit_code == 2 and result.stderr.startswith("error: ") and needle in result.stderr


@needs_openssl
def test_serve_command_passes_tls_files_to_uvicorn(launched, tmp_path):
    check_tls_reaches_uvicorn(launched, tmp_path)
