"""The rollout-informativeness objective as a monotone submodular function, greedy and brute force.

Ground set: "one more continuation sampled from candidate node i" (repeats allowed, so a choice is a
count vector ``n``). A *group* u is a node of the current tree whose subtree already holds leaves
that are all successes, all failures, or mixed; its members ``D(u)`` are the candidates inside its
subtree. Each new leaf from candidate i succeeds with probability ``v_i``, independently. The
objective is the expected weighted number of groups whose leaves end up mixed:

    F(n) = sum_u w_u * P(subtree(u) mixed | n)
         = sum_u w_u * [1 - 1{all-succ_u} prod_{i in D(u)} v_i^{n_i}
                          - 1{all-fail_u} prod_{i in D(u)} (1 - v_i)^{n_i}]    (mixed groups count 1)

Each bracket is a probabilistic-coverage function of the counts (a product of per-item "miss"
probabilities), so F is monotone and submodular (DR-submodular on the integer lattice), and greedy
under a cardinality budget gets at least (1 - 1/e) of the optimum (Nemhauser-Wolsey-Fisher). The
root's group is "this prompt contributes any gradient", so one weight, ``w_root``, turns the same
function into the per-prompt (anti-collapse) objective the budget allocator maximises across prompts.

This exact form is our reconstruction (the notes give the per-node version, training-rl.md §1 [R]);
nesting the groups along the tree is what makes it non-separable and the greedy not trivially optimal.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

ALL_SUCC, ALL_FAIL, MIXED = 0, 1, 2


@dataclass
class CoverageInstance:
    """Candidates with success probabilities ``v``; groups with weight, state and member candidates."""

    v: np.ndarray  # (K,) success probability of a continuation from each candidate
    group_weight: np.ndarray  # (U,)
    group_state: np.ndarray  # (U,) ALL_SUCC / ALL_FAIL / MIXED
    members: list[np.ndarray] = field(default_factory=list)  # U arrays of candidate indices

    def __post_init__(self) -> None:
        self.v = np.asarray(self.v, dtype=float)
        self.group_weight = np.asarray(self.group_weight, dtype=float)
        self.group_state = np.asarray(self.group_state, dtype=int)
        if np.any(self.v < 0) or np.any(self.v > 1):
            raise ValueError(f"candidate success probabilities v must be in [0, 1]; got {self.v}")
        if np.any(self.group_weight < 0):
            raise ValueError("group weights must be >= 0 (a negative weight breaks monotonicity)")
        if not (len(self.group_weight) == len(self.group_state) == len(self.members)):
            raise ValueError("group_weight, group_state and members must have one entry per group")
        if np.any((self.group_state < 0) | (self.group_state > 2)):
            raise ValueError("group_state entries must be ALL_SUCC (0), ALL_FAIL (1) or MIXED (2)")
        self.members = [np.asarray(m, dtype=int) for m in self.members]
        for m in self.members:
            if len(m) and (m.min() < 0 or m.max() >= len(self.v)):
                raise ValueError(f"group member index out of range [0, {len(self.v)}): {m}")

    @property
    def n_candidates(self) -> int:
        return len(self.v)

    def value(self, counts: np.ndarray | list[int]) -> float:
        """F(n): expected weighted number of mixed groups after ``counts[i]`` continuations from i."""
        n = np.asarray(counts, dtype=float)
        if n.shape != self.v.shape or np.any(n < 0):
            raise ValueError(f"counts must be {len(self.v)} non-negative numbers; got {counts}")
        # log-space products; 0**0 = 1 handled by where()
        with np.errstate(divide="ignore", invalid="ignore"):
            log_v = np.where(n > 0, n * np.log(self.v), 0.0)
            log_f = np.where(n > 0, n * np.log1p(-self.v), 0.0)
        total = 0.0
        for w, st, m in zip(self.group_weight, self.group_state, self.members, strict=True):
            if st == MIXED:
                total += w
            elif st == ALL_SUCC:
                total += w * (1.0 - np.exp(log_v[m].sum()))
            else:
                total += w * (1.0 - np.exp(log_f[m].sum()))
        return float(total)

    def values(self, counts: np.ndarray) -> np.ndarray:
        """F(n) for every row of an ``(S, K)`` array of counts at once (what brute force needs)."""
        n = np.asarray(counts, dtype=float)
        if n.ndim != 2 or n.shape[1] != len(self.v) or np.any(n < 0):
            raise ValueError(f"counts must be an (S, {len(self.v)}) array of non-negative numbers")
        member = np.zeros((len(self.members), len(self.v)))
        for u, m in enumerate(self.members):
            member[u, m] = 1.0
        with np.errstate(divide="ignore"):
            # log 0 = -inf is clipped: n * (-1e6) for n >= 1 still gives exp(...) = 0, and 0 * (-1e6) = 0
            log_v = np.maximum(np.log(self.v), -1e6)
            log_f = np.maximum(np.log1p(-self.v), -1e6)
        all_succ = np.exp(n @ (member * log_v).T)  # (S, U): P(every new leaf in u's subtree succeeds)
        all_fail = np.exp(n @ (member * log_f).T)
        miss = np.where(self.group_state == ALL_SUCC, all_succ, np.where(self.group_state == ALL_FAIL, all_fail, 0.0))
        return (self.group_weight * (1.0 - miss)).sum(axis=1)

    def value_of_set(self, chosen: list[int]) -> float:
        return self.value(np.bincount(np.asarray(chosen, dtype=int), minlength=len(self.v)))

    def marginal_gains(self, counts: np.ndarray) -> np.ndarray:
        base = self.value(counts)
        gains = np.empty(len(self.v))
        for i in range(len(self.v)):
            c = np.array(counts, dtype=float)
            c[i] += 1
            gains[i] = self.value(c) - base
        return gains


def greedy(inst: CoverageInstance, budget: int, rng: np.random.Generator | None = None) -> np.ndarray:
    """Counts chosen by greedy marginal-gain maximisation under a cardinality ``budget``."""
    if budget < 0:
        raise ValueError(f"budget must be >= 0; got {budget}")
    counts = np.zeros(inst.n_candidates)
    for _ in range(budget):
        g = inst.marginal_gains(counts)
        best = np.flatnonzero(g >= g.max() - 1e-12)
        i = int(rng.choice(best)) if rng is not None else int(best[0])
        counts[i] += 1
    return counts


def brute_force(inst: CoverageInstance, budget: int) -> tuple[np.ndarray, float]:
    """The optimal counts by enumerating every multiset of size ``budget`` (small instances only)."""
    K = inst.n_candidates
    n_sets = 1
    for j in range(budget):
        n_sets = n_sets * (K + j) // (j + 1)
    if n_sets > 200_000:
        raise ValueError(f"brute force over {n_sets} multisets is too big (at most 200000: e.g. K <= 30 with "
                         "budget <= 4, K <= 8 with budget <= 5)")
    combos = np.array(list(itertools.combinations_with_replacement(range(K), budget)), dtype=int)
    counts = np.zeros((len(combos), K))
    for j in range(budget):
        np.add.at(counts, (np.arange(len(combos)), combos[:, j]), 1.0)
    vals = inst.values(counts)
    i = int(np.argmax(vals))  # the first maximum, as the former loop kept
    return counts[i], float(inst.value(counts[i]))


def random_tree_instance(rng: np.random.Generator, n_nodes: int = 7, root_weight: float = 1.0,
                         p_candidate: float = 0.8, chain: float = 0.0) -> CoverageInstance:
    """A random rollout tree: random parent links, random outcome states, random candidate values.

    Groups are the tree's nodes (nested subtrees), so instances are laminar like real trees. With
    ``chain`` > 0 each node extends the previous one with that probability (else a uniformly random
    earlier node): ``chain=0.9`` gives deep, long-horizon trees (depth close to ``n_nodes``), the
    default 0 the bushy, shallow (depth ~ log n) trees of uniform random attachment.
    """
    if n_nodes < 1:
        raise ValueError(f"n_nodes must be >= 1; got {n_nodes}")
    if not 0.0 <= chain <= 1.0:
        raise ValueError(f"chain must be in [0, 1]; got {chain}")
    parent = [-1] + [i - 1 if chain > 0 and rng.random() < chain else int(rng.integers(0, i))
                     for i in range(1, n_nodes)]
    cand = [i for i in range(n_nodes) if rng.random() < p_candidate] or [n_nodes - 1]
    idx = {node: k for k, node in enumerate(cand)}
    # a leaf outcome pattern drives the states: the tree is all-fail, all-success, or partly mixed
    state = np.empty(n_nodes, dtype=int)
    base = rng.choice([ALL_FAIL, ALL_SUCC], p=[0.7, 0.3])
    for i in range(n_nodes):
        state[i] = base if rng.random() < 0.8 else rng.choice([ALL_FAIL, ALL_SUCC, MIXED])
    for i in range(n_nodes - 1, 0, -1):  # a parent is mixed if its children disagree
        if state[i] != state[parent[i]]:
            state[parent[i]] = MIXED
    members: list[list[int]] = [[] for _ in range(n_nodes)]
    for node in cand:
        u = node
        while u >= 0:
            members[u].append(idx[node])
            u = parent[u]
    v = rng.beta(0.7, 1.5, size=len(cand))
    w = np.ones(n_nodes)
    w[0] = root_weight
    return CoverageInstance(v=v, group_weight=w, group_state=state, members=[np.array(m) for m in members])


def instance_depth(inst: CoverageInstance) -> int:
    """Depth of a tree instance: the most groups (ancestors, itself included) any candidate lies in."""
    depth = np.zeros(inst.n_candidates, dtype=int)
    for m in inst.members:
        depth[m] += 1
    return int(depth.max()) if depth.size else 0


def random_instance(rng: np.random.Generator, n_candidates: int = 5, n_groups: int = 6) -> CoverageInstance:
    """An arbitrary (non-laminar) coverage instance: any member sets, any states, any weights."""
    v = rng.random(n_candidates)
    members = [np.flatnonzero(rng.random(n_candidates) < 0.5) for _ in range(n_groups)]
    return CoverageInstance(v=v, group_weight=rng.random(n_groups) * 2,
                            group_state=rng.integers(0, 3, size=n_groups), members=members)
