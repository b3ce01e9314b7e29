"""The lean target engine: a HF Llama-family model decoded by :mod:`divelab.lm.lean` inside DSpark.

:class:`SpecEngine` runs its target in one of two engines (``engine=``):

* ``"lean"`` (the default): the model's weights regrouped once in ``fmt`` (``fp32``, ``bf16`` or
  ``int8``) and one static key/value cache per request. A step verifies a request's anchor and
  its ℓ drafts with one (1 + ℓ)-token forward and rolls the rejected drafts back in that cache in
  place (no re-prefill, no copy). The forwards are row-invariant (see
  :class:`divelab.lm.lean.LeanLM`), so greedy speculative decoding commits exactly the tokens the
  same engine's plain greedy decoding does, in every format. The requests of a step run in one
  forward (every matrix product once over all their rows, attention per request in its own cache),
  and each request's rows are bit for bit what it would get alone; CPU only; ``LlamaForCausalLM``
  models (e.g. SmolLM2).
* ``"hf"``: the HF model's own forward over a persistent batched cache (any causal LM, any
  device, batched verification).
* ``"auto"``: lean where the lean path runs the model (a Llama-family model on the CPU), else hf.

Per-request logits processing (the server's sampling parameters) hooks in through
:meth:`LeanTarget.register_forward_hook`, called once per step with the step's logits padded to
(requests, positions, vocab), exactly as a forward hook on the HF model sees them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from divelab.lm.lean import FORMATS, SUPPORTED_CLASSES, SUPPORTED_MODEL_TYPES, LeanLM
from divelab.serving.dspark.sps import SPSCurve, fit_sps

ENGINES = ("lean", "hf", "auto")


class _Handle:
    def __init__(self, hooks: list, fn: Callable) -> None:
        self.hooks, self.fn = hooks, fn

    def remove(self) -> None:
        if self.fn in self.hooks:
            self.hooks.remove(self.fn)


class LeanTarget:
    """A loaded HF model's lean twin: shared weights in ``fmt``, one :class:`LeanLM` cache per request.

    ``model`` stays the reference for everything but the target forward (its config, and the
    embedding and LM head a drafter shares). ValueError for an architecture the lean path does not
    run (pass ``engine="hf"`` for those) and for a model off the CPU.
    """

    def __init__(self, model: torch.nn.Module, fmt: str = "fp32") -> None:
        if fmt not in FORMATS:
            raise ValueError(f"unknown weight format {fmt!r} for the lean engine; allowed: {', '.join(FORMATS)}")
        dev = next(model.parameters()).device
        if dev.type != "cpu":
            raise ValueError(f"the lean engine runs on the CPU but the model is on {dev}; use engine='hf' there")
        cls, kind = type(model).__name__, getattr(getattr(model, "config", None), "model_type", None)
        if cls not in SUPPORTED_CLASSES or kind not in SUPPORTED_MODEL_TYPES:
            raise ValueError(f"the lean engine runs {', '.join(SUPPORTED_CLASSES)} models (e.g. SmolLM2), not {cls} "
                             f"(model_type {kind!r}); use the HF engine for it: engine='hf' (CLI: --engine hf)")
        try:
            self.base = LeanLM.from_hf(model, fmt, max_len=1, row_invariant=True)
        except ValueError as exc:
            raise ValueError(f"{exc}; use the HF engine for this model: engine='hf' (CLI: --engine hf)") from None
        self.model, self.fmt = model, fmt
        self.config = model.config
        self.hooks: list[Callable] = []

    def sequence(self, max_len: int) -> LeanLM:
        """A fresh sequence (empty cache of ``max_len`` positions) over the shared weights."""
        return self.base.fork(max_len=max(1, int(max_len)))

    def register_forward_hook(self, fn: Callable) -> _Handle:
        """``fn(target, (ids,), output)`` after each step's forwards, ``output.logits`` (R, T, V) editable
        in place (rows right-padded with zeros past each request's positions), as on a HF module."""
        self.hooks.append(fn)
        return _Handle(self.hooks, fn)

    def run_hooks(self, ids: torch.Tensor, logits: torch.Tensor) -> None:
        out = SimpleNamespace(logits=logits)
        for fn in list(self.hooks):
            fn(self, (ids,), out)


def lean_target(model: torch.nn.Module, engine: str | LeanTarget | None, fmt: str = "fp32") -> LeanTarget | None:
    """The :class:`LeanTarget` an engine choice means (None for ``"hf"``); a LeanTarget passes through."""
    if isinstance(engine, LeanTarget):
        return engine
    if engine not in ENGINES:
        raise ValueError(f"unknown target engine {engine!r}; allowed: {', '.join(ENGINES)}")
    if engine == "auto":
        if fmt not in FORMATS:
            raise ValueError(f"unknown weight format {fmt!r} for the lean engine; allowed: {', '.join(FORMATS)}")
        try:
            return LeanTarget(model, fmt)
        except ValueError:  # an architecture or device the lean path does not run
            return None
    if engine == "hf":
        if fmt != "fp32":
            raise ValueError(f"fmt={fmt!r} picks the lean engine's weight format; the hf engine runs the model as "
                             "loaded (drop fmt, or use engine='lean')")
        return None
    return LeanTarget(model, fmt)


@torch.inference_mode()
def measure_lean_sps(target: LeanTarget, batch_sizes: list[int] | None = None, context: int = 64,
                     repeats: int = 7, seed: int = 0) -> SPSCurve:
    """SPS(B) of the lean engine: one B-token forward over a ``context``-token cache, then rolled back
    (what verifying B tokens of one request costs), ``repeats`` timed forwards per B after a warm-up,
    interleaved across B, fitted by :func:`~divelab.serving.dspark.sps.fit_sps`. The lean engine runs a
    step's requests in one forward, so B tokens spread over R requests cost about the same plus R - 1
    more attention calls."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    batch_sizes = batch_sizes or [1, 2, 4, 8, 16, 32, 64]
    g = torch.Generator().manual_seed(seed)
    vocab = int(target.config.vocab_size)
    seq = target.sequence(context + max(batch_sizes))
    seq.forward(torch.randint(0, vocab, (context,), generator=g), last_only=True)
    news = [torch.randint(0, vocab, (b,), generator=g) for b in batch_sizes]
    times = np.zeros((len(batch_sizes), repeats))
    for i in range(repeats + 1):
        for j, new in enumerate(news):
            t0 = time.perf_counter()
            seq.forward(new)
            if i:  # the first round is warm-up
                times[j, i - 1] = time.perf_counter() - t0
            seq.rollback(len(new))
    return fit_sps(batch_sizes, times,
                   label=f"measured on this machine (lean {target.fmt}, one request, context {context}, "
                         f"{torch.get_num_threads()} threads)",
                   meta={"context": context, "engine": "lean", "fmt": target.fmt,
                         "tokens_per_request": max(batch_sizes)})


def describe(engine: Any) -> str:
    """``lean (bf16)`` or ``hf``, for banners and records."""
    return f"lean ({engine.fmt})" if isinstance(engine, LeanTarget) else "hf"


__all__ = ["ENGINES", "LeanTarget", "describe", "lean_target", "measure_lean_sps"]
