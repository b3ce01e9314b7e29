"""G2PO's experimental set-up: the methods compared, the conditions, and each scale's test bed and
training settings (G2PO's ``Plan`` holds them).

Its own module because other systems' reproductions and the benchmarks reuse the same test bed
(InfoTree's TextWorld runs, `benchmarks/rl_engine.py`, `benchmarks/scaleout.py`): they import it from
here, never from G2PO's reproduction, so the reproduction module stays private to the runner.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from divelab.rl.testbed import TestbedConfig
from divelab.scale import check_scale

METHODS = ("grpo", "gigpo", "g2po")
# run name -> (registered estimator, options); the ablation is G2PO with the literal reading of
# V(s) (mean undiscounted outcome), which standardisation turns against winning paths when states
# never repeat
ESTIMATORS: dict[str, tuple[str, dict[str, Any]]] = {
    "grpo": ("grpo", {}), "gigpo": ("gigpo", {"gamma": 0.95}), "g2po": ("g2po", {"gamma": 0.95}),
    "g2po-outcome": ("g2po", {"gamma": 0.95, "value": "outcome"}),
}
CONDITIONS = ("repeat", "control")


# every run's optimiser settings (the same at every scale)
LR, KL_COEF, PPO_EPOCHS = 1e-2, 0.02, 2


@dataclass(frozen=True)
class Training:
    """How many GRPO runs of which methods a scale trains, and how long each is."""

    iterations: int
    """GRPO iterations (updates) of every run."""
    group_size: int
    """rollouts per game in one GRPO group."""
    n_seeds: int
    """training seeds per set-up (seed, seed+1, ...): runs of different methods are paired by seed."""
    methods: dict[str, tuple[str, ...]]
    """which methods each condition (repeat, control) trains: gigpo is the strongest simple baseline where
    states repeat (on the control it has no anchors either); the g2po-outcome ablation only at full scale."""
    seeds_for: dict[str, int]
    """limits, per "condition/method" or per condition, on how many of the seeds get that run (none: all)."""
    control_setups: str
    """which set-ups run the control: "all", or "primary" (it holds by construction, so once is enough)."""


# the primary test bed of each scale (game set from generator seed 0; the warm start's seed is the run's)
TESTBEDS = {
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
TRAINING = {
    "smoke": Training(iterations=2, group_size=4, n_seeds=1, methods={"repeat": METHODS, "control": METHODS},
                      seeds_for={}, control_setups="all"),
    # quick: one training seed in each of the 4 set-ups (the replication units), every method on it, within
    # the 150 s CPU budget cold; the gains vary far more between set-ups than between seeds of one set-up,
    # so units, not seeds within them, are what quick keeps; the control on the primary set-up only
    "quick": Training(iterations=20, group_size=8, n_seeds=1,
                      methods={"repeat": METHODS, "control": ("grpo", "g2po")},
                      seeds_for={}, control_setups="primary"),
    # full: 9 set-ups (the units) x 3 training seeds. Sized by power and the 60-minute budget: 4 seeds took
    # about 70 minutes on two idle cores and detected a 3.4-point gap, against the paper's +22 points; 3 seeds
    # keep all 9 units (the seed-to-seed variance within a set-up is the small part) for about 52 minutes
    "full": Training(iterations=60, group_size=8, n_seeds=3,
                     methods={c: tuple(ESTIMATORS) for c in CONDITIONS}, seeds_for={}, control_setups="all"),
}


def train_settings(training: Training, seed: int) -> dict[str, Any]:
    """The training settings as the runs read them: seeds from ``seed`` on, and the optimiser's."""
    return {"iterations": training.iterations, "group_size": training.group_size,
            "seeds": [seed + i for i in range(training.n_seeds)], "lr": LR, "kl_coef": KL_COEF,
            "ppo_epochs": PPO_EPOCHS, "methods": {c: list(ms) for c, ms in training.methods.items()},
            "seeds_for": dict(training.seeds_for), "control_setups": training.control_setups}


def experiment_config(scale: str, seed: int) -> tuple[TestbedConfig, dict[str, Any]]:
    """The primary test bed (game set from generator seed 0, warm start ``seed``) and the training
    settings of a scale; G2PO's reproduction also runs further game sets and warm starts."""
    check_scale(scale)
    return replace(TESTBEDS[scale], seed=seed), train_settings(TRAINING[scale], seed)
