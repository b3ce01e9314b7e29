"""The HTTP endpoints of ``divelab serve``, one module-level function each on :data:`router`.

Every route reads the served model and its engine from :func:`~divelab.serving.server.state.state_of`;
to add an endpoint, add a function here with ``@router.get``/``@router.post`` (and ``@guard`` when it
can fail unexpectedly, so the failure is an OpenAI-shaped 500 that keeps the connection alive)."""

from __future__ import annotations

import asyncio
import logging

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from divelab.serving.server.openai_http import guarded, read_body
from divelab.serving.server.prepare import check_model, encode_chat, encode_completion
from divelab.serving.server.replies import run
from divelab.serving.server.schemas import ChatRequest, CompletionRequest
from divelab.serving.server.state import state_of

router = APIRouter()
guard = guarded(logging.getLogger("divelab.serve"))


async def generation(request: Request, schema: type[CompletionRequest] | type[ChatRequest], encode, chat: bool):
    """Validate the body, tokenise it off the event loop (a huge prompt must not stall it), decode, reply."""
    s = state_of(request)
    body = await read_body(request, schema)
    check_model(s, body.model)
    prep = await asyncio.to_thread(encode, s, body)
    return await run(s, request, body, prep, chat=chat)


@router.post("/v1/completions")
@guard
async def completions(request: Request):
    return await generation(request, CompletionRequest, encode_completion, chat=False)


@router.post("/v1/chat/completions")
@guard
async def chat_completions(request: Request):
    return await generation(request, ChatRequest, encode_chat, chat=True)


@router.post("/v1/guard/score")
@guard
async def guard_score(request: Request):
    """Score prompts with the server's guard probe without generating (text, token ids, or a batch)."""
    from divelab.serving.server.guarding import score_request

    return await score_request(state_of(request), request)


@router.get("/v1/models")
async def models(request: Request):
    s = state_of(request)
    return {"object": "list", "data": [{"id": s.model_name, "object": "model", "created": s.created,
                                        "owned_by": "divelab", "max_model_len": s.ctx_len,
                                        "speculative": s.engine.speculative}]}


@router.get("/health")
async def health(request: Request):
    s = state_of(request)
    alive = s.engine.alive
    body = {"status": "ok" if alive else "engine loop stopped", "model": s.model_name,
            "speculative": s.engine.speculative, **s.engine.load}
    return JSONResponse(body, status_code=200 if alive else 503)


@router.get("/metrics")
async def metrics_route(request: Request):
    metrics = state_of(request).metrics
    return Response(metrics.render(), media_type=metrics.content_type)
