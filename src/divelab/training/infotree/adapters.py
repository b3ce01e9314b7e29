"""How outside trainers call InfoTree: a TRL ``rollout_func``, a segment layout and a verl-agent-loop-style driver.

``trl_rollout_func`` (re-exported from :mod:`divelab.training.infotree.trl_rollout`) is the one to give
``trl.GRPOTrainer``: exactly ``num_generations`` completions per prompt, real token ids and log-probs.

Both are thin: they take a *generate step* callable (whatever produces the next action/segment for a
prefix: a vLLM server, ``model.generate``, an agent's tool call) and a *branchable env*, grow one
InfoTree per prompt under a token/step budget, and hand back flat samples with the comparison group
of each. The trainer's own advantage estimator then works per group id (verl: ``uid``; TRL: one
group per prompt, advantages precomputed per sample).

The verl shape follows training-rl.md §7 (a
verl ``AgentLoopBase.run`` returns one output per trajectory with per-sample ``non_tensor_batch``
fields such as ``uid``). verl is not a dependency of this module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from divelab.training.infotree.tree import (
    BranchableEnv,
    Policy,
    SamplerConfig,
    group_normalized_advantages,
    sample_tree,
)
from divelab.training.infotree.trl_rollout import trl_rollout_func


@dataclass
class TreeSample:
    """One segment of a tree: a member of the sibling group ``group_uid``."""

    prompt_index: int
    group_uid: str  # "<prompt>/<branch node>": what verl calls uid
    actions: list[int]  # the segment's actions (token ids / tool calls)
    prefix_actions: list[int]  # actions from the root to the branch point (the shared prefix)
    score: float  # mean leaf reward below the segment (Tree-GRPO value)
    advantage: float  # GRPO within the group (recomputable by the trainer's own estimator)


def tree_samples(envs: Sequence[BranchableEnv], policy: Policy, budgets: Sequence[int],
                 cfg: SamplerConfig | None = None, seed: int = 0,
                 estimator: Callable[[np.ndarray, np.ndarray], np.ndarray] = group_normalized_advantages,
                 ) -> list[TreeSample]:
    """Grow one tree per prompt and flatten it into sibling-group samples (the common core)."""
    if len(envs) != len(budgets):
        raise ValueError(f"need one budget per env; got {len(envs)} and {len(budgets)}")
    rng = np.random.default_rng(seed)
    out: list[TreeSample] = []
    for pi, (env, b) in enumerate(zip(envs, budgets, strict=True)):
        tree = sample_tree(env, policy, b, cfg, rng)
        segs = tree.segments()
        if not segs:
            continue
        adv = estimator(np.array([s.score for s in segs]), np.array([s.group for s in segs]))
        for seg, a in zip(segs, adv, strict=True):
            prefix, u = [], seg.group
            while u > 0:
                prefix.append(tree.action[u])
                u = tree.parent[u]
            out.append(TreeSample(prompt_index=pi, group_uid=f"{pi}/{seg.group}", actions=[a_ for _, a_ in seg.steps],
                                  prefix_actions=prefix[::-1], score=seg.score, advantage=float(a)))
    return out


def tree_segment_rollout(make_env: Callable[[str], BranchableEnv], policy: Policy, budget_per_prompt: int,
                         cfg: SamplerConfig | None = None) -> Callable[..., dict[str, Any]]:
    """The tree-aware *segment* layout: one row per tree segment (a variable number per prompt), with
    ``prompt_ids`` = the shared action prefix, ``group_uid`` (the sibling group) and ``tree_advantage``.

    This is **not** a TRL ``rollout_func``: GRPOTrainer needs exactly ``num_generations`` rows per
    prompt, which :func:`trl_rollout_func` returns. Use this where each segment must be its own
    sample in its sibling group (a custom loss, or verl with ``uid`` = ``group_uid``)."""

    def rollout(prompts: list[str], trainer: Any = None, seed: int = 0) -> dict[str, Any]:
        envs = [make_env(p) for p in prompts]
        samples = tree_samples(envs, policy, [budget_per_prompt] * len(envs), cfg, seed)
        return {
            "prompt_ids": [s.prefix_actions for s in samples],
            "completion_ids": [s.actions for s in samples],
            "prompt_index": [s.prompt_index for s in samples],
            "group_uid": [s.group_uid for s in samples],
            "tree_score": [s.score for s in samples],
            "tree_advantage": [s.advantage for s in samples],
        }

    return rollout


def verl_agent_loop_outputs(envs: Sequence[BranchableEnv], policy: Policy, budgets: Sequence[int],
                            cfg: SamplerConfig | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """What a verl agent loop would return per sample: ``prompt_ids``, ``response_ids``, ``response_mask``,
    a scalar ``reward_score`` and ``non_tensor_batch["uid"]`` = the sibling group, so verl's own
    ``grpo``/``rloo`` estimator normalises within sibling groups (Tree-GRPO) with no change."""
    return [{
        "prompt_ids": s.prefix_actions,
        "response_ids": s.actions,
        "response_mask": [1] * len(s.actions),
        "reward_score": s.score,
        "non_tensor_batch": {"uid": s.group_uid, "prompt_index": s.prompt_index},
    } for s in tree_samples(envs, policy, budgets, cfg, seed)]


__all__ = ["TreeSample", "tree_samples", "tree_segment_rollout", "trl_rollout_func", "verl_agent_loop_outputs"]
