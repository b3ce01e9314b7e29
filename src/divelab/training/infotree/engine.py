"""InfoTree as a :class:`divelab.rl.rollout.RolloutSampler`: tree rollouts on any ``TextEnv``.

The RL engine's envs restore state by replaying an action prefix (``env.restore(prefix)``, cheap
behind ``ReplayCache``). :class:`TextEnvBranching` turns such an env plus an engine policy into the
functional ``BranchableEnv``/``Policy`` pair the tree code uses: a tree node's state is the
immutable record of its prefix (actions, observations, recorded ``Step``s, admissible commands),
and stepping from it restores the prefix, then plays one command.

:class:`TreeSampler` grows one tree per game and returns its leaves as complete
``Trajectory`` objects (prefix steps included, ``parent = (traj_id, step_id)`` of the trajectory a
branch left), so *every* registered advantage estimator works on them: ``grpo`` compares all
leaves of a game, ``gigpo`` finds the sibling groups itself (branches share the branch point's
state key), ``g2po`` merges them into its graph. Budget: ``group_size`` rollouts' worth of
environment steps per game, measured as ``group_size`` times the mean length of the game's first
(independent, root) rollouts in earlier batches, so a batch's budget does not hang on how its own first
rollouts ended (a game's first batch uses its own).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from divelab.envs.base import EnvFactory, TextEnv
from divelab.rl.rollout import IndependentSampler, Policy, RolloutSampler, Step, Trajectory
from divelab.training.infotree.allocator import AllocatorConfig, allocate
from divelab.training.infotree.tree import RolloutTree, SamplerConfig, TreeStats, UUCBConfig, grow_tree

SAMPLER_NAMES = ("independent", "tree", "tree+allocator", "tree (random node)", "tree (root only)")
"""``tree (random node)`` expands a uniformly random unfinished node (the trivial selector: branching without
UUCB); ``tree (root only)`` is the tree sampler with branching removed: the same code path and budget rule
(see ``TreeSampler.collect``), every continuation from the root (a sham tree)."""


@dataclass(frozen=True, eq=False)
class BranchState:
    actions: tuple[str, ...]
    observations: tuple[str, ...]
    steps: tuple[Step, ...]
    candidates: tuple[str, ...]
    done: bool = False
    reward: float = 0.0  # 1.0 for a win (what the tree counts as success)
    truncated: bool = False


class TextEnvBranching:
    """A ``TextEnv`` + engine ``Policy`` seen as a branchable env and a tree policy."""

    def __init__(self, env: TextEnv, policy: Policy, seed: int | None, max_steps: int) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1; got {max_steps}")
        self.env, self.policy, self.seed, self.max_steps = env, policy, seed, max_steps
        self._memo: dict[int, tuple[str, np.ndarray]] = {}

    @property
    def horizon(self) -> int:
        return self.max_steps

    def reset(self) -> BranchState:
        obs = self.env.reset(self.seed)
        return BranchState((), (obs,), (), tuple(self.env.admissible_actions()))

    def observation(self, state: BranchState) -> BranchState:
        return state

    def action_probs(self, states: list[BranchState]) -> list[np.ndarray]:
        out = []
        for st in states:
            ctx = self.policy.context(list(st.observations), list(st.actions))
            p = np.asarray(self.policy.action_probs(ctx, list(st.candidates)), dtype=np.float64)
            self._memo[id(st)] = (ctx, p)
            out.append(p / p.sum())
        return out

    def step(self, state: BranchState, action: int, rng: np.random.Generator) -> BranchState:
        if state.done:
            raise ValueError("step() from a terminal tree node")
        ctx, p = self._memo.get(id(state)) or (None, None)
        if ctx is None:
            ctx = self.policy.context(list(state.observations), list(state.actions))
            p = np.asarray(self.policy.action_probs(ctx, list(state.candidates)), dtype=np.float64)
        if list(self.env.actions_taken) != list(state.actions):
            self.env.restore(list(state.actions))  # restore the prefix (replay)
        cmd = state.candidates[action]
        nobs, reward, done, info = self.env.step(cmd)
        obs = state.observations[-1]
        step = Step(observation=obs, context=ctx, action=cmd, candidates=list(state.candidates),
                    action_index=action, logprob=float(np.log(max(p[action] / p.sum(), 1e-30))),
                    reward=float(reward), state_key=self.env.state_key(obs),
                    next_state_key=None if done else self.env.state_key(nobs), step_id=len(state.steps),
                    done=bool(done), info=dict(info))
        n = len(state.steps) + 1
        truncated = (not done) and n >= self.max_steps
        won = bool(done and info.get("won", reward > 0))
        cands = () if (done or truncated) else tuple(self.env.admissible_actions())
        return BranchState(state.actions + (cmd,), state.observations + (nobs,), state.steps + (step,), cands,
                           done=bool(done) or truncated, reward=1.0 if won else 0.0, truncated=truncated)


def tree_trajectories(tree: RolloutTree, game_id: str, group_index: int, seed: int | None,
                      first_id: int) -> list[Trajectory]:
    """The leaves of a tree as complete trajectories (steps copied, so trajectories never share)."""
    ids = {leaf: first_id + k for k, leaf in enumerate(tree.leaves)}
    out = []
    for leaf in tree.leaves:
        st: BranchState = tree.state[leaf]
        origin = tree.origin[leaf]
        parent = None
        if origin != 0 and tree.first_leaf[origin] != leaf:
            parent = (ids[tree.first_leaf[origin]], tree.depth[origin])
        out.append(Trajectory(game_id=game_id, group_index=group_index,
                              steps=[dataclasses.replace(s, info=dict(s.info)) for s in st.steps],
                              won=st.reward > 0, truncated=st.truncated, seed=seed, traj_id=ids[leaf],
                              parent=parent))
    return out


@dataclass
class TreeSampler:
    """InfoTree rollouts for the GRPO trainer (``GRPOTrainer(..., sampler=TreeSampler())``)."""

    max_steps: int = 20
    tree: SamplerConfig = field(default_factory=SamplerConfig)
    allocator: AllocatorConfig | None = None  # set to share a pooled budget across the batch's games
    length_window: int = 8
    """root rollouts of a game, from earlier batches, whose mean length sets its budget (see ``collect``)."""
    last_trees: list[RolloutTree] = field(default_factory=list, repr=False)
    root_lengths: dict[str, list[int]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.length_window < 1:
            raise ValueError(f"length_window must be >= 1, got {self.length_window}")

    def collect(self, policy: Policy, make_env: EnvFactory, game_ids: Sequence[str], group_size: int,
                rng: np.random.Generator) -> list[list[Trajectory]]:
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        trees, seeds, budgets = [], [], []
        cfg = self.allocator.sampler if self.allocator is not None else self.tree
        for game_id in game_ids:
            seed = int(rng.integers(0, 2**31 - 1))
            bridge = TextEnvBranching(make_env(game_id), policy, seed, self.max_steps)
            tree = RolloutTree(bridge, success_threshold=cfg.uucb.success_threshold)
            # the first rollouts are independent, full episodes from the root. The budget is group_size times
            # the mean length of the game's root rollouts in *earlier* batches (the last length_window), so it
            # does not depend on how this batch's first rollouts ended: a quick win is a short rollout, and
            # sizing the budget from it would give a game the policy can win less than group_size
            # independent episodes use. A game's first batch has no history and uses its own first rollouts.
            grow_tree(tree, bridge, 1, dataclasses.replace(cfg, batch=cfg.init_rollouts), rng)
            first = [tree.depth[leaf] for leaf in tree.leaves]
            past = self.root_lengths.get(game_id, [])[-self.length_window:]
            mean_len = float(np.mean(past)) if past else tree.stats.env_steps / max(len(tree.leaves), 1)
            self.root_lengths[game_id] = (self.root_lengths.get(game_id, []) + first)[-self.length_window:]
            budgets.append(max(1, int(round(group_size * mean_len))))
            trees.append(tree)
            seeds.append(seed)
        if self.allocator is not None:
            # each tree's bridge is also its policy (it records contexts for the Steps)
            allocate(trees, [t.env for t in trees], budgets, self.allocator, rng)  # type: ignore[misc]
        else:
            for t, b in zip(trees, budgets, strict=True):
                grow_tree(t, t.env, b, cfg, rng)  # type: ignore[arg-type]
        self.last_trees = trees
        groups, next_id = [], 0
        for gi, (game_id, t, seed) in enumerate(zip(game_ids, trees, seeds, strict=True)):
            trajs = tree_trajectories(t, game_id, gi, seed, next_id)
            next_id += len(trajs)
            groups.append(trajs)
        return groups

    def stats(self) -> dict[str, Any]:
        """Mixed ratio, env steps and bookkeeping time of the last batch."""
        s = TreeStats()
        for t in self.last_trees:
            for k in ("env_steps", "policy_calls", "t_policy", "t_env", "t_select", "t_update"):
                setattr(s, k, getattr(s, k) + getattr(t.stats, k))
        return {"mixed_ratio": float(np.mean([t.prompt_mixed for t in self.last_trees])) if self.last_trees else 0.0,
                "env_steps": s.env_steps, "bookkeeping_overhead": s.bookkeeping_overhead}


def make_sampler(name: str, max_steps: int = 20, **options: Any) -> RolloutSampler:
    """``independent`` (plain GRPO), ``tree`` (InfoTree), ``tree+allocator`` (InfoTree + ABA-style pool), or the
    two reference trees ``tree (random node)`` and ``tree (root only)`` (see ``SAMPLER_NAMES``)."""
    if name == "independent":
        return IndependentSampler(max_steps=max_steps)
    if name == "tree":
        return TreeSampler(max_steps=max_steps, tree=options.get("tree", SamplerConfig()))
    if name == "tree+allocator":
        return TreeSampler(max_steps=max_steps, allocator=options.get("allocator", AllocatorConfig()))
    if name == "tree (random node)":
        return TreeSampler(max_steps=max_steps, tree=SamplerConfig(uucb=UUCBConfig(selector="uniform")))
    if name == "tree (root only)":
        return TreeSampler(max_steps=max_steps,
                           tree=SamplerConfig(init_rollouts=1, uucb=UUCBConfig(selector="independent")))
    raise ValueError(f"unknown sampler {name!r}; allowed: {', '.join(SAMPLER_NAMES)}")
