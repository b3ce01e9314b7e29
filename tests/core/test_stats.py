"""divelab.stats: intervals that cover what they should, AUROC on known answers."""

import numpy as np
import pytest

from divelab import stats


def test_auroc_recovers_a_planted_signal_and_shuffled_labels_give_chance():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    s = y * 1.5 + rng.normal(size=400)
    auc, lo, hi = stats.auroc_ci(y, s, seed=0)
    assert 0.8 < auc < 0.9 and lo < auc < hi
    auc0, lo0, hi0 = stats.auroc_ci(rng.permutation(y), s, seed=0)
    assert lo0 < 0.5 < hi0
    with pytest.raises(ValueError, match="both classes"):
        stats.auroc([1, 1, 1], [0.1, 0.2, 0.3])


def test_intervals_cover_the_mean_and_are_seeded():
    rng = np.random.default_rng(1)
    x = rng.normal(2.0, 1.0, 60)
    lo, hi = stats.mean_ci(x)
    assert lo < 2.0 < hi
    assert stats.bootstrap_ci(x, seed=3) == stats.bootstrap_ci(x, seed=3)
    blo, bhi = stats.bootstrap_ci(x, seed=3)
    assert blo < x.mean() < bhi
    assert stats.mean_ci([1.0, 1.0, 1.0]) == (1.0, 1.0)


def test_differences_and_proportions():
    d, lo, hi = stats.paired_diff_ci([1, 2, 3, 4], [0, 1, 2, 3])
    assert d == 1.0 and lo == hi == 1.0
    d, lo, hi = stats.diff_ci(np.arange(20.0), np.arange(20.0) + 5, seed=0)
    assert d == -5.0 and lo < -5.0 < hi
    lo, hi = stats.proportion_ci(0, 816)
    assert lo == 0.0 and 0.003 < hi < 0.006  # the Wilson upper bound for 0/816
    with pytest.raises(ValueError, match="0 <= k <= n"):
        stats.proportion_ci(5, 3)


def test_holm_adjusts_in_step_down_order():
    adj = stats.holm([0.01, 0.04, 0.03])
    assert np.allclose(adj, [0.03, 0.06, 0.06])


def test_auroc_equals_sklearn_with_ties_and_is_vectorised():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(5)
    for _ in range(20):
        y = rng.integers(0, 2, 57)
        if len(set(y)) < 2:
            continue
        s = rng.integers(0, 6, 57).astype(float)  # many ties
        assert stats.auroc(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    y = np.array([3, 7, 7, 3])  # the larger label is the positive class
    assert stats.auroc(y, [0.1, 0.9, 0.8, 0.2]) == 1.0


def test_auroc_diff_ci_is_zero_for_one_scorer_and_positive_for_a_better_one():
    rng = np.random.default_rng(0)
    y = np.r_[np.ones(40), np.zeros(40)].astype(int)
    good, noise = y + rng.normal(0, 0.5, 80), rng.normal(size=80)
    assert stats.auroc_diff_ci(y, good, y, good, n_resamples=200) == (0.0, 0.0, 0.0)
    d, lo, hi = stats.auroc_diff_ci(y, good, y, noise, n_resamples=500, seed=1)
    assert lo <= d <= hi and lo > 0.1
    with pytest.raises(ValueError, match="equal-size inputs"):
        stats.auroc_diff_ci(y, good, y[:-1], noise[:-1])
