"""One continuously-batched decoding loop shared by every HTTP request.

A background thread owns the target. Each iteration it (1) drops requests whose client went
away, (2) admits waiting requests into free batch slots with one batched prefill per kind
(``SpecEngine.prefill_many``: greedy together, unseeded sampled together, each seeded request
alone), and (3) runs ``SpecEngine.step`` over the live requests — one batched draft + schedule +
verify forward for all greedy requests together, one for all unseeded sampled requests together,
and one per seeded request (its own generator, stepped alone, so the same seed gives the same
tokens whatever else is being served). New tokens go back to the request's handler as text
deltas (incremental detokenisation), with stop strings and ``max_tokens`` enforced here.

Per-request temperature, top-p, presence/frequency penalties and logit bias are applied by a
forward hook on the target that processes each batch row's logits before the engine's (lossless)
verification sees them (see :mod:`divelab.serving.server.logits`); the sampling engine runs at
temperature 1, so ``softmax(hooked logits)`` is exactly the request's distribution. The same hook
records the raw log-probabilities a request asked for.

On the lean target engine (the default for Llama-family models on the CPU, see
:mod:`divelab.serving.dspark.lean_target`) each request has its own static cache and the same hook
is called once per step with the step's logits padded to (requests, positions, vocab); both
engines share one set of converted weights.

Isolation: a request whose logits turn non-finite, or whose forward raises, is finished with its
own error event; the loop repairs the batch and keeps serving every other request.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from divelab.serving.dspark import Request, SpecEngine, measure_sps
from divelab.serving.dspark.lean_target import LeanTarget, lean_target, measure_lean_sps
from divelab.serving.server.detok import IncrementalDetokenizer
from divelab.serving.server.logits import bias_vector, entries, penalise, top_p_filter
from divelab.serving.server.metrics import ServerMetrics
from divelab.serving.server.schemas import GREEDY_BELOW

log = logging.getLogger("divelab.serve")
__all__ = ["EngineLoop", "Job", "QueueFull", "SamplingParams", "top_p_filter"]


class QueueFull(RuntimeError):
    """More requests are waiting than the server accepts (answered with HTTP 429)."""


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: tuple[tuple[int, float], ...] = ()
    logprobs: int | None = None  # None: none; k >= 0: the chosen token's logprob and the top k
    prompt_logprobs: bool = False  # also the prompt tokens' logprobs (``echo`` with ``logprobs``)

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_BELOW

    @property
    def penalised(self) -> bool:
        return bool(self.presence_penalty or self.frequency_penalty)

    @property
    def processed(self) -> bool:
        """Does this request need the logits hook at all?"""
        return not self.greedy or self.penalised or bool(self.logit_bias) or self.logprobs is not None


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
    t_last: float | None = None
    finished: bool = False
    detok: IncrementalDetokenizer | None = None
    text: str = ""  # detokenised output so far
    emitted: int = 0  # characters of ``text`` sent
    searched: int = 0  # characters of ``text`` already searched for stop strings
    bias: torch.Tensor | None = None
    raw_lsm: torch.Tensor | None = None  # raw log-softmax of the last forward's positions (logprobs)
    prompt_lp: list | None = None
    poisoned: str | None = None
    guard: str | None = None  # the guard policy for this job (None: not guarded)
    verdict: object = None  # its GuardVerdict once scored (see divelab.serving.server.guarding)
    guard_sent: bool = False


class EngineLoop:
    def __init__(self, target: torch.nn.Module, tokenizer, drafter=None, calibration=None,
                 scheduler: str = "dspark", sps=None, gamma: int | None = None, max_batch: int = 8,
                 max_queue: int = 64, seed: int = 0, metrics: ServerMetrics | None = None, guard=None,
                 engine: str | LeanTarget = "lean", fmt: str = "fp32") -> None:
        if max_batch < 1 or max_queue < 1:
            raise ValueError(f"max_batch and max_queue must be >= 1, got {max_batch}, {max_queue}")
        self.tok = tokenizer
        self.device = next(target.parameters()).device
        self.eos = getattr(tokenizer, "eos_token_id", None)
        if guard is not None and engine == "auto":
            engine = "hf"
        self.lean = lean_target(target, engine, fmt)  # converted once, shared by both engines
        if guard is not None and self.lean is not None:
            raise ValueError("the guard reads the HF model's own layers: serve a guarded model with engine='hf' "
                             "(--engine hf)")
        if drafter is not None and sps is None:  # measured once, shared by both engines
            sps = (measure_sps(target, batch_sizes=[1, 2, 4, 8, 16, 32], repeats=2, seed=seed) if self.lean is None
                   else measure_lean_sps(self.lean, batch_sizes=[1, 2, 4, 8, 16, 32], repeats=2, seed=seed))
        kw = dict(sps=sps, calibration=calibration, gamma=gamma, eos_token_id=self.eos, seed=seed,
                  engine="hf" if self.lean is None else self.lean)
        self.greedy = SpecEngine(target, drafter, scheduler, temperature=0.0, **kw)
        self.sampler = SpecEngine(target, drafter, scheduler, temperature=1.0, **kw)
        self.shared_gen = self.sampler.gen
        self.speculative = drafter is not None
        self.max_batch, self.max_queue = max_batch, max_queue
        self.metrics = metrics or ServerMetrics()
        self.guard = guard  # a ServerGuard: scores guarded jobs from the forwards below
        self.pending: deque[Job] = deque()
        self.active: list[Job] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._ctx: tuple[list[Job], bool] | None = None  # (rows of the forward in flight, is it a prefill)
        self._tid: int | None = None
        self._rid = 0
        self._prefilling = 0
        self._hook = (self.lean or target).register_forward_hook(self._logits_hook)
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

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def submit(self, jobs: list[Job]) -> None:
        """Queue the jobs of one request together (all or none); raises :class:`QueueFull`."""
        for j in jobs:  # everything that can fail happens before any job is queued
            if j.params.seed is not None:
                j.gen = torch.Generator(device=self.device).manual_seed(int(j.params.seed) % 2**64)
            j.detok = IncrementalDetokenizer(self.tok)
        with self._lock:
            if len(self.pending) + len(jobs) > self.max_queue:
                raise QueueFull(f"{len(self.pending)} requests already waiting (limit {self.max_queue})")
            self.pending.extend(jobs)
            self.metrics.queue.set(len(self.pending))
        self._wake.set()

    def cancel(self, jobs: list[Job]) -> None:
        """The client went away (or a sibling choice failed): the loop frees these slots at its next iteration."""
        for j in jobs:
            j.cancelled = True
        self._wake.set()

    @property
    def load(self) -> dict:
        return {"waiting": len(self.pending), "running": len(self.active) + self._prefilling,
                "max_batch": self.max_batch, "max_queue": self.max_queue}

    # ------------------------------------------------------------------------------ the logits hook
    def _logits_hook(self, module, args, output):
        ctx = self._ctx
        if ctx is None or threading.get_ident() != self._tid:
            return None
        jobs, prefill = ctx
        logits = output.logits
        ids = args[0] if args else None
        for i, job in enumerate(jobs[: logits.shape[0]]):
            p = job.params
            x = logits[i, -1:] if prefill else logits[i]
            if p.logprobs is not None:
                job.raw_lsm = torch.log_softmax(x.float(), -1)
                if prefill and p.prompt_logprobs:
                    n = len(job.prompt)
                    lsm = torch.log_softmax(logits[i, -n:-1].float(), -1)
                    job.prompt_lp = entries(lsm, job.prompt[1:], p.logprobs)
            if p.logit_bias:
                if job.bias is None:
                    job.bias = bias_vector(p.logit_bias, x.shape[-1], x)
                x += job.bias
            if p.penalised and not prefill:
                penalise(x, job.state.out, ids[i] if ids is not None else None, p.presence_penalty,
                         p.frequency_penalty)
            if not p.greedy:
                if p.temperature != 1.0:
                    x.div_(p.temperature)
                if p.top_p < 1.0:
                    top_p_filter(x, p.top_p)
            if torch.isnan(x).any() or not torch.isfinite(x).any(-1).all():
                job.poisoned = "the request's logits became non-finite (NaN or all -inf) after its sampling parameters"
                x.zero_()  # keep the batch computable; this row is failed after the forward
        return None

    # ------------------------------------------------------------------------------ the loop
    def _run(self) -> None:
        self._tid = threading.get_ident()
        while not self._stop.is_set():
            try:
                self._iteration()
            except Exception as exc:  # a last resort: each group step isolates its own failures first
                log.exception("engine loop iteration failed")
                for j in list(self.active):
                    self._fail(j, f"internal engine error: {type(exc).__name__}: {exc}")
                self.active = []
                self._ctx = None

    def _iteration(self) -> None:
        self.active = [j for j in self.active if not j.cancelled and not j.finished]
        self._admit()
        self.metrics.running.set(len(self.active))
        if not self.active:
            self._wake.wait(0.05)
            self._wake.clear()
            return
        for eng, jobs, gen in self._groups(self.active):
            if self._stop.is_set():
                return
            self._step_isolated(eng, jobs, gen)

    def _engine(self, job: Job) -> SpecEngine:
        return self.greedy if job.params.greedy else self.sampler

    def _set_context(self, jobs: list[Job], gen: torch.Generator | None, prefill: bool) -> None:
        self._ctx = (jobs, prefill) if any(j.params.processed for j in jobs) else None
        full = prefill and any(j.params.prompt_logprobs for j in jobs)  # lean: prompt rows' logits wanted
        self.greedy.full_prompt_logits = self.sampler.full_prompt_logits = full
        self.sampler.gen = gen if gen is not None else self.shared_gen

    def _groups(self, jobs: list[Job]) -> list[tuple[SpecEngine, list[Job], torch.Generator | None]]:
        greedy = [j for j in jobs if j.params.greedy]
        shared = [j for j in jobs if not j.params.greedy and j.gen is None]
        groups = [(self.greedy, greedy, None)] if greedy else []
        if shared:
            groups.append((self.sampler, shared, None))
        groups += [(self.sampler, [j], j.gen) for j in jobs if not j.params.greedy and j.gen is not None]
        return groups

    def _admit(self) -> None:
        """Take waiting jobs into free slots; one batched prefill per group."""
        take: list[Job] = []
        with self._lock:
            while self.pending and len(self.active) + len(take) < self.max_batch:
                job = self.pending.popleft()
                if not job.cancelled:
                    take.append(job)
            self.metrics.queue.set(len(self.pending))
        if not take:
            return
        self._prefilling = len(take)
        try:
            for eng, jobs, gen in self._groups(take):
                self._prefill_isolated(eng, jobs, gen)
        finally:
            self._prefilling = 0

    def _prefill_isolated(self, eng: SpecEngine, jobs: list[Job], gen: torch.Generator | None) -> None:
        reqs = []
        for j in jobs:
            self._rid += 1
            reqs.append(Request(j.prompt, j.params.max_tokens, rid=self._rid))
        self._set_context(jobs, gen, prefill=True)
        try:
            with self._guard_reading(jobs, prefill=True):
                states = eng.prefill_many(reqs, time.perf_counter())
        except Exception as exc:  # noqa: BLE001  (split the batch: only the requests that fail alone fail)
            self._ctx = None
            if len(jobs) > 1:
                for j in jobs:
                    self._prefill_isolated(eng, [j], gen)
                return
            log.exception("prefill failed")
            self._fail(jobs[0], f"prefill failed: {type(exc).__name__}: {exc}")
            return
        finally:
            self._ctx = None
        for job, st in zip(jobs, states, strict=True):
            job.state = st
            self.metrics.prompt_tokens.inc(len(job.prompt))
            if job.poisoned:
                self._fail(job, job.poisoned)
                continue
            self._emit(job)
            if not job.finished:
                self.active.append(job)

    def _step_isolated(self, eng: SpecEngine, jobs: list[Job], gen: torch.Generator | None) -> None:
        jobs = [j for j in jobs if not j.cancelled and not j.finished]
        if not jobs:
            return
        try:
            self._step(eng, jobs, gen)
        except Exception as exc:  # noqa: BLE001  (roll the batch back and retry each request alone)
            self._ctx = None
            eng.rollback([j.state for j in jobs if j.state is not None])  # undo the failed step's cache writes
            if len(jobs) > 1:
                for j in jobs:
                    self._step_isolated(eng, [j], gen)
                return
            log.exception("decoding step failed")
            self._fail(jobs[0], f"decoding failed: {type(exc).__name__}: {exc}")
        for j in jobs:
            if j.poisoned and not j.finished:
                self._fail(j, j.poisoned)

    def _step(self, eng: SpecEngine, jobs: list[Job], gen: torch.Generator | None) -> None:
        self._set_context(jobs, gen, prefill=False)
        try:
            with self._guard_reading(jobs, prefill=False):
                rec = eng.step([j.state for j in jobs])
        finally:
            self._ctx = None
        self.metrics.record_round(len(jobs), int(np.asarray(rec.accepted).sum()) + len(jobs))
        self.metrics.step_batch.observe(rec.verify_tokens)
        for j in jobs:
            if not j.poisoned:
                self._emit(j)

    # ------------------------------------------------------------------------------ output
    def _send(self, job: Job, event: dict) -> None:
        try:
            job.sink(event)
        except RuntimeError:  # the handler's event loop is gone (server shutting down)
            job.cancelled = True

    def _guard_reading(self, jobs: list[Job], prefill: bool):
        return self.guard.reading(jobs, prefill) if self.guard is not None else contextlib.nullcontext()

    def _emit(self, job: Job) -> None:
        if self.guard is not None and not self.guard.gate(job, self._send):
            return  # held until its verdict, or ended by it
        st = job.state
        now = time.perf_counter()
        new = st.out[job.n_seen:]
        k = len(new)
        if k > 0:
            self.metrics.generation_tokens.inc(k)
            if job.t_last is None:
                self.metrics.ttft.observe(now - job.arrival)
            else:
                for _ in range(k):
                    self.metrics.itl.observe((now - job.t_last) / k)
            job.t_last = now
        job.n_seen = len(st.out)
        lps = None
        if job.params.logprobs is not None and job.raw_lsm is not None:
            lps = entries(job.raw_lsm, new, job.params.logprobs)
            job.raw_lsm = None
        job.text += job.detok.push(new)
        if st.done:
            job.text += job.detok.flush()
        finish = None
        stops = job.params.stop
        if stops:
            start = max(0, job.searched - max(len(s) for s in stops) + 1)
            cut = min((i for i in (job.text.find(s, start) for s in stops) if i >= 0), default=-1)
            job.searched = len(job.text)
            if cut >= 0:
                job.text, finish = job.text[:cut], "stop"
        if finish is None and st.done:
            finish = "stop" if (self.eos is not None and st.out and st.out[-1] == self.eos) else "length"
        text = job.text
        if finish is None:  # hold back what may still become a stop string
            safe = len(text)
            for s in stops:
                for m in range(min(len(s) - 1, len(text)), 0, -1):
                    if text.endswith(s[:m]):
                        safe = min(safe, len(text) - m)
                        break
            delta = text[job.emitted: max(safe, job.emitted)]
        else:
            delta = text[job.emitted:]
        if delta or (k > 0 and finish is None) or lps:
            job.emitted += len(delta)
            ev = {"type": "delta", "text": delta, "tokens": k}
            if lps is not None:
                ev["logprobs"] = lps
            self._send(job, ev)
        if finish is not None:
            job.finished = True
            st.done = True
            self._send(job, {"type": "done", "finish_reason": finish, "completion_tokens": len(st.out),
                             "prompt_tokens": len(job.prompt), "rounds": st.rounds})

    def _fail(self, job: Job, message: str) -> None:
        job.finished = True
        if job.state is not None:
            job.state.done = True  # its batch row is dropped by index at the next step
        self._send(job, {"type": "error", "message": message})
