"""An OpenAI-compatible ``/v1/chat/completions`` endpoint in front of any divelab chat model (e.g. a FuguRouter).

``create_app(model, model_name)`` returns a FastAPI app; ``divelab fugu serve`` runs it with uvicorn.
Bodies are validated by pydantic with the same rules and the same OpenAI error shape as
``divelab serve`` (:mod:`divelab.serving.server.openai_http`): bad types, out-of-range values and
unsupported fields are a 400 naming the field; the orchestrator's own failures are a 502, never a
traceback. ``/health`` and ``/metrics`` (Prometheus, responses by route template) come with it, and an optional
API key (:mod:`divelab.serving.server.auth`) closes everything but ``/health``.
"""

import asyncio
import logging
import time
import uuid
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import Field, field_validator

from divelab.chat import ChatModel
from divelab.serving.server.auth import require_api_key
from divelab.serving.server.metrics import HTTPMetrics
from divelab.serving.server.openai_http import APIError, RouteMetrics, guarded, install_errors, read_body
from divelab.serving.server.schemas import GREEDY_BELOW, ChatMessage, ToolFields

log = logging.getLogger("divelab.fugu.serve")


class FuguChatRequest(ToolFields):
    """What a routed chat model honours: the messages, temperature, a token budget and tools."""

    model: str | None = Field(None, max_length=512)
    messages: list[ChatMessage] = Field(min_length=1, max_length=4096)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(None, ge=1, le=2**31)
    max_completion_tokens: int | None = Field(None, ge=1, le=2**31)
    n: Literal[1] = 1
    stream: Literal[False] = False

    @field_validator("temperature")
    @classmethod
    def _greedy(cls, v: float | None) -> float | None:
        return 0.0 if v is not None and v < GREEDY_BELOW else v


def create_app(model: ChatModel, model_name: str = "fugu", api_key: str | None = None,
               public_metrics: bool = False) -> Any:
    """With ``api_key`` every route but ``/health`` (and ``/metrics`` when ``public_metrics``) needs
    ``Authorization: Bearer <api_key>``; a missing or wrong key is an OpenAI-shaped 401."""
    app = FastAPI(title="divelab fugu", docs_url=None, redoc_url=None)
    metrics = HTTPMetrics()
    install_errors(app, log)
    require_api_key(app, api_key, public_metrics=public_metrics, log=log)  # inside RouteMetrics: 401s counted
    app.add_middleware(RouteMetrics, counter=metrics.requests, routes=lambda: app.router.routes)
    guard = guarded(log)

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": 0, "owned_by": "divelab"}]}

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "model": model_name}

    @app.get("/metrics")
    def metrics_route() -> Response:
        return Response(metrics.render(), media_type=metrics.content_type)

    @app.post("/v1/chat/completions")
    @guard
    async def chat(request: Request) -> Any:
        body = await read_body(request, FuguChatRequest)
        if body.model not in (model_name, None):
            raise APIError(404, f"model {body.model!r} does not exist; available: {model_name}", "not_found_error",
                           "model", "model_not_found")
        try:
            msgs = [m.to_message() for m in body.messages]
        except (ValueError, TypeError) as e:
            raise APIError(400, f"malformed messages: {e}", "invalid_request_error", "messages") from None
        budget = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
        try:  # the orchestrator may call slow workers: keep the event loop free
            resp = await asyncio.to_thread(model.complete, msgs, body.offered_tools() or None,
                                           temperature=body.temperature, max_tokens=budget)
        except ValueError as e:
            raise APIError(400, str(e)) from None
        except Exception as e:  # noqa: BLE001  (an upstream worker failed: report it, never a traceback)
            log.exception("orchestrator failed")
            raise APIError(502, f"orchestrator failed: {type(e).__name__}: {e}", "upstream_error") from None
        fugu = (resp.raw or {}).get("fugu", {})
        msg = resp.message.to_openai()
        if not body.parallel_tool_calls and msg.get("tool_calls"):
            msg["tool_calls"] = msg["tool_calls"][:1]
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": model_name,
            "choices": [{"index": 0, "message": msg, "logprobs": None,
                         "finish_reason": "tool_calls" if msg.get("tool_calls") else resp.finish_reason}],
            "usage": {"prompt_tokens": resp.prompt_tokens or 0, "completion_tokens": resp.completion_tokens or 0,
                      "total_tokens": (resp.prompt_tokens or 0) + (resp.completion_tokens or 0)},
            "fugu": fugu,
        }

    return app


def demo_router(seed: int = 0, n_tasks: int = 400) -> Any:
    """A FuguRouter over the reproduction's programmatic pool, trained (SFT + short sep-CMA-ES) in seconds."""
    from divelab.chat import user
    from divelab.orchestration.fugu.features import HashingFeatures
    from divelab.orchestration.fugu.orchestrator import FuguRouter
    from divelab.orchestration.fugu.replay import record
    from divelab.orchestration.fugu.router import LinearRouter
    from divelab.orchestration.fugu.tasks import make_tasks
    from divelab.orchestration.fugu.workers import default_pool

    tasks = make_tasks(n_tasks, seed=seed + 7)
    pool = default_pool(seed)
    out = record(tasks, pool, 2)
    feats = HashingFeatures(64)
    x = feats([[user(t.prompt)] for t in tasks])
    rbar = out.reward.mean(axis=2)
    r = LinearRouter(out.workers, x.shape[1]).fit_sft(x, rbar).fit_cma(x, rbar, iters=10, popsize=12, seed=seed)
    return FuguRouter(pool, r, feats)


def routed_pool(urls: dict[str, str], pool: Any, *, seed: int = 0, n_features: int = 256, cma_iters: int = 60,
                popsize: int = 33, api_key: str | None = None) -> Any:
    """A FuguRouter over workers served elsewhere (``{name: base_url}``, e.g. each behind ``divelab serve``),
    its router trained (SFT + sep-CMA-ES) on a recorded pool whose workers have those names
    (:class:`divelab.orchestration.fugu.real_workers.RealPool`) and priced with the pool's measured prices."""
    from divelab.chat import OpenAIChatClient, user
    from divelab.orchestration.fugu.features import HashingFeatures
    from divelab.orchestration.fugu.orchestrator import FuguRouter
    from divelab.orchestration.fugu.router import LinearRouter
    from divelab.orchestration.fugu.workers import Worker

    missing = sorted(set(pool.names) - set(urls))
    if missing:
        raise ValueError(f"no URL for worker(s) {', '.join(missing)}; the recorded pool has {', '.join(pool.names)}")
    from divelab.orchestration.fugu.real_workers import SystemPrompted

    # a worker's fixed system message (the untuned model's format instruction) is sent from here
    systems = {s["name"]: s.get("system") for s in pool.info.get("config", {}).get("specs", [])}

    def chat(n: str) -> Any:
        client = OpenAIChatClient(base_url=urls[n], model=n, api_key=api_key or "none", max_retries=1)
        return SystemPrompted(client, systems[n]) if systems.get(n) else client

    workers = [Worker(n, chat(n), price_in=pool.prices[n]["price_in"], price_out=pool.prices[n]["price_out"])
               for n in pool.names]
    feats = HashingFeatures(n_features)
    x = feats([[user(t.prompt)] for t in pool.tasks])
    router = LinearRouter(pool.names, x.shape[1]).fit_sft(x, pool.reward).fit_cma(
        x, pool.reward, iters=cma_iters, popsize=popsize, seed=seed)
    return FuguRouter(workers, router, feats)
