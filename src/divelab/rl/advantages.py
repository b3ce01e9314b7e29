"""Advantage estimators: one registry, one pure function each over per-step data.

Every estimator has the signature ``fn(batch: StepBatch, **options) -> np.ndarray`` and returns
one advantage per step (the trainer broadcasts it to that step's action tokens). ``StepBatch``
is flat numpy data, built from trajectories with :meth:`StepBatch.from_groups` or directly (the
verl/SkyRL adapter in :mod:`divelab.rl.verl` builds it from token-level tensors).

Built in:

- ``grpo``: episode level. ``A = (R_i - mean_group R) / (std_group R + eps)`` on every step.
- ``gigpo`` (arXiv 2505.10978): ``A = A_episode + step_weight * A_step``, where ``A_step``
  normalises the discounted return-to-go within *anchor groups*: steps of the same group that
  start from the same state key.
- ``g2po`` (arXiv 2606.22995): merge identical state keys across the group's rollouts into one
  graph; ``V(s)`` = mean (discounted, from the first visit) return of all trajectories through
  ``s`` (``value="outcome"``: their undiscounted outcome); each step is an edge with TD error
  ``delta = r + gamma * V(s') - V(s)`` (``V(terminal) = 0``); the TD errors are standardised over
  the whole graph; ``A = episode_weight * A_episode + edge_weight * A_edge``.

Add one with::

    @register_advantage("mine")
    def mine(batch: StepBatch, *, epsilon: float = 1e-6) -> np.ndarray: ...
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from divelab.rl.rollout import Trajectory

AdvantageFn = Callable[..., np.ndarray]
_REGISTRY: dict[str, AdvantageFn] = {}


def register_advantage(name: str) -> Callable[[AdvantageFn], AdvantageFn]:
    """Decorator: register ``fn(batch, **options) -> per-step advantages`` under ``name``."""

    def deco(fn: AdvantageFn) -> AdvantageFn:
        if name in _REGISTRY and _REGISTRY[name] is not fn:
            raise ValueError(f"advantage estimator {name!r} is already registered")
        _REGISTRY[name] = fn
        return fn

    return deco


def get_advantage(name: str) -> AdvantageFn:
    if name not in _REGISTRY:
        raise ValueError(f"unknown advantage estimator {name!r}; registered: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def available_advantages() -> list[str]:
    return sorted(_REGISTRY)


@dataclass
class StepBatch:
    """Per-step data of a batch of trajectory groups, flat, ordered trajectory by trajectory.

    Arrays of length n_steps: ``traj_index`` (dense 0..n_traj-1), ``group_index``, ``step_id``,
    ``rewards``, ``dones``; lists ``state_keys`` / ``next_state_keys`` (``None`` = terminal).
    Optional ``logprobs`` / ``ref_logprobs`` of the chosen actions (progress-style estimators).
    """

    traj_index: np.ndarray
    group_index: np.ndarray
    step_id: np.ndarray
    rewards: np.ndarray
    dones: np.ndarray
    state_keys: list[Hashable]
    next_state_keys: list[Hashable | None]
    logprobs: np.ndarray | None = None
    ref_logprobs: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.traj_index)
        for name in ("group_index", "step_id", "rewards", "dones", "state_keys", "next_state_keys"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"StepBatch.{name} has length {len(getattr(self, name))}, expected {n}")
        self.traj_index = np.asarray(self.traj_index, dtype=np.int64)
        self.group_index = np.asarray(self.group_index, dtype=np.int64)
        self.step_id = np.asarray(self.step_id, dtype=np.int64)
        self.rewards = np.asarray(self.rewards, dtype=np.float64)
        self.dones = np.asarray(self.dones, dtype=bool)

    def __len__(self) -> int:
        return len(self.traj_index)

    @property
    def n_traj(self) -> int:
        return int(self.traj_index.max()) + 1 if len(self) else 0

    def returns(self) -> np.ndarray:
        """Episode return of each trajectory (length n_traj)."""
        return np.bincount(self.traj_index, weights=self.rewards, minlength=self.n_traj)

    def traj_group(self) -> np.ndarray:
        """Group of each trajectory (length n_traj)."""
        g = np.zeros(self.n_traj, dtype=np.int64)
        g[self.traj_index] = self.group_index
        return g

    def return_to_go(self, gamma: float) -> np.ndarray:
        """Discounted return from each step to the end of its trajectory."""
        out = np.zeros(len(self))
        for t in _traj_slices(self):
            acc = 0.0
            for i in t[::-1]:
                acc = self.rewards[i] + gamma * acc
                out[i] = acc
        return out

    @classmethod
    def from_groups(cls, groups: Sequence[Sequence[Trajectory]]) -> StepBatch:
        ti, gi, sid, rw, dn, sk, nk, lp, rlp = [], [], [], [], [], [], [], [], []
        has_ref = True
        t = 0
        for g_idx, group in enumerate(groups):
            for traj in group:
                for s in traj.steps:
                    ti.append(t)
                    gi.append(g_idx)
                    sid.append(s.step_id)
                    rw.append(s.reward)
                    dn.append(s.done)
                    sk.append(s.state_key)
                    nk.append(s.next_state_key)
                    lp.append(s.logprob)
                    has_ref = has_ref and s.ref_logprob is not None
                    rlp.append(s.ref_logprob if s.ref_logprob is not None else np.nan)
                t += 1
        return cls(np.array(ti, dtype=np.int64), np.array(gi, dtype=np.int64), np.array(sid, dtype=np.int64),
                   np.array(rw, dtype=np.float64), np.array(dn, dtype=bool), sk, nk,
                   logprobs=np.array(lp, dtype=np.float64),
                   ref_logprobs=np.array(rlp, dtype=np.float64) if has_ref and rlp else None)


def _traj_slices(batch: StepBatch) -> list[np.ndarray]:
    order: dict[int, list[int]] = defaultdict(list)
    for i, t in enumerate(batch.traj_index):
        order[int(t)].append(i)
    # steps of a trajectory in step order, whatever order rows came in
    return [np.array(sorted(v, key=lambda i: batch.step_id[i]), dtype=np.int64) for v in order.values()]


def group_normalize(values: np.ndarray, groups: np.ndarray, epsilon: float = 1e-6,
                    by_std: bool = True) -> np.ndarray:
    """``(x - mean_g) / (std_g + eps)`` within each group id, with the unbiased std that verl's
    GRPO uses (``torch.std``); a group of one step/trajectory gets 0."""
    out = np.zeros_like(values, dtype=np.float64)
    for g in np.unique(groups):
        m = groups == g
        x = values[m]
        if len(x) < 2:
            continue
        centred = x - x.mean()
        out[m] = centred / (x.std(ddof=1) + epsilon) if by_std else centred
    return out


def episode_advantage(batch: StepBatch, epsilon: float = 1e-6, by_std: bool = True) -> np.ndarray:
    """GRPO's episode-level advantage of each trajectory, broadcast to its steps."""
    per_traj = group_normalize(batch.returns(), batch.traj_group(), epsilon, by_std)
    return per_traj[batch.traj_index]


@register_advantage("grpo")
def grpo_advantage(batch: StepBatch, *, epsilon: float = 1e-6, norm_by_std: bool = True) -> np.ndarray:
    """Episode-level GRPO (``norm_by_std=False`` is Dr.GRPO)."""
    return episode_advantage(batch, epsilon, norm_by_std)


@register_advantage("gigpo")
def gigpo_advantage(batch: StepBatch, *, epsilon: float = 1e-6, gamma: float = 0.95,
                    step_weight: float = 1.0, norm_by_std: bool = True) -> np.ndarray:
    """GiGPO: episode advantage + ``step_weight`` x return-to-go normalised within anchor-state
    groups (same group, same state key). Anchor groups of one step contribute 0."""
    a_ep = episode_advantage(batch, epsilon, norm_by_std)
    rtg = batch.return_to_go(gamma)
    anchor_ids: dict[tuple[int, Hashable], int] = {}
    anchors = np.array([anchor_ids.setdefault((int(g), k), len(anchor_ids))
                        for g, k in zip(batch.group_index, batch.state_keys, strict=True)], dtype=np.int64)
    a_step = group_normalize(rtg, anchors, epsilon, norm_by_std)
    return a_ep + step_weight * a_step


@dataclass
class GroupGraph:
    """The merged state-transition graph of one group (for inspection and the docs)."""

    values: dict[Hashable, float]  # V(s): mean outcome of trajectories through s
    visits: dict[Hashable, int]  # number of distinct trajectories through s
    edges: dict[tuple[Hashable, Hashable | None, float], float]  # (s, s', r) -> TD error


def build_group_graph(batch: StepBatch, rows: np.ndarray, outcomes: np.ndarray, gamma: float,
                      returns_to_go: np.ndarray | None = None) -> GroupGraph:
    """Graph of the steps ``rows`` (one group).

    ``outcomes[t]`` is trajectory t's return. Without ``returns_to_go``, ``V(s)`` is the mean
    outcome of the trajectories through ``s``. With it (per-step discounted return-to-go, as from
    :meth:`StepBatch.return_to_go`), each trajectory through ``s`` contributes its discounted return
    from its *first* visit of ``s``, so ``V`` is a first-visit Monte-Carlo value with the same
    ``gamma`` as the TD error, and the TD error of a transition seen in one trajectory only is 0.
    """
    through: dict[Hashable, dict[int, float]] = defaultdict(dict)
    by_traj: dict[int, list[int]] = defaultdict(list)
    for i in rows:
        by_traj[int(batch.traj_index[i])].append(int(i))
    for t, idx in by_traj.items():
        idx.sort(key=lambda i: batch.step_id[i])
        for n, i in enumerate(idx):
            if returns_to_go is None:
                g_here = g_next = float(outcomes[t])
            else:
                g_here = float(returns_to_go[i])
                g_next = float(returns_to_go[idx[n + 1]]) if n + 1 < len(idx) else 0.0
            through[batch.state_keys[i]].setdefault(t, g_here)  # first visit wins
            if batch.next_state_keys[i] is not None:
                through[batch.next_state_keys[i]].setdefault(t, g_next)
    values = {s: float(np.mean(list(ts.values()))) for s, ts in through.items()}
    edges: dict[tuple[Hashable, Hashable | None, float], float] = {}
    for i in rows:
        s, s2, r = batch.state_keys[i], batch.next_state_keys[i], float(batch.rewards[i])
        v2 = 0.0 if s2 is None else values[s2]
        edges[(s, s2, r)] = r + gamma * v2 - values[s]
    return GroupGraph(values, {s: len(ts) for s, ts in through.items()}, edges)


@register_advantage("g2po")
def g2po_advantage(batch: StepBatch, *, epsilon: float = 1e-6, gamma: float = 0.95,
                   episode_weight: float = 1.0, edge_weight: float = 1.0,
                   standardize_over: str = "edges", value: str = "return") -> np.ndarray:
    """G2PO edge advantage (see the module docstring).

    ``standardize_over="edges"`` standardises over the graph's distinct edges (each transition
    counted once, the paper's "whole graph"); ``"steps"`` over step occurrences (frequent edges
    weigh more). ``episode_weight`` adds GRPO's episode advantage (the paper leaves the combination
    open; GiGPO and GraphGPO add it, so the default does too; set 0 for the edge term alone).

    ``value="return"`` (default): ``V(s)`` is the mean discounted return from ``s`` (first visit)
    over the trajectories through it, consistent with the discounted TD error, so a path no other
    rollout shares gets edge credit 0 and G2PO falls back to GRPO where states never repeat.
    ``value="outcome"``: the literal "mean outcome of the trajectories through s" (undiscounted);
    with ``gamma < 1`` every edge of a winning chain then has TD error ``-(1 - gamma)``, which
    the standardisation turns into a full negative unit (see ``docs/g2po.md`` for what that does
    to training when states never repeat).
    """
    if standardize_over not in ("edges", "steps"):
        raise ValueError(f"standardize_over must be 'edges' or 'steps', got {standardize_over!r}")
    if value not in ("return", "outcome"):
        raise ValueError(f"value must be 'return' or 'outcome', got {value!r}")
    outcomes = batch.returns()
    rtg = batch.return_to_go(gamma) if value == "return" else None
    a_edge = np.zeros(len(batch))
    for g in np.unique(batch.group_index):
        rows = np.flatnonzero(batch.group_index == g)
        graph = build_group_graph(batch, rows, outcomes, gamma, returns_to_go=rtg)
        deltas = np.array([graph.edges[(batch.state_keys[i], batch.next_state_keys[i], float(batch.rewards[i]))]
                           for i in rows])
        pool = np.array(list(graph.edges.values())) if standardize_over == "edges" else deltas
        if len(pool) < 2:
            continue
        a_edge[rows] = (deltas - pool.mean()) / (pool.std() + epsilon)
    a = edge_weight * a_edge
    if episode_weight:
        a = a + episode_weight * episode_advantage(batch, epsilon)
    return a
