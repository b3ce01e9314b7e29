"""Progress advantage (E173) at its edges: small beta with long horizons (log-space solver, never a
silent NaN) and the reward-recovery seam by its worst case over reachable states (issue #30)."""

from __future__ import annotations

import numpy as np
import pytest

from divelab.training.progress_advantage import mdp as M

BETAS = [1.0, 0.1, 0.01, 0.001]
GAMMAS = [0.5, 0.9, 0.99]


def _problem(seed: int, gamma: float, S: int = 5, A: int = 3) -> tuple[M.TabularMDP, np.ndarray]:
    rng = np.random.default_rng(seed)
    return M.random_mdp(rng, S, A, gamma=gamma), rng.dirichlet(np.ones(A), size=S)


@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("gamma", GAMMAS)
def test_identity_over_a_grid_of_beta_and_gamma(beta: float, gamma: float) -> None:
    """Q*, V* by value iteration; pi* independently by policy iteration, in log space."""
    for seed in range(2):
        mdp, ref = _problem(seed, gamma)
        Q, V = M.soft_value_iteration(mdp, ref, beta)
        log_pi = M.soft_policy_iteration(mdp, np.log(ref), beta, log=True)
        assert np.all(np.isfinite(log_pi))
        scale = max(1.0, float(np.abs(V).max()))
        assert M.identity_error(log_pi, np.log(ref), beta, Q, V, log=True) < 1e-9 * scale
        assert M.bellman_residual(mdp, log_pi, np.log(ref), beta, log=True) < 1e-9 * scale


@pytest.mark.parametrize("beta", [0.01, 0.001])
def test_longest_horizon_gamma_0999(beta: float) -> None:
    mdp, ref = _problem(7, 0.999)
    Q, V = M.soft_value_iteration(mdp, ref, beta)
    log_pi = M.soft_policy_iteration(mdp, np.log(ref), beta, log=True)
    scale = max(1.0, float(np.abs(V).max()))
    assert scale > 100  # values really are on the long-horizon scale
    assert M.identity_error(log_pi, np.log(ref), beta, Q, V, log=True) < 1e-9 * scale
    assert M.bellman_residual(mdp, log_pi, np.log(ref), beta, log=True) < 1e-9 * scale


@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("gamma", GAMMAS)
def test_probability_api_is_exact_or_raises_never_nan(beta: float, gamma: float) -> None:
    """The convenience form (probabilities in and out) either returns a correct policy or says why not."""
    mdp, ref = _problem(11, gamma)
    Q, V = M.soft_value_iteration(mdp, ref, beta)
    try:
        pi = M.soft_policy_iteration(mdp, ref, beta)
    except ValueError as exc:
        assert type(exc).__name__ == "PolicyUnderflowError" and "log=True" in str(exc)
        log_pi = M.soft_policy_iteration(mdp, np.log(ref), beta, log=True)
        assert log_pi.min() < -700  # only when pi* really leaves float64's range
        return
    assert np.all(np.isfinite(pi)) and np.all(pi > 0)
    assert M.identity_error(pi, ref, beta, Q, V) < 1e-9 * max(1.0, float(np.abs(V).max()))


def test_small_beta_optimum_is_below_float64_and_log_space_carries_it() -> None:
    mdp, ref = _problem(0, 0.99)
    log_pi = M.soft_policy_iteration(mdp, np.log(ref), 0.001, log=True)
    assert log_pi.min() < -745  # exp() of it is exactly 0.0 in float64
    adv = M.log_ratio_advantage(log_pi, np.log(ref), 0.001, log=True)
    assert np.all(np.isfinite(adv))
    with pytest.raises(M.PolicyUnderflowError, match="log=True"):
        M.soft_policy_iteration(mdp, ref, 0.001)


def test_underflowed_probabilities_raise_clear_errors() -> None:
    ref = np.full((2, 3), 1 / 3)
    pi = np.array([[1.0, 0.0, 0.0], [0.2, 0.3, 0.5]])
    with pytest.raises(M.PolicyUnderflowError, match="action 1 in state 0 probability 0"):
        M.log_ratio_advantage(pi, ref, 0.1)
    Q = np.zeros((2, 3))
    with pytest.raises(M.PolicyUnderflowError):
        M.identity_error(pi, ref, 0.1, Q, np.zeros(2))
    with pytest.raises(ValueError, match="NaN"):
        M.log_ratio_advantage(np.full((2, 3), np.nan), ref, 0.1)
    with pytest.raises(ValueError, match="log=True"):
        M.log_ratio_advantage(np.log(pi[1:]), ref[1:], 0.1)  # log-probs passed as probabilities
    with pytest.raises(ValueError, match="entries > 0"):
        M.log_ratio_advantage(pi[1:], np.log(ref[1:]), 0.1, log=True)  # probabilities passed as logs
    with pytest.raises(FloatingPointError, match="not finite"):
        M.identity_error(pi[1:], ref[1:], 0.1, np.full((1, 3), np.nan), np.zeros(1))
    # a zero-probability action costs nothing in the KL term (0 log 0 = 0): evaluation stays finite
    mdp = M.slip_chain(2, 0.0)
    Qp, Vp = M.soft_policy_evaluation(mdp, pi, ref, 0.1)
    assert np.all(np.isfinite(Qp)) and np.all(np.isfinite(Vp))


def test_log_and_probability_forms_agree_where_both_exist() -> None:
    mdp, ref = _problem(3, 0.9)
    pi = M.soft_policy_iteration(mdp, ref, 0.5)
    log_pi = M.soft_policy_iteration(mdp, np.log(ref), 0.5, log=True)
    np.testing.assert_allclose(np.log(pi), log_pi, atol=1e-10)
    _, V = M.soft_value_iteration(mdp, ref, 0.5)
    assert M.kl_objective(mdp, pi, ref, 0.5) == pytest.approx(M.kl_objective(mdp, log_pi, np.log(ref), 0.5, log=True))
    assert M.reward_recovery_gap(mdp, pi, ref, 0.5, V) == pytest.approx(
        M.reward_recovery_gap(mdp, log_pi, np.log(ref), 0.5, V, log=True))


def test_worst_case_reward_gap_exposes_what_the_mean_hides() -> None:
    """A 20-state slippery chain at gamma 0.5: values are flat near the start, where the occupancy sits,
    so the mean gap is ~1e-12 while a reachable triple is off by ~0.7 (rewards of size 1)."""
    mdp = M.slip_chain(20, 0.2, gamma=0.5)
    ref = np.full((20, 3), 1 / 3)
    _, V = M.soft_value_iteration(mdp, ref, 0.5)
    pi = M.soft_policy_iteration(mdp, ref, 0.5)
    assert M.reward_recovery_gap(mdp, pi, ref, 0.5, V) < 1e-9
    assert M.reward_recovery_max_gap(mdp, pi, ref, 0.5, V) > 0.5
    det = M.slip_chain(20, 0.0, gamma=0.5)
    _, Vd = M.soft_value_iteration(det, ref, 0.5)
    pid = M.soft_policy_iteration(det, ref, 0.5)
    assert M.reward_recovery_max_gap(det, pid, ref, 0.5, Vd) < 1e-8


def test_worst_case_is_over_reachable_states_only() -> None:
    """State 2 is unreachable from state 0; its (large) gap must not count."""
    P = np.zeros((3, 2, 3))
    P[0, :, 0] = P[0, :, 1] = 0.5
    P[1, :, 0] = 1.0
    P[2, 0, 0] = P[2, 0, 2] = 0.5
    P[2, 1, 2] = 1.0
    R = np.array([[0.0, 0.0], [0.0, 0.0], [10.0, -10.0]])
    mdp = M.TabularMDP(P, R, 0.9, np.array([1.0, 0.0, 0.0]))
    ref = np.full((3, 2), 0.5)
    _, V = M.soft_value_iteration(mdp, ref, 1.0)
    pi = M.soft_policy_iteration(mdp, ref, 1.0)
    assert M.reachable_states(mdp, pi).tolist() == [True, True, False]
    assert M.reward_recovery_max_gap(mdp, pi, ref, 1.0, V) < M.reward_recovery_max_gap(
        mdp, pi, ref, 1.0, V, reachable=False)


def test_reproduction_reports_worst_case_gap_and_small_beta_grid() -> None:
    from divelab.claims import Kind, Reproduction, Verdict
    from divelab.training.progress_advantage.reproduce import PLANS, _exact_claims, exact_check

    ex = exact_check(PLANS["smoke"].exact, 0)
    assert {(r["beta"], r["gamma"]) for r in ex["small_beta_grid"]} == {(b, g) for b in (0.01, 0.001)
                                                                          for g in (0.9, 0.99)}
    assert any(r["underflows_float64"] for r in ex["small_beta_grid"])
    lc = ex["long_chain_gamma05"]
    assert lc["reward_gap_mean"] < 1e-9 < 0.5 < lc["reward_gap_max"]
    rep = Reproduction(system="progress-advantage", title="t", scale="smoke", seed=0)
    rep.claims += _exact_claims(ex)
    worst = [c for c in rep.claims if c.statement.startswith("the same seam by its worst case")]
    grid = [c for c in rep.claims if c.statement.startswith("the identity at RLHF-typical settings")]
    assert len(worst) == 1 and worst[0].kind is Kind.CHECK and worst[0].verdict is Verdict.REPRODUCED
    assert len(grid) == 1 and grid[0].rule["name"] == "bound" and grid[0].verdict is Verdict.REPRODUCED
    assert grid[0].measured < 1e-8
