"""One continuously-batched decoding loop shared by every HTTP request.

A background thread owns the target. Each iteration it (1) drops requests whose client went
away, (2) admits waiting requests into free batch slots (``SpecEngine.prefill``), and (3) runs
``SpecEngine.step`` over the live requests — one batched draft + schedule + verify forward for all
greedy requests together, one for all unseeded sampled requests together, and one per seeded
request (its own generator, stepped alone, so the same seed gives the same tokens whatever else
is being served). New tokens go back to the request's handler as text deltas, with stop strings
and ``max_tokens`` enforced here.

Per-request temperature and top-p are applied by a forward hook on the target that rescales and
nucleus-filters each batch row's logits before the engine's (lossless) verification sees them;
the sampling engine runs at temperature 1, so ``softmax(hooked logits)`` is exactly the request's
distribution. The drafter proposes from its own logits, which changes only how often drafts are
accepted, never the output distribution.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from divelab.serving.dspark import Request, SpecEngine, measure_sps
from divelab.serving.server.metrics import ServerMetrics

log = logging.getLogger("divelab.serve")


class QueueFull(RuntimeError):
    """More requests are waiting than the server accepts (answered with HTTP 429)."""


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


@dataclass(eq=False)
class Job:
    """One choice of one HTTP request. ``sink`` receives event dicts (called from the loop thread)."""

    prompt: list[int]
    params: SamplingParams
    sink: Callable[[dict], None]
    arrival: float = field(default_factory=time.perf_counter)
    cancelled: bool = False
    state: object = None
    gen: torch.Generator | None = None
    n_seen: int = 0
    emitted: int = 0
    t_last: float | None = None
    finished: bool = False


def top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Set logits outside the smallest nucleus with mass >= top_p to -inf (last dim; in place)."""
    srt, idx = torch.sort(logits, dim=-1, descending=True)
    p = torch.softmax(srt.double(), dim=-1)
    drop = (p.cumsum(-1) - p) >= top_p  # mass strictly before this token already reaches top_p
    drop[..., 0] = False
    logits.scatter_(-1, idx, srt.masked_fill(drop, float("-inf")))
    return logits


class EngineLoop:
    def __init__(self, target: torch.nn.Module, tokenizer, drafter=None, calibration=None,
                 scheduler: str = "dspark", sps=None, gamma: int | None = None, max_batch: int = 8,
                 max_queue: int = 64, seed: int = 0, metrics: ServerMetrics | None = None) -> None:
        if max_batch < 1 or max_queue < 1:
            raise ValueError(f"max_batch and max_queue must be >= 1, got {max_batch}, {max_queue}")
        self.tok = tokenizer
        self.device = next(target.parameters()).device
        self.eos = getattr(tokenizer, "eos_token_id", None)
        if drafter is not None and sps is None:  # measured once, shared by both engines
            sps = measure_sps(target, batch_sizes=[1, 2, 4, 8, 16, 32], repeats=2, seed=seed)
        kw = dict(sps=sps, calibration=calibration, gamma=gamma, eos_token_id=self.eos, seed=seed)
        self.greedy = SpecEngine(target, drafter, scheduler, temperature=0.0, **kw)
        self.sampler = SpecEngine(target, drafter, scheduler, temperature=1.0, **kw)
        self.shared_gen = self.sampler.gen
        self.speculative = drafter is not None
        self.max_batch, self.max_queue = max_batch, max_queue
        self.metrics = metrics or ServerMetrics()
        self.pending: deque[Job] = deque()
        self.active: list[Job] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._rows: list[tuple[float, float]] | None = None
        self._tid: int | None = None
        self._rid = 0
        self._prefilling = 0
        self._hook = target.register_forward_hook(self._logits_hook)
        self._thread = threading.Thread(target=self._run, name="divelab-engine-loop", daemon=True)

    # ------------------------------------------------------------------------------ public
    def start(self) -> EngineLoop:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._hook.remove()

    def submit(self, jobs: list[Job]) -> None:
        """Queue the jobs of one request together (all or none); raises :class:`QueueFull`."""
        with self._lock:
            if len(self.pending) + len(jobs) > self.max_queue:
                raise QueueFull(f"{len(self.pending)} requests already waiting (limit {self.max_queue})")
            for j in jobs:
                if j.params.seed is not None:
                    j.gen = torch.Generator(device=self.device).manual_seed(int(j.params.seed))
                self.pending.append(j)
            self.metrics.queue.set(len(self.pending))
        self._wake.set()

    def cancel(self, jobs: list[Job]) -> None:
        """The client went away: the loop frees these slots at its next iteration."""
        for j in jobs:
            j.cancelled = True
        self._wake.set()

    @property
    def load(self) -> dict:
        return {"waiting": len(self.pending), "running": len(self.active) + self._prefilling,
                "max_batch": self.max_batch,
                "max_queue": self.max_queue}

    # ------------------------------------------------------------------------------ the loop
    def _logits_hook(self, module, args, output):
        rows = self._rows
        if rows is None or threading.get_ident() != self._tid:
            return None
        logits = output.logits
        for i, (temp, top_p) in enumerate(rows[: logits.shape[0]]):
            if temp != 1.0:
                logits[i].div_(temp)
            if top_p < 1.0:
                top_p_filter(logits[i], top_p)
        return None

    def _run(self) -> None:
        self._tid = threading.get_ident()
        while not self._stop.is_set():
            try:
                self._iteration()
            except Exception as exc:  # never let one bad step kill the server: fail the live jobs
                log.exception("engine loop step failed")
                for j in list(self.active):
                    self._fail(j, f"internal engine error: {type(exc).__name__}: {exc}")
                self.active = []
                self._rows = None

    def _iteration(self) -> None:
        self.active = [j for j in self.active if not j.cancelled and not j.finished]
        self._admit()
        self.metrics.running.set(len(self.active))
        if not self.active:
            self._wake.wait(0.05)
            self._wake.clear()
            return
        for eng, jobs, gen in self._groups():
            if self._stop.is_set():
                return
            self._step(eng, jobs, gen)

    def _engine(self, job: Job) -> SpecEngine:
        return self.greedy if job.params.temperature == 0 else self.sampler

    def _set_context(self, jobs: list[Job], gen: torch.Generator | None) -> None:
        sampled = jobs[0].params.temperature > 0
        self._rows = [(j.params.temperature, j.params.top_p) for j in jobs] if sampled else None
        self.sampler.gen = gen if gen is not None else self.shared_gen

    def _admit(self) -> None:
        while len(self.active) < self.max_batch:
            with self._lock:
                if not self.pending:
                    break
                job = self.pending.popleft()
                self.metrics.queue.set(len(self.pending))
            if job.cancelled:
                continue
            self._rid += 1
            self._set_context([job], job.gen)
            self._prefilling = 1
            try:
                job.state = self._engine(job).prefill(Request(job.prompt, job.params.max_tokens, rid=self._rid),
                                                      time.perf_counter())
            except Exception as exc:  # e.g. a prompt the model cannot take
                log.exception("prefill failed")
                self._fail(job, f"prefill failed: {type(exc).__name__}: {exc}")
                continue
            finally:
                self._rows = None
                self._prefilling = 0
            self.metrics.prompt_tokens.inc(len(job.prompt))
            self._emit(job)
            if not job.finished:
                self.active.append(job)

    def _groups(self) -> list[tuple[SpecEngine, list[Job], torch.Generator | None]]:
        greedy = [j for j in self.active if j.params.temperature == 0]
        shared = [j for j in self.active if j.params.temperature > 0 and j.gen is None]
        groups = [(self.greedy, greedy, None)] if greedy else []
        if shared:
            groups.append((self.sampler, shared, None))
        groups += [(self.sampler, [j], j.gen) for j in self.active if j.params.temperature > 0 and j.gen is not None]
        return groups

    def _step(self, eng: SpecEngine, jobs: list[Job], gen: torch.Generator | None) -> None:
        jobs = [j for j in jobs if not j.cancelled and not j.finished]
        if not jobs:
            return
        self._set_context(jobs, gen)
        try:
            rec = eng.step([j.state for j in jobs])
        finally:
            self._rows = None
        self.metrics.record_round(len(jobs), int(np.asarray(rec.accepted).sum()) + len(jobs))
        self.metrics.step_batch.observe(rec.verify_tokens)
        for j in jobs:
            self._emit(j)

    # ------------------------------------------------------------------------------ output
    def _emit(self, job: Job) -> None:
        st = job.state
        now = time.perf_counter()
        k = len(st.out) - job.n_seen
        if k > 0:
            self.metrics.generation_tokens.inc(k)
            if job.t_last is None:
                self.metrics.ttft.observe(now - job.arrival)
            else:
                for _ in range(k):
                    self.metrics.itl.observe((now - job.t_last) / k)
            job.t_last = now
        job.n_seen = len(st.out)
        text = self.tok.decode(st.out, skip_special_tokens=True)
        finish = None
        stops = job.params.stop
        cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
        if cut >= 0:
            text, finish = text[:cut], "stop"
        elif st.done:
            finish = "stop" if (self.eos is not None and st.out and st.out[-1] == self.eos) else "length"
        if finish is None:  # hold back what may still become a stop string or a multi-byte char
            safe = len(text)
            if text.endswith("\ufffd"):
                safe -= 1
            for s in stops:
                for m in range(min(len(s) - 1, len(text)), 0, -1):
                    if text.endswith(s[:m]):
                        safe = min(safe, len(text) - m)
                        break
            delta = text[job.emitted: max(safe, job.emitted)]
        else:
            delta = text[job.emitted:]
        if delta or (k > 0 and finish is None):
            job.emitted += len(delta)
            job.sink({"type": "delta", "text": delta, "tokens": k})
        if finish is not None:
            job.finished = True
            job.sink({"type": "done", "finish_reason": finish, "completion_tokens": len(st.out),
                      "prompt_tokens": len(job.prompt), "rounds": st.rounds})

    def _fail(self, job: Job, message: str) -> None:
        job.finished = True
        job.sink({"type": "error", "message": message})
