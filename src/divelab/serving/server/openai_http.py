"""HTTP plumbing shared by divelab's OpenAI-compatible servers (``divelab serve``, ``divelab fugu serve``).

* :class:`APIError` and :func:`install_errors`: every error is the OpenAI envelope, with the same
  shape on every server; client errors are logged as one line, unexpected ones with a traceback
  and a 500 that keeps the connection usable.
* :func:`read_body`: the request body parsed (off the event loop when large) and validated into
  a pydantic model; malformed JSON, nesting too deep and bad fields are a 400 naming the field.
* :class:`RouteMetrics`: counts responses by *route template* and status, so junk paths cannot
  grow the metrics without bound.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from divelab.serving.server.schemas import error_body

M = TypeVar("M", bound=BaseModel)
BIG_BODY = 64 * 1024  # parse bodies larger than this in a worker thread


class APIError(Exception):
    def __init__(self, status: int, message: str, type_: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type_, param, code
        self.headers = headers


def error_response(status: int, message: str, type_: str = "invalid_request_error", param: str | None = None,
                   code: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(message, type_, param, code), status_code=status, headers=headers)


def validation_error(errors: list[dict]) -> APIError:
    """A 400 naming the first few offending fields (pydantic's messages, never the offending values)."""
    problems = []
    for e in errors[:5]:
        loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
        msg = e.get("msg", "invalid")
        if e.get("type") == "extra_forbidden":
            msg = "this server does not support this field (docs/serving.md lists the supported ones)"
        problems.append(f"{loc or 'body'}: {msg}")
    first = errors[0].get("loc", ()) if errors else ()
    param = ".".join(str(x) for x in first if x != "body") or None
    return APIError(400, "invalid request: " + "; ".join(problems), param=param)


async def read_body(request: Request, model: type[M]) -> M:
    """Parse and validate the JSON body; every way it can be wrong is an :class:`APIError` 400."""
    raw = await request.body()
    try:
        obj = await asyncio.to_thread(json.loads, raw) if len(raw) > BIG_BODY else json.loads(raw)
    except RecursionError:
        raise APIError(400, "request body is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise APIError(400, f"request body is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise APIError(400, f"request body must be a JSON object, got {type(obj).__name__}")
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        raise validation_error(exc.errors(include_input=False, include_url=False)) from None
    except RecursionError:
        raise APIError(400, "request body is nested too deeply") from None


def install_errors(app: FastAPI, log: logging.Logger) -> None:
    """OpenAI-shaped errors for every failure; client errors as one log line each."""

    def answer(request: Request, exc: APIError) -> JSONResponse:
        if exc.status < 500:
            log.warning("%s %s -> %d %s", request.method, request.url.path, exc.status, exc.message[:300])
        return error_response(exc.status, exc.message, exc.type, exc.param, exc.code, exc.headers)

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return answer(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return answer(request, validation_error(list(exc.errors())))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return answer(request, APIError(exc.status_code, str(exc.detail), kind))


def guarded(log: logging.Logger) -> Callable:
    """Decorate a route: an unexpected exception becomes a logged, OpenAI-shaped 500 answered by the
    handler itself (an exception reaching Starlette's last-resort handler drops the keep-alive connection)."""

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        async def inner(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except APIError:
                raise
            except Exception as exc:  # noqa: BLE001  (logged with its traceback, never shown to the client)
                log.exception("unhandled error in %s", fn.__name__)
                return error_response(500, f"internal server error: {type(exc).__name__}", "server_error")

        return inner

    return wrap


class RouteMetrics:
    """Pure ASGI middleware counting responses by route template and status (``BaseHTTPMiddleware``
    would hide client disconnects from the handlers). Paths matching no route count as ``unmatched``."""

    def __init__(self, app, counter, routes: Callable[[], list]) -> None:
        self.app, self.counter, self.routes = app, counter, routes

    def template(self, scope) -> str:
        for r in self.routes():
            match, _ = r.matches(scope)
            if match != Match.NONE:
                return getattr(r, "path", "unmatched")
        return "unmatched"

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def counted(message) -> None:
            if message["type"] == "http.response.start":
                self.counter.labels(self.template(scope), str(message["status"])).inc()
            await send(message)

        await self.app(scope, receive, counted)
