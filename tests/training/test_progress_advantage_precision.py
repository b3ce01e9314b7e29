"""Progress advantage (E173): the solvers' stopping rules guarantee the tolerance they state.

Value iteration stops on the contraction bound ``(gamma |V_k - V_{k-1}| + rounding) / (1 - gamma)``,
policy iteration on ``2 (gamma |T V - V| + rounding) / (1 - gamma)``; each returns that bound
(``with_bound=True``), and a reference computed in extended precision (``np.longdouble``, far past
float64's floor) checks that the true error is within it — across gamma 0.5 to 0.999 and beta 1 to
0.001. Before, value iteration stopped when the last change fell below 1e-13 of the value scale,
which at gamma 0.99 left V and Q up to ~1e-9·1.3 off (the change times gamma / (1 - gamma) ~ 100).
"""

from __future__ import annotations

import numpy as np
import pytest
from soft_reference import extended_soft_values

from divelab.training.progress_advantage import mdp as M

GAMMAS = [0.5, 0.9, 0.99, 0.999]
BETAS = [1.0, 0.1, 0.01, 0.001]


def _problem(seed: int, gamma: float) -> tuple[M.TabularMDP, np.ndarray]:
    rng = np.random.default_rng(seed)
    S, A = int(rng.integers(3, 8)), int(rng.integers(2, 5))
    return M.random_mdp(rng, S, A, gamma=gamma), np.log(rng.dirichlet(np.ones(A), size=S))


def _reference(mdp: M.TabularMDP, log_ref: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """``(Q*, V*)`` by value iteration in extended precision, from zero (see soft_reference)."""
    return extended_soft_values(mdp, log_ref, beta)


@pytest.fixture(scope="module")
def references() -> dict[tuple[float, float], tuple]:
    out = {}
    for i, gamma in enumerate(GAMMAS):
        for j, beta in enumerate(BETAS):
            mdp, log_ref = _problem(100 * i + j, gamma)
            out[gamma, beta] = (mdp, log_ref, *_reference(mdp, log_ref, beta))
    return out


@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("gamma", GAMMAS)
def test_value_iteration_is_within_its_certified_bound(references, gamma, beta):
    mdp, log_ref, Q_star, V_star = references[gamma, beta]
    Q, V, bound = M.soft_value_iteration(mdp, log_ref, beta, log=True, with_bound=True)
    assert float(np.abs(V - V_star).max()) <= bound
    assert float(np.abs(Q - Q_star).max()) <= mdp.gamma * bound + 1e-15 * float(np.abs(Q_star).max())
    if gamma <= 0.99:  # values up to a few hundred: float64 certifies well below 1e-9
        assert bound <= 1e-9, bound


@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("gamma", [0.9, 0.99])
def test_value_iteration_meets_an_absolute_tolerance_asked_for(references, gamma, beta):
    """At gamma 0.99 the values reach ~100: an absolute 1e-9 is what the old stopping rule missed."""
    mdp, log_ref, Q_star, V_star = references[gamma, beta]
    Q, V = M.soft_value_iteration(mdp, log_ref, beta, tol=1e-9, log=True)
    assert float(np.abs(V - V_star).max()) <= 1e-9
    assert float(np.abs((Q - V[:, None]) - (Q_star - V_star[:, None])).max()) <= 2e-9


@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("gamma", GAMMAS)
def test_policy_iteration_is_within_its_certified_bound(references, gamma, beta):
    mdp, log_ref, Q_star, V_star = references[gamma, beta]
    log_pi, bound = M.soft_policy_iteration(mdp, log_ref, beta, log=True, with_bound=True)
    err = float(np.abs(beta * (log_pi - log_ref) - (Q_star - V_star[:, None])).max())
    assert err <= bound, (err, bound)
    # and the identity check against value iteration's Q*, V* stays within both certificates
    Q, V, vi_bound = M.soft_value_iteration(mdp, log_ref, beta, log=True, with_bound=True)
    assert M.identity_error(log_pi, log_ref, beta, Q, V, log=True) <= bound + (1 + mdp.gamma) * vi_bound


@pytest.mark.parametrize("solver", ["value", "policy"])
def test_a_tolerance_float64_cannot_certify_is_refused_with_the_floor_named(references, solver):
    mdp, log_ref, _, _ = references[0.999, 0.01]
    run = M.soft_value_iteration if solver == "value" else M.soft_policy_iteration
    with pytest.raises(ValueError, match=r"below what float64 can certify.*pass tol >= "):
        run(mdp, log_ref, 0.01, tol=1e-14, log=True)
    with pytest.raises(ValueError, match="tol must be a positive"):
        run(mdp, log_ref, 0.01, tol=0.0, log=True)
