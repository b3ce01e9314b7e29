"""API-key authentication shared by divelab's OpenAI-compatible servers (``divelab serve``, ``divelab fugu serve``).

With a key set, every request must carry ``Authorization: Bearer <key>``, as the OpenAI API expects
and every OpenAI client sends; a missing or wrong key is a 401 in the OpenAI error envelope with a
``WWW-Authenticate: Bearer`` header. ``/health`` stays open so load balancers and orchestrators can
probe the server; ``/metrics`` stays closed unless asked for. The key is compared in constant time
and never written to a log line, a reply or the startup banner.

The check is pure ASGI middleware (like :class:`~divelab.serving.server.openai_http.RouteMetrics`):
it runs before routing, so unknown paths and FastAPI's own ``/docs`` are closed too, and it does not
hide client disconnects from streaming handlers the way ``BaseHTTPMiddleware`` would. Torch-free.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
from collections.abc import Iterable

from divelab.serving.server.openai_http import error_response

ENV_VAR = "DIVELAB_API_KEY"
ALWAYS_OPEN = ("/health",)  # liveness probes cannot be expected to hold the key
CHALLENGE = {"WWW-Authenticate": "Bearer"}  # RFC 6750: a 401 names the scheme it wants


def resolve_api_key(option: str | None) -> str | None:
    """The key a server requires: ``option`` (``--api-key``) when given, else ``$DIVELAB_API_KEY``, else
    None (no authentication). An empty value counts as not given."""
    return option or os.environ.get(ENV_VAR) or None


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name other than localhost may resolve to any interface
        return False


def open_host_warning(host: str, api_key: str | None) -> str | None:
    """The one-line warning for a server other machines can reach without a key, or None."""
    if api_key or is_loopback(host):
        return None
    return (f"warning: serving on {host} without an API key: anyone who can reach this port can use it; "
            f"set --api-key or {ENV_VAR}")


def bearer_token(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme case-insensitive), or None."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            if scheme.lower() == b"bearer" and token.strip():
                return token.strip()
            return None
    return None


class BearerAuth:
    """ASGI middleware: answer 401 to any HTTP request outside ``open_paths`` without the right bearer key."""

    def __init__(self, app, api_key: str, open_paths: Iterable[str] = ALWAYS_OPEN,
                 log: logging.Logger | None = None) -> None:
        if not api_key:
            raise ValueError("BearerAuth needs a non-empty api_key")
        self.app, self.key = app, api_key.encode("utf-8")
        self.open_paths = frozenset(open_paths)
        self.log = log or logging.getLogger("divelab.serve")

    def refusal(self, token: bytes | None) -> str | None:
        """Why a request with this token is refused (a message naming no key), or None to let it through."""
        if token is None:
            return "missing API key: send it in the header 'Authorization: Bearer <key>'"
        if not hmac.compare_digest(token, self.key):  # constant time: no timing oracle on the key
            return "incorrect API key provided"
        return None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths:
            return await self.app(scope, receive, send)
        why = self.refusal(bearer_token(scope.get("headers", ())))
        if why is None:
            return await self.app(scope, receive, send)
        self.log.warning("%s %s -> 401 %s", scope.get("method", "?"), scope["path"], why.split(":")[0])
        reply = error_response(401, why, "invalid_request_error", None, "invalid_api_key", CHALLENGE)
        await reply(scope, receive, send)


def require_api_key(app, api_key: str | None, *, public_metrics: bool = False,
                    log: logging.Logger | None = None) -> None:
    """Close ``app`` behind ``api_key`` (no-op when None). ``/health`` stays open, and ``/metrics`` too when
    ``public_metrics``. Call it before adding metrics middleware so refused requests are counted."""
    if api_key is None:
        return
    open_paths = ALWAYS_OPEN + (("/metrics",) if public_metrics else ())
    app.add_middleware(BearerAuth, api_key=api_key, open_paths=open_paths, log=log)
