"""TLS options of divelab's servers, checked before the server starts (uvicorn would otherwise fail with a
traceback after the model has loaded, or prompt on the terminal for an encrypted key's passphrase)."""

from __future__ import annotations

import ssl
from pathlib import Path


def tls_options(keyfile: str | Path | None, certfile: str | Path | None) -> dict[str, str]:
    """uvicorn's ``ssl_keyfile`` / ``ssl_certfile`` for ``--ssl-keyfile`` / ``--ssl-certfile``: empty when
    neither is given. Raises ValueError saying what is wrong when only one is given, a file does not
    exist, or the pair does not load (not PEM, key and certificate do not match, key encrypted)."""
    if keyfile is None and certfile is None:
        return {}
    if keyfile is None or certfile is None:
        given, missing = ("--ssl-keyfile", "--ssl-certfile") if certfile is None else ("--ssl-certfile",
                                                                                       "--ssl-keyfile")
        raise ValueError(f"{given} was given without {missing}: HTTPS needs both, the private key and its "
                         "certificate (PEM files), or neither for plain HTTP")
    for flag, path in (("--ssl-keyfile", keyfile), ("--ssl-certfile", certfile)):
        if not Path(path).is_file():
            raise ValueError(f"{flag} {path}: no such file")
    try:  # an encrypted key gets an empty passphrase and fails here instead of prompting later
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(str(certfile), str(keyfile),
                                                                             password=lambda: b"")
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(f"cannot load --ssl-certfile {certfile} with --ssl-keyfile {keyfile}: {exc} (both must "
                         "be PEM, the key unencrypted and matching the certificate)") from None
    return {"ssl_keyfile": str(keyfile), "ssl_certfile": str(certfile)}
