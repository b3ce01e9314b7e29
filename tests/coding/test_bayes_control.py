"""E170 controller: belief updates, thresholds, DP vs greedy vs baselines, replay and live mode."""

from __future__ import annotations

import random

import numpy as np
import pytest

from divelab.coding.bayes_control import (
    AlwaysVerify,
    BeliefModel,
    Costs,
    DPController,
    FixedThreshold,
    GreedyController,
    Likelihood,
    NeverVerify,
    RefineModel,
    State,
    VerifyIfCriticsPass,
    calibrate,
    greedy_threshold,
    known_failure_value,
    run_episode,
)
from divelab.coding.bayes_control.replay import SyntheticEnv, auroc

MODEL = BeliefModel(prior=0.45, critics=(Likelihood(0.95, 0.5), Likelihood(0.9, 0.25)),
                    refine=RefineModel(rho11=0.9, rho01=0.35))


def test_log_odds_update_matches_bayes_rule():
    lik = Likelihood(0.8, 0.3)
    for b in (0.1, 0.5, 0.77):
        assert lik.posterior(b, True) == pytest.approx(0.8 * b / (0.8 * b + 0.3 * (1 - b)))
        assert lik.posterior(b, False) == pytest.approx(0.2 * b / (0.2 * b + 0.7 * (1 - b)))
    assert lik.posterior(0.0, True) == 0.0 and lik.posterior(1.0, False) == 1.0
    assert Likelihood(0.6, 0.6).posterior(0.3, True) == pytest.approx(0.3)  # uninformative critic


def test_calibrate_counts_and_skips_abstentions():
    obs = [(True, True)] * 8 + [(False, True)] * 2 + [(True, False)] * 3 + [(False, False)] * 7 + [(None, True)] * 5
    lik = calibrate(obs, smoothing=0.0 + 1e-9)
    assert lik.alpha == pytest.approx(0.8, abs=1e-6) and lik.beta == pytest.approx(0.3, abs=1e-6)
    assert calibrate(obs).alpha == pytest.approx(9 / 12)  # Laplace


def test_bad_inputs_are_clear():
    with pytest.raises(ValueError, match="alpha"):
        Likelihood(1.0, 0.5)
    with pytest.raises(ValueError, match="rho01"):
        RefineModel(0.9, 1.5)
    with pytest.raises(ValueError, match="verify"):
        Costs(verify=-1)
    with pytest.raises(ValueError, match="horizon"):
        DPController(MODEL, Costs(), horizon=0)
    with pytest.raises(ValueError, match="prior"):
        BeliefModel.from_dict({"critics": []})


@pytest.mark.parametrize("cv", [0.05, 0.2, 0.5, 0.9])
def test_greedy_threshold_equals_dp_boundary_at_horizon_one(cv):
    costs = Costs(verify=cv, critics=(0.01, 0.02))
    thr = greedy_threshold(MODEL, costs)
    dp = DPController(MODEL, costs, horizon=1, grid=4001, failure_terminal=known_failure_value(MODEL, costs))
    assert dp.ship_verify_boundary() == pytest.approx(min(max(thr, 0.0), 1.0), abs=1 / 4000 + 1e-9)


def _mean_utility(ctl, model, costs, n=1500, seed=0, max_steps=6):
    total = 0.0
    for i in range(n):
        env = SyntheticEnv(model, random.Random(seed * 100_000 + i))
        total += run_episode(ctl, env, model, costs, max_steps=max_steps).utility
    return total / n


@pytest.mark.parametrize("cv", [0.1, 0.6])
def test_dp_beats_greedy_and_baselines_on_synthetic_logs(cv):
    costs = Costs(verify=cv, critics=(0.01, 0.02))
    dp = _mean_utility(DPController(MODEL, costs, horizon=6), MODEL, costs)
    others = {c.name: _mean_utility(c, MODEL, costs) for c in (
        GreedyController(MODEL, costs), AlwaysVerify(), NeverVerify(), VerifyIfCriticsPass(), FixedThreshold(0.8))}
    for name, u in others.items():
        assert dp >= u - 0.03, (name, u, dp)
    assert dp > others["never-verify"] + 0.3
    assert others["greedy-VOI"] >= others["never-verify"]


def test_cheap_verifier_all_verifying_controllers_tie():
    # free verification and a step budget that does not bind: verifying everything is optimal
    costs = Costs(verify=0.0, refine=0.0, critics=(0.0, 0.0))
    dp = _mean_utility(DPController(MODEL, costs, horizon=20), MODEL, costs, n=600, max_steps=20)
    av = _mean_utility(AlwaysVerify(), MODEL, costs, n=600, max_steps=20)
    assert abs(dp - av) < 0.03


def test_uninformative_critics_reduce_to_a_threshold_rule():
    flat = BeliefModel(prior=0.6, critics=(Likelihood(0.7, 0.7),), refine=RefineModel(0.9, 0.4))
    costs = Costs(verify=0.5, critics=(0.01,))
    dp = DPController(flat, costs, horizon=4)
    acts = [dp.act(State(belief=b, next_critic=0, steps_left=4)) for b in np.linspace(0.01, 0.99, 50)]
    assert all(a[0] != "critic" for a in acts)  # never pays for a critic that cannot move the belief
    ships = [a[0] == "ship" for a in acts]
    first = ships.index(True)
    assert all(ships[first:])  # one boundary: ship above it


def test_auroc_matches_definition():
    assert auroc([0.1, 0.4, 0.35, 0.8], [False, False, True, True]) == pytest.approx(0.75)
    assert auroc([1, 1, 1], [True, False, True]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="both classes"):
        auroc([0.1, 0.2], [True, True])


def test_episode_accounting_always_verify():
    costs = Costs(verify=0.3, refine=0.1)
    model = BeliefModel(prior=0.0 + 1e-6, critics=(), refine=RefineModel(1.0, 1.0))
    env = SyntheticEnv(model, random.Random(0))  # first wrong, every refinement correct
    r = run_episode(AlwaysVerify(), env, model, costs, max_steps=6)
    assert r.actions == ["verify", "refine", "verify", "ship"]
    assert r.cost == pytest.approx(0.7) and r.utility == pytest.approx(0.3) and r.shipped_correct
