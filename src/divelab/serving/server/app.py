"""The OpenAI-compatible FastAPI app: ``/v1/completions``, ``/v1/chat/completions``, ``/v1/models``,
``/health``, ``/metrics``. Every request becomes one :class:`Job` per prompt and choice on the shared
:class:`EngineLoop`; handlers only translate HTTP <-> jobs. Bodies are validated by the pydantic
models of :mod:`divelab.serving.server.schemas`; tokenisation runs in a worker thread so a huge
prompt never stalls the event loop.

The routes live at module level in :mod:`~divelab.serving.server.routes` (request -> jobs in
:mod:`.prepare`, events -> replies in :mod:`.replies`); :func:`create_app` builds the one
:class:`~divelab.serving.server.state.ServerState` they read and wires the app around it."""

from __future__ import annotations

import logging
import time
from contextlib import asynccontextmanager

from fastapi import FastAPI

from divelab.serving.server.auth import require_api_key
from divelab.serving.server.engine_loop import EngineLoop
from divelab.serving.server.metrics import ServerMetrics
from divelab.serving.server.openai_http import RouteMetrics, install_errors
from divelab.serving.server.prepare import plain_chat_prompt
from divelab.serving.server.routes import router
from divelab.serving.server.state import ServerState

__all__ = ["context_length", "create_app", "default_engine", "plain_chat_prompt"]
log = logging.getLogger("divelab.serve")


def context_length(model) -> int:
    cfg = model.config
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        if getattr(cfg, name, None):
            return int(getattr(cfg, name))
    return 2048


def default_engine(model, guard=None) -> str:
    """``lean`` for a model on the CPU without a guard, else ``hf``."""
    on_cpu = next(model.parameters()).device.type == "cpu"
    return "lean" if on_cpu and guard is None else "hf"


@asynccontextmanager
async def lifespan(app: FastAPI):
    """The engine loop runs while the app does."""
    engine = app.state.server.engine
    engine.start()
    try:
        yield
    finally:
        engine.close()


def create_app(target, tokenizer, model_name: str, drafter=None, calibration=None, scheduler: str = "dspark",
               max_batch: int = 8, max_queue: int = 64, seed: int = 0, sps=None, gamma: int | None = None,
               max_context: int | None = None, api_key: str | None = None, public_metrics: bool = False,
               guard=None, guard_policy: str = "annotate", engine: str | None = None, fmt: str = "fp32") -> FastAPI:
    """Build the app; the engine loop starts with the app (lifespan) and stops with it. With ``api_key``
    every route but ``/health`` (and ``/metrics`` when ``public_metrics``) needs ``Authorization: Bearer``.
    ``guard``: a first-token probe (a :class:`~divelab.guard.GuardProbe` or its file) that scores every request,
    acting by ``guard_policy`` unless a request names its own (see :mod:`divelab.serving.server.guarding`).
    ``engine``: ``"lean"`` (the lean path, weights in ``fmt``: fp32 | bf16 | int8; Llama-family models on
    the CPU) or ``"hf"`` (the HF model's forward, batched); None picks lean unless the model is off the CPU or
    a guard is given (the guard reads the HF model's layers), where it picks hf."""
    metrics = ServerMetrics()
    probe_guard = None
    if guard is not None:
        from divelab.serving.server.guarding import ServerGuard

        probe_guard = ServerGuard.for_model(target, tokenizer, guard, guard_policy, metrics.registry)
    engine = EngineLoop(target, tokenizer, drafter, calibration, scheduler=scheduler, sps=sps, gamma=gamma,
                        max_batch=max_batch, max_queue=max_queue, seed=seed, metrics=metrics, guard=probe_guard,
                        engine=default_engine(target, guard) if engine is None else engine, fmt=fmt)
    state = ServerState(engine=engine, metrics=metrics, tokenizer=tokenizer, model_name=model_name,
                        ctx_len=max_context or context_length(target), vocab=int(target.config.vocab_size),
                        has_template=bool(getattr(tokenizer, "chat_template", None)), created=int(time.time()),
                        guard=probe_guard)

    app = FastAPI(title="divelab serve", lifespan=lifespan)
    app.state.server = state
    app.state.engine = engine
    app.state.metrics = metrics
    app.state.model_name = model_name
    install_errors(app, log)
    require_api_key(app, api_key, public_metrics=public_metrics, log=log)  # inside RouteMetrics: 401s counted
    app.add_middleware(RouteMetrics, counter=metrics.requests, routes=lambda: app.router.routes)
    for route in router.routes:  # each route on the app itself (include_router nests them in one entry,
        # where RouteMetrics could not see their path templates)
        app.add_api_route(route.path, route.endpoint, methods=sorted(route.methods), name=route.name)
    return app
