"""How well the proxy score the greedy step maximises tracks the true objective.

While trees grow on the decision chain, every ``every``-th selection records, for each candidate
node, its UUCB score (the proxy: estimated success probability, optimism, entropy, per step of
cost) and the *true* marginal gain of one continuation from it (the exact success probability of
its state under the policy, per the same cost). The correlation is pooled over all recorded
candidates (Pearson and Spearman).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from divelab.training.infotree.chain import DecisionChainEnv, TabularPolicy
from divelab.training.infotree.tree import RolloutTree, SamplerConfig


@dataclass
class ProxyResult:
    pearson: float
    spearman: float
    n_points: int
    proxy: np.ndarray
    true: np.ndarray


def proxy_true_correlation(policy: TabularPolicy, ds: np.ndarray, group_size: int, n_actions: int,
                           p_reveal: float, rng: np.random.Generator, cfg: SamplerConfig | None = None,
                           every: int = 3) -> ProxyResult:
    cfg = cfg or SamplerConfig()
    proxies, trues = [], []
    for d in ds:
        env = DecisionChainEnv(d=int(d), n_actions=n_actions, p_reveal=p_reveal)
        tree = RolloutTree(env, cfg.uucb.success_threshold)
        budget = group_size * int(d)
        k = 0
        while tree.stats.env_steps < budget:
            if len(tree.leaves) < cfg.init_rollouts:
                tree.expand([0], policy, rng)
                continue
            cand, score = tree.scores(cfg.uucb)
            if cand.size == 0:
                break
            if k % every == 0 and cand.size > 1:
                true = tree.true_gains(cand, cfg.uucb, lambda s, e=env: e.success_probability(s, policy))
                if cfg.uucb.cost_aware:
                    true = true / np.maximum(1.0, env.horizon - np.asarray(tree.depth, dtype=float)[cand])
                proxies.append(score)
                trues.append(true)
            k += 1
            tree.expand(tree.select(cfg.uucb, rng), policy, rng)
    p = np.concatenate(proxies) if proxies else np.zeros(0)
    t = np.concatenate(trues) if trues else np.zeros(0)
    if p.size < 3 or np.std(p) == 0 or np.std(t) == 0:
        return ProxyResult(float("nan"), float("nan"), int(p.size), p, t)
    return ProxyResult(float(stats.pearsonr(p, t)[0]), float(stats.spearmanr(p, t)[0]), int(p.size), p, t)
