"""The options ``divelab serve`` and ``divelab fugu serve`` share: who may call the server (``--api-key``,
``--public-metrics``) and HTTPS (``--ssl-keyfile``, ``--ssl-certfile``), checked before a model loads.

Only typer is imported here (the checks import their modules when a command runs), so listing the
commands stays fast and torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import typer


def api_key_option():
    return typer.Option(None, "--api-key", show_default=False,
                        help="require 'Authorization: Bearer KEY' on every request but /health "
                             "(default: $DIVELAB_API_KEY; neither: no authentication). The variable keeps the key "
                             "out of the process list")


def public_metrics_option():
    return typer.Option(False, "--public-metrics",
                        help="with an API key, still serve /metrics without it (e.g. to a Prometheus scraper)")


def ssl_keyfile_option():
    return typer.Option(None, "--ssl-keyfile", help="PEM private key: serve HTTPS (give --ssl-certfile too)")


def ssl_certfile_option():
    return typer.Option(None, "--ssl-certfile", help="PEM certificate (chain) for --ssl-keyfile")


@dataclass(frozen=True)
class Access:
    """The resolved key (never shown: kept out of ``repr``) and uvicorn's TLS arguments."""

    api_key: str | None = field(repr=False)
    tls: dict[str, str] = field(default_factory=dict)

    def url(self, host: str, port: int) -> str:
        shown = f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls else 'http'}://{shown}:{port}/v1"

    @property
    def note(self) -> str:
        """What the startup banner says about authentication (never the key itself)."""
        return "API key required" if self.api_key else "no API key"


def resolve_access(host: str, api_key: str | None, ssl_keyfile: str | None, ssl_certfile: str | None) -> Access:
    """Check the options (``error: ...`` and exit 2 on bad TLS files) and warn on stderr when a server other
    machines can reach has no key."""
    from divelab.serving.server.auth import open_host_warning, resolve_api_key
    from divelab.serving.server.tls import tls_options

    try:
        tls = tls_options(ssl_keyfile, ssl_certfile)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    key = resolve_api_key(api_key)
    warning = open_host_warning(host, key)
    if warning:
        typer.echo(warning, err=True)
    return Access(key, tls)
