"""Cliff-DPO: direct preference optimisation on exactly one token position, the cliff.

Pairs (the authors' rule): at a cliff whose prefix before it is ``x`` (potential ``p_{t-1}``),

- **rejected** = the cliff token;
- **chosen** = each of the top-10 next tokens at ``x`` (the cliff token excluded) whose own potential, estimated
  from ``N`` continuations of ``x + [c]``, does *not* pass the cliff test against ``p_{t-1}``.

The loss is the DPO sigmoid loss on the single position's log-probabilities,
``-log sigmoid(beta [(log pi(c|x) - log pi_ref(c|x)) - (log pi(r|x) - log pi_ref(r|x))])``, at token-ID level
(no re-tokenisation of text). Two baselines share the trainer: **full-sequence DPO** (chosen = a right response,
rejected = a wrong one, log-probabilities summed over every response token, as TRL's ``DPOTrainer`` computes them)
and **random-token DPO** (the same number of single-token pairs at random positions of wrong responses, chosen =
the most likely other token: no detection cost).

Why not TRL here: TRL's ``DPOTrainer`` takes text and re-tokenises prompt/chosen/rejected, which is exactly what a
single token-ID pair must avoid (the authors patched it for this), and it is not installed in this environment.
The objective below is TRL's sigmoid loss (``loss_type="sigmoid"``) written out; LoRA comes from ``peft`` with the
authors' layout (all linear projections, dropout 0.05), scaled down for a tiny model.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from divelab.interp.cliff_tokens.cliff_test import cliff_matrix
from divelab.interp.cliff_tokens.detector import Detection
from divelab.interp.cliff_tokens.potential import Trace
from divelab.lm.fitting import fit, warmup_cosine


@dataclass(frozen=True)
class TokenPair:
    context: tuple[int, ...]  # prompt + response prefix before the position
    chosen: int
    rejected: int
    kind: str = ""  # cliff type, or "random"


@dataclass(frozen=True)
class SequencePair:
    prompt: tuple[int, ...]
    chosen: tuple[int, ...]  # a whole response (eos included)
    rejected: tuple[int, ...]


@dataclass(frozen=True)
class DPOConfig:
    """The DPO trainer's settings."""

    beta: float = 0.1
    """preference temperature"""
    lr: float = 1e-6
    """peak learning rate (the authors' default for 8B models, 5e-6 for 0.6B/1B; tiny models need far more)"""
    epochs: int = 1
    """passes over the preference pairs"""
    batch_size: int = 16
    """pairs per step"""
    warmup: float = 0.1
    """share of steps spent warming up, then cosine decay"""
    lora_r: int | None = 32
    """LoRA rank; None: full fine-tuning"""
    lora_alpha: int = 64
    """LoRA scale numerator (the update is multiplied by alpha / r)"""
    lora_dropout: float = 0.05
    """dropout on the adapter's input during training"""
    seed: int = 0
    """seed of the adapter's initialisation and the batch order"""

    def __post_init__(self) -> None:
        if self.beta <= 0 or self.lr <= 0 or self.epochs < 1 or self.batch_size < 1:
            raise ValueError(f"need beta > 0, lr > 0, epochs >= 1, batch_size >= 1; got {self}")


@dataclass
class DPOResult:
    model: torch.nn.Module
    pairs: int
    positions: int  # distinct token positions the loss flows through, over the pair set
    seconds: float
    losses: list[float] = field(default_factory=list)


# --- pairs ------------------------------------------------------------------------------------------------------


@torch.no_grad()
def _next_logprobs(model: torch.nn.Module, contexts: Sequence[Sequence[int]]) -> torch.Tensor:
    device = next(model.parameters()).device
    width = max(len(c) for c in contexts)
    ids = torch.zeros((len(contexts), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, c in enumerate(contexts):
        ids[i, :len(c)] = torch.as_tensor(list(c))
        mask[i, :len(c)] = 1
    logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.float().cpu()
    last = torch.as_tensor([len(c) - 1 for c in contexts])
    return torch.log_softmax(logits[torch.arange(len(contexts)), last], dim=-1)


def cliff_pairs(det: Detection, top_k: int = 10, n: int | None = None, kinds: Sequence[str] | None = None
                ) -> list[TokenPair]:
    """Single-token preference pairs at every cliff of ``det`` (optionally only of the given ``kinds``)."""
    cliffs = [c for c in det.cliffs if kinds is None or c.kind in kinds]
    if not cliffs:
        return []
    n = det.rollouts.config.n if n is None else n
    contexts = [tuple(det.traces[c.trace].prompt_ids + det.traces[c.trace].response_ids[:c.token - 1])
                for c in cliffs]
    logp = _next_logprobs(det.rollouts.model, contexts)
    cands: list[list[int]] = []
    for i, c in enumerate(cliffs):
        order = torch.argsort(logp[i], descending=True).tolist()
        cands.append([t for t in order[:top_k + 1] if t != c.token_id][:top_k])
    items, index = [], []
    for i, c in enumerate(cliffs):
        tr = det.traces[c.trace]
        for t in cands[i]:
            items.append((tr.prompt_ids, tr.response_ids[:c.token - 1] + [t], tr.problem.answer))
            index.append((i, t))
    counts = det.rollouts.success_counts(items, n=n)
    m = cliff_matrix(n)
    pairs = []
    for (i, t), k in zip(index, counts, strict=True):
        c = cliffs[i]
        k_prev = int(round(c.p_prev * n))
        if not m[k_prev, k]:
            pairs.append(TokenPair(contexts[i], int(t), int(c.token_id), c.kind))
    return pairs


def random_token_pairs(model: torch.nn.Module, traces: Sequence[Trace], count: int, seed: int = 0) -> list[TokenPair]:
    """``count`` single-token pairs at uniformly random positions of wrong responses: rejected = the token
    written there, chosen = the most likely other token (no potentials needed)."""
    wrong = [tr for tr in traces if not tr.correct and tr.response_ids]
    if not wrong or count < 1:
        return []
    rng = np.random.default_rng(seed)
    picks = []
    for _ in range(count):
        tr = wrong[int(rng.integers(len(wrong)))]
        t = int(rng.integers(len(tr.response_ids)))
        picks.append((tuple(tr.prompt_ids + tr.response_ids[:t]), tr.response_ids[t]))
    logp = _next_logprobs(model, [p[0] for p in picks])
    out = []
    for i, (ctx, rej) in enumerate(picks):
        order = torch.argsort(logp[i], descending=True).tolist()
        chosen = next(t for t in order if t != rej)
        out.append(TokenPair(ctx, int(chosen), int(rej), "random"))
    return out


def sequence_pairs(traces: Sequence[Trace], eos_id: int, max_pairs: int | None = None, seed: int = 0
                   ) -> list[SequencePair]:
    """Whole-response pairs: for every problem with a right and a wrong sampled response, one (right, wrong)."""
    by_prompt: dict[tuple[int, ...], list[Trace]] = {}
    for tr in traces:
        by_prompt.setdefault(tuple(tr.prompt_ids), []).append(tr)
    rng = np.random.default_rng(seed)
    out = []
    for prompt, group in by_prompt.items():
        good = [t for t in group if t.correct]
        bad = [t for t in group if not t.correct]
        for g, b in zip(good, bad, strict=False):
            end_g = [eos_id] if g.finished else []
            end_b = [eos_id] if b.finished else []
            out.append(SequencePair(prompt, tuple(g.response_ids + end_g), tuple(b.response_ids + end_b)))
    if max_pairs is not None and len(out) > max_pairs:
        idx = sorted(rng.choice(len(out), size=max_pairs, replace=False).tolist())
        out = [out[i] for i in idx]
    return out


# --- the objective ----------------------------------------------------------------------------------------------


def dpo_sigmoid_loss(pol_chosen: torch.Tensor, pol_rejected: torch.Tensor, ref_chosen: torch.Tensor,
                     ref_rejected: torch.Tensor, beta: float) -> torch.Tensor:
    """TRL's ``sigmoid`` DPO loss per pair (log-probabilities of whole completions or of one token)."""
    return -F.logsigmoid(beta * ((pol_chosen - ref_chosen) - (pol_rejected - ref_rejected)))


def token_logprobs_at_end(model: torch.nn.Module, contexts: Sequence[Sequence[int]], chosen: torch.Tensor,
                          rejected: torch.Tensor, return_logits: bool = False):
    """``log pi(chosen | context)`` and ``log pi(rejected | context)`` at the last position of each context."""
    device = next(model.parameters()).device
    width = max(len(c) for c in contexts)
    ids = torch.zeros((len(contexts), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, c in enumerate(contexts):
        ids[i, :len(c)] = torch.as_tensor(list(c))
        mask[i, :len(c)] = 1
    logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
    if return_logits:
        logits.retain_grad()
    rows = torch.arange(len(contexts), device=device)
    last = torch.as_tensor([len(c) - 1 for c in contexts], device=device)
    logp = torch.log_softmax(logits[rows, last].float(), dim=-1)
    out = (logp[rows, chosen.to(device)], logp[rows, rejected.to(device)])
    return (*out, logits) if return_logits else out


def sequence_logprob_sums(model: torch.nn.Module, prompts: Sequence[Sequence[int]],
                          responses: Sequence[Sequence[int]]) -> torch.Tensor:
    """Sum of the response tokens' log-probabilities given the prompt (right-padded batch)."""
    device = next(model.parameters()).device
    seqs = [list(p) + list(r) for p, r in zip(prompts, responses, strict=True)]
    width = max(len(s) for s in seqs)
    ids = torch.zeros((len(seqs), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    resp = torch.zeros((len(seqs), width), dtype=torch.bool)
    for i, (p, s) in enumerate(zip(prompts, seqs, strict=True)):
        ids[i, :len(s)] = torch.as_tensor(s)
        mask[i, :len(s)] = 1
        resp[i, len(p):len(s)] = True
    logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.float()
    logp = torch.log_softmax(logits[:, :-1], dim=-1).gather(2, ids[:, 1:, None].to(device)).squeeze(2)
    return (logp * resp[:, 1:].to(device)).sum(-1)


def _logps(model, pairs: Sequence[TokenPair | SequencePair]) -> tuple[torch.Tensor, torch.Tensor]:
    if isinstance(pairs[0], TokenPair):
        return token_logprobs_at_end(model, [p.context for p in pairs],
                                     torch.as_tensor([p.chosen for p in pairs]),
                                     torch.as_tensor([p.rejected for p in pairs]))
    prompts = [p.prompt for p in pairs]
    return (sequence_logprob_sums(model, prompts, [p.chosen for p in pairs]),
            sequence_logprob_sums(model, prompts, [p.rejected for p in pairs]))


def positions_trained(pairs: Sequence[TokenPair | SequencePair]) -> int:
    """Token positions the loss flows through: one per single-token pair (chosen and rejected share it); every
    response token of both responses for a sequence pair."""
    if not pairs:
        return 0
    if isinstance(pairs[0], TokenPair):
        return len({(p.context) for p in pairs})
    return sum(len(p.chosen) + len(p.rejected) for p in pairs)


def _with_lora(model: torch.nn.Module, cfg: DPOConfig) -> torch.nn.Module:
    from peft import LoraConfig, get_peft_model

    lc = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                    target_modules="all-linear", task_type="CAUSAL_LM")
    return get_peft_model(model, lc)


def train_dpo(model: torch.nn.Module, pairs: Sequence[TokenPair | SequencePair], config: DPOConfig | None = None
              ) -> DPOResult:
    """DPO on ``pairs`` (all single-token or all whole-response) from a copy of ``model`` (the reference stays
    as given). Returns the trained copy (LoRA merged back), the positions trained and the wall-clock."""
    cfg = config or DPOConfig()
    if not pairs:
        raise ValueError("train_dpo needs at least one preference pair")
    if len({type(p) for p in pairs}) != 1:
        raise ValueError("pairs must be all TokenPair or all SequencePair, not a mix")
    t0 = time.perf_counter()
    torch.manual_seed(cfg.seed)
    with torch.no_grad():
        ref_c, ref_r = [], []
        for s in range(0, len(pairs), 64):
            c, r = _logps(model, pairs[s:s + 64])
            ref_c.append(c)
            ref_r.append(r)
        ref_c_t, ref_r_t = torch.cat(ref_c).detach(), torch.cat(ref_r).detach()
    policy = copy.deepcopy(model)
    if cfg.lora_r is not None:
        policy = _with_lora(policy, cfg)
    per_epoch = math.ceil(len(pairs) / cfg.batch_size)
    steps = cfg.epochs * per_epoch
    gen = torch.Generator().manual_seed(cfg.seed)
    order: list[int] = []

    def loss_of_step(step: int) -> torch.Tensor:
        if step % per_epoch == 0:  # a fresh shuffle at the start of every epoch
            order[:] = torch.randperm(len(pairs), generator=gen).tolist()
        s = (step % per_epoch) * cfg.batch_size
        idx = order[s:s + cfg.batch_size]
        pc, pr = _logps(policy, [pairs[i] for i in idx])
        return dpo_sigmoid_loss(pc, pr, ref_c_t[idx], ref_r_t[idx], cfg.beta).mean()

    # warmup over a fraction of the steps, then cosine to zero
    losses = fit(policy, loss_of_step, steps, lr=cfg.lr, optimizer="adamw", grad_clip=1.0,
                 schedule=warmup_cosine(steps, max(1, int(cfg.warmup * steps))), description="DPO").losses
    if cfg.lora_r is not None:
        policy = policy.merge_and_unload()
    policy.eval()
    return DPOResult(policy, len(pairs), positions_trained(pairs), time.perf_counter() - t0, losses)
