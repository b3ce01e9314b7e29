"""Neglected Free Lunch from Post-training: Progress Advantage for LLM Agents (arXiv 2606.26080).

Under KL-regularised RL, the optimal policy is ``pi_ref * exp((Q* - V*)/beta)``, so the log-ratio
``beta * log pi_theta(a|s) / pi_ref(a|s)`` of a post-trained model and its reference *is* the optimal
advantage, exactly, even when the environment is stochastic (reading it as a recovered reward only
works for deterministic transitions). Scoring the action spans of agent trajectories with that
log-ratio, one forward pass per model, gives a free step-level grader for best-of-N selection,
success prediction and failure localisation, which the paper reports beats confidence baselines.

>>> from divelab.training.progress_advantage import ProgressAdvantage, Trajectory, Step   # doctest: +SKIP
>>> pa = ProgressAdvantage(policy, reference, tokenizer, beta=0.1)                         # doctest: +SKIP
>>> pa.best_of_n(candidates, token_agg="min", step_agg="min")                             # doctest: +SKIP
"""

from divelab.training.progress_advantage.aggregate import (
    STEP_AGGREGATIONS,
    TOKEN_AGGREGATIONS,
    aggregate_steps,
    aggregate_tokens,
    auroc,
    best_of_n,
    bottom_fraction_mean,
    failure_step,
)
from divelab.training.progress_advantage.scorer import (
    ProgressAdvantage,
    Step,
    TokenizedTrajectory,
    Trajectory,
    TrajectoryScores,
    load_jsonl,
)

__all__ = [
    "STEP_AGGREGATIONS", "TOKEN_AGGREGATIONS", "ProgressAdvantage", "Step", "TokenizedTrajectory", "Trajectory",
    "TrajectoryScores", "aggregate_steps", "aggregate_tokens", "auroc", "best_of_n", "bottom_fraction_mean",
    "failure_step", "load_jsonl",
]
