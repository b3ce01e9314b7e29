"""InfoTree: Maximizing Rollout Informativeness under a Fixed Budget — a submodular view of tree search
for tool-use agentic RL (arXiv 2605.05262, E162).

Under GRPO a group whose rewards all agree has zero advantage; for independent sampling the chance of
a mixed group grows only linearly in the budget while difficulty shrinks it exponentially, so collapse
cannot be budgeted away on hard prompts. InfoTree grows a tree of rollouts instead, choosing which
prefix to expand next by greedy maximisation of a monotone submodular objective (expected mixed sibling
groups), scored in closed form by UUCB (value + exploration bonus + token entropy), with (1 - 1/e) of
the optimum guaranteed. An adaptive allocator spends a pooled budget on prompts about to come out
uniform.

>>> from divelab.training.infotree import DecisionChainEnv, TabularPolicy, sample_tree
>>> tree = sample_tree(DecisionChainEnv(d=6), TabularPolicy.with_accuracy(6, 4, 0.7), budget_steps=48)
>>> tree.prompt_mixed in (True, False)
True
"""

from divelab.training.infotree.allocator import AllocatorConfig, allocate, allocate_and_sample
from divelab.training.infotree.chain import DecisionChainEnv, TabularPolicy
from divelab.training.infotree.collapse import (
    DifficultyMix,
    collapse_probability,
    mixed_probability,
    mixed_ratio_curve,
    simulate_collapse,
)
from divelab.training.infotree.objective import CoverageInstance, brute_force, greedy
from divelab.training.infotree.tree import (
    RolloutTree,
    SamplerConfig,
    UUCBConfig,
    group_normalized_advantages,
    grow_tree,
    sample_tree,
)

__all__ = [
    "AllocatorConfig", "CoverageInstance", "DecisionChainEnv", "DifficultyMix", "RolloutTree", "SamplerConfig",
    "TabularPolicy", "UUCBConfig", "allocate", "allocate_and_sample", "brute_force", "collapse_probability",
    "greedy", "group_normalized_advantages", "grow_tree", "mixed_probability", "mixed_ratio_curve",
    "sample_tree", "simulate_collapse",
]
