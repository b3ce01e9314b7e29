"""Wall-clock overhead of tree bookkeeping, synchronous vs speculative (asynchronous) expansion.

Bookkeeping = scoring and choosing candidates + adding nodes and back-propagating counts. It is
reported as a fraction of generation time (policy forward passes + environment steps). The
generation cost comes from a real HF model: an untrained ``tiny-100k`` Llama from
:mod:`divelab.lm.models` run on the step's prefix, its first ``n_actions`` logits read as the action
distribution. Speculative expansion (``batch`` > 1) scores once per ``batch`` expansions (bounded
staleness) and runs the continuations in lockstep, one batched forward pass per step.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from divelab.lm.models import build_model
from divelab.training.infotree.chain import DecisionChainEnv
from divelab.training.infotree.tree import RolloutTree, SamplerConfig, TreeStats, grow_tree


class TinyLMChainPolicy:
    """Action distribution from a tiny Llama's next-token logits on a length-(t+1) prefix."""

    def __init__(self, n_actions: int, seed: int = 0, model: str = "tiny-100k", vocab_size: int = 64):
        if vocab_size < n_actions:
            raise ValueError(f"vocab_size ({vocab_size}) must be >= n_actions ({n_actions})")
        self.model = build_model(model, vocab_size=vocab_size, seed=seed).eval()
        self.n_actions = n_actions
        self.vocab_size = vocab_size

    @torch.no_grad()
    def action_probs(self, observations: list[int]) -> np.ndarray:
        ts = [int(t) for t in observations]
        L = max(ts) + 1
        # left-pad with token 0; the attention mask hides the padding
        ids = torch.zeros((len(ts), L), dtype=torch.long)
        mask = torch.zeros((len(ts), L), dtype=torch.long)
        for i, t in enumerate(ts):
            ids[i, L - t - 1:] = (torch.arange(t + 1) * 7 + 3) % self.vocab_size
            mask[i, L - t - 1:] = 1
        logits = self.model(input_ids=ids, attention_mask=mask).logits[:, -1, : self.n_actions]
        return torch.softmax(logits.double(), dim=-1).numpy()


@dataclass
class OverheadResult:
    batch: int
    stats: TreeStats
    repeat: int = 0  # which of the interleaved repeats this timing belongs to

    @property
    def overhead(self) -> float:
        return self.stats.bookkeeping_overhead


def measure_overhead(batches: tuple[int, ...] = (1, 4), n_prompts: int = 6, d: int = 10, group_size: int = 8,
                     n_actions: int = 4, seed: int = 0, cfg: SamplerConfig | None = None,
                     repeats: int = 1) -> list[OverheadResult]:
    """Grow the same prompts' trees with each ``batch`` setting; sum timings over prompts.

    With ``repeats`` > 1 every setting is timed that many times, interleaved (the order of the
    settings alternates between repeats), so a drift in machine load hits every setting alike and
    the repeats give a timing an interval. Results are in measurement order, tagged with ``repeat``.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    torch.set_num_threads(1)
    cfg = cfg or SamplerConfig()
    policy = TinyLMChainPolicy(n_actions, seed=seed)
    out = []
    for r in range(repeats):
        for b in (batches if r % 2 == 0 else tuple(reversed(batches))):
            rng = np.random.default_rng(seed)
            total = TreeStats()
            for _ in range(n_prompts):
                tree = RolloutTree(DecisionChainEnv(d=d, n_actions=n_actions), cfg.uucb.success_threshold)
                grow_tree(tree, policy, group_size * d, replace(cfg, batch=b), rng)
                for k in ("env_steps", "policy_calls", "t_policy", "t_env", "t_select", "t_update"):
                    setattr(total, k, getattr(total, k) + getattr(tree.stats, k))
            out.append(OverheadResult(batch=b, stats=total, repeat=r))
    return out
