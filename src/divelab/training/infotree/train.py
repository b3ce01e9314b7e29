"""GRPO on the decision chain with either sampler, at an equal budget of environment steps.

The policy is the tabular softmax of :mod:`divelab.training.infotree.chain` (one row of logits per
step index, shared by all prompts, so easy prompts teach the first decisions of hard ones). Each
iteration draws a batch of prompts (difficulties ``d``), builds their rollouts with the chosen
sampler under a budget of ``group_size * d`` environment steps per prompt (what ``group_size``
independent full-length rollouts would cost), turns the rollouts into comparison groups (sibling
segments for trees, the whole group for independent sampling), computes advantages with any
group estimator, and takes one policy-gradient step (token-mean over the batch's steps).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from divelab.training.infotree.allocator import AllocatorConfig, allocate_and_sample
from divelab.training.infotree.chain import DecisionChainEnv, TabularPolicy
from divelab.training.infotree.tree import (
    RolloutTree,
    SamplerConfig,
    UUCBConfig,
    group_normalized_advantages,
    sample_tree,
)

SAMPLERS = ("independent", "tree", "tree+allocator")

# (scores, group ids) -> advantages; any GRPO-family estimator fits
Estimator = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class ChainTrainConfig:
    sampler: str = "tree"
    n_actions: int = 4
    d_range: tuple[int, int] = (1, 8)
    p_reveal: float = 0.5
    iterations: int = 40
    prompts_per_iter: int = 16
    group_size: int = 8  # budget per prompt = group_size * d environment steps
    lr: float = 2.0
    seed: int = 0
    tree: SamplerConfig = field(default_factory=SamplerConfig)
    allocator: AllocatorConfig = field(default_factory=AllocatorConfig)

    def __post_init__(self) -> None:
        if self.sampler not in SAMPLERS:
            raise ValueError(f"unknown sampler {self.sampler!r}; allowed: {', '.join(SAMPLERS)}")
        lo, hi = self.d_range
        if not 1 <= lo <= hi:
            raise ValueError(f"d_range must satisfy 1 <= lo <= hi; got {self.d_range}")
        if self.iterations < 0 or self.prompts_per_iter < 1 or self.group_size < 1:
            raise ValueError("iterations >= 0, prompts_per_iter >= 1 and group_size >= 1 are required")


@dataclass
class ChainTrainResult:
    config: ChainTrainConfig
    env_steps: list[int]  # cumulative environment steps after each iteration
    success: list[float]  # exact mean success over d in d_range after each iteration
    mixed_ratio: list[float]  # share of prompts with a non-zero-advantage group, per iteration
    policy: TabularPolicy


def build_trees(cfg: ChainTrainConfig, policy: TabularPolicy, ds: np.ndarray,
                rng: np.random.Generator) -> list[RolloutTree]:
    envs = [DecisionChainEnv(d=int(d), n_actions=cfg.n_actions, p_reveal=cfg.p_reveal) for d in ds]
    budgets = [cfg.group_size * int(d) for d in ds]
    if cfg.sampler == "tree+allocator":
        return allocate_and_sample(envs, policy, budgets, cfg.allocator, rng)
    if cfg.sampler == "independent":
        scfg = SamplerConfig(init_rollouts=1, uucb=UUCBConfig(selector="independent"))
    else:
        scfg = cfg.tree
    return [sample_tree(e, policy, b, scfg, rng) for e, b in zip(envs, budgets, strict=True)]


def policy_gradient(policy: TabularPolicy, trees: list[RolloutTree], estimator: Estimator) -> np.ndarray:
    """Token-mean policy gradient of the batch; every edge gets its sibling group's advantage."""
    grad = np.zeros_like(policy.logits)
    n_steps = 0
    for tree in trees:
        segs = tree.segments()
        if not segs:
            continue
        adv = estimator(np.array([s.score for s in segs]), np.array([s.group for s in segs]))
        for seg, a in zip(segs, adv, strict=True):
            n_steps += len(seg.steps)
            if a == 0.0:
                continue
            for obs, act in seg.steps:
                grad[obs] += a * policy.grad_logp(obs, act)
    return grad / max(n_steps, 1)


def mean_success(policy: TabularPolicy, cfg: ChainTrainConfig) -> float:
    lo, hi = cfg.d_range
    return float(np.mean([DecisionChainEnv(d=d, n_actions=cfg.n_actions).success_probability(
        DecisionChainEnv(d=d, n_actions=cfg.n_actions).reset(), policy) for d in range(lo, hi + 1)]))


def train_chain(cfg: ChainTrainConfig, estimator: Estimator | None = None) -> ChainTrainResult:
    """Train from a uniform policy; returns the learning curve against environment steps."""
    estimator = estimator or group_normalized_advantages
    rng = np.random.default_rng(cfg.seed)
    policy = TabularPolicy(cfg.d_range[1], cfg.n_actions)
    steps, succ, mixed = [], [mean_success(policy, cfg)], []
    total = 0
    for _ in range(cfg.iterations):
        ds = rng.integers(cfg.d_range[0], cfg.d_range[1] + 1, size=cfg.prompts_per_iter)
        trees = build_trees(cfg, policy, ds, rng)
        total += sum(t.stats.env_steps for t in trees)
        policy.logits += cfg.lr * policy_gradient(policy, trees, estimator)
        steps.append(total)
        succ.append(mean_success(policy, cfg))
        mixed.append(float(np.mean([t.prompt_mixed for t in trees])))
    return ChainTrainResult(config=cfg, env_steps=[0, *steps], success=succ, mixed_ratio=mixed, policy=policy)
