"""Training a drafter against a frozen target with the paper's loss (DSpark §2.5).

L = 0.1·CE(draft, data token) + 0.9·‖p_d − p_t‖₁ + 1.0·BCE(c, 1 − ½‖p_d − p_t‖₁), each summed
over the block with position weights w_k = exp(−(k−1)/decay) (paper: decay = γ; the released
configs use 4). The target runs forward-only on each batch of corpus windows; random anchors are
sampled per window; the drafter sees the fused target features of the ``window`` positions
before the anchor, the anchor token, and (teacher-forced) the ground-truth previous tokens.
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
                tokens: torch.Tensor, weights: torch.Tensor, cfg: DrafterTrainConfig
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (loss, per-position mean 1 − TV). Shapes: logits (N, γ, V), conf (N, γ), tokens (N, γ)."""
    logp_d = F.log_softmax(draft_logits.float(), dim=-1)
    p_d = logp_d.exp()
    p_t = F.softmax(target_logits.float(), dim=-1)
    ce = -logp_d.gather(-1, tokens[..., None]).squeeze(-1)
    l1 = (p_d - p_t).abs().sum(-1)
    soft = (1.0 - 0.5 * l1).detach().clamp(0.0, 1.0)  # analytic acceptance probability
    bce = F.binary_cross_entropy_with_logits(conf_logits.float(), soft, reduction="none")
    w = weights.to(ce.device) / weights.sum()
    per = cfg.ce_weight * ce + cfg.l1_weight * l1 + cfg.conf_weight * bce
    return (per * w).sum(-1).mean(), soft.mean(0)


def sample_windows(tokens: np.ndarray, batch: int, seq_len: int, rng: np.random.Generator) -> torch.Tensor:
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


def train_drafter(target: torch.nn.Module, drafter: Drafter, tokens: np.ndarray,
                  config: DrafterTrainConfig | None = None, description: str = "drafter") -> TrainLog:
    """Train ``drafter`` (in place) on a token stream; the target stays frozen."""
    cfg = config or DrafterTrainConfig()
    if cfg.seq_len < drafter.config.gamma + 3:
        raise ValueError(f"seq_len {cfg.seq_len} too short for block length γ={drafter.config.gamma}")
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    target.eval()
    for p in target.parameters():
        p.requires_grad_(False)
    drafter.train()
    params = [p for p in drafter.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)

    def lr_at(step: int) -> float:
        if step < cfg.warmup:
            return (step + 1) / cfg.warmup
        prog = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * prog))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    weights = position_weights(drafter.config.gamma, cfg.decay)
    losses: list[float] = []
    proxies: list[torch.Tensor] = []
    t0 = time.perf_counter()
    with make_progress() as prog:
        task = prog.add_task(f"train {description}", total=cfg.steps, info="")
        for _ in range(cfg.steps):
            seqs = sample_windows(tokens, cfg.batch_size, cfg.seq_len, rng)
            with torch.no_grad():
                out = target(seqs, output_hidden_states=True)
            feats = drafter.fuse_features(out.hidden_states)
            ctx, mask, anchor, tgt_tok, tgt_logits = block_batch(drafter, feats, seqs, out.logits,
                                                                 cfg.anchors_per_seq, gen)
            d_logits, c_logits = drafter.forward_train(ctx, mask, anchor, tgt_tok)
            loss, proxy = dspark_loss(d_logits, c_logits, tgt_logits, tgt_tok, weights, cfg)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
            proxies.append(proxy.detach())
            prog.update(task, advance=1, info=f"loss {losses[-1]:.3f}")
    drafter.eval()
    tail = torch.stack(proxies[-max(1, cfg.steps // 5):]).mean(0)
    return TrainLog(losses, tail.tolist(), time.perf_counter() - t0)
