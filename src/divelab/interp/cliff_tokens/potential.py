"""Token-wise potential ``P_t = P(correct | response prefix up to token t)`` by Monte Carlo continuations.

For every prefix, ``N`` continuations are sampled from the model and checked; ``k_t`` of them are right and
``P_t ~ k_t / N``. This is the expensive part of the method (the paper spent ~4,000 GPU-hours on it), so the
sampling here is batched across prefixes *and* continuations, KV-cached, and vectorised (no Python loop over rows);
``benchmarks/interp_cliff_tokens.py`` measures continuations per second against ``divelab.lm.generate``.

- ``every=k`` computes the potential only every ``k`` response tokens (plus the last one); cliffs are then
  found between consecutive computed prefixes, as in the authors' code.
- early stop: once ``zero_patience`` consecutive computed prefixes have no successful continuation, the rest
  of the trace is not rolled out (its entries stay ``None``): the potential is taken as irrecoverably 0.
- the last prefix (the whole response) needs no sampling when the response ended: ``k_T = N * correct``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from divelab.interp.cliff_tokens.cliff_test import CliffSpan, find_cliffs
from divelab.interp.cliff_tokens.task import Checker, Problem, get_checker
from divelab.lm.sampling import filter_logits
from divelab.progress import make_progress, track


@dataclass(frozen=True)
class RolloutConfig:
    n: int = 64  # continuations per prefix (the paper's N)
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 64
    batch_rows: int = 1024  # continuations decoded together
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n (continuations per prefix) must be >= 1, got {self.n}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0 for Monte Carlo rollouts, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1 or self.batch_rows < 1:
            raise ValueError(f"max_new_tokens and batch_rows must be >= 1, got {self.max_new_tokens}, "
                             f"{self.batch_rows}")


@dataclass
class Cost:
    """What the rollouts cost: continuations, generated tokens, seconds."""

    continuations: int = 0
    tokens: int = 0
    seconds: float = 0.0

    def per_second(self) -> float:
        return self.continuations / self.seconds if self.seconds > 0 else float("nan")


def eos_ids(model: torch.nn.Module, tokenizer) -> list[int]:
    ids: set[int] = set()
    for src in (getattr(tokenizer, "eos_token_id", None), getattr(getattr(model, "generation_config", None),
                                                                    "eos_token_id", None),
                getattr(getattr(model, "config", None), "eos_token_id", None)):
        if isinstance(src, int):
            ids.add(src)
        elif isinstance(src, list | tuple):
            ids.update(int(x) for x in src)
    if not ids:
        raise ValueError("the tokenizer and model define no eos token: continuations could never end; set "
                         "tokenizer.eos_token")
    return sorted(ids)


@torch.no_grad()
def sample_batch(model: torch.nn.Module, prefixes: Sequence[Sequence[int]], *, max_new_tokens: int,
                 eos: Sequence[int], pad_id: int, temperature: float = 1.0, top_p: float = 1.0,
                 generator: torch.Generator | None = None, greedy: bool = False) -> list[list[int]]:
    """Sample one continuation per prefix (left-padded batch, KV cache, stops at any ``eos``, which is kept)."""
    n = len(prefixes)
    if n == 0:
        return []
    if any(len(p) == 0 for p in prefixes):
        raise ValueError("every prefix needs at least one token")
    device = next(model.parameters()).device
    # the N continuations of one prefix share its prefill: each distinct prefix is encoded once and its KV cache
    # and last logits are copied to its rows (the prefill of a long prompt dominates short continuations)
    distinct: dict[tuple[int, ...], int] = {}
    index = torch.as_tensor([distinct.setdefault(tuple(int(t) for t in p), len(distinct)) for p in prefixes])
    uniq = list(distinct)
    width = max(len(p) for p in uniq)
    ids = torch.full((len(uniq), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(uniq), width), dtype=torch.long)
    for i, p in enumerate(uniq):
        ids[i, width - len(p):] = torch.as_tensor(p, dtype=torch.long)
        mask[i, width - len(p):] = 1
    ids, mask = ids.to(device), mask.to(device)
    eos_t = torch.as_tensor(list(eos), dtype=torch.long)
    out = torch.full((n, max_new_tokens), -1, dtype=torch.long)
    done = torch.zeros(n, dtype=torch.bool)
    past, step_ids = None, ids
    was_training = model.training
    model.eval()
    try:
        for s in range(max_new_tokens):
            pos = (mask.cumsum(-1) - 1).clamp(min=0)[:, -step_ids.size(1):]
            o = model(input_ids=step_ids, attention_mask=mask, position_ids=pos, cache=past, use_cache=True)
            past = o.cache
            logits = o.logits[:, -1, :].float().cpu()
            if s == 0 and len(uniq) < n:  # copy each distinct prefix's state to its rows
                logits, mask = logits[index], mask[index.to(device)]
                past = _select_rows(past, index.to(device))
            if greedy:
                nxt = logits.argmax(-1)
            else:
                probs = torch.softmax(filter_logits(logits / temperature, top_p), dim=-1)
                nxt = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
            nxt = torch.where(done, torch.full_like(nxt, -1), nxt)
            out[:, s] = nxt
            done |= torch.isin(nxt, eos_t)
            if bool(done.all()):
                break
            step_ids = nxt.clamp(min=0)[:, None].to(device)
            mask = torch.cat([mask, torch.ones((n, 1), dtype=torch.long, device=device)], dim=-1)
    finally:
        model.train(was_training)
    return [[int(t) for t in row if t >= 0] for row in out.tolist()]


def _select_rows(past, index: torch.Tensor):
    """The KV cache with its batch rows taken at ``index`` (a ``transformers`` Cache, a legacy tuple, or None)."""
    if past is None:
        return None
    if hasattr(past, "reorder_cache"):
        past.reorder_cache(index)
        return past
    return tuple(tuple(t.index_select(0, index) for t in layer) for layer in past)


class Rollouts:
    """Counts successful continuations of response prefixes: the engine behind every potential.

    >>> r = Rollouts(model, tokenizer, "last-number", RolloutConfig(n=64))          # doctest: +SKIP
    >>> r.success_counts([(prompt_ids, response_prefix_ids, "42")])                   # doctest: +SKIP
    [17]
    """

    def __init__(self, model: torch.nn.Module, tokenizer, checker: str | Checker = "last-number",
                 config: RolloutConfig | None = None):
        self.model, self.tokenizer = model, tokenizer
        self.checker = get_checker(checker)
        self.config = config or RolloutConfig()
        self.eos = eos_ids(model, tokenizer)
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_id = int(pad if pad is not None else self.eos[0])
        self.cost = Cost()
        self._calls = 0

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode([t for t in ids if t not in self.eos], skip_special_tokens=True)

    def success_counts(self, items: Sequence[tuple[Sequence[int], Sequence[int], str]],
                       n: int | None = None) -> list[int]:
        """``items``: ``(prompt_ids, response_prefix_ids, answer)``; returns successes out of ``n`` each."""
        n = self.config.n if n is None else n
        counts = [0] * len(items)
        ended = [bool(r) and r[-1] in self.eos for _, r, _ in items]  # a prefix that already ended: just check
        for i, (_, r, a) in enumerate(items):
            if ended[i]:
                counts[i] = n * int(self.checker(self.decode(r), a))
        rows = [(i, list(p) + list(r), list(r)) for i, (p, r, _) in enumerate(items) if not ended[i]
                for _ in range(n)]
        cfg = self.config
        t0 = time.perf_counter()
        for start in range(0, len(rows), cfg.batch_rows):
            chunk = rows[start:start + cfg.batch_rows]
            self._calls += 1
            gen = torch.Generator().manual_seed(int(cfg.seed) * 1_000_003 + self._calls)
            cont = sample_batch(self.model, [c[1] for c in chunk], max_new_tokens=cfg.max_new_tokens,
                                eos=self.eos, pad_id=self.pad_id, temperature=cfg.temperature, top_p=cfg.top_p,
                                generator=gen)
            texts = self.tokenizer.batch_decode([[t for t in c[2] + k if t not in self.eos]
                                                 for c, k in zip(chunk, cont, strict=True)],
                                                skip_special_tokens=True)
            for (i, _, _), text in zip(chunk, texts, strict=True):
                counts[i] += int(self.checker(text, items[i][2]))
            self.cost.continuations += len(chunk)
            self.cost.tokens += sum(len(k) for k in cont)
        self.cost.seconds += time.perf_counter() - t0
        return counts


@dataclass
class Trace:
    """One sampled (or given) response, its potentials, per-token statistics and cliffs."""

    problem: Problem
    prompt_ids: list[int]
    response_ids: list[int]  # eos excluded
    finished: bool
    correct: bool
    n: int = 0
    ks: list[int | None] = field(default_factory=list)  # len T+1; ks[0]: the prompt alone
    logprobs: list[float] = field(default_factory=list)  # per response token, untempered
    ranks: list[int] = field(default_factory=list)  # 1 = the greedy token
    entropies: list[float] = field(default_factory=list)  # nats, from the top-20 probabilities
    cliffs: list[CliffSpan] = field(default_factory=list)

    @property
    def potentials(self) -> list[float | None]:
        return [None if k is None else k / self.n for k in self.ks]


def encode_prompt(tokenizer, prompt: str, chat: bool = False) -> list[int]:
    if chat:
        ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                            tokenize=True)
        ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
        return [int(t) for t in ids]
    ids = tokenizer(prompt, add_special_tokens=True)["input_ids"]
    if not ids:
        raise ValueError(f"prompt {prompt!r} encodes to no tokens")
    return [int(t) for t in ids]


def sample_traces(rollouts: Rollouts, problems: Sequence[Problem], per_problem: int = 1, *, chat: bool = False,
                  seed: int = 0) -> list[Trace]:
    """Sample ``per_problem`` responses for each problem and check them."""
    cfg = rollouts.config
    prompts = [encode_prompt(rollouts.tokenizer, p.prompt, chat) for p in problems]
    rows = [(j, prompts[j]) for j in range(len(problems)) for _ in range(per_problem)]
    traces: list[Trace] = []
    batches = range(0, len(rows), cfg.batch_rows)
    for start in track(batches, f"sampling {len(rows)} responses (batches)", total=len(batches)):
        chunk = rows[start:start + cfg.batch_rows]
        gen = torch.Generator().manual_seed(10_007 * int(seed) + start + 1)
        cont = sample_batch(rollouts.model, [c[1] for c in chunk], max_new_tokens=cfg.max_new_tokens,
                            eos=rollouts.eos, pad_id=rollouts.pad_id, temperature=cfg.temperature,
                            top_p=cfg.top_p, generator=gen)
        for (j, p), k in zip(chunk, cont, strict=True):
            finished = bool(k) and k[-1] in rollouts.eos
            resp = k[:-1] if finished else k
            ok = rollouts.checker(rollouts.decode(resp), problems[j].answer)
            traces.append(Trace(problems[j], list(p), resp, finished, bool(ok)))
    return traces


@torch.no_grad()
def token_stats(model: torch.nn.Module, trace: Trace, top: int = 20) -> None:
    """Fill the trace's per-token log-prob, greedy rank and top-``top`` entropy (one forward pass)."""
    if not trace.response_ids:
        trace.logprobs, trace.ranks, trace.entropies = [], [], []
        return
    device = next(model.parameters()).device
    seq = torch.as_tensor([trace.prompt_ids + trace.response_ids], dtype=torch.long, device=device)
    logits = model(input_ids=seq).logits[0].float().cpu()
    p0 = len(trace.prompt_ids)
    logp = torch.log_softmax(logits[p0 - 1:p0 - 1 + len(trace.response_ids)], dim=-1)
    tok = torch.as_tensor(trace.response_ids)
    chosen = logp.gather(1, tok[:, None]).squeeze(1)
    ranks = 1 + (logp > chosen[:, None]).sum(-1)
    topv = logp.topk(min(top, logp.size(-1)), dim=-1).values
    ent = -(topv.exp() * topv).sum(-1)
    trace.logprobs, trace.ranks, trace.entropies = chosen.tolist(), ranks.tolist(), ent.tolist()


def estimate_potentials(rollouts: Rollouts, traces: Sequence[Trace], *, every: int = 1, zero_patience: int = 2,
                        description: str = "potentials") -> None:
    """Fill ``trace.ks`` (and ``trace.cliffs``, ``trace.n``) for every trace, in place."""
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    if zero_patience < 1:
        raise ValueError(f"zero_patience must be >= 1, got {zero_patience}")
    n = rollouts.config.n
    per_chunk = max(1, rollouts.config.batch_rows // n)

    def positions_of(tr: Trace) -> list[int]:
        T = len(tr.response_ids)
        positions = sorted(set(range(0, T + 1, every)) | {T})
        return [t for t in positions if t != T] if tr.finished else positions

    traces = list(traces)
    # progress in prefixes (each n continuations), not traces: one long trace can take minutes
    with make_progress() as bar:
        task = bar.add_task(f"{description} ({n} continuations per prefix)",
                            total=sum(len(positions_of(tr)) for tr in traces), info="")
        for tr in traces:
            T = len(tr.response_ids)
            ks: list[int | None] = [None] * (T + 1)
            positions = positions_of(tr)
            if tr.finished:
                ks[T] = n * int(tr.correct)
            computed: list[int] = []
            for c in range(0, len(positions), per_chunk):
                chunk = positions[c:c + per_chunk]
                counts = rollouts.success_counts([(tr.prompt_ids, tr.response_ids[:t], tr.problem.answer)
                                                  for t in chunk])
                for t, k in zip(chunk, counts, strict=True):
                    ks[t] = k
                    computed.append(k)
                bar.advance(task, len(chunk))
                if len(computed) >= zero_patience and all(k == 0 for k in computed[-zero_patience:]):
                    bar.advance(task, len(positions) - c - len(chunk))  # the rest of this trace is skipped
                    break
            tr.n, tr.ks = n, ks
            tr.cliffs = find_cliffs(ks, n)


def pass_at_n(k: int) -> float:
    return float(k > 0)


def potential_array(trace: Trace) -> np.ndarray:
    return np.array([np.nan if k is None else k / trace.n for k in trace.ks], dtype=float)
