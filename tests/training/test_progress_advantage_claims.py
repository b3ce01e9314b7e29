"""E173's language-model claims over training runs (lm_claims.py), on hand-made per-run numbers: no model."""

from __future__ import annotations

import numpy as np
import pytest

from divelab.claims import Kind, Verdict
from divelab.training.progress_advantage import lm_claims as L
from divelab.training.progress_advantage.lmcheck import permuted_steps
from divelab.training.progress_advantage.scorer import TrajectoryScores


def _run(progress: float, sham: float, **baselines: float) -> dict:
    return {"progress": progress, "sham": sham, "baselines": baselines}


def _claim(runs: list[dict]):
    return L.comparative(runs, statement="s", paper_value="p", unit="points", scale=100.0, fmt=L._pct,
                         falsifier="f", note="", seed=0, why="no size")


def test_random_pick_decides_when_it_beats_every_confidence_baseline() -> None:
    # progress beats the confidence baseline by 20 points in every run, but a random pick is stronger still
    runs = [_run(0.50 + e, 0.40, **{"mean token log-prob": 0.30 + e, "random pick": 0.60 + 1.5 * e}) for e in
            (0.0, 0.01, -0.01, 0.02)]
    c = _claim(runs)
    assert c.compared_with == "random pick" and c.measured == pytest.approx(-10.25)
    assert c.verdict is Verdict.NOT_REPRODUCED
    assert {b["name"] for b in c.baselines} == {"mean token log-prob", "random pick"}


def test_the_interval_is_over_training_runs_so_runs_that_disagree_are_not_separated() -> None:
    # two runs favour progress, two disfavour it: however many groups each run had, the sign is not settled
    runs = [_run(0.5 + d, 0.3, **{"random pick": 0.5}) for d in (0.2, 0.15, -0.1, -0.05)]
    c = _claim(runs)
    assert c.ci[0] < 0 < c.ci[1] and c.verdict is Verdict.NOT_SEPARATED
    assert c.replication == {"unit": "training runs", "n": 4, "clustered_by": ""}
    assert c.rule["args"]["training_runs"] == 4


def test_a_control_that_shows_the_effect_makes_the_claim_uninformative() -> None:
    win = [_run(0.8 + 2 * e, 0.2, **{"random pick": 0.5 + e}) for e in (0.0, 0.02, -0.02, 0.01)]
    assert _claim(win).verdict in (Verdict.PARTLY, Verdict.DIRECTION_HOLDS)
    sham_wins = [dict(r, sham=r["progress"]) for r in win]  # permuted log-ratios select as well as the real ones
    c = _claim(sham_wins)
    assert c.verdict is Verdict.UNINFORMATIVE and "negative control" in c.reason
    assert c.rule["args"]["control"]["name"] == L.SHAM and c.kind is Kind.EMPIRICAL and c.falsifier


def test_permuted_steps_keep_lengths_and_confidences_and_move_log_ratios() -> None:
    rng = np.random.default_rng(0)

    def traj(n: int, base: float) -> TrajectoryScores:
        lp = [np.array([base + i, base + i + 0.5]) for i in range(n)]
        return TrajectoryScores(lp, [x - 1 for x in lp], [np.ones(2) * base] * n, [np.zeros(2)] * n, 0.1)

    scored = [traj(3, 0.0), traj(1, 10.0), traj(5, 20.0)]
    sham = permuted_steps(scored, rng)
    assert [x.n_steps for x in sham] == [3, 1, 5]
    assert all(a.policy_entropy is b.policy_entropy for a, b in zip(scored, sham, strict=True))
    steps = sorted(float(p[0]) for x in scored for p in x.policy_logprobs)
    assert sorted(float(p[0]) for x in sham for p in x.policy_logprobs) == steps  # the same pool, moved
    # each step keeps its own (policy, reference) pair
    assert all(np.allclose(p - r, 1.0) for x in sham for p, r in zip(x.policy_logprobs, x.reference_logprobs,
                                                                     strict=True))
    assert any(not np.array_equal(a.policy_logprobs[0], b.policy_logprobs[0]) for a, b in zip(scored, sham,
                                                                                              strict=True))


def test_best_of_n_run_includes_the_trivial_picks() -> None:
    n = 4
    success = np.array([0, 1, 0, 0, 1, 1, 0, 1], dtype=bool)  # two groups of four
    per_task = {"min/min": np.array([1.0, 1.0]), "sum/sum": np.array([0.0, 1.0])}
    pol = {"n": n, "_scores": {"success": success.tolist(), "conf": [4, 3, 2, 1, 1, 2, 3, 4]},
           "baselines": {"conf": {}}, "_per_task": per_task, "_sham": {"_per_task": per_task}}
    r = L.best_of_n_run(pol)
    assert r["baselines"]["random pick"] == pytest.approx(success.mean())
    assert r["baselines"]["first rollout"] == pytest.approx(0.5)  # rollout 0 lost in group 1, won in group 2
    assert r["baselines"]["conf"] == pytest.approx(0.5)  # picks rollout 0, then rollout 3
    assert r["sum/sum"] == pytest.approx(0.5) and r["progress"] == pytest.approx(1.0)
