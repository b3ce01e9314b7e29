"""Bayesian control for coding agents: refine / verify / ship (arXiv 2606.24453, E170).

The paper treats orchestrating a coding agent as cost-sensitive sequential hypothesis testing: a
belief that the current candidate is correct is updated by cheap critics (log-odds evidence from
calibrated likelihoods) and by refinement (a transition model learnt from logged trajectories).
A one-step value-of-information controller and a finite-horizon DP then choose among running a
critic, refining, calling the expensive verifier, or shipping; the claim is that this pays when
verification is costly and critics are informative but imperfect, and ties a fixed rule elsewhere.

    from divelab.coding.bayes_control import Costs, DPController, run_episode
    ctl = DPController(model, Costs(verify=0.4), horizon=6)   # model: a fitted BeliefModel
    result = run_episode(ctl, env, model, Costs(verify=0.4))  # env: ReplayEnv or LiveEnv
"""

from divelab.coding.bayes_control.belief import BeliefModel, Likelihood, RefineModel, calibrate
from divelab.coding.bayes_control.controllers import (
    AlwaysVerify,
    Costs,
    DPController,
    FixedThreshold,
    GreedyController,
    NeverVerify,
    ShipIfCriticsPass,
    State,
    VerifyIfCriticsPass,
    greedy_threshold,
    known_failure_value,
)
from divelab.coding.bayes_control.episode import EpisodeResult, run_episode

__all__ = [
    "AlwaysVerify", "BeliefModel", "Costs", "DPController", "EpisodeResult", "FixedThreshold",
    "GreedyController", "Likelihood", "NeverVerify", "RefineModel", "ShipIfCriticsPass", "State", "VerifyIfCriticsPass",
    "calibrate", "greedy_threshold", "known_failure_value", "run_episode",
]
