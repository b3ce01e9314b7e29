"""The speculative decoding engine: per-request KV caches with rollback, batched verification,
continuous batching.

Each engine step: the drafter drafts γ tokens for every active request (one batched pass),
the scheduler picks per-request verification lengths ℓ_r from the (calibrated) confidences
and SPS(B), one batched target forward verifies all ``Σ(1 + ℓ_r)`` tokens (ragged rows, right
padded; per-request caches left padded and masked), and each request keeps the accepted prefix:
its cache is cut back to the committed tokens (rollback) and the fused target features of the
committed positions are appended to its drafter context. With no drafter the same engine is
plain (batched) autoregressive decoding.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch
from transformers import DynamicCache

from divelab.serving.dspark.drafter import Drafter
from divelab.serving.dspark.sampling import probs_at, verify_block
from divelab.serving.dspark.scheduler import Scheduler, make_scheduler
from divelab.serving.dspark.sps import SPSCurve, measure_sps


@dataclass
class Request:
    prompt: list[int]
    max_new_tokens: int = 64
    arrival_s: float = 0.0
    rid: int = 0


@dataclass
class RequestState:
    req: Request
    kv: list[tuple[torch.Tensor, torch.Tensor]]  # per layer (heads, length, head_dim)
    ctx: torch.Tensor | None  # fused target features of the last `window` committed positions
    anchor: int  # last committed token, not yet seen by the target
    out: list[int] = field(default_factory=list)
    done: bool = False
    rounds: int = 0
    committed_in_rounds: int = 0
    admitted_s: float = 0.0
    finished_s: float = 0.0

    @property
    def length(self) -> int:
        return int(self.kv[0][0].shape[1])


@dataclass
class StepRecord:
    ell: np.ndarray  # verify lengths chosen
    accepted: np.ndarray  # drafts accepted per request
    verify_tokens: int  # B = Σ (1 + ℓ_r)
    conf_logits: np.ndarray | None  # raw confidence logits (R, γ)
    gamma_avail: np.ndarray  # drafts available per request (budget-capped)
    draft_s: float = 0.0
    sequential_s: float = 0.0
    verify_s: float = 0.0
    step_s: float = 0.0


@dataclass
class ServeResult:
    outputs: dict[int, list[int]]
    steps: list[StepRecord]
    per_request: dict[int, dict]
    makespan_s: float
    clock: str

    @property
    def total_tokens(self) -> int:
        return sum(len(v) for v in self.outputs.values())

    @property
    def throughput(self) -> float:
        return self.total_tokens / max(self.makespan_s, 1e-12)

    @property
    def per_user_speed(self) -> float:
        return float(np.mean([d["tokens_per_s"] for d in self.per_request.values()]))

    @property
    def tau(self) -> float:
        """Mean committed tokens per verification round (incl. the bonus token)."""
        acc = sum(int(s.accepted.sum()) + len(s.accepted) for s in self.steps)
        return acc / max(1, sum(len(s.accepted) for s in self.steps))


class SpecEngine:
    """Speculative decoding of a HF causal LM with a :class:`Drafter` and a :class:`Scheduler`.

    ``temperature=0`` is greedy (token-identical to plain greedy decoding); ``> 0`` is lossless
    speculative sampling. ``sps`` is the SPS(B) curve the scheduler optimises: ``"measure"``
    profiles the real target now (start-up), or pass an :class:`SPSCurve` (e.g. the labelled
    synthetic accelerator curve). ``calibration`` maps raw confidence logits to probabilities
    (STS); without it a plain sigmoid is used.
    """

    def __init__(self, target: torch.nn.Module, drafter: Drafter | None = None,
                 scheduler: str | Scheduler = "dspark", sps: SPSCurve | str | None = "measure",
                 calibration: object | None = None, temperature: float = 0.0, gamma: int | None = None,
                 eos_token_id: int | None = None, seed: int = 0) -> None:
        self.target = target.eval()
        self.drafter = drafter.eval() if drafter is not None else None
        if drafter is not None:
            drafter.attach(target)  # raises on vocab / hidden-size mismatch
        if gamma is not None and gamma < 1:
            raise ValueError(f"gamma must be >= 1, got {gamma}")
        self.gamma = gamma or (drafter.config.gamma if drafter is not None else 1)
        if drafter is not None and self.gamma > drafter.config.gamma and drafter.config.kind != "ar":
            raise ValueError(f"gamma {self.gamma} exceeds the drafter's trained block length {drafter.config.gamma}")
        self.scheduler = make_scheduler(scheduler, self.gamma) if isinstance(scheduler, str) else scheduler
        if isinstance(sps, str):
            if sps != "measure":
                raise ValueError(f"sps must be an SPSCurve, 'measure' or None, got {sps!r}")
            sps = measure_sps(target, batch_sizes=[1, 2, 4, 8, 16, 32, 64], repeats=2, seed=seed)
        self.sps = sps
        self.calibration = calibration
        self.temperature = float(temperature)
        self.eos = eos_token_id
        self.gen = torch.Generator().manual_seed(seed)
        self.record_rounds = False
        self.round_log: list[dict] = []

    # ------------------------------------------------------------------------------------ target
    @property
    def _device(self) -> torch.device:
        return next(self.target.parameters()).device

    @torch.no_grad()
    def _forward(self, states: list[RequestState], rows: list[list[int]]):
        """One batched cached target forward over ragged rows. Returns logits (R, T, V), the
        hidden states tuple, and per-request full K/V (past + row) to cut from."""
        n = len(states)
        lens = [s.length for s in states]
        p, t = max(lens), max(len(r) for r in rows)
        dev = self._device
        ids = torch.zeros(n, t, dtype=torch.long, device=dev)
        attn = torch.zeros(n, p + t, dtype=torch.long, device=dev)
        pos = torch.zeros(n, t, dtype=torch.long, device=dev)
        for i, (row, ln) in enumerate(zip(rows, lens, strict=True)):
            ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
            attn[i, p - ln: p + len(row)] = 1
            pos[i] = ln + torch.arange(t)
        cache = DynamicCache(config=self.target.config)
        if n == 1:  # a single request: its cache as a view, no padding, no stacking copy
            for li, (k, v) in enumerate(states[0].kv):
                cache.update(k[None], v[None], li)
        for li in range(len(states[0].kv) if n > 1 else 0):
            ks, vs = [], []
            for s, ln in zip(states, lens, strict=True):
                k, v = s.kv[li]
                if ln < p:
                    pad = k.new_zeros(k.shape[0], p - ln, k.shape[2])
                    k, v = torch.cat([pad, k], 1), torch.cat([pad, v], 1)
                ks.append(k)
                vs.append(v)
            cache.update(torch.stack(ks), torch.stack(vs), li)
        uniform = all(ln == p for ln in lens) and all(len(r) == t for r in rows)
        out = self.target(ids, attention_mask=None if uniform else attn, position_ids=pos, past_key_values=cache,
                          use_cache=True, output_hidden_states=self.drafter is not None)
        kv = [(layer.keys, layer.values) for layer in out.past_key_values.layers]
        return out.logits, out.hidden_states, kv, p

    @torch.no_grad()
    def prefill(self, req: Request, now: float = 0.0) -> RequestState:
        if not req.prompt:
            raise ValueError("empty prompt: give at least one token")
        if req.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {req.max_new_tokens}")
        ids = torch.tensor([req.prompt], dtype=torch.long, device=self._device)
        cache = DynamicCache(config=self.target.config)
        out = self.target(ids, past_key_values=cache, use_cache=True, output_hidden_states=self.drafter is not None)
        kv = [(layer.keys[0], layer.values[0]) for layer in out.past_key_values.layers]
        ctx = None
        if self.drafter is not None:
            w = self.drafter.config.window
            ctx = self.drafter.fuse_features(tuple(h[0, -w:] for h in out.hidden_states))
        first = self._sample(out.logits[0, -1])
        st = RequestState(req, kv, ctx, first, out=[first], admitted_s=now)
        st.done = self._finished(st)
        return st

    def _sample(self, logits: torch.Tensor) -> int:
        if self.temperature <= 0:
            return int(logits.argmax())
        return int(torch.multinomial(probs_at(logits, self.temperature), 1, generator=self.gen))

    def _finished(self, st: RequestState) -> bool:
        if self.eos is not None and self.eos in st.out:
            st.out = st.out[: st.out.index(self.eos) + 1]
            return True
        if len(st.out) >= st.req.max_new_tokens:
            st.out = st.out[: st.req.max_new_tokens]
            return True
        return False

    # ------------------------------------------------------------------------------------ a step
    def confidences(self, conf_logits: torch.Tensor) -> np.ndarray:
        z = conf_logits.double().numpy()
        if self.calibration is not None:
            return self.calibration.apply(z)
        return 1.0 / (1.0 + np.exp(-z))

    @torch.no_grad()
    def step(self, states: list[RequestState], force_ell: np.ndarray | None = None) -> StepRecord:
        n = len(states)
        t_start = time.perf_counter()
        drafts = None
        conf_logits = None
        avail = np.array([min(self.gamma, s.req.max_new_tokens - len(s.out) - 1) for s in states]).clip(0)
        seq_s = 0.0
        if self.drafter is not None and avail.max() > 0:
            w = self.drafter.config.window
            d = self.drafter.config.hidden_size
            ctx = torch.zeros(n, w, d, dtype=states[0].ctx.dtype)
            mask = torch.zeros(n, w, dtype=torch.bool)
            for i, s in enumerate(states):
                c = s.ctx[-w:]
                ctx[i, w - len(c):] = c
                mask[i, w - len(c):] = True
            anchors = torch.tensor([s.anchor for s in states], dtype=torch.long)
            drafts = self.drafter.draft(ctx, mask, anchors, self.temperature, self.gen, gamma=self.gamma)
            seq_s = drafts.timings.get("sequential_s", 0.0)
            conf_logits = drafts.conf_logits
            conf = self.confidences(conf_logits)
            conf[np.arange(self.gamma)[None, :] >= avail[:, None]] = 0.0
            ell = self.scheduler(conf, self.sps) if force_ell is None else np.minimum(force_ell, avail)
        else:
            ell = np.zeros(n, dtype=np.int64)
        t_draft = time.perf_counter()
        rows = [[s.anchor] + (drafts.tokens[i, : int(ell[i])].tolist() if drafts is not None else [])
                for i, s in enumerate(states)]
        logits, hidden, kv, p = self._forward(states, rows)
        accepted = np.zeros(n, dtype=np.int64)
        for i, s in enumerate(states):
            li = int(ell[i])
            dt = drafts.tokens[i, :li] if drafts is not None else torch.zeros(0, dtype=torch.long)
            dp = drafts.probs[i, :li] if (drafts is not None and drafts.probs is not None) else None
            n_acc, nxt = verify_block(dt, dp, logits[i, : li + 1], self.temperature, self.gen)
            accepted[i] = n_acc
            keep = 1 + n_acc  # anchor + accepted drafts now sit in the cache: roll back the rest
            ln = s.length
            s.kv = [(k[i, :, p - ln: p + keep], v[i, :, p - ln: p + keep]) for k, v in kv]
            if self.drafter is not None:
                w = self.drafter.config.window
                new = self.drafter.fuse_features(tuple(h[i, :keep] for h in hidden))
                s.ctx = torch.cat([s.ctx, new], 0)[-w:]
            s.out.extend(dt[:n_acc].tolist() + [nxt])
            s.anchor = nxt
            s.rounds += 1
            s.committed_in_rounds += n_acc + 1
            if self.record_rounds and drafts is not None:
                entry = {"ell": li, "accepted": n_acc, "conf_logits": conf_logits[i].double().numpy().copy(),
                         "avail": int(avail[i])}
                if dp is not None:  # analytic acceptance Σ_v min(p_d, p_t) at the drafted prefix (an oracle)
                    pt = probs_at(logits[i, :li], self.temperature)
                    entry["accept_prob"] = torch.minimum(pt, dp).sum(-1).numpy()
                self.round_log.append(entry)
            s.done = self._finished(s)
        t_end = time.perf_counter()
        return StepRecord(ell=np.asarray(ell), accepted=accepted, verify_tokens=int(sum(len(r) for r in rows)),
                          conf_logits=None if conf_logits is None else conf_logits.numpy().copy(),
                          gamma_avail=avail, draft_s=t_draft - t_start, sequential_s=seq_s,
                          verify_s=t_end - t_draft, step_s=t_end - t_start)

    # ------------------------------------------------------------------------------------ APIs
    def generate(self, prompt: list[int], max_new_tokens: int = 64) -> list[int]:
        """Decode one request; returns the new token ids."""
        self.scheduler.reset()
        st = self.prefill(Request(list(prompt), max_new_tokens))
        while not st.done:
            self.step([st])
        return st.out

    def serve(self, requests: list[Request], max_batch: int = 8, clock: str | SPSCurve = "wall",
              draft_overhead: float = 0.1) -> ServeResult:
        """Continuous batching: requests are admitted when they have arrived and a slot is free;
        each step drafts for every active request, schedules, verifies in one batched forward.

        ``clock="wall"`` measures real time. Passing an :class:`SPSCurve` instead runs a
        *virtual* clock: each step costs 1/SPS(B) (plus ``draft_overhead`` × 1/SPS(R) when
        drafting) — used to replay the real engine's decisions on a synthetic accelerator curve.
        """
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        self.scheduler.reset()
        virtual = isinstance(clock, SPSCurve)
        if not virtual and clock != "wall":
            raise ValueError(f"clock must be 'wall' or an SPSCurve, got {clock!r}")
        pending = sorted(requests, key=lambda r: (r.arrival_s, r.rid))
        active: list[RequestState] = []
        finished: dict[int, RequestState] = {}
        steps: list[StepRecord] = []
        now = 0.0
        wall0 = time.perf_counter()

        def tick(wall_dt: float, b: int, r: int) -> float:
            if not virtual:
                return time.perf_counter() - wall0
            extra = draft_overhead * clock.step_time(r) if self.drafter is not None else 0.0
            return now + clock.step_time(b) + extra

        while pending or active:
            while pending and pending[0].arrival_s <= now and len(active) < max_batch:
                req = pending.pop(0)
                t0 = time.perf_counter()
                st = self.prefill(req, now)
                now = tick(time.perf_counter() - t0, len(req.prompt), 1)
                if st.done:
                    st.finished_s = now
                    finished[req.rid] = st
                else:
                    active.append(st)
            if not active:
                if pending:
                    now = max(now, pending[0].arrival_s)
                continue
            rec = self.step(active)
            steps.append(rec)
            now = tick(rec.step_s, rec.verify_tokens, len(active))
            for st in [s for s in active if s.done]:
                st.finished_s = now
                finished[st.req.rid] = st
            active = [s for s in active if not s.done]
        per = {}
        for rid, st in finished.items():
            dur = max(st.finished_s - max(st.admitted_s, st.req.arrival_s), 1e-12)
            per[rid] = {"tokens": len(st.out), "latency_s": st.finished_s - st.req.arrival_s,
                        "tokens_per_s": len(st.out) / dur, "rounds": st.rounds}
        return ServeResult({rid: st.out for rid, st in finished.items()}, steps, per, now,
                           clock.label if virtual else "wall clock (measured)")


def plain_greedy(target: torch.nn.Module, prompt: list[int], max_new_tokens: int,
                 eos_token_id: int | None = None) -> list[int]:
    """Reference: plain cached greedy decoding, one token per target forward."""
    ids = torch.tensor([prompt], dtype=torch.long)
    cache = DynamicCache(config=target.config)
    out: list[int] = []
    with torch.no_grad():
        logits = target(ids, past_key_values=cache, use_cache=True).logits
        for _ in range(max_new_tokens):
            tok = int(logits[0, -1].argmax())
            out.append(tok)
            if eos_token_id is not None and tok == eos_token_id:
                break
            logits = target(torch.tensor([[tok]]), past_key_values=cache, use_cache=True).logits
    return out
