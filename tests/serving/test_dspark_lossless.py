"""Losslessness of speculative sampling and of every causal scheduler (exact and statistical)."""

import copy

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from divelab.serving.dspark import exact
from divelab.serving.dspark.sampling import verify_block
from divelab.serving.dspark.scheduler import (
    ConfidenceScheduler,
    FixedK,
    GlobalArgmaxScheduler,
    StaleKScheduler,
    StaticThreshold,
    make_scheduler,
    survival,
    theta_curve,
)
from divelab.serving.dspark.sps import SPSCurve

CURVES = {
    "smooth": SPSCurve(np.arange(1, 8), 1.0 / (1 + 0.35 * np.arange(7))),
    "staircase": SPSCurve.synthetic_accelerator(1.0, 2, tile=2, max_b=16),
    "random": SPSCurve(np.arange(1, 8), np.random.default_rng(3).uniform(0.2, 1.0, 7)),
    "paper": exact.COUNTEREXAMPLE_SPS,
}
CAUSAL = [FixedK(1), FixedK(2), StaticThreshold(0.4), ConfidenceScheduler(), StaleKScheduler()]


def test_paper_counterexample():
    p = exact.SpecProblem.counterexample()
    brk = exact.first_token_distribution(p, ConfidenceScheduler(), exact.COUNTEREXAMPLE_SPS)
    arg = exact.first_token_distribution(p, GlobalArgmaxScheduler(), exact.COUNTEREXAMPLE_SPS)
    assert np.allclose(brk, [0.7, 0.3], atol=1e-12)
    assert np.allclose(arg, [0.85, 0.15], atol=1e-12)


@pytest.mark.parametrize("curve", list(CURVES))
@pytest.mark.parametrize("n_req,gamma", [(1, 3), (2, 2)])
def test_causal_schedulers_exactly_lossless(curve, n_req, gamma):
    sps = CURVES[curve]
    for seed in range(2):
        prob = exact.SpecProblem.random(n_req, 3, gamma, seed=seed, peaked=0.6)
        history = np.random.default_rng(seed).uniform(0.05, 1, size=(2, n_req, gamma))

        def prime(s, h=history, c=sps):
            if isinstance(s, StaleKScheduler):
                for old in h:
                    s(old, c)

        for sch in CAUSAL:
            assert exact.max_tv_error(prob, sch, sps, prime) <= 1e-12, (sch.name, curve, seed)


def test_target_distribution_sums_to_one():
    prob = exact.SpecProblem.random(1, 3, 2, seed=1)
    assert exact.target_distribution(prob, 0).sum() == pytest.approx(1.0, abs=1e-12)


def test_alg1_equals_one_at_a_time_loop():
    rng = np.random.default_rng(0)
    sps = SPSCurve.synthetic_accelerator(0.01, 6)
    for _ in range(30):
        conf = rng.uniform(0.05, 1, size=(3, 4))
        a = survival(conf)
        order = sorted(((a[r, j], j, r) for r in range(3) for j in range(4)), key=lambda t: (-t[0], t[1], t[2]))
        ell, b, tau = np.zeros(3, int), 3, 3.0
        best = tau * sps(b)
        for val, j, r in order:
            b, tau = b + 1, tau + val
            th = tau * sps(b)
            if th > best:
                best, ell[r] = th, j + 1
            else:
                break
        assert np.array_equal(ConfidenceScheduler()(conf, sps), ell)
        # admitted sets are prefixes and the global argmax is never below the break's Θ
        theta, *_ = theta_curve(a, sps)
        assert theta.max() >= best - 1e-12


def test_stale_k_budget_comes_from_old_confidences():
    sps = SPSCurve.synthetic_accelerator(0.01, 4)
    s = StaleKScheduler(delay=2)
    hi, lo = np.full((2, 4), 0.99), np.full((2, 4), 0.01)
    s(hi, sps)
    s(lo, sps)
    k_from_hi = int(s(lo, sps).sum())  # budget from `hi`, two calls back
    s2 = copy.deepcopy(s)
    assert s2.budget(2, sps) >= 0
    assert k_from_hi > 0


def test_scheduler_errors():
    with pytest.raises(ValueError, match="unknown scheduler"):
        make_scheduler("bogus", 4)
    with pytest.raises(ValueError, match="delay"):
        StaleKScheduler(delay=0)
    assert make_scheduler("fixed", 5).k == 5
    assert make_scheduler("fixed-1").k == 1


def test_verify_block_output_is_target_distribution():
    # one draft position: output token distribution must equal p_t whatever p_d is
    g = torch.Generator().manual_seed(0)
    p_t = torch.tensor([0.5, 0.2, 0.2, 0.1], dtype=torch.float64)
    p_d = torch.tensor([0.1, 0.6, 0.1, 0.2], dtype=torch.float64)
    logits = torch.log(p_t)[None].expand(2, -1)
    counts = np.zeros(4)
    n = 3000
    for _ in range(n):
        x = torch.multinomial(p_d, 1, generator=g)
        n_acc, nxt = verify_block(x, p_d[None], logits, 1.0, g)
        counts[int(x) if n_acc == 1 else nxt] += 1
    assert chisquare(counts, n * p_t.numpy()).pvalue > 1e-3
    # greedy: accept while equal to the target argmax
    tl = torch.tensor([[0.0, 5.0, 0.0], [9.0, 0.0, 0.0], [0.0, 0.0, 3.0]])
    assert verify_block(torch.tensor([1, 0]), None, tl, 0.0) == (2, 2)
    assert verify_block(torch.tensor([2, 0]), None, tl, 0.0) == (0, 1)
