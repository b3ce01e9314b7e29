"""divelab.rl: rollouts, advantage estimators and the GRPO loop for agentic RL on text envs."""

from divelab.rl.advantages import (
    StepBatch,
    available_advantages,
    get_advantage,
    register_advantage,
)
from divelab.rl.pg_loss import k3_kl, policy_gradient_loss
from divelab.rl.rollout import IndependentSampler, Policy, RolloutSampler, Step, Trajectory, continue_episode

__all__ = [
    "IndependentSampler", "Policy", "RolloutSampler", "Step", "StepBatch", "Trajectory",
    "available_advantages", "continue_episode", "get_advantage", "k3_kl", "policy_gradient_loss",
    "register_advantage",
]
