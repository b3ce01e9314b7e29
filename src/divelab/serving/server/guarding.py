"""The first-token guard inside the engine loop: score each guarded job from the forward it already runs.

A ``prompt_last`` probe is read from the prefill (each row's last prompt token: the batch is left-padded),
a ``first`` probe from the first decoding step (each row's first input is its first generated token, with
or without speculation: drafts follow it). Until its verdict is in, a job's output is held back, so
``stop`` and ``redirect`` act before any of the model's own words leave the server. Each job carries its
own policy and verdict (:class:`~divelab.serving.server.engine_loop.Job`), so batched rows never share one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Histogram

from divelab.guard import (
    GuardProbe,
    GuardVerdict,
    LayerTap,
    check_identity,
    check_policy,
    load_guard,
    score_prompts,
)

SCORE_BUCKETS = (-8.0, -4.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 4.0, 8.0)


class ServerGuard:
    """One probe on the served model, its default policy, and its Prometheus series."""

    def __init__(self, target: Any, tokenizer: Any, probe: GuardProbe, policy: str = "annotate",
                 registry: CollectorRegistry | None = None) -> None:
        self.target, self.probe, self.policy = target, probe, check_policy(policy)
        self.tap = LayerTap(target, probe.layer)
        self.refusal_tokens = len(tokenizer.encode(probe.refusal, add_special_tokens=False))
        self._scoring = threading.Lock()  # /v1/guard/score forwards run one at a time, beside the engine's
        self.decisions = Counter("divelab_guard_decisions", "guard verdicts by decision and by what was done",
                                 ["decision", "action"], registry=registry)
        self.scores = Histogram("divelab_guard_score", "guard probe scores (flagged at or above the threshold)",
                                buckets=SCORE_BUCKETS, registry=registry)

    def verdict(self, score: float | None, policy: str) -> GuardVerdict:
        p = self.probe
        return GuardVerdict(score, score is not None and p.flagged(score), p.layer, p.position, policy, p.threshold)

    def _awaits(self, job: Any, prefill: bool) -> bool:
        return job.guard is not None and job.verdict is None and prefill == (self.probe.position == "prompt_last")

    @contextmanager
    def reading(self, jobs: Sequence[Any], prefill: bool) -> Iterator[None]:
        """Around one batched forward over ``jobs`` (row i = jobs[i]): the jobs waiting for a verdict from
        this kind of forward get one. A forward that raises gives none (the job is retried or failed)."""
        want = [i for i, j in enumerate(jobs) if self._awaits(j, prefill)]
        if not want:
            yield
            return
        rows: list[np.ndarray] = []
        at = -1 if prefill else 0
        self.tap.arm(lambda h: rows.append(h[:, at].detach().double().cpu().numpy()))
        try:
            yield
        finally:
            self.tap.disarm()
        if rows:
            for i, s in zip(want, self.probe.scores(rows[-1][want]), strict=True):
                jobs[i].verdict = self.verdict(float(s), jobs[i].guard)

    def gate(self, job: Any, send: Callable[[Any, dict], None]) -> bool:
        """Called before a job's output goes out. False: hold it (verdict pending) or the guard ended it.
        The first time a verdict is there it is sent (a ``guard`` event) and the policy applied."""
        if job.guard is None:
            return True
        if job.verdict is None:
            if not job.state.done:
                return False
            job.verdict = self.verdict(None, job.guard)  # ended before any forward read the position
        if job.guard_sent:
            return True
        job.guard_sent = True
        v = job.verdict
        self.decisions.labels(v.decision, v.action).inc()
        if v.score is not None:
            self.scores.observe(v.score)
        send(job, {"type": "guard", "guard": v.to_dict()})
        if v.action == "none":
            return True
        job.finished = True
        job.state.done = True  # its batch row is dropped by index at the next step
        tokens = 0
        if v.action == "redirected":
            tokens = self.refusal_tokens
            send(job, {"type": "delta", "text": self.probe.refusal, "tokens": tokens})
        send(job, {"type": "done", "finish_reason": "content_filter" if v.action == "stopped" else "stop",
                   "completion_tokens": tokens, "prompt_tokens": len(job.prompt), "rounds": job.state.rounds})
        return False

    def score_now(self, prompts: Sequence[Sequence[int]]) -> list[GuardVerdict]:
        """Score prompts without generating (``/v1/guard/score``): the offline scorer through this tap."""
        with self._scoring:
            got = score_prompts(self.target, self.probe, prompts, tap=self.tap)
        out = [self.verdict(g.score, "annotate") for g in got]
        for v in out:
            self.decisions.labels(v.decision, "scored-only").inc()
        return out

    @classmethod
    def for_model(cls, target: Any, tokenizer: Any, guard: GuardProbe | str | Path, policy: str,
                  registry: CollectorRegistry | None = None) -> ServerGuard:
        """From a probe or its file; ValueError when it was trained on another model or the policy is unknown."""
        check_policy(policy)
        probe = guard if isinstance(guard, GuardProbe) else load_guard(guard, target)
        if isinstance(guard, GuardProbe):
            check_identity(probe.model, target)
        return cls(target, tokenizer, probe, policy, registry)


async def score_request(s: Any, request: Any) -> dict:
    """``POST /v1/guard/score``: ``{"model", "prompt"}`` (a completions prompt: text, ids, or a batch of either)."""
    import asyncio

    from divelab.serving.server.openai_http import APIError, read_body
    from divelab.serving.server.prepare import check_model, encode_completion
    from divelab.serving.server.schemas import CompletionRequest

    if s.guard is None:
        raise APIError(404, "this server has no guard; start it with divelab serve --guard PROBE",
                       "not_found_error", code="guard_not_configured")
    body = await read_body(request, CompletionRequest)
    check_model(s, body.model)
    prep = await asyncio.to_thread(encode_completion, s, body)
    verdicts = await asyncio.to_thread(s.guard.score_now, prep.prompts)
    return {"object": "list", "model": s.model_name, "data": [{"index": i, **v.to_dict()}
                                                             for i, v in enumerate(verdicts)]}
