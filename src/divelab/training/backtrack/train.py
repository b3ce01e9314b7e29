"""Training the four policies from one base: random-walk base, SFT, RL (outcome + length penalty),
and distillation of RL traces into the base. Every trained model is cached by config hash.

- **base**: the LM imitates a scripted explorer (:class:`~divelab.training.backtrack.policy.Explorer`) that
  mostly restarts at dead ends, with every move in its support.
- **SFT**: cross-entropy on golden shortest paths only (the correct exit is random per maze, so the
  best imitation at a junction is a uniform guess; dead ends never appear).
- **RL**: a compact GRPO-style loop on the policy's own attempts: G walks per maze, reward
  ``1[goal] - alpha * steps / shortest_path``, advantage = reward minus the group mean over the
  group std, loss = -advantage x log-prob summed over the walk's moves.
- **distilled**: cross-entropy of the *base* on the RL policy's successful walks (recoveries kept).
- **sham-reward RL** (``RLConfig(sham_reward=True)``), the negative control: the same loop with each update's
  rewards permuted across its walks, so nothing ties a walk's advantage to what it did.

The share of training signal on backward-facing states is measured on the very batches each
trainer learns from: the share of gradient-bearing moves, and the share of gradient norm
(||g_backward|| / (||g_backward|| + ||g_forward||), each the gradient of the loss restricted to
those moves).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from divelab.cache import atomic_dir, entry_path, stable_hash
from divelab.envs.maze import MazeSpec
from divelab.lm import fitting
from divelab.lm.models import build_model
from divelab.rl.pg_loss import policy_gradient_loss
from divelab.threads import torch_threads
from divelab.training.backtrack.policy import (
    DEFAULT_WINDOW,
    VOCAB,
    Episode,
    Explorer,
    action_logprobs,
    action_logprobs_and_entropy,
    build_action_batch,
    golden_episode,
    legal_log_probs,
    rollout,
    sample_mazes,
)

CACHE_KIND = "backtrack"
CACHE_VERSION = 1


@dataclass(frozen=True)
class ModelSpec:
    name: str = "tiny-100k"
    window: int = DEFAULT_WINDOW
    init_seed: int = 0


@dataclass(frozen=True)
class SFTConfig:
    """Supervised fine-tuning of a walker model: the base on exploratory traces, the SFT child on golden paths."""

    steps: int = 150
    """optimiser steps (AdamW)"""
    batch: int = 32
    """episodes per step"""
    lr: float = 3e-3
    """learning rate"""
    walk_cap: int = 48
    """base only: length of each exploratory trace"""
    back_prob: float = 0.15
    """base only: the scripted explorer's chance of backing out of a dead end (else it restarts)"""
    noise: float = 0.05
    """base only: the explorer's chance of a uniformly random move"""


@dataclass(frozen=True)
class RLConfig:
    """RL with verifiable rewards from the base: group-relative advantages on the model's own walks."""

    updates: int = 120
    """policy-gradient updates"""
    mazes: int = 8
    """mazes per update"""
    group: int = 8
    """walks per maze (the GRPO group)"""
    cap: int = 60
    """steps per training walk"""
    alpha: float = 0.1
    """length penalty: reward = 1[goal] - alpha * steps / shortest path"""
    lr: float = 1e-3
    """learning rate"""
    entropy: float = 0.0
    """entropy bonus per move"""
    kl: float = 0.0
    """KL(pi || base) penalty per move, exact over the legal moves (as in GRPO)"""
    grad_every: int = 10
    """measure the gradient-signal share of backward-facing states every this many updates (the token share
    on the others)"""
    sham_reward: bool = False
    """negative control: each update's rewards are permuted across all its walks before the group advantages,
    so a walk's advantage says nothing about what it did (same walks, updates and optimiser otherwise)"""


@dataclass(frozen=True)
class DistillConfig:
    """Distillation: SFT of the base on the RL policy's successful walks."""

    walks: int = 256
    """RL walks sampled; the successful ones are the data"""
    sft: SFTConfig = SFTConfig()
    """the fine-tune on them"""


@dataclass
class Trained:
    model: torch.nn.Module
    meta: dict[str, Any]


def _specs_key(specs: list[MazeSpec]) -> list[dict[str, int]]:
    return [asdict(s) for s in specs]


def _cached(key_obj: dict[str, Any], model_spec: ModelSpec, train_fn: Callable[[], Trained]) -> Trained:
    key = stable_hash({"v": CACHE_VERSION, **key_obj})
    path = entry_path(CACHE_KIND, key)
    if (path / "model.safetensors").exists() and (path / "meta.json").exists():
        model = build_model(model_spec.name, vocab_size=len(VOCAB), seed=model_spec.init_seed)
        model.load_state_dict(load_file(str(path / "model.safetensors")), strict=False)
        model.eval()
        meta = json.loads((path / "meta.json").read_text())
        meta["cached"] = True
        return Trained(model, meta)
    with torch_threads(1):
        out = train_fn()
    with atomic_dir(path) as tmp:
        # tied embeddings share storage; save a contiguous copy of every tensor
        state = {k: v.detach().clone().contiguous() for k, v in out.model.state_dict().items()}
        save_file(state, str(tmp / "model.safetensors"))
        (tmp / "meta.json").write_text(json.dumps({**out.meta, "key": key_obj}, default=str))
    out.meta["cached"] = False
    out.meta["key"] = key_obj
    return out


def _clone(model: torch.nn.Module, model_spec: ModelSpec) -> torch.nn.Module:
    child = build_model(model_spec.name, vocab_size=len(VOCAB), seed=model_spec.init_seed)
    child.load_state_dict(model.state_dict())
    return child


def signal_share(model: torch.nn.Module, episodes: list[Episode], weights: torch.Tensor, window: int) -> dict:
    """Share of the training signal on backward-facing states for loss = -sum(w * log pi) / n.

    Returns the share of gradient-bearing moves (w != 0) that sit on backward-facing states, and
    the gradient-norm share ||g_b|| / (||g_b|| + ||g_f||)."""
    batch = build_action_batch(episodes)
    back = torch.tensor([b for ep in episodes for b in ep.backward_flags()], dtype=torch.bool)
    bearing = weights != 0
    n_bearing = int(bearing.sum())
    token_share = float((bearing & back).sum()) / max(n_bearing, 1)
    norms = []
    for part in (back, ~back):
        model.zero_grad(set_to_none=True)
        logp = action_logprobs(model, batch, window)
        loss = -(weights * logp * part.float()).sum() / max(len(weights), 1)
        loss.backward()
        sq = sum(float((p.grad.float() ** 2).sum()) for p in model.parameters() if p.grad is not None)
        norms.append(sq**0.5)
    model.zero_grad(set_to_none=True)
    gb, gf = norms
    return {
        "token_share": token_share,
        "grad_share": gb / (gb + gf) if gb + gf > 0 else 0.0,
        "grad_norm_backward": gb,
        "grad_norm_forward": gf,
        "moves": len(weights),
        "backward_moves": int(back.sum()),
    }


def _sft(
    model: torch.nn.Module,
    source: Callable[[np.random.Generator, int], list[Episode]],
    cfg: SFTConfig,
    seed: int,
    window: int,
    label: str,
) -> dict[str, Any]:
    """Cross-entropy on every move of the episodes ``source`` yields (fresh episodes each step)."""
    rng = np.random.default_rng(seed)
    shares: list[dict] = []

    def loss_of_step(step: int) -> torch.Tensor:
        eps = source(rng, cfg.batch)
        if step == 0:
            shares.append(signal_share(model, eps, torch.ones(sum(e.n_actions for e in eps)), window))
        return -action_logprobs(model, build_action_batch(eps), window).mean()

    losses = fitting.fit(model, loss_of_step, cfg.steps, lr=cfg.lr, optimizer="adamw", grad_clip=1.0, seed=seed,
                 description=f"backtrack: {label}").losses
    return {"loss_first": losses[0], "loss_last": float(np.mean(losses[-10:])), "signal": shares}


def train_base(specs: list[MazeSpec], ms: ModelSpec, cfg: SFTConfig, seed: int) -> Trained:
    """The base: imitates the scripted :class:`Explorer` (mostly restarts at dead ends)."""

    def source(rng: np.random.Generator, n: int) -> list[Episode]:
        explorer = Explorer(back_prob=cfg.back_prob, noise=cfg.noise)
        return rollout(explorer, sample_mazes(specs, n, rng), cap=cfg.walk_cap, seed=int(rng.integers(2**31)))

    def fit() -> Trained:
        model = build_model(ms.name, vocab_size=len(VOCAB), seed=ms.init_seed + seed)
        meta = _sft(model, source, cfg, seed, ms.window, "base (exploratory traces)")
        return Trained(model, meta)

    key = {"kind": "base", "specs": _specs_key(specs), "model": asdict(ms), "cfg": asdict(cfg), "seed": seed}
    return _cached(key, ms, fit)


def train_sft(base: Trained, specs: list[MazeSpec], ms: ModelSpec, cfg: SFTConfig, seed: int) -> Trained:
    """SFT child: golden shortest paths only."""

    def source(rng: np.random.Generator, n: int) -> list[Episode]:
        return [golden_episode(m) for m in sample_mazes(specs, n, rng)]

    def fit() -> Trained:
        model = _clone(base.model, ms)
        meta = _sft(model, source, cfg, seed + 1, ms.window, "SFT (golden paths)")
        return Trained(model, meta)

    key = {"kind": "sft", "base": stable_hash(base.meta["key"]),
           "specs": _specs_key(specs), "cfg": asdict(cfg), "seed": seed}
    return _cached(key, ms, fit)


def train_rl(base: Trained, specs: list[MazeSpec], ms: ModelSpec, cfg: RLConfig, seed: int) -> Trained:
    """RL child: GRPO-style policy gradient on its own walks, outcome reward with a length penalty."""

    def fit() -> Trained:
        model = _clone(base.model, ms)
        rng = np.random.default_rng(seed + 2)
        sham_rng = np.random.default_rng(seed + 5)
        history: list[dict[str, float]] = []

        def loss_of_step(u: int) -> torch.Tensor:
            mazes = sample_mazes(specs, cfg.mazes, rng)
            group_mazes = [m for m in mazes for _ in range(cfg.group)]
            model.eval()
            eps = rollout(model, group_mazes, cap=cfg.cap, seed=int(rng.integers(2**31)), window=ms.window)
            r = np.array([float(e.success) - cfg.alpha * e.steps / e.maze.spec.shortest_path for e in eps])
            if cfg.sham_reward:  # its own generator: the same mazes and rollout seeds as the real run
                r = sham_rng.permutation(r)
            r = r.reshape(cfg.mazes, cfg.group)
            adv = (r - r.mean(1, keepdims=True)) / (r.std(1, keepdims=True) + 1e-6)
            w = torch.tensor(
                [float(a) for e, a in zip(eps, adv.reshape(-1), strict=True) for _ in range(e.n_actions)]
            )
            row: dict[str, float] = {
                "update": u,
                "success": float(np.mean([e.success for e in eps])),
                "steps": float(np.mean([e.steps for e in eps])),
            }
            model.train()
            if u % cfg.grad_every == 0:
                row.update({f"signal_{k}": v for k, v in signal_share(model, eps, w, ms.window).items()})
            else:
                back = torch.tensor([b for e in eps for b in e.backward_flags()], dtype=torch.bool)
                row["signal_token_share"] = float(((w != 0) & back).sum()) / max(int((w != 0).sum()), 1)
            batch = build_action_batch(eps)
            if cfg.kl > 0:
                logp_all = legal_log_probs(model, batch, ms.window)
                logp = logp_all.gather(1, batch.target[:, None]).squeeze(1)
                with torch.no_grad():
                    ref = legal_log_probs(base.model, batch, ms.window)
                p = logp_all.exp()
                kl = (p * torch.where(p > 0, logp_all - ref, torch.zeros_like(p))).sum(-1).mean()
                ent = -(p * torch.where(p > 0, logp_all, torch.zeros_like(p))).sum(-1)
                row["kl"] = float(kl)
            else:
                logp, ent = action_logprobs_and_entropy(model, batch, ms.window)
                kl = torch.zeros(())
            history.append(row)
            pg = policy_gradient_loss(logp, w, reduction="sum") / len(w)
            return pg - cfg.entropy * ent.mean() + cfg.kl * kl

        def info(done: int, loss: float | None) -> str:
            return f"success {history[-1]['success']:.2f} steps {history[-1]['steps']:.1f}"

        fitting.fit(model, loss_of_step, cfg.updates, lr=cfg.lr, optimizer="adamw", grad_clip=1.0, seed=seed + 2,
            description="backtrack: RL (own attempts)", info=info)
        return Trained(model, {"history": history})

    key = {"kind": "rl", "base": stable_hash(base.meta["key"]), "specs": _specs_key(specs),
           "cfg": asdict(cfg), "seed": seed}
    return _cached(key, ms, fit)


def train_distilled(
    base: Trained, rl: Trained, specs: list[MazeSpec], ms: ModelSpec, cfg: DistillConfig, rl_cap: int, seed: int
) -> Trained:
    """Distilled child: SFT of the base on the RL policy's successful walks."""

    def fit() -> Trained:
        rng = np.random.default_rng(seed + 3)
        walks = rollout(rl.model, sample_mazes(specs, cfg.walks, rng), cap=rl_cap, seed=seed + 3, window=ms.window)
        data = [e for e in walks if e.success]
        if not data:
            raise RuntimeError("the RL policy solved none of the distillation mazes; train RL longer")

        def source(r: np.random.Generator, n: int) -> list[Episode]:
            return [data[int(i)] for i in r.integers(0, len(data), size=n)]

        model = _clone(base.model, ms)
        meta = _sft(model, source, cfg.sft, seed + 4, ms.window, "distillation (RL traces)")
        meta["traces"] = len(data)
        meta["trace_success"] = len(data) / len(walks)
        return Trained(model, meta)

    key = {"kind": "distill", "rl": stable_hash(rl.meta["key"]), "base": stable_hash(base.meta["key"]),
           "specs": _specs_key(specs), "cfg": asdict(cfg), "rl_cap": rl_cap, "seed": seed}
    return _cached(key, ms, fit)
