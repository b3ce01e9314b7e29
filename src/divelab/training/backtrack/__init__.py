"""Provable Benefits of RLVR over SFT for Reasoning Models: Learning to Backtrack Efficiently
(Wei & Kim, arXiv 2606.22938, ICML 2026).

Model chain-of-thought as path-finding through a maze with K decision points, L exits each and
dead ends W steps deep. SFT on golden shortest paths never sees a backward-facing state (correct
solutions never backtrack), so it gets no signal there and needs Θ(W·L^K) steps to reach the goal,
while RL on the model's own attempts learns to back out of dead ends and needs Θ(W·K); distilling RL
traces into the base model transfers the backtracking.

>>> from divelab.training.backtrack import MazeSpec                # doctest: +SKIP
>>> MazeSpec(K=4, L=2, W=2).optimal_backtracking_steps()          # doctest: +SKIP
20.0
"""

from divelab.envs.maze import Maze, MazeSpec, MazeWalker, legal_actions
from divelab.training.backtrack.analysis import GrowthFit, HittingTime, fit_growth, hitting_time, probe_states
from divelab.training.backtrack.policy import (
    VOCAB,
    Episode,
    Explorer,
    golden_episode,
    move_distribution,
    rollout,
    sample_mazes,
)
from divelab.training.backtrack.train import (
    DistillConfig,
    ModelSpec,
    RLConfig,
    SFTConfig,
    signal_share,
    train_base,
    train_distilled,
    train_rl,
    train_sft,
)

__all__ = [
    "VOCAB", "DistillConfig", "Episode", "Explorer", "GrowthFit", "HittingTime", "Maze", "MazeSpec", "MazeWalker",
    "ModelSpec", "RLConfig", "SFTConfig", "fit_growth", "golden_episode", "hitting_time", "legal_actions",
    "move_distribution", "probe_states", "rollout", "sample_mazes", "signal_share", "train_base",
    "train_distilled", "train_rl", "train_sft",
]
