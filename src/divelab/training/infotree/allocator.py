"""Adaptive budget allocation across prompts: spend the pooled budget where a tree is still uniform.

Every prompt first grows its tree with a base share of its budget. The rest of the batch's budget
(plus an optional small extra, the paper's "under 5% overhead") goes into one pool, which is spent by
the same greedy rule over the *union* of all trees: the next continuation goes to the (prompt, node)
with the best UUCB score per step, where the root group ("this prompt yields any gradient") carries a
large weight. A sum of submodular functions on disjoint ground sets is submodular, so this is still
greedy on one monotone submodular objective. A prompt whose tree is already mixed has lost its root
term, so the pool flows to prompts about to come out uniform.

The paper's allocator (ABA) is *learned*; ours is this closed-form greedy, with no trained predictor.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from divelab.training.infotree.tree import (
    BranchableEnv,
    Policy,
    RolloutTree,
    SamplerConfig,
    UUCBConfig,
    grow_tree,
)


@dataclass(frozen=True)
class AllocatorConfig:
    base_fraction: float = 0.6  # share of each prompt's budget spent on its own tree first
    extra_fraction: float = 0.04  # extra budget added to the pool, as a fraction of the batch budget
    root_weight: float = 8.0  # weight of the per-prompt (anti-collapse) term while allocating the pool
    sampler: SamplerConfig = field(default_factory=SamplerConfig)

    def __post_init__(self) -> None:
        if not 0.0 < self.base_fraction <= 1.0:
            raise ValueError(f"base_fraction must be in (0, 1]; got {self.base_fraction}")
        if self.extra_fraction < 0:
            raise ValueError(f"extra_fraction must be >= 0; got {self.extra_fraction}")
        if self.root_weight < 0:
            raise ValueError(f"root_weight must be >= 0; got {self.root_weight}")


def allocate_and_sample(envs: Sequence[BranchableEnv], policy: Policy, budgets: Sequence[int],
                        cfg: AllocatorConfig | None = None,
                        rng: np.random.Generator | None = None) -> list[RolloutTree]:
    """Trees for a batch of prompts; total steps ~ (1 + extra_fraction) * sum(budgets)."""
    cfg = cfg or AllocatorConfig()
    rng = rng or np.random.default_rng(0)
    if len(envs) != len(budgets):
        raise ValueError(f"need one budget per env; got {len(envs)} envs and {len(budgets)} budgets")
    trees = [RolloutTree(env, success_threshold=cfg.sampler.uucb.success_threshold) for env in envs]
    return allocate(trees, policy, budgets, cfg, rng)


def allocate(trees: Sequence[RolloutTree], policy: Policy | Sequence[Policy], budgets: Sequence[int],
             cfg: AllocatorConfig, rng: np.random.Generator) -> list[RolloutTree]:
    """Grow (possibly already started) trees: each to ``base_fraction`` of its budget, then the pool.
    ``policy`` is one policy for all trees or one per tree."""
    if len(trees) != len(budgets):
        raise ValueError(f"need one budget per tree; got {len(trees)} trees and {len(budgets)} budgets")
    policies = list(policy) if isinstance(policy, (list, tuple)) else [policy] * len(trees)
    if len(policies) != len(trees):
        raise ValueError(f"need one policy per tree; got {len(policies)} for {len(trees)} trees")
    for tree, pol, b in zip(trees, policies, budgets, strict=True):
        grow_tree(tree, pol, max(1, int(round(cfg.base_fraction * b))), cfg.sampler, rng)
    used = sum(t.stats.env_steps for t in trees)
    pool = int(round((1.0 + cfg.extra_fraction) * sum(budgets))) - used
    ucfg = replace(cfg.sampler.uucb, root_weight=cfg.root_weight)
    best: list[tuple[float, int]] = [_best(t, ucfg, rng) for t in trees]
    while pool > 0:
        scores = np.array([b[0] for b in best])
        if not np.isfinite(scores).any():
            break
        i = int(np.argmax(scores + 1e-12 * rng.random(len(scores))))
        t = trees[i]
        pool -= t.expand([best[i][1]], policies[i], rng)
        best[i] = _best(t, ucfg, rng)
    return list(trees)


def _best(tree: RolloutTree, ucfg: UUCBConfig, rng: np.random.Generator) -> tuple[float, int]:
    t0 = time.perf_counter()
    cand, score = tree.scores(ucfg)
    tree.stats.t_select += time.perf_counter() - t0
    if cand.size == 0:
        return -np.inf, -1
    if ucfg.selector in ("independent", "uniform"):
        return 1.0, int(rng.choice(cand))
    j = int(np.argmax(score + 1e-12 * rng.random(score.size)))
    return float(score[j]), int(cand[j])
