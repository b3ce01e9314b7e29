"""The RL engine's standard settings: each scale's TextWorld test bed, GRPO group size and optimiser.

Several systems train on the same test bed with the same GRPO settings (G2PO compares advantage
estimators on it, InfoTree tree rollouts, the world model and progress advantage build their policies
from it), so its games and warm starts are generated and cached once. The presets live here, in the
engine, rather than in one of those systems: each system's ``Plan`` takes them by value, and changing
a preset changes every system that uses it, visibly, in this one file.
"""

from __future__ import annotations

from divelab.rl.testbed import TestbedConfig

TESTBEDS: dict[str, TestbedConfig] = {
    # smoke: two one-step quests in two rooms, explored and warm-started in seconds
    "smoke": TestbedConfig(n_games=2, nb_rooms=2, nb_objects=2, quest_length=1, max_steps=4, sft_episodes=4,
                           sft_steps=10),
    # quick: three-step quests in three rooms, step cap ~3x optimal, games a uniform random player wins
    # at least 7% of the time (so some groups are mixed from the start); two-step quests were too easy
    # to tell credit assignment apart
    "quick": TestbedConfig(n_games=4, nb_rooms=3, nb_objects=3, quest_length=3, max_steps=10,
                           min_random_success=0.07, max_states=120, sft_episodes=32, sft_steps=200, sft_lr=1e-2),
    "full": TestbedConfig(n_games=8, nb_rooms=3, nb_objects=4, quest_length=3, max_steps=12,
                          min_random_success=0.05, max_states=400, sft_episodes=32, sft_steps=300, sft_lr=1e-2),
}
"""Each scale's primary test bed (game set from generator seed 0; a reproduction sets the warm start's
seed to its run's seed)."""

GROUP_SIZE: dict[str, int] = {"smoke": 4, "quick": 8, "full": 8}
"""Each scale's GRPO group: rollouts per game in one group."""

LR = 1e-2
"""Adam learning rate of a GRPO run on the test bed (every scale)."""
KL_COEF = 0.02
"""weight of the k3 KL penalty to the frozen start (every scale)."""
PPO_EPOCHS = 2
"""clipped policy-gradient epochs per batch of rollouts (every scale)."""
