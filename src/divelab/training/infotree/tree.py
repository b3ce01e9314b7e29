"""Tree rollouts: prefixes are shared, siblings form comparison groups, expansions chosen by UUCB.

A node is a partial trajectory, stored as the environment state it reached (restoring a prefix is
just stepping on from that state; stateful environments get there through their snapshot/restore).
Expanding node s samples one continuation from s to a terminal state, adding a chain of nodes and a
leaf. Every node keeps its subtree's success/failure counts, which is all the objective of
:mod:`divelab.training.infotree.objective` needs: the exact marginal gain of one more continuation
from s is ``v_s * AF(s) + (1 - v_s) * AS(s)``, where ``AF`` (``AS``) sums the weights of the
all-failure (all-success) groups on the path root..s.

UUCB (Uncertainty-aware UCB) scores a candidate with three terms (our reconstruction; the paper's
exact coefficients were not retrievable, training-rl.md §1 [R]):

    UUCB(s) = [v̂ AF + (1 - v̂) AS]                       value: the marginal gain at the estimate v̂
            + c |AF - AS| sd(v̂_s)                        exploration: the gain is linear in v, so an
                                                          optimistic v (c posterior std devs up)
                                                          moves it by slope * c * sd
            + λ H̄(s) [v̂ AF + (1 - v̂) AS]               token entropy: a near-deterministic prefix
                                                          re-samples its old continuations, so the
                                                          independence behind the value term holds
                                                          in proportion to the normalised entropy

Greedy picks the best score per expected environment step (cost-aware greedy) until the budget is
spent. ``batch`` > 1 is speculative expansion: the top ``batch`` nodes are expanded together with
scores that are up to ``batch`` expansions stale, and the continuations run in lockstep so the
policy sees one batched call per step.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

SELECTORS = ("uucb", "value", "no_entropy", "uniform", "independent")


class BranchableEnv(Protocol):
    """What tree rollouts need: states that can be stepped from more than once."""

    @property
    def horizon(self) -> int: ...

    def reset(self) -> Any: ...

    def step(self, state: Any, action: int, rng: np.random.Generator) -> Any: ...  # must not mutate state

    def observation(self, state: Any) -> Any: ...


class Policy(Protocol):
    """Probabilities over the actions available at each observation: an ``(n, A)`` array or a list
    of ``n`` arrays of varying length (text envs have different admissible commands per state)."""

    def action_probs(self, observations: list[Any]) -> np.ndarray | list[np.ndarray]: ...


@dataclass(frozen=True)
class UUCBConfig:
    """Scoring of expansion candidates. ``selector`` picks the ablation:

    - ``uucb``: value + exploration + entropy; ``value``: the value term only;
    - ``no_entropy``: value + exploration; ``uniform``: any non-terminal node, uniformly;
    - ``independent``: only the root (this *is* independent GRPO sampling, as a tree).
    """

    selector: str = "uucb"
    c_explore: float = 0.3
    lam_entropy: float = 0.3
    prior_strength: float = 2.0  # Beta pseudo-counts pulling v̂ towards the parent's estimate
    prior_mean: float = 0.5  # v̂ of an unvisited root
    root_weight: float = 1.0  # weight of "this prompt contributes gradient" in the objective
    node_weight: float = 1.0  # weight of each inner group
    cost_aware: bool = True  # divide by expected remaining steps (budget is in environment steps)
    success_threshold: float = 0.5  # a leaf with reward >= threshold counts as a success

    def __post_init__(self) -> None:
        if self.selector not in SELECTORS:
            raise ValueError(f"unknown selector {self.selector!r}; allowed: {', '.join(SELECTORS)}")
        if self.c_explore < 0 or self.lam_entropy < 0 or self.prior_strength <= 0:
            raise ValueError("c_explore and lam_entropy must be >= 0 and prior_strength > 0")
        if not 0.0 <= self.prior_mean <= 1.0:
            raise ValueError(f"prior_mean must be in [0, 1]; got {self.prior_mean}")


@dataclass
class Segment:
    """One member of a sibling group: the steps from a branch point down to the next one (or a leaf)."""

    group: int  # node id of the branch point (the comparison group)
    child: int  # first node of the segment
    steps: list[tuple[Any, int]]  # (observation, action) pairs
    score: float  # mean leaf reward under ``child`` (Tree-GRPO-style subtree value)


@dataclass
class TreeStats:
    env_steps: int = 0
    policy_calls: int = 0
    t_policy: float = 0.0  # seconds in the policy (the "generation" cost)
    t_env: float = 0.0
    t_select: float = 0.0  # seconds scoring and choosing candidates (tree bookkeeping)
    t_update: float = 0.0  # seconds adding nodes and back-propagating counts (tree bookkeeping)

    @property
    def bookkeeping_overhead(self) -> float:
        gen = self.t_policy + self.t_env
        return (self.t_select + self.t_update) / gen if gen > 0 else 0.0


class RolloutTree:
    """The tree of one prompt. Node ids increase with creation, so parents precede children."""

    def __init__(self, env: BranchableEnv, success_threshold: float = 0.5):
        self.env = env
        self.success_threshold = success_threshold
        self.parent: list[int] = [-1]
        self.depth: list[int] = [0]
        self.state: list[Any] = [env.reset()]
        self.obs: list[Any] = [env.observation(self.state[0])]
        self.action: list[int] = [-1]
        self.children: list[list[int]] = [[]]
        self.succ: list[int] = [0]
        self.fail: list[int] = [0]
        self.reward_sum: list[float] = [0.0]
        self.entropy: list[float] = [float("nan")]  # normalised policy entropy at the node
        self.probs: list[np.ndarray | None] = [None]
        self.terminal: list[bool] = [bool(getattr(self.state[0], "done", False))]
        self.leaves: list[int] = []
        self.origin: dict[int, int] = {}  # leaf -> node its continuation started from
        self.first_leaf: list[int] = [-1]  # node -> leaf of the continuation that created it
        self.stats = TreeStats()

    # ------------------------------------------------------------------ structure
    def __len__(self) -> int:
        return len(self.parent)

    def is_terminal(self, u: int) -> bool:
        return self.terminal[u]

    def _add(self, parent: int, action: int, state: Any) -> int:
        u = len(self.parent)
        self.parent.append(parent)
        self.depth.append(self.depth[parent] + 1)
        self.state.append(state)
        self.obs.append(self.env.observation(state))
        self.action.append(action)
        self.children.append([])
        self.children[parent].append(u)
        self.succ.append(0)
        self.fail.append(0)
        self.reward_sum.append(0.0)
        self.entropy.append(float("nan"))
        self.probs.append(None)
        self.terminal.append(bool(getattr(state, "done", False)))
        self.first_leaf.append(-1)
        return u

    def _backprop(self, leaf: int) -> None:
        r = float(getattr(self.state[leaf], "reward", 0.0))
        ok = r >= self.success_threshold
        u = leaf
        while u >= 0:
            if ok:
                self.succ[u] += 1
            else:
                self.fail[u] += 1
            self.reward_sum[u] += r
            u = self.parent[u]
        self.leaves.append(leaf)

    def expand(self, nodes: Sequence[int], policy: Policy, rng: np.random.Generator) -> int:
        """Roll one continuation from each node to a terminal state, in lockstep. Returns env steps."""
        for u in nodes:
            if self.is_terminal(u):
                raise ValueError(f"node {u} is terminal and cannot be expanded")
        # one entry per continuation: (frontier node, node it started at, nodes it created)
        cur: list[tuple[int, int, list[int]]] = [(u, u, []) for u in nodes]
        steps = 0
        while cur:
            t0 = time.perf_counter()
            probs = policy.action_probs([self.obs[u] for u, _, _ in cur])
            t1 = time.perf_counter()
            self.stats.t_policy += t1 - t0
            self.stats.policy_calls += 1
            nxt = []
            for (u, origin, made), p in zip(cur, probs, strict=True):
                t2 = time.perf_counter()
                p = np.asarray(p, dtype=float)
                if self.probs[u] is None:
                    self.probs[u] = p
                    pz = p[p > 0]
                    self.entropy[u] = float(-(pz * np.log(pz)).sum() / math.log(len(p))) if len(p) > 1 else 0.0
                t2b = time.perf_counter()
                a = int(rng.choice(len(p), p=p / p.sum()))  # sampling is generation, not bookkeeping
                t3 = time.perf_counter()
                s = self.env.step(self.state[u], a, rng)
                t4 = time.perf_counter()
                c = self._add(u, a, s)
                made.append(c)
                steps += 1
                if self.is_terminal(c):
                    self._backprop(c)
                    self.origin[c] = origin
                    for x in made:
                        self.first_leaf[x] = c
                    if self.first_leaf[0] < 0:
                        self.first_leaf[0] = c
                else:
                    nxt.append((c, origin, made))
                t5 = time.perf_counter()
                self.stats.t_env += t4 - t3
                self.stats.t_policy += t3 - t2b
                self.stats.t_update += (t2b - t2) + (t5 - t4)
            cur = nxt
        self.stats.env_steps += steps
        return steps

    # ------------------------------------------------------------------ scoring
    def path_terms(self, cfg: UUCBConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``AF``, ``AS`` (path sums of all-fail / all-success group weights) and ``v̂`` per node.

        ``v̂`` is the Beta posterior mean of the subtree's leaf outcomes, with ``prior_strength``
        pseudo-counts at the parent's estimate (so a fresh deep node inherits its prefix's value).
        Computed level by level (depth <= horizon), vectorised within a level.
        """
        parent = np.asarray(self.parent)
        depth = np.asarray(self.depth)
        s = np.asarray(self.succ, dtype=float)
        f = np.asarray(self.fail, dtype=float)
        w = np.full(len(parent), cfg.node_weight)
        w[0] = cfg.root_weight
        af = np.where((s == 0) & (f > 0), w, 0.0)
        as_ = np.where((f == 0) & (s > 0), w, 0.0)
        AF, AS, vhat = af.copy(), as_.copy(), np.zeros(len(parent))
        k = cfg.prior_strength
        vhat[0] = (s[0] + k * cfg.prior_mean) / (s[0] + f[0] + k)
        order = np.argsort(depth, kind="stable")
        bounds = np.searchsorted(depth[order], np.arange(1, depth.max() + 2))
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            idx = order[lo:hi]
            p = parent[idx]
            AF[idx] += AF[p]
            AS[idx] += AS[p]
            vhat[idx] = (s[idx] + k * vhat[p]) / (s[idx] + f[idx] + k)
        return AF, AS, vhat

    def scores(self, cfg: UUCBConfig) -> tuple[np.ndarray, np.ndarray]:
        """(candidate node ids, their UUCB scores per expected step)."""
        cand = np.flatnonzero(~np.asarray(self.terminal))
        if cand.size == 0:
            return cand, np.zeros(0)
        if cfg.selector == "independent":
            return np.array([0]), np.array([1.0])
        if cfg.selector == "uniform":
            return cand, np.ones(cand.size)
        AF, AS, vhat = self.path_terms(cfg)
        af, as_, v = AF[cand], AS[cand], vhat[cand]
        value = v * af + (1.0 - v) * as_
        score = value.copy()
        if cfg.selector in ("uucb", "no_entropy"):
            # optimism: the gain is linear in v with slope (AF - AS); move v by c posterior std devs
            n = np.asarray(self.succ, dtype=float)[cand] + np.asarray(self.fail, dtype=float)[cand]
            sd = np.sqrt(v * (1.0 - v) / (n + cfg.prior_strength + 1.0))
            score = score + cfg.c_explore * np.abs(af - as_) * sd
        if cfg.selector == "uucb":
            # a low-entropy prefix re-samples its existing continuations: the independence behind
            # `value` fails there, so the gain is credited in proportion to normalised entropy
            ent = np.nan_to_num(np.asarray(self.entropy)[cand], nan=1.0)
            score = score + cfg.lam_entropy * ent * value
        if cfg.cost_aware:
            cost = np.maximum(1.0, self.env.horizon - np.asarray(self.depth, dtype=float)[cand])
            score = score / cost
        return cand, score

    def true_gains(self, cand: np.ndarray, cfg: UUCBConfig, true_value: Callable[[Any], float]) -> np.ndarray:
        """Exact marginal gain of one continuation from each candidate, with the *true* success
        probabilities (``true_value(state)``): what the proxy score is trying to rank."""
        AF, AS, _ = self.path_terms(cfg)
        v = np.array([true_value(self.state[u]) for u in cand])
        return v * AF[cand] + (1.0 - v) * AS[cand]

    def select(self, cfg: UUCBConfig, rng: np.random.Generator, k: int = 1) -> list[int]:
        t0 = time.perf_counter()
        cand, score = self.scores(cfg)
        if cand.size == 0:
            chosen: list[int] = []
        elif cfg.selector == "independent":
            chosen = [0] * k
        elif cfg.selector == "uniform":
            chosen = [int(x) for x in rng.choice(cand, size=min(k, cand.size), replace=False)]
        else:
            # random tie-break, then the top k distinct nodes
            order = np.lexsort((rng.random(cand.size), -score))
            chosen = [int(cand[i]) for i in order[:k]]
        self.stats.t_select += time.perf_counter() - t0
        return chosen

    # ------------------------------------------------------------------ outputs
    @property
    def prompt_mixed(self) -> bool:
        """Leaves hold both outcomes, so some sibling group has a non-zero advantage."""
        return self.succ[0] > 0 and self.fail[0] > 0

    def value(self, u: int) -> float:
        n = self.succ[u] + self.fail[u]
        return self.reward_sum[u] / n if n else 0.0

    def branch_points(self) -> list[int]:
        return [u for u in range(len(self.parent)) if len(self.children[u]) >= 2]

    def group_stats(self) -> tuple[int, int]:
        """(number of sibling groups, number of them with non-identical member values)."""
        groups = self.branch_points()
        mixed = sum(1 for u in groups if len({round(self.value(c), 12) for c in self.children[u]}) > 1)
        return len(groups), mixed

    def segments(self) -> list[Segment]:
        """Every edge belongs to exactly one segment; segments of one branch point form a group."""
        out: list[Segment] = []
        for u in range(len(self.parent)):
            if len(self.children[u]) < 2 and u != 0:
                continue
            for c in self.children[u]:
                steps = [(self.obs[u], self.action[c])]
                x = c
                while len(self.children[x]) == 1:
                    y = self.children[x][0]
                    steps.append((self.obs[x], self.action[y]))
                    x = y
                out.append(Segment(group=u, child=c, steps=steps, score=self.value(c)))
        return out


def group_normalized_advantages(scores: np.ndarray, groups: np.ndarray, eps: float = 1e-6,
                                norm_by_std: bool = True) -> np.ndarray:
    """GRPO advantages within groups (``norm_by_std=False`` is Dr.GRPO); singletons get 0."""
    scores = np.asarray(scores, dtype=float)
    groups = np.asarray(groups)
    adv = np.zeros_like(scores)
    for g in np.unique(groups):
        m = groups == g
        if m.sum() < 2:
            continue
        x = scores[m]
        a = x - x.mean()
        if norm_by_std:
            a = a / (x.std(ddof=1) + eps)
        adv[m] = a
    return adv


@dataclass(frozen=True)
class SamplerConfig:
    """How one prompt's rollouts are built under a budget of environment steps."""

    init_rollouts: int = 2  # full rollouts from the root before any branching
    batch: int = 1  # > 1: speculative expansion with scores up to ``batch`` expansions stale
    uucb: UUCBConfig = field(default_factory=UUCBConfig)

    def __post_init__(self) -> None:
        if self.init_rollouts < 1:
            raise ValueError(f"init_rollouts must be >= 1; got {self.init_rollouts}")
        if self.batch < 1:
            raise ValueError(f"batch must be >= 1; got {self.batch}")


def grow_tree(tree: RolloutTree, policy: Policy, budget_steps: int, cfg: SamplerConfig,
              rng: np.random.Generator) -> int:
    """Grow ``tree`` until it has used ``budget_steps`` environment steps in all (steps already spent
    count). Returns the steps used by this call. The last continuation may run past the budget: a
    rollout is never cut, for either sampler."""
    if budget_steps < 1:
        raise ValueError(f"budget_steps must be >= 1; got {budget_steps}")
    used = 0
    while tree.stats.env_steps < budget_steps:
        missing = cfg.init_rollouts - len(tree.leaves)
        if missing > 0:
            nodes = [0] * min(missing, cfg.batch) if not tree.is_terminal(0) else []
        else:
            nodes = tree.select(cfg.uucb, rng, k=cfg.batch)
        if not nodes:
            break
        used += tree.expand(nodes, policy, rng)
    return used


def sample_tree(env: BranchableEnv, policy: Policy, budget_steps: int,
                cfg: SamplerConfig | None = None, rng: np.random.Generator | None = None) -> RolloutTree:
    """One prompt's rollout tree under a budget (``selector="independent"`` gives plain GRPO groups)."""
    cfg = cfg or SamplerConfig()
    rng = rng or np.random.default_rng(0)
    tree = RolloutTree(env, success_threshold=cfg.uucb.success_threshold)
    grow_tree(tree, policy, budget_steps, cfg, rng)
    return tree
