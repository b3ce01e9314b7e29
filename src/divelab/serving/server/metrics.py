"""Prometheus metrics of one server (own registry, so several servers can live in one process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

_LAT = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class HTTPMetrics:
    """Responses by route template (bounded: one series per route and status) in an own registry."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter("divelab_requests", "HTTP requests by route template and status",
                                ["endpoint", "status"], registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class ServerMetrics(HTTPMetrics):
    def __init__(self) -> None:
        super().__init__()
        r = self.registry
        self.prompt_tokens = Counter("divelab_prompt_tokens", "prompt tokens admitted", registry=r)
        self.generation_tokens = Counter("divelab_generation_tokens", "tokens generated", registry=r)
        self.rounds = Counter("divelab_verify_rounds", "per-request verification rounds (target steps)", registry=r)
        self.committed = Counter("divelab_committed_tokens", "tokens committed by verification rounds", registry=r)
        self.tau = Gauge("divelab_tau", "mean committed tokens per verification round (incl. bonus token)",
                         registry=r)
        self.queue = Gauge("divelab_queue_length", "requests waiting for a batch slot", registry=r)
        self.running = Gauge("divelab_running_requests", "requests in the running batch", registry=r)
        self.ttft = Histogram("divelab_time_to_first_token_seconds", "time from arrival to the first token",
                              buckets=_LAT, registry=r)
        self.itl = Histogram("divelab_inter_token_latency_seconds",
                             "time between tokens (a step committing k tokens gives k samples of gap/k)",
                             buckets=_LAT, registry=r)
        self.step_batch = Histogram("divelab_step_verify_tokens", "tokens verified per batched target forward",
                                    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256), registry=r)

    def record_round(self, rounds: int, committed: int) -> None:
        self.rounds.inc(rounds)
        self.committed.inc(committed)
        n = self.rounds._value.get()
        self.tau.set(self.committed._value.get() / n if n else 0.0)
