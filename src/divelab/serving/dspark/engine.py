"""The speculative decoding engine: a persistent batched KV cache with rollback, batched
verification, continuous batching. Device-agnostic: every tensor lives on the target's device.

Each engine step: the drafter drafts γ tokens for every active request (one batched pass over
the per-request cached context keys/values), the scheduler picks per-request verification
lengths ℓ_r from the (calibrated) confidences and SPS(B), one batched target forward verifies all
``Σ(1 + ℓ_r)`` tokens (ragged rows right padded) against the persistent batched cache, acceptance
is computed for all rows at once on the device, and rollback crops the cache to the longest kept
prefix; rows that kept fewer tokens leave masked holes (no re-padding, no re-stacking). The
batch is rebuilt only when the set of requests changes by admission (finished rows are dropped by
index). One host copy per step brings back the accepted counts, next tokens and drafts (plus one
for the confidences the scheduler reads). With no drafter the engine is plain batched decoding.

That is the ``engine="hf"`` target. The default, ``engine="lean"``, runs a HF Llama-family target
through :mod:`divelab.lm.lean` instead (:mod:`.lean_target`): per request a static cache, one
(1 + ℓ)-token forward verifies its drafts, rejected drafts are rolled back in place; the requests of a
step are verified in one forward (:func:`divelab.lm.lean.forward_many`: every matrix product once over
all their rows, attention per request) and share the drafting pass and the acceptance computation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch
from transformers import DynamicCache

from divelab.lm.lean import forward_many
from divelab.serving.dspark.drafter import Drafter
from divelab.serving.dspark.lean_target import LeanTarget, lean_target, measure_lean_sps
from divelab.serving.dspark.sampling import probs_at, verify_batch
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
    # per layer (heads, length, head_dim) while the request is outside a batch (after prefill);
    # None while its cache lives in the engine's persistent batched cache (see ``_Batch``)
    kv: list[tuple[torch.Tensor, torch.Tensor]] | None
    # drafter context: per drafter layer the cached (un-rotated) keys/values (≤ window, d) of the
    # last `window` committed positions; None without a drafter or while in a batch
    ctx: list[tuple[torch.Tensor, torch.Tensor]] | None
    anchor: int  # last committed token, not yet seen by the target
    out: list[int] = field(default_factory=list)
    done: bool = False
    rounds: int = 0
    committed_in_rounds: int = 0
    admitted_s: float = 0.0
    finished_s: float = 0.0
    n_cached: int = 0  # committed tokens in the target cache
    seq: object = None  # the lean engine's sequence (a LeanLM holding this request's static cache)
    _group: object = field(default=None, repr=False)
    _row: int = field(default=-1, repr=False)

    @property
    def length(self) -> int:
        return self.n_cached


@dataclass
class _Batch:
    """The persistent batched state of the requests stepped together: a left-padded DynamicCache
    whose rows may hold masked holes (rejected drafts of rows that kept fewer tokens than the
    longest), and the drafters' cached context keys/values."""

    states: list[RequestState]
    cache: DynamicCache
    mask: torch.Tensor  # (n, L) bool: which cache slots hold committed tokens
    holes: bool  # any False in mask (padding or rolled-back slots): an attention mask is needed
    lengths: torch.Tensor  # (n,) committed tokens per row (RoPE positions continue from here)
    anchor: torch.Tensor  # (n,) last committed token per row
    ctx_kv: list[tuple[torch.Tensor, torch.Tensor]] | None  # per drafter layer (n, w, d)
    ctx_mask: torch.Tensor | None  # (n, w) bool


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


def _crop(cache: DynamicCache, length: int) -> None:
    """Roll every layer of ``cache`` back to ``length`` slots (views, no copy). Done by hand:
    ``DynamicCache.crop``'s argument changed meaning across transformers releases."""
    for layer in cache.layers:
        if layer.keys is not None and layer.keys.shape[-2] > length:
            layer.keys, layer.values = layer.keys[..., :length, :], layer.values[..., :length, :]


class SpecEngine:
    """Speculative decoding of a HF causal LM with a :class:`Drafter` and a :class:`Scheduler`.

    ``temperature=0`` is greedy (token-identical to plain greedy decoding); ``> 0`` is lossless
    speculative sampling. ``sps`` is the SPS(B) curve the scheduler optimises: ``"measure"``
    profiles the real target now (start-up), or pass an :class:`SPSCurve` (e.g. the labelled
    synthetic accelerator curve). ``calibration`` maps raw confidence logits to probabilities
    (STS); without it a plain sigmoid is used. The engine runs on the target's device; the random
    generator lives there too.

    ``engine="lean"`` (default) decodes a ``LlamaForCausalLM`` target (e.g. SmolLM2) on the CPU by
    the lean path in weight format ``fmt`` (``fp32`` | ``bf16`` | ``int8``; a :class:`LeanTarget`
    may be passed to share one set of converted weights between engines); other architectures get
    a ValueError naming ``engine="hf"``, the HF model's own batched forward (any causal LM, any device).
    """

    def __init__(self, target: torch.nn.Module, drafter: Drafter | None = None,
                 scheduler: str | Scheduler = "dspark", sps: SPSCurve | str | None = "measure",
                 calibration: object | None = None, temperature: float = 0.0, gamma: int | None = None,
                 eos_token_id: int | None = None, seed: int = 0, sps_repeats: int = 7,
                 engine: str | LeanTarget = "lean", fmt: str = "fp32") -> None:
        self.target = target.eval()
        self.lean = lean_target(self.target, engine, fmt)
        self.engine = "hf" if self.lean is None else "lean"
        self.fmt = None if self.lean is None else self.lean.fmt
        # lean engine: compute every prompt position's logits at prefill (a logits hook reading prompt logprobs)
        self.full_prompt_logits = False
        self.drafter = drafter.eval() if drafter is not None else None
        if drafter is not None:
            drafter.attach(target)  # raises on vocab / hidden-size mismatch
            pdev = next(drafter.parameters()).device
            if pdev != self._device:
                raise ValueError(f"the drafter is on {pdev} but the target is on {self._device}: "
                                 f"move it with drafter.to({str(self._device)!r})")
        if gamma is not None and gamma < 1:
            raise ValueError(f"gamma must be >= 1, got {gamma}")
        self.gamma = gamma or (drafter.config.gamma if drafter is not None else 1)
        if drafter is not None and self.gamma > drafter.config.gamma and drafter.config.kind != "ar":
            raise ValueError(f"gamma {self.gamma} exceeds the drafter's trained block length {drafter.config.gamma}")
        self.scheduler = make_scheduler(scheduler, self.gamma) if isinstance(scheduler, str) else scheduler
        if isinstance(sps, str):
            if sps != "measure":
                raise ValueError(f"sps must be an SPSCurve, 'measure' or None, got {sps!r}")
            sps = (measure_sps(target, batch_sizes=[1, 2, 4, 8, 16, 32, 64], repeats=sps_repeats, seed=seed)
                   if self.lean is None else measure_lean_sps(self.lean, repeats=sps_repeats, seed=seed))
        self.sps = sps
        self.calibration = calibration
        self.temperature = float(temperature)
        self.eos = eos_token_id
        self.gen = torch.Generator(device=self._device).manual_seed(seed)
        self.record_rounds = False
        self.round_log: list[dict] = []

    # ------------------------------------------------------------------------------------ target
    @property
    def _device(self) -> torch.device:
        return next(self.target.parameters()).device

    @torch.no_grad()
    def prefill(self, req: Request, now: float = 0.0) -> RequestState:
        """Run one request's prompt through the target; returns its state (first token sampled)."""
        return self.prefill_many([req], now)[0]

    @torch.no_grad()
    def prefill_many(self, reqs: list[Request], now: float = 0.0) -> list[RequestState]:
        """Batched prefill: one left-padded target forward for all ``reqs`` (the lean engine: one
        forward per request, each into its own new static cache)."""
        if not reqs:
            return []
        for req in reqs:
            if not req.prompt:
                raise ValueError("empty prompt: give at least one token")
            if req.max_new_tokens < 1:
                raise ValueError(f"max_new_tokens must be >= 1, got {req.max_new_tokens}")
        if self.lean is not None:
            return self._lean_prefill(reqs, now)
        dev = self._device
        n = len(reqs)
        lens = [len(r.prompt) for r in reqs]
        p = max(lens)
        ids = torch.zeros(n, p, dtype=torch.long)
        attn = torch.zeros(n, p, dtype=torch.long)
        for i, r in enumerate(reqs):
            ids[i, p - lens[i]:] = torch.tensor(r.prompt, dtype=torch.long)
            attn[i, p - lens[i]:] = 1
        ids, attn = ids.to(dev), attn.to(dev)
        padded = min(lens) < p
        pos = (attn.cumsum(1) - 1).clamp_min(0)
        cache = DynamicCache(config=self.target.config)
        out = self.target(ids, attention_mask=attn if padded else None, position_ids=pos, cache=cache,
                          use_cache=True, output_hidden_states=self.drafter is not None)
        first = self._sample_rows(out.logits[:, -1]).cpu().tolist()  # the one host copy
        ctx_all = None
        if self.drafter is not None:
            w = self.drafter.config.window
            feats = self.drafter.fuse_features(tuple(h[:, -w:] for h in out.hidden_states))
            ctx_all = self.drafter.project_context(feats)
        states = []
        for i, r in enumerate(reqs):
            ln = lens[i]
            kv = [(layer.keys[i][:, p - ln:], layer.values[i][:, p - ln:]) for layer in out.cache.layers]
            ctx = None
            if ctx_all is not None:
                c = min(ln, ctx_all[0][0].shape[1])
                ctx = [(k[i, -c:], v[i, -c:]) for k, v in ctx_all]
            st = RequestState(r, kv, ctx, int(first[i]), out=[int(first[i])], admitted_s=now, n_cached=ln)
            st.done = self._finished(st)
            states.append(st)
        return states

    def _sample_rows(self, logits: torch.Tensor) -> torch.Tensor:
        if self.temperature <= 0:
            return logits.argmax(-1)
        return torch.multinomial(probs_at(logits, self.temperature), 1, generator=self.gen).squeeze(-1)

    def _finished(self, st: RequestState) -> bool:
        if self.eos is not None and self.eos in st.out:
            st.out = st.out[: st.out.index(self.eos) + 1]
            return True
        if len(st.out) >= st.req.max_new_tokens:
            st.out = st.out[: st.req.max_new_tokens]
            return True
        return False

    # ------------------------------------------------------------------------------------ batch
    @staticmethod
    def rollback(states: list[RequestState]) -> None:
        """Undo the cache writes of a step that failed part way (an exception inside :meth:`step`):
        every batch holding one of ``states`` is cropped back to its committed slots, so the
        requests can be stepped again (together or one by one) as if the step had never run."""
        for s in states:
            if s.seq is not None:  # lean: the committed tokens are the cache's first n_cached rows
                s.seq.cache.length = s.n_cached
        for b in {id(g): g for g in (s._group for s in states) if g is not None}.values():
            _crop(b.cache, b.mask.shape[1])

    @staticmethod
    def _detach(s: RequestState) -> None:
        """Copy a request's committed cache rows out of its batch (drops holes and padding)."""
        g = s._group
        if g is None:
            return
        r = s._row
        m = g.mask[r]
        s.kv = [(layer.keys[r][:, m], layer.values[r][:, m]) for layer in g.cache.layers]
        if g.ctx_kv is not None:
            cm = g.ctx_mask[r]
            s.ctx = [(k[r][cm], v[r][cm]) for k, v in g.ctx_kv]
        s._group, s._row = None, -1

    def _batch_for(self, states: list[RequestState]) -> _Batch:
        """The persistent batch for exactly ``states`` (in order): reused as is, narrowed by index
        when only finished requests left, rebuilt (left-padded) when the set changed otherwise."""
        b = states[0]._group  # several live batches may exist (a server steps groups of requests)
        if b is not None and all(s._group is b for s in states):
            if len(states) == len(b.states) and all(x is y for x, y in zip(states, b.states, strict=True)):
                return b
            keep = [s._row for s in states]
            kept_rows = set(keep)
            dropped = [s for s in b.states if s._group is b and s._row not in kept_rows]
            if keep == sorted(keep) and all(s.done for s in dropped):
                idx = torch.tensor(keep, device=self._device)
                b.cache.batch_select_indices(idx)
                b.mask, b.lengths, b.anchor = b.mask[idx], b.lengths[idx], b.anchor[idx]
                if b.ctx_kv is not None:
                    b.ctx_kv = [(k[idx], v[idx]) for k, v in b.ctx_kv]
                    b.ctx_mask = b.ctx_mask[idx]
                b.holes = b.holes and not bool(b.mask.all())
                for s in dropped:
                    s._group, s._row, s.kv, s.ctx = None, -1, None, None
                for i, s in enumerate(states):
                    s._row = i
                b.states = list(states)
                return b
        for s in states:
            self._detach(s)
        return self._build(states)

    def _build(self, states: list[RequestState]) -> _Batch:
        dev = self._device
        n = len(states)
        lens = [s.n_cached for s in states]
        p = max(lens)
        cache = DynamicCache(config=self.target.config)
        for li in range(len(states[0].kv)):
            k0 = states[0].kv[li][0]
            shape = (n, k0.shape[0], p, k0.shape[2])
            ks, vs = k0.new_zeros(shape), k0.new_zeros(shape)
            for i, s in enumerate(states):
                k, v = s.kv[li]
                ks[i, :, p - lens[i]:] = k
                vs[i, :, p - lens[i]:] = v
            cache.update(ks, vs, li)
        mask = torch.arange(p, device=dev)[None] >= torch.tensor([p - ln for ln in lens], device=dev)[:, None]
        ctx_kv, ctx_mask = self._ctx_batch(states)
        b = _Batch(list(states), cache, mask, min(lens) < p, torch.tensor(lens, device=dev),
                   torch.tensor([s.anchor for s in states], dtype=torch.long, device=dev), ctx_kv, ctx_mask)
        for i, s in enumerate(states):
            s._group, s._row, s.kv, s.ctx = b, i, None, None
        return b

    def _ctx_batch(self, states: list[RequestState]
                   ) -> tuple[list[tuple[torch.Tensor, torch.Tensor]] | None, torch.Tensor | None]:
        """The drafter's cached context of ``states`` stacked (left-padded to its window) with its mask."""
        if self.drafter is None:
            return None, None
        dev = self._device
        n = len(states)
        w = self.drafter.config.window
        d = self.drafter.config.hidden_size
        dt = states[0].ctx[0][0].dtype
        ctx_kv = []
        for li in range(len(states[0].ctx)):
            ck = torch.zeros(n, w, d, dtype=dt, device=dev)
            cv = torch.zeros(n, w, d, dtype=dt, device=dev)
            for i, s in enumerate(states):
                k, v = s.ctx[li]
                c = min(w, k.shape[0])
                ck[i, w - c:], cv[i, w - c:] = k[-c:], v[-c:]
            ctx_kv.append((ck, cv))
        have = torch.tensor([min(w, s.ctx[0][0].shape[0]) for s in states], device=dev)
        return ctx_kv, torch.arange(w, device=dev)[None] >= (w - have)[:, None]

    # ------------------------------------------------------------------------------------ a step
    def confidences(self, conf_logits: torch.Tensor) -> np.ndarray:
        z = conf_logits.double().cpu().numpy()
        if self.calibration is not None:
            return self.calibration.apply(z)
        return 1.0 / (1.0 + np.exp(-z))

    def _draft_and_schedule(self, anchor: torch.Tensor, ctx_mask: torch.Tensor | None, ctx_kv, avail: np.ndarray,
                            force_ell: np.ndarray | None) -> tuple[object, np.ndarray, float]:
        """Draft γ tokens per request (one batched drafter pass) and pick the verify lengths ℓ."""
        if self.drafter is None or avail.max() <= 0:
            return None, np.zeros(len(avail), dtype=np.int64), 0.0
        drafts = self.drafter.draft(None, ctx_mask, anchor, self.temperature, self.gen, gamma=self.gamma,
                                    ctx_kv=ctx_kv)
        conf = self.confidences(drafts.conf_logits)  # host copy 1: the scheduler reads confidences
        conf[np.arange(self.gamma)[None, :] >= avail[:, None]] = 0.0
        ell = self.scheduler(conf, self.sps) if force_ell is None else np.minimum(force_ell, avail)
        return drafts, np.asarray(ell, dtype=np.int64), drafts.timings.get("sequential_s", 0.0)

    @torch.no_grad()
    def step(self, states: list[RequestState], force_ell: np.ndarray | None = None) -> StepRecord:
        if not states:
            raise ValueError("step needs at least one active request state")
        if any(s.done for s in states):
            raise ValueError("step got a finished request state; pass only states with done == False")
        if self.lean is not None:
            return self._lean_step(states, force_ell)
        dev = self._device
        t_start = time.perf_counter()
        b = self._batch_for(states)
        avail = np.array([min(self.gamma, s.req.max_new_tokens - len(s.out) - 1) for s in states]).clip(0)
        drafts, ell, seq_s = self._draft_and_schedule(b.anchor, b.ctx_mask, b.ctx_kv, avail, force_ell)
        t_draft = time.perf_counter()
        t = 1 + int(ell.max())
        ids = b.anchor[:, None] if t == 1 else torch.cat([b.anchor[:, None], drafts.tokens[:, : t - 1]], 1)
        ar = torch.arange(t, device=dev)
        ell_d = torch.as_tensor(ell, device=dev)
        ragged = bool((ell != ell[0]).any())
        attn = torch.cat([b.mask, ar[None] <= ell_d[:, None]], 1).long() if (b.holes or ragged) else None
        out = self.target(ids, attention_mask=attn, position_ids=b.lengths[:, None] + ar[None],
                          cache=b.cache, use_cache=True, output_hidden_states=self.drafter is not None)
        logits = out.logits
        dtok = drafts.tokens[:, : t - 1] if drafts is not None else ids[:, :0]
        dprob = drafts.probs[:, : t - 1] if (drafts is not None and drafts.probs is not None) else None
        acc, nxt = verify_batch(dtok, dprob, logits, ell_d, self.temperature, self.gen)
        keep = acc + 1  # anchor + accepted drafts now sit in the cache: roll back the rest
        packed = torch.cat([acc[:, None], nxt[:, None], dtok], 1).cpu().numpy()  # host copy 2
        accepted = packed[:, 0].astype(np.int64)
        maxkeep = int(accepted.max()) + 1
        kept = ar[None] < keep[:, None]
        length0 = b.mask.shape[1]
        _crop(b.cache, length0 + maxkeep)
        b.mask = torch.cat([b.mask, kept[:, :maxkeep]], 1)
        b.holes = b.holes or bool((accepted + 1 != maxkeep).any())
        b.lengths = b.lengths + keep
        b.anchor = nxt
        if self.drafter is not None:
            w = self.drafter.config.window
            new = self.drafter.project_context(self.drafter.fuse_features(out.hidden_states))
            idx = keep[:, None] + torch.arange(w, device=dev)[None]  # the last w valid of [old window; kept]
            b.ctx_kv = [(torch.cat([ck, nk], 1).gather(1, idx[..., None].expand(-1, -1, ck.shape[2])),
                         torch.cat([cv, nv], 1).gather(1, idx[..., None].expand(-1, -1, cv.shape[2])))
                        for (ck, cv), (nk, nv) in zip(b.ctx_kv, new, strict=True)]
            b.ctx_mask = torch.cat([b.ctx_mask, kept], 1).gather(1, idx)
        return self._commit(states, drafts, logits, dprob, ell, accepted, packed, avail, t_start, t_draft, seq_s)

    def _commit(self, states: list[RequestState], drafts, logits: torch.Tensor, dprob: torch.Tensor | None,
                ell: np.ndarray, accepted: np.ndarray, packed: np.ndarray, avail: np.ndarray, t_start: float,
                t_draft: float, seq_s: float) -> StepRecord:
        """The host side of a step (either engine): each request's new tokens, counters and end."""
        n, t = len(states), logits.shape[1]
        nxt_h = packed[:, 1]
        conf_logits = drafts.conf_logits if drafts is not None else None
        if self.record_rounds and drafts is not None:
            z = conf_logits.double().cpu().numpy()
            ap = None
            if dprob is not None:  # analytic acceptance Σ_v min(p_d, p_t) at the drafted prefix (an oracle)
                ap = torch.minimum(probs_at(logits[:, : t - 1], self.temperature), dprob.double()).sum(-1).cpu().numpy()
        for i, s in enumerate(states):
            n_acc, li = int(accepted[i]), int(ell[i])
            s.out.extend([int(x) for x in packed[i, 2: 2 + n_acc]] + [int(nxt_h[i])])
            s.anchor = int(nxt_h[i])
            s.n_cached += n_acc + 1
            s.rounds += 1
            s.committed_in_rounds += n_acc + 1
            if self.record_rounds and drafts is not None:
                entry = {"ell": li, "accepted": n_acc, "conf_logits": z[i].copy(), "avail": int(avail[i])}
                if ap is not None:
                    entry["accept_prob"] = ap[i, :li]
                self.round_log.append(entry)
            s.done = self._finished(s)
        t_end = time.perf_counter()
        return StepRecord(ell=ell, accepted=accepted, verify_tokens=int(n + ell.sum()),
                          conf_logits=None if conf_logits is None else conf_logits.double().cpu().numpy(),
                          gamma_avail=avail, draft_s=t_draft - t_start, sequential_s=seq_s,
                          verify_s=t_end - t_draft, step_s=t_end - t_start)

    # ------------------------------------------------------------------------------------ the lean engine
    @torch.inference_mode()
    def _lean_prefill(self, reqs: list[Request], now: float) -> list[RequestState]:
        """One lean forward over every request's prompt, each into a new static cache sized for its prompt and
        budget."""
        layers = self.drafter.config.target_layers if self.drafter is not None else ()
        full = self.full_prompt_logits
        lens = [len(r.prompt) for r in reqs]
        p = max(lens)
        seqs = [self.lean.sequence(len(r.prompt) + r.max_new_tokens + 1) for r in reqs]
        rows, hidden = map(list, zip(*forward_many(seqs, [r.prompt for r in reqs], layers, last_only=not full),
                                     strict=True))
        ids = torch.zeros(len(reqs), p, dtype=torch.long)  # left-padded, as a batched HF prefill sees them
        for i, r in enumerate(reqs):
            ids[i, p - lens[i]:] = torch.tensor(r.prompt, dtype=torch.long)
        if full:
            logits = rows[0].new_zeros(len(reqs), p, rows[0].shape[-1])
            for i, lg in enumerate(rows):
                logits[i, p - lens[i]:] = lg
        else:
            logits = torch.stack(rows)  # (R, 1, V)
        self.lean.run_hooks(ids, logits)
        first = self._sample_rows(logits[:, -1]).tolist()
        states = []
        for i, r in enumerate(reqs):
            ctx = None
            if self.drafter is not None:
                w = self.drafter.config.window
                ctx = self._lean_context(hidden[i], slice(-w, None))
            st = RequestState(r, None, ctx, int(first[i]), out=[int(first[i])], admitted_s=now, n_cached=lens[i],
                              seq=seqs[i])
            st.done = self._finished(st)
            states.append(st)
        return states

    def _lean_context(self, hidden: list[torch.Tensor], rows: slice) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The drafter's per-layer context keys/values (c, d) of the target features ``hidden[...][rows]``."""
        feats = {i: h[rows][None] for i, h in zip(self.drafter.config.target_layers, hidden, strict=True)}
        return [(k[0], v[0]) for k, v in self.drafter.project_context(self.drafter.fuse_features(feats))]

    @torch.inference_mode()
    def _lean_step(self, states: list[RequestState], force_ell: np.ndarray | None) -> StepRecord:
        n = len(states)
        t_start = time.perf_counter()
        for s in states:
            if s.seq is None:
                raise ValueError("the lean engine steps only requests it prefilled itself")
        anchor = torch.tensor([s.anchor for s in states], dtype=torch.long)
        avail = np.array([min(self.gamma, s.req.max_new_tokens - len(s.out) - 1) for s in states]).clip(0)
        ctx_kv, ctx_mask = self._ctx_batch(states)
        drafts, ell, seq_s = self._draft_and_schedule(anchor, ctx_mask, ctx_kv, avail, force_ell)
        t_draft = time.perf_counter()
        t = 1 + int(ell.max())
        ids = anchor[:, None] if t == 1 else torch.cat([anchor[:, None], drafts.tokens[:, : t - 1]], 1)
        layers = self.drafter.config.target_layers if self.drafter is not None else ()
        # one forward for every request's 1 + ℓ_r tokens, each into its own cache: the weights are read once
        rows, hidden = map(list, zip(*forward_many([s.seq for s in states],
                                                   [ids[i, : 1 + int(ell[i])] for i in range(n)], layers),
                                     strict=True))
        if n == 1:
            logits = rows[0][None]
        else:
            logits = rows[0].new_zeros(n, t, rows[0].shape[-1])  # right-padded rows
            for i, lg in enumerate(rows):
                logits[i, : lg.shape[0]] = lg
        self.lean.run_hooks(ids, logits)
        dtok = drafts.tokens[:, : t - 1] if drafts is not None else ids[:, :0]
        dprob = drafts.probs[:, : t - 1] if (drafts is not None and drafts.probs is not None) else None
        acc, nxt = verify_batch(dtok, dprob, logits, torch.as_tensor(ell), self.temperature, self.gen)
        packed = torch.cat([acc[:, None], nxt[:, None], dtok], 1).numpy()
        accepted = packed[:, 0].astype(np.int64)
        for i, s in enumerate(states):
            s.seq.rollback(int(ell[i]) - int(accepted[i]))  # the rejected drafts leave the cache in place
            if self.drafter is not None:
                w = self.drafter.config.window
                new = self._lean_context(hidden[i], slice(0, int(accepted[i]) + 1))
                s.ctx = [(torch.cat([ck, nk])[-w:], torch.cat([cv, nv])[-w:])
                         for (ck, cv), (nk, nv) in zip(s.ctx, new, strict=True)]
        return self._commit(states, drafts, logits, dprob, ell, accepted, packed, avail, t_start, t_draft, seq_s)

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
            admit = []
            while pending and pending[0].arrival_s <= now and len(active) + len(admit) < max_batch:
                admit.append(pending.pop(0))
            if admit:  # batched prefill: one target forward for every request admitted now
                t0 = time.perf_counter()
                sts = self.prefill_many(admit, now)
                now = tick(time.perf_counter() - t0, sum(len(r.prompt) for r in admit), len(admit))
                for st in sts:
                    if st.done:
                        st.finished_s = now
                        finished[st.req.rid] = st
                    else:
                        active.append(st)
                continue  # requests may have arrived meanwhile (and slots freed by instant finishes)
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
    """Reference: plain cached greedy decoding, one token per target forward (on the target's device)."""
    dev = next(target.parameters()).device
    ids = torch.tensor([prompt], dtype=torch.long, device=dev)
    cache = DynamicCache(config=target.config)
    out: list[int] = []
    with torch.no_grad():
        logits = target(ids, cache=cache, use_cache=True).logits
        for _ in range(max_new_tokens):
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            tok = int(nxt)  # the one host copy per token
            out.append(tok)
            if eos_token_id is not None and tok == eos_token_id:
                break
            logits = target(nxt, cache=cache, use_cache=True).logits
    return out
