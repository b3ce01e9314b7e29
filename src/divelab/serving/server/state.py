"""What the routes of ``divelab serve`` share: one :class:`ServerState` per app, held on ``app.state.server``.

A route reads it with :func:`state_of` (``state_of(request).engine`` and so on), so a new endpoint is one
module-level function in :mod:`divelab.serving.server.routes` and needs no closure over :func:`create_app`'s
arguments."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request

from divelab.serving.server.engine_loop import EngineLoop
from divelab.serving.server.metrics import ServerMetrics


@dataclass
class ServerState:
    """The served model and the engine decoding it; built once by :func:`create_app`."""

    engine: EngineLoop
    metrics: ServerMetrics
    tokenizer: Any
    model_name: str
    ctx_len: int  # the context a prompt plus its completion must fit in
    vocab: int  # token ids (prompts, logit_bias) must be in [0, vocab)
    has_template: bool  # the tokenizer has a chat template (else plain ``Role: text`` lines)
    created: int  # unix time the app was built (``/v1/models``)
    guard: Any = None  # a ServerGuard (``--guard``): the first-token probe scoring each request


def state_of(request: Request) -> ServerState:
    """The state of the app serving ``request``."""
    return request.app.state.server
