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
    prompt: np.ndarray  # which prompt (tree) each point came from: points of one tree are correlated


def proxy_true_correlation(policy: TabularPolicy, ds: np.ndarray, group_size: int, n_actions: int,
                           p_reveal: float, rng: np.random.Generator, cfg: SamplerConfig | None = None,
                           every: int = 3) -> ProxyResult:
    cfg = cfg or SamplerConfig()
    proxies, trues, prompts = [], [], []
    for i, d in enumerate(ds):
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
                prompts.append(np.full(cand.size, i))
            k += 1
            tree.expand(tree.select(cfg.uucb, rng), policy, rng)
    p = np.concatenate(proxies) if proxies else np.zeros(0)
    t = np.concatenate(trues) if trues else np.zeros(0)
    g = np.concatenate(prompts) if prompts else np.zeros(0, dtype=int)
    if p.size < 3 or np.std(p) == 0 or np.std(t) == 0:
        return ProxyResult(float("nan"), float("nan"), int(p.size), p, t, g)
    return ProxyResult(float(stats.pearsonr(p, t)[0]), float(stats.spearmanr(p, t)[0]), int(p.size), p, t, g)


def pearson_cluster_ci(res: ProxyResult, n_resamples: int = 1000, seed: int = 0,
                       confidence: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the pooled Pearson r with whole prompts (trees) resampled: the points of one
    tree share its early leaves, so resampling points alone would make the interval too narrow."""
    keys = np.unique(res.prompt)
    if keys.size < 2:
        return res.pearson, res.pearson
    rows = [np.flatnonzero(res.prompt == k) for k in keys]
    rng = np.random.default_rng(seed)
    rs = []
    for _ in range(n_resamples):
        idx = np.concatenate([rows[j] for j in rng.integers(0, keys.size, size=keys.size)])
        x, y = res.proxy[idx], res.true[idx]
        if np.std(x) > 0 and np.std(y) > 0:
            rs.append(float(np.corrcoef(x, y)[0, 1]))
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(rs, [alpha, 1 - alpha])
    return float(lo), float(hi)
