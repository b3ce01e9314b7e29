"""Training a drafter against a frozen target with the paper's loss (DSpark §2.5).

L = 0.1·CE(draft, data token) + 0.9·‖p_d − p_t‖₁ + 1.0·BCE(c, 1 − ½‖p_d − p_t‖₁), each summed
over the block with position weights w_k = exp(−(k−1)/decay) (paper: decay = γ; the released
configs use 4). The target runs forward-only on each batch of windows; random anchors are
sampled per window; the drafter sees the fused target features of the ``window`` positions
before the anchor, the anchor token, and (teacher-forced) the ground-truth previous tokens.

Two efficiencies that matter on a CPU: several drafters can be trained in one loop sharing each
batch's target forward (:func:`train_drafters`), and the windows can be *target-regenerated*
(:func:`regenerate`: continuations sampled from the target itself from corpus prompts, as the
paper's training data is the target's own responses) so the drafter learns the distribution it
will be verified against.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F

from divelab.progress import make_progress
from divelab.serving.dspark.drafter import Drafter


@dataclass
class DrafterTrainConfig:
    steps: int = 200
    batch_size: int = 4
    seq_len: int = 96
    anchors_per_seq: int = 8
    lr: float = 3e-3
    warmup: int = 20
    ce_weight: float = 0.1
    l1_weight: float = 0.9
    conf_weight: float = 1.0
    decay: float | None = None  # None -> γ (paper); 4.0 = released configs
    seed: int = 0
    regenerate: int = 0  # > 0: train on this many target-sampled sequences instead of corpus windows
    regen_temperature: float = 1.0

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1 or self.anchors_per_seq < 1:
            raise ValueError("steps, batch_size and anchors_per_seq must be >= 1")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class TrainLog:
    losses: list[float]
    accept_proxy: list[float]  # mean 1 − TV per block position over the last steps
    seconds: float


def position_weights(gamma: int, decay: float | None) -> torch.Tensor:
    d = float(gamma if decay is None else decay)
    return torch.exp(-torch.arange(gamma, dtype=torch.float32) / d)


def dspark_loss(draft_logits: torch.Tensor, conf_logits: torch.Tensor, target_logits: torch.Tensor,
                tokens: torch.Tensor, weights: torch.Tensor, cfg: DrafterTrainConfig,
                drafter: Drafter | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (loss, per-position mean 1 − TV). Shapes: draft logits (N, γ, K) over the draft
    vocabulary (K = V unless ``drafter`` has a reduced one), target logits (N, γ, V), conf (N, γ),
    tokens (N, γ). With a reduced vocabulary the draft puts no mass outside it, so the L1 distance
    gains the target's mass there and the CE term skips data tokens outside it."""
    logp_d = F.log_softmax(draft_logits.float(), dim=-1)
    p_d = logp_d.exp()
    p_t = F.softmax(target_logits.float(), dim=-1)
    if drafter is not None and drafter.reduced:
        p_t_in = p_t.index_select(-1, drafter.vocab_ids)
        idx, inside = drafter.to_draft_index(tokens)
        ce = -logp_d.gather(-1, idx[..., None]).squeeze(-1) * inside
        l1 = (p_d - p_t_in).abs().sum(-1) + (1.0 - p_t_in.sum(-1)).clamp(min=0.0)
    else:
        ce = -logp_d.gather(-1, tokens[..., None]).squeeze(-1)
        l1 = (p_d - p_t).abs().sum(-1)
    return combine_dspark_terms(ce, l1, conf_logits, weights, cfg)


def combine_dspark_terms(ce: torch.Tensor, l1: torch.Tensor, conf_logits: torch.Tensor, weights: torch.Tensor,
                         cfg: DrafterTrainConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The DSpark loss from its per-slot terms (N, γ): CE, the L1 distance to the target, and the BCE of the
    confidence against the analytic acceptance probability 1 − ½·L1; position-weighted, averaged over
    blocks. Returns (loss, per-position mean acceptance probability)."""
    soft = (1.0 - 0.5 * l1).detach().clamp(0.0, 1.0)  # analytic acceptance probability
    bce = F.binary_cross_entropy_with_logits(conf_logits.float(), soft, reduction="none")
    w = weights.to(ce.device) / weights.sum()
    per = cfg.ce_weight * ce + cfg.l1_weight * l1 + cfg.conf_weight * bce
    return (per * w).sum(-1).mean(), soft.mean(0)


def sample_windows(tokens: np.ndarray, batch: int, seq_len: int, rng: np.random.Generator) -> torch.Tensor:
    """``batch`` random windows of ``seq_len`` tokens from a stream (1-D) or from rows of a
    (N, L) array of separate sequences (windows never cross a row boundary)."""
    if tokens.ndim == 2:
        if tokens.shape[1] < seq_len:
            raise ValueError(f"regenerated sequences of {tokens.shape[1]} tokens shorter than seq_len {seq_len}")
        rows = rng.integers(0, tokens.shape[0], size=batch)
        offs = rng.integers(0, tokens.shape[1] - seq_len + 1, size=batch)
        return torch.from_numpy(np.stack([tokens[r, o: o + seq_len] for r, o in zip(rows, offs, strict=True)])
                                .astype(np.int64))
    if len(tokens) <= seq_len + 1:
        raise ValueError(f"training corpus too short: {len(tokens)} tokens for seq_len {seq_len}")
    starts = rng.integers(0, len(tokens) - seq_len - 1, size=batch)
    return torch.from_numpy(np.stack([tokens[s: s + seq_len] for s in starts]).astype(np.int64))


def block_batch(drafter: Drafter, feats: torch.Tensor, seqs: torch.Tensor, target_logits: torch.Tensor,
                anchors_per_seq: int, gen: torch.Generator) -> tuple:
    """Gather (ctx, ctx_mask, anchor, block targets, aligned target logits) for random anchors."""
    s, length = seqs.shape
    g, w = drafter.config.gamma, drafter.config.window
    lo, hi = 1, length - g - 1
    a = torch.randint(lo, hi + 1, (s, anchors_per_seq), generator=gen)
    row = torch.arange(s)[:, None].expand_as(a).reshape(-1)
    a = a.reshape(-1)
    cidx = a[:, None] - w + torch.arange(w)[None, :]
    mask = cidx >= 0
    ctx = feats[row[:, None], cidx.clamp(min=0)]
    bidx = a[:, None] + torch.arange(g)[None, :]
    return ctx, mask, seqs[row, a], seqs[row[:, None], bidx + 1], target_logits[row[:, None], bidx]


@torch.no_grad()
def regenerate(target: torch.nn.Module, tokens: np.ndarray, n_seqs: int, length: int, prompt_len: int = 16,
               temperature: float = 1.0, seed: int = 0, batch: int = 64) -> np.ndarray:
    """Target-regenerated training data: ``n_seqs`` rows of ``prompt_len`` corpus tokens followed
    by ``length − prompt_len`` tokens sampled from the target (KV-cached, batched). Returns (N, length)."""
    from transformers import DynamicCache

    if length <= prompt_len:
        raise ValueError(f"regenerated length {length} must exceed prompt_len {prompt_len}")
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for lo in range(0, n_seqs, batch):
        nb = min(batch, n_seqs - lo)
        seqs = sample_windows(tokens, nb, prompt_len, rng)
        cache = DynamicCache(config=target.config)
        logits = target(seqs, cache=cache, use_cache=True).logits[:, -1]
        out = [seqs]
        for _ in range(length - prompt_len):
            if temperature <= 0:
                nxt = logits.argmax(-1, keepdim=True)
            else:
                nxt = torch.multinomial(torch.softmax(logits.float() / temperature, -1), 1, generator=gen)
            out.append(nxt)
            logits = target(nxt, cache=cache, use_cache=True).logits[:, -1]
        rows.append(torch.cat(out, 1))
    return torch.cat(rows).numpy()


def train_drafter(target: torch.nn.Module, drafter: Drafter, tokens: np.ndarray,
                  config: DrafterTrainConfig | None = None, description: str = "drafter") -> TrainLog:
    """Train ``drafter`` (in place) on a token stream; the target stays frozen."""
    return train_drafters(target, [drafter], tokens, config, description)[0]


def train_drafters(target: torch.nn.Module, drafters: list[Drafter], tokens: np.ndarray,
                   config: DrafterTrainConfig | None = None, description: str = "drafters") -> list[TrainLog]:
    """Train several drafters (in place) in one loop: each batch's target forward is shared, each
    drafter has its own optimiser and anchors. With ``config.regenerate > 0`` the windows come from
    target-sampled sequences (:func:`regenerate`) instead of the corpus stream ``tokens``."""
    cfg = config or DrafterTrainConfig()
    if not drafters:
        raise ValueError("no drafters to train")
    for d in drafters:
        if cfg.seq_len < d.config.gamma + 3:
            raise ValueError(f"seq_len {cfg.seq_len} too short for block length γ={d.config.gamma}")
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    target.eval()
    for p in target.parameters():
        p.requires_grad_(False)
    t0 = time.perf_counter()
    if cfg.regenerate > 0:
        tokens = regenerate(target, tokens, cfg.regenerate, cfg.seq_len + 16, temperature=cfg.regen_temperature,
                            seed=cfg.seed)

    def lr_at(step: int) -> float:
        if step < cfg.warmup:
            return (step + 1) / cfg.warmup
        prog = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * prog))

    opts, scheds, gens, params = [], [], [], []
    for i, d in enumerate(drafters):
        d.train()
        ps = [p for p in d.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(ps, lr=cfg.lr, weight_decay=0.0)
        opts.append(opt)
        scheds.append(torch.optim.lr_scheduler.LambdaLR(opt, lr_at))
        gens.append(torch.Generator().manual_seed(cfg.seed + 1000 * i))
        params.append(ps)
    weights = [position_weights(d.config.gamma, cfg.decay) for d in drafters]
    losses: list[list[float]] = [[] for _ in drafters]
    proxies: list[list[torch.Tensor]] = [[] for _ in drafters]
    with make_progress() as prog:
        task = prog.add_task(f"train {description}", total=cfg.steps, info="")
        for _ in range(cfg.steps):
            seqs = sample_windows(tokens, cfg.batch_size, cfg.seq_len, rng)
            with torch.no_grad():
                out = target(seqs, output_hidden_states=True)
            for i, d in enumerate(drafters):
                feats = d.fuse_features(out.hidden_states)
                ctx, mask, anchor, tgt_tok, tgt_logits = block_batch(d, feats, seqs, out.logits,
                                                                     cfg.anchors_per_seq, gens[i])
                d_logits, c_logits = d.forward_train(ctx, mask, anchor, tgt_tok)
                loss, proxy = dspark_loss(d_logits, c_logits, tgt_logits, tgt_tok, weights[i], cfg, d)
                opts[i].zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params[i], 1.0)
                opts[i].step()
                scheds[i].step()
                losses[i].append(float(loss.detach()))
                proxies[i].append(proxy.detach())
            prog.update(task, advance=1, info=f"loss {losses[0][-1]:.3f}")
    logs = []
    for i, d in enumerate(drafters):
        d.eval()
        tail = torch.stack(proxies[i][-max(1, cfg.steps // 5):]).mean(0)
        logs.append(TrainLog(losses[i], tail.tolist(), time.perf_counter() - t0))
    return logs
