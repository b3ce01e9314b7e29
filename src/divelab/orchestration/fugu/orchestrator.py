"""Fugu as a chat model: route each turn to one worker and return its reply (latency ≈ a direct call)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from divelab.chat import ChatResponse, Message, ToolSpec
from divelab.orchestration.fugu.workers import Worker


@dataclass
class FuguRouter:
    """A :class:`divelab.chat.ChatModel` in front of ``workers``: features → ``router`` → one worker per turn.

    ``router`` is anything with ``route(x, cost, lam)`` (a trained :class:`LinearRouter`, kNN, MF);
    ``featurize`` maps a list of transcripts to an (N, d) array. ``lam`` > 0 trades quality for cost
    using each worker's ``price_in`` as its cost. Every decision is appended to ``log``.
    """

    workers: list[Worker]
    router: Any
    featurize: Any
    lam: float = 0.0
    log: list[dict[str, Any]] = field(default_factory=list)

    def choose(self, messages: list[Message]) -> int:
        x = self.featurize([messages])
        price = np.array([w.price_in for w in self.workers], dtype=float)
        return int(self.router.route(x, price / price.max(), self.lam)[0])

    def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None, *,
                 temperature: float | None = None, max_tokens: int | None = None) -> ChatResponse:
        if not messages:
            raise ValueError("messages must be a non-empty list")
        i = self.choose(messages)
        w = self.workers[i]
        kw: dict[str, Any] = {}
        if tools:
            kw["tools"] = tools
        if temperature is not None:
            kw["temperature"] = temperature
        if max_tokens is not None:
            kw["max_tokens"] = max_tokens
        resp, cost = w.call(messages, **kw)
        self.log.append({"worker": w.name, "cost": cost})
        raw = dict(resp.raw or {})
        raw["fugu"] = {"worker": w.name, "cost": cost}
        return ChatResponse(resp.message, resp.finish_reason, resp.prompt_tokens, resp.completion_tokens, raw)
