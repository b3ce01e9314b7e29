"""Shared by the API-key / TLS tests of both servers (importable as ``auth_helpers``: tests/ is on sys.path)."""

from __future__ import annotations

import logging
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

KEY = "sk-divelab-test-7f3a9c1e5b"  # distinctive, so a leak into any captured text is unmistakable
WRONG = "sk-wrong-key-0000"
needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None,
                                   reason="needs the openssl command to make a certificate")


def assert_refused(r, code: str = "invalid_api_key") -> None:
    """A 401 in the OpenAI envelope, with the Bearer challenge, naming no key."""
    assert r.status_code == 401, (r.status_code, r.text)
    assert r.headers["www-authenticate"] == "Bearer"
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["type"] == "invalid_request_error" and err["param"] is None and err["code"] == code
    assert "API key" in err["message"]
    assert KEY not in r.text and WRONG not in r.text


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@contextmanager
def captured_logs(*names: str):
    """Every record of the named loggers (uvicorn's and the server's), whatever logging config ran before."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Keep(logging.DEBUG)
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    try:
        yield lines
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.removeHandler(handler)
            lg.setLevel(level)


def self_signed_cert(where: Path) -> tuple[Path, Path]:
    """A key and a self-signed certificate for 127.0.0.1 (PEM), made by the ``openssl`` command (the
    ``cryptography`` package is not among divelab's dependencies)."""
    key_path, cert_path = where / "key.pem", where / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", str(key_path), "-out", str(cert_path), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True, timeout=60)
    return key_path, cert_path


def check_tls_reaches_uvicorn(launch, where: Path) -> None:
    """``launch(*args) -> (CliRunner result, uvicorn.run's recorded arguments)`` with a real key and
    certificate: the command hands both files to uvicorn and its banner shows an https URL."""
    keyfile, certfile = self_signed_cert(where)
    result, seen = launch("--ssl-keyfile", str(keyfile), "--ssl-certfile", str(certfile))
    assert result.exit_code == 0, result.output
    assert seen["ssl_keyfile"] == str(keyfile) and seen["ssl_certfile"] == str(certfile)
    assert "on https://127.0.0.1:8000/v1" in result.stderr
