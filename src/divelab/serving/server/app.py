"""The OpenAI-compatible FastAPI app: ``/v1/completions``, ``/v1/chat/completions``, ``/v1/models``,
``/health``, ``/metrics``. Every request becomes one or more :class:`Job` s on the shared
:class:`EngineLoop`; handlers only translate HTTP <-> jobs."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from divelab.serving.server.engine_loop import EngineLoop, Job, QueueFull, SamplingParams
from divelab.serving.server.metrics import ServerMetrics
from divelab.serving.server.schemas import ChatMessage, ChatRequest, CompletionRequest, error_body

log = logging.getLogger("divelab.serve")
DEFAULT_COMPLETION_TOKENS = 16  # the OpenAI default for /v1/completions
DEFAULT_CHAT_TOKENS = 256


class APIError(Exception):
    def __init__(self, status: int, message: str, type_: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type_, param, code
        self.headers = headers


class _CountRequests:
    """Pure ASGI middleware counting responses by path and status (``BaseHTTPMiddleware`` would
    hide client disconnects from the handlers)."""

    def __init__(self, app, metrics: ServerMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def counted(message) -> None:
            if message["type"] == "http.response.start":
                self.metrics.requests.labels(scope["path"], str(message["status"])).inc()
            await send(message)

        await self.app(scope, receive, counted)


def plain_chat_prompt(messages: list[dict[str, str]]) -> str:
    """The template for models without one: ``Role: text`` lines, then ``Assistant:``."""
    lines = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n".join(lines) + "\nAssistant:"


def context_length(model) -> int:
    cfg = model.config
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        if getattr(cfg, name, None):
            return int(getattr(cfg, name))
    return 2048


def create_app(target, tokenizer, model_name: str, drafter=None, calibration=None, scheduler: str = "dspark",
               max_batch: int = 8, max_queue: int = 64, seed: int = 0, sps=None, gamma: int | None = None,
               max_context: int | None = None) -> FastAPI:
    """Build the app; the engine loop starts with the app (lifespan) and stops with it."""
    metrics = ServerMetrics()
    engine = EngineLoop(target, tokenizer, drafter, calibration, scheduler=scheduler, sps=sps, gamma=gamma,
                        max_batch=max_batch, max_queue=max_queue, seed=seed, metrics=metrics)
    ctx_len = max_context or context_length(target)
    vocab = int(target.config.vocab_size)
    has_template = bool(getattr(tokenizer, "chat_template", None))
    created = int(time.time())

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        engine.start()
        try:
            yield
        finally:
            engine.close()

    app = FastAPI(title="divelab serve", lifespan=lifespan)
    app.state.engine = engine
    app.state.metrics = metrics
    app.state.model_name = model_name

    # ---------------------------------------------------------------------------- errors
    def err(status: int, message: str, type_: str = "invalid_request_error", param: str | None = None,
            code: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse(error_body(message, type_, param, code), status_code=status, headers=headers)

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return err(exc.status, exc.message, exc.type, exc.param, exc.code, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for e in exc.errors()[:5]:
            loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
            problems.append(f"{loc or 'body'}: {e.get('msg')}")
        first = exc.errors()[0].get("loc", ()) if exc.errors() else ()
        param = ".".join(str(x) for x in first if x != "body") or None
        return err(400, "invalid request: " + "; ".join(problems), param=param)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return err(exc.status_code, str(exc.detail), "not_found_error" if exc.status_code == 404 else
                   "invalid_request_error")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:  # logged, never shown as a traceback
        log.exception("unhandled error")
        return err(500, f"internal server error: {type(exc).__name__}", "server_error")

    app.add_middleware(_CountRequests, metrics=metrics)

    # ---------------------------------------------------------------------------- helpers
    def check_model(name: str) -> None:
        if name != model_name:
            raise APIError(404, f"model {name!r} is not served here; this server serves {model_name!r} "
                                "(see GET /v1/models)", "not_found_error", "model", "model_not_found")

    def params_for(body, prompt_len: int, default_max: int) -> SamplingParams:
        if prompt_len >= ctx_len:
            raise APIError(400, f"the prompt is {prompt_len} tokens; the model's context is {ctx_len}",
                           param="messages" if isinstance(body, ChatRequest) else "prompt",
                           code="context_length_exceeded")
        room = ctx_len - prompt_len
        mt = body.requested_max()
        if mt is None:
            mt = min(default_max, room)
        if mt < 1:
            raise APIError(400, f"max_tokens must be >= 1, got {mt}", param="max_tokens")
        if mt > room:
            raise APIError(400, f"max_tokens {mt} + prompt {prompt_len} tokens exceeds the model's context of "
                                f"{ctx_len} tokens (at most {room} new tokens)", param="max_tokens",
                           code="context_length_exceeded")
        return SamplingParams(max_tokens=mt, temperature=body.temperature, top_p=body.top_p,
                              stop=tuple(body.stop_list()), seed=body.seed)

    def encode_completion(prompt) -> list[int]:
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], str):
            prompt = prompt[0]
        if isinstance(prompt, str):
            ids = tokenizer.encode(prompt)
        else:
            ids = list(prompt)
            bad = [t for t in ids if not isinstance(t, int) or not 0 <= t < vocab]
            if bad:
                raise APIError(400, f"prompt token ids must be in [0, {vocab}), got {bad[:5]}", param="prompt")
        if not ids:
            raise APIError(400, "the prompt encodes to zero tokens: give some text", param="prompt")
        return ids

    def encode_chat(messages: list[ChatMessage]) -> list[int]:
        try:
            msgs = [{"role": "system" if m.role == "developer" else m.role, "content": m.text()} for m in messages]
        except ValueError as exc:
            raise APIError(400, f"malformed messages: {exc}", param="messages") from None
        if has_template:
            try:
                text = tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
            except Exception as exc:  # templates raise jinja errors for orders they do not allow
                raise APIError(400, f"the model's chat template rejected the messages: {exc}",
                               param="messages") from None
            ids = tokenizer.encode(text, add_special_tokens=False)
        else:
            ids = tokenizer.encode(plain_chat_prompt(msgs))
        if not ids:
            raise APIError(400, "the messages encode to zero tokens", param="messages")
        return ids

    def submit(prompt: list[int], params: SamplingParams, n: int):
        aloop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        jobs = []
        for i in range(n):
            p = params if params.seed is None else SamplingParams(params.max_tokens, params.temperature,
                                                                  params.top_p, params.stop, params.seed + i)
            jobs.append(Job(list(prompt), p, sink=lambda ev, i=i: aloop.call_soon_threadsafe(queue.put_nowait,
                                                                                             (i, ev))))
        try:
            engine.submit(jobs)
        except QueueFull as exc:
            raise APIError(429, f"server overloaded: {exc}; retry later", "rate_limit_error",
                           code="rate_limit_exceeded", headers={"Retry-After": "1"}) from None
        return jobs, queue

    async def events(request: Request, jobs: list[Job], queue: asyncio.Queue) -> AsyncIterator[tuple[int, dict]]:
        """Yield (choice index, event) until every job is done; cancel the jobs if the client leaves."""
        left = len(jobs)
        checked = time.monotonic()
        try:
            while left:
                if time.monotonic() - checked > 0.25:  # even while tokens flow
                    checked = time.monotonic()
                    if await request.is_disconnected():
                        return
                try:
                    i, ev = await asyncio.wait_for(queue.get(), timeout=0.25)
                except TimeoutError:
                    continue
                if ev["type"] in ("done", "error"):
                    left -= 1
                yield i, ev
        finally:
            if left:
                engine.cancel(jobs)

    async def run(request: Request, body, prompt: list[int], chat: bool):
        check_model(body.model)
        params = params_for(body, len(prompt), DEFAULT_CHAT_TOKENS if chat else DEFAULT_COMPLETION_TOKENS)
        jobs, queue = submit(prompt, params, body.n)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        obj = "chat.completion" if chat else "text_completion"
        if body.stream:
            include_usage = bool((body.stream_options or {}).get("include_usage"))
            return StreamingResponse(stream(request, jobs, queue, rid, chat, len(prompt), include_usage),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        texts = [""] * body.n
        finish = [None] * body.n
        completion = 0
        async for i, ev in events(request, jobs, queue):
            if ev["type"] == "delta":
                texts[i] += ev["text"]
            elif ev["type"] == "done":
                finish[i] = ev["finish_reason"]
                completion += ev["completion_tokens"]
            else:
                raise APIError(500, ev["message"], "server_error")
        if any(f is None for f in finish):  # the client left; nobody reads this
            return Response(status_code=499)
        if chat:
            choices = [{"index": i, "message": {"role": "assistant", "content": t}, "logprobs": None,
                        "finish_reason": f} for i, (t, f) in enumerate(zip(texts, finish, strict=True))]
        else:
            choices = [{"index": i, "text": t, "logprobs": None, "finish_reason": f}
                       for i, (t, f) in enumerate(zip(texts, finish, strict=True))]
        usage = {"prompt_tokens": len(prompt), "completion_tokens": completion,
                 "total_tokens": len(prompt) + completion}
        return {"id": rid, "object": obj, "created": int(time.time()), "model": model_name, "choices": choices,
                "usage": usage, "system_fingerprint": "divelab-dspark" if engine.speculative else "divelab-plain"}

    async def stream(request: Request, jobs, queue, rid: str, chat: bool, prompt_len: int,
                     include_usage: bool) -> AsyncIterator[str]:
        obj = "chat.completion.chunk" if chat else "text_completion"
        made = int(time.time())

        def chunk(choices: list[dict], usage: dict | None = None, tokens: int | None = None) -> str:
            d: dict[str, Any] = {"id": rid, "object": obj, "created": made, "model": model_name, "choices": choices}
            if include_usage:
                d["usage"] = usage
            if tokens is not None:
                d["x_divelab_tokens"] = tokens  # tokens carried by this chunk (for inter-token latency)
            return f"data: {json.dumps(d)}\n\n"

        def choice(i: int, text: str | None, finish: str | None, first: bool = False) -> dict:
            if chat:
                delta: dict[str, Any] = {"role": "assistant", "content": ""} if first else {}
                if text:
                    delta["content"] = text
                return {"index": i, "delta": delta, "logprobs": None, "finish_reason": finish}
            return {"index": i, "text": text or "", "logprobs": None, "finish_reason": finish}

        if chat:
            for i in range(len(jobs)):
                yield chunk([choice(i, None, None, first=True)])
        completion = 0
        async for i, ev in events(request, jobs, queue):
            if ev["type"] == "delta" and ev["text"]:
                yield chunk([choice(i, ev["text"], None)], tokens=ev["tokens"])
            elif ev["type"] == "done":
                completion += ev["completion_tokens"]
                yield chunk([choice(i, None, ev["finish_reason"])])
            elif ev["type"] == "error":
                yield f"data: {json.dumps(error_body(ev['message'], 'server_error'))}\n\n"
        if include_usage:
            yield chunk([], {"prompt_tokens": prompt_len, "completion_tokens": completion,
                             "total_tokens": prompt_len + completion})
        yield "data: [DONE]\n\n"

    # ---------------------------------------------------------------------------- routes
    @app.post("/v1/completions")
    async def completions(request: Request, body: CompletionRequest):
        check_model(body.model)
        return await run(request, body, encode_completion(body.prompt), chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request, body: ChatRequest):
        check_model(body.model)
        return await run(request, body, encode_chat(body.messages), chat=True)

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": created,
                                            "owned_by": "divelab", "max_model_len": ctx_len,
                                            "speculative": engine.speculative}]}

    @app.get("/health")
    async def health():
        alive = engine._thread.is_alive()
        body = {"status": "ok" if alive else "engine loop stopped", "model": model_name,
                "speculative": engine.speculative, **engine.load}
        return JSONResponse(body, status_code=200 if alive else 503)

    @app.get("/metrics")
    async def metrics_route():
        return Response(metrics.render(), media_type=metrics.content_type)

    return app
