"""A small, readable training loop for any Hugging Face causal LM (its steps run in :func:`divelab.lm.fit`).

AdamW, linear warmup then cosine decay to ``min_lr_ratio * lr``, gradient clipping, periodic
validation loss, and checkpoints (safetensors weights + optimizer/scheduler/RNG state) that a
later call resumes from after an interrupt. Batches are drawn with a generator seeded by
``(seed, step)``, so a resumed run sees exactly the batches an uninterrupted run would have
seen and ends with identical weights.

Data comes from a :class:`BatchSource`: :class:`TokenStream` (random windows of one long token
stream, for pre-training) or :class:`SequenceSource` (whole sequences, right-padded, with an
optional loss mask, for SFT on prompts + completions).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from divelab.lm.fitting import fit, warmup_cosine

Batch = dict[str, torch.Tensor]  # input_ids, attention_mask, labels (-100 = not trained on)


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 200
    batch_size: int = 16
    seq_len: int = 256
    lr: float = 3e-3
    warmup: int = 20
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    eval_every: int = 50  # 0: only at the end
    eval_batches: int = 4
    ckpt_every: int = 0  # 0: no intermediate checkpoints (needs ckpt_dir otherwise)
    seed: int = 0
    # None: 1. Measured on this 2-core machine: 2 threads barely beat 1 even when idle, and are several
    # times slower when other processes compete for the cores (threads wait on each other)
    num_threads: int | None = None

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "seq_len", "eval_batches"):
            if getattr(self, name) < 1:
                raise ValueError(f"TrainConfig.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("warmup", "eval_every", "ckpt_every"):
            if getattr(self, name) < 0:
                raise ValueError(f"TrainConfig.{name} must be >= 0, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"TrainConfig.lr must be > 0, got {self.lr}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"TrainConfig.min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")

    def tokens_per_step(self) -> int:
        return self.batch_size * self.seq_len


@dataclass
class TrainResult:
    steps: int
    train_losses: list[float]  # one per step
    val_losses: list[tuple[int, float]]  # (step, loss)
    tokens_seen: int
    wall_time_s: float  # of this call (a resumed run counts only its own time)
    resumed_from: int | None = None
    config: dict = field(default_factory=dict)

    @property
    def final_val_loss(self) -> float | None:
        return self.val_losses[-1][1] if self.val_losses else None

    @property
    def final_val_ppl(self) -> float | None:
        v = self.final_val_loss
        return None if v is None else math.exp(v)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(final_val_loss=self.final_val_loss, final_val_ppl=self.final_val_ppl)
        return d


class BatchSource(Protocol):
    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator) -> Batch: ...

    def eval_batches(self, n: int, batch_size: int, seq_len: int) -> list[Batch]: ...


class TokenStream:
    """Random windows of ``seq_len`` tokens from one long stream (documents separated by eos)."""

    def __init__(self, tokens: np.ndarray | torch.Tensor | Sequence[int]):
        t = torch.as_tensor(np.asarray(tokens, dtype=np.int64))
        if t.ndim != 1:
            raise ValueError(f"TokenStream needs a 1-D token stream, got shape {tuple(t.shape)}")
        self.tokens = t

    def _check(self, seq_len: int) -> None:
        if len(self.tokens) < seq_len + 1:
            raise ValueError(f"token stream of {len(self.tokens)} tokens is shorter than seq_len={seq_len} + 1")

    def _windows(self, starts: torch.Tensor, seq_len: int) -> Batch:
        idx = starts[:, None] + torch.arange(seq_len)[None, :]
        ids = self.tokens[idx]
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}

    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator) -> Batch:
        self._check(seq_len)
        starts = torch.randint(0, len(self.tokens) - seq_len + 1, (batch_size,), generator=generator)
        return self._windows(starts, seq_len)

    def eval_batches(self, n: int, batch_size: int, seq_len: int) -> list[Batch]:
        """Evenly spaced windows covering the stream (deterministic, no randomness)."""
        self._check(seq_len)
        total = n * batch_size
        starts = torch.linspace(0, len(self.tokens) - seq_len, total).long()
        return [self._windows(starts[i * batch_size:(i + 1) * batch_size], seq_len) for i in range(n)]


class SequenceSource:
    """Whole sequences (e.g. prompt + completion), right-padded per batch and truncated to seq_len.

    ``loss_masks[i][j] = 0`` excludes token j of sequence i from the loss (e.g. the prompt).
    """

    def __init__(self, sequences: Sequence[Sequence[int]], pad_token_id: int,
                 loss_masks: Sequence[Sequence[int]] | None = None):
        if not sequences:
            raise ValueError("SequenceSource needs at least one sequence")
        if loss_masks is not None:
            if len(loss_masks) != len(sequences):
                raise ValueError(f"loss_masks has {len(loss_masks)} entries for {len(sequences)} sequences")
            for i, (s, m) in enumerate(zip(sequences, loss_masks, strict=True)):
                if len(s) != len(m):
                    raise ValueError(f"sequence {i} has {len(s)} tokens but its loss mask has {len(m)}")
        self.sequences = [list(map(int, s)) for s in sequences]
        self.loss_masks = None if loss_masks is None else [list(map(int, m)) for m in loss_masks]
        self.pad_token_id = int(pad_token_id)

    def _collate(self, idx: Sequence[int], seq_len: int) -> Batch:
        seqs = [self.sequences[i][:seq_len] for i in idx]
        width = max(1, max(len(s) for s in seqs))
        ids = torch.full((len(seqs), width), self.pad_token_id, dtype=torch.long)
        att = torch.zeros((len(seqs), width), dtype=torch.long)
        labels = torch.full((len(seqs), width), -100, dtype=torch.long)
        for r, (i, s) in enumerate(zip(idx, seqs, strict=True)):
            n = len(s)
            ids[r, :n] = torch.tensor(s, dtype=torch.long)
            att[r, :n] = 1
            lab = torch.tensor(s, dtype=torch.long)
            if self.loss_masks is not None:
                lab[torch.tensor(self.loss_masks[i][:n], dtype=torch.bool).logical_not()] = -100
            labels[r, :n] = lab
        return {"input_ids": ids, "attention_mask": att, "labels": labels}

    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator) -> Batch:
        idx = torch.randint(0, len(self.sequences), (batch_size,), generator=generator).tolist()
        return self._collate(idx, seq_len)

    def eval_batches(self, n: int, batch_size: int, seq_len: int) -> list[Batch]:
        order = list(range(len(self.sequences)))[: n * batch_size]
        return [self._collate(order[i:i + batch_size], seq_len) for i in range(0, len(order), batch_size)]


def as_source(data: BatchSource | np.ndarray | torch.Tensor | Sequence[int]) -> BatchSource:
    if hasattr(data, "sample") and hasattr(data, "eval_batches"):
        return data  # type: ignore[return-value]
    return TokenStream(data)  # type: ignore[arg-type]


def lr_lambda(config: TrainConfig) -> Callable[[int], float]:
    """Multiplier of ``lr`` at a step: linear warmup, then cosine to ``min_lr_ratio``."""
    return warmup_cosine(config.steps, config.warmup, config.min_lr_ratio)


def _step_generator(seed: int, step: int) -> torch.Generator:
    # seeded per step: a resumed run draws the same batches as an uninterrupted one
    return torch.Generator().manual_seed(seed * 1_000_003 + step)


@torch.no_grad()
def evaluate(model: torch.nn.Module, batches: list[Batch]) -> float:
    """Token-weighted mean cross-entropy (nats/token) over ``batches``."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for b in batches:
        out = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"])
        logits = out.logits[:, :-1].float()
        labels = b["labels"][:, 1:]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1),
                                                 ignore_index=-100, reduction="sum")
        total += loss.item()
        count += int((labels != -100).sum())
    model.train(was_training)
    return total / max(count, 1)


def _resume_key(config: TrainConfig) -> dict:
    d = asdict(config)
    d.pop("num_threads")  # speed only
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def train(model: torch.nn.Module, train_data: BatchSource | np.ndarray | torch.Tensor,
          val_data: BatchSource | np.ndarray | torch.Tensor | None = None,
          config: TrainConfig | None = None, *, ckpt_dir: str | Path | None = None,
          description: str = "training", callback: Callable[[int, float], None] | None = None) -> TrainResult:
    """Train ``model`` (any HF causal LM) in place and return the loss curves.

    With ``ckpt_dir``, a checkpoint is written every ``config.ckpt_every`` steps and at the end,
    and a call that finds one resumes from it (same seed → same final weights as an
    uninterrupted run). ``callback(step, loss)`` is called after every step.

    >>> from divelab.lm.models import build_model
    >>> m = build_model("tiny-100k", vocab_size=64)
    >>> r = train(m, np.arange(5000) % 64, config=TrainConfig(steps=3, batch_size=2, seq_len=16, warmup=1))
    >>> len(r.train_losses)
    3
    """
    config = config or TrainConfig()
    src = as_source(train_data)
    val_src = as_source(val_data) if val_data is not None else None
    ckpt_path = Path(ckpt_dir) if ckpt_dir is not None else None
    return _train(model, src, val_src, config, ckpt_path, description, callback)


def _train(model: torch.nn.Module, src: BatchSource, val_src: BatchSource | None, config: TrainConfig,
           ckpt_path: Path | None, description: str,
           callback: Callable[[int, float], None] | None) -> TrainResult:
    state: dict = {"val_losses": [], "tokens_seen": 0}  # checkpointed beside the weights
    eval_set = val_src.eval_batches(config.eval_batches, config.batch_size, config.seq_len) if val_src else None

    def loss_of_step(step: int) -> torch.Tensor:
        batch = src.sample(config.batch_size, config.seq_len, _step_generator(config.seed, step))
        state["tokens_seen"] += int(batch["attention_mask"].sum())
        return model(**batch).loss

    def after_step(done: int, loss: float | None) -> None:
        if eval_set is not None and (done == config.steps or (config.eval_every and done % config.eval_every == 0)):
            state["val_losses"].append((done, evaluate(model, eval_set)))
            model.train()
        if callback is not None:
            callback(done, float(loss))

    def on_resume(stored: dict) -> None:
        state["tokens_seen"] = int(stored["tokens_seen"])
        state["val_losses"] = [(int(s), float(v)) for s, v in stored["val_losses"]]

    def info(done: int, loss: float | None) -> str:
        val = state["val_losses"]
        return f"loss {loss:.3f}" + (f"  val {val[-1][1]:.3f}" if val else "")

    result = fit(model, loss_of_step, config.steps, lr=config.lr, optimizer="adamw",
                 weight_decay=config.weight_decay, betas=config.betas, foreach=False, schedule=lr_lambda(config),
                 grad_clip=config.grad_clip if config.grad_clip > 0 else None, seed=config.seed,
                 num_threads=config.num_threads or 1, description=description, info=info, after_step=after_step, ckpt_dir=ckpt_path,
                 ckpt_every=config.ckpt_every, ckpt_key=_resume_key(config), ckpt_state=lambda: dict(state),
                 on_resume=on_resume)
    return TrainResult(steps=config.steps, train_losses=[float(x) for x in result.losses],
                       val_losses=state["val_losses"], tokens_seen=state["tokens_seen"],
                       wall_time_s=result.wall_time_s, resumed_from=result.resumed_from, config=asdict(config))
