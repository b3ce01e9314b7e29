"""An OpenAI-compatible ``/v1/chat/completions`` endpoint in front of any divelab chat model (e.g. a FuguRouter).

``create_app(model, model_name)`` returns a FastAPI app; ``divelab fugu serve`` runs it with uvicorn.
Bad requests get OpenAI-style error JSON (``{"error": {"message", "type", "param", "code"}}``) with a
4xx status; the orchestrator's own failures get a 502 with the same shape, never a traceback.
"""

import time
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from divelab.chat import ChatModel, Message


def _error(status: int, message: str, param: str | None = None, code: str | None = None) -> Any:
    kind = "invalid_request_error" if status < 500 else "upstream_error"
    return JSONResponse(status_code=status, content={"error": {"message": message, "type": kind, "param": param,
                                                                "code": code}})


def create_app(model: ChatModel, model_name: str = "fugu") -> Any:
    app = FastAPI(title="divelab fugu", docs_url=None, redoc_url=None)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> Any:
        return _error(400, f"invalid request: {exc.errors()[:3]}")

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": 0, "owned_by": "divelab"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "request body is not valid JSON")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object")
        if body.get("model") not in (model_name, None):
            return _error(404, f"model {body.get('model')!r} does not exist; available: {model_name}", "model",
                          "model_not_found")
        if body.get("stream"):
            return _error(400, "stream=true is not supported by this server", "stream")
        raw = body.get("messages")
        if not isinstance(raw, list) or not raw:
            return _error(400, "'messages' must be a non-empty list", "messages")
        msgs: list[Message] = []
        for k, m in enumerate(raw):
            if not isinstance(m, dict) or not isinstance(m.get("content", ""), str):
                return _error(400, f"messages[{k}] must be an object with string 'content'", f"messages[{k}]")
            try:
                msgs.append(Message(str(m.get("role")), m.get("content") or ""))
            except (ValueError, TypeError) as e:
                return _error(400, f"messages[{k}]: {e}", f"messages[{k}]")
        try:
            resp = model.complete(msgs, temperature=body.get("temperature"), max_tokens=body.get("max_tokens"))
        except ValueError as e:
            return _error(400, str(e))
        except Exception as e:  # noqa: BLE001  (an upstream worker failed: report it, never a traceback)
            return _error(502, f"orchestrator failed: {type(e).__name__}: {e}")
        fugu = (resp.raw or {}).get("fugu", {})
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": model_name,
            "choices": [{"index": 0, "message": resp.message.to_openai(), "finish_reason": resp.finish_reason}],
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
