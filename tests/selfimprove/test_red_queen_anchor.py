"""Red Queen (E178): what an anchor does to the judge is reported as claims, and an anchor with one
label only (on which an accept-all or reject-all judge is perfect) is refused."""

from __future__ import annotations

import numpy as np
import pytest

from divelab import verdicts
from divelab.claims import Kind
from divelab.selfimprove.red_queen.reproduce import lenient_anchor_judge_claims, run_arm
from divelab.selfimprove.red_queen.rqgm import (
    DegenerateAnchor,
    RQGMConfig,
    check_anchor,
    run,
    shuffled_labels,
)
from divelab.selfimprove.red_queen.world_synthetic import SyntheticWorld


@pytest.mark.parametrize("anchor_tau, only", [(-100.0, "good"), (100.0, "bad")])
@pytest.mark.parametrize("mode", ["rqgm", "no_erasure"])
def test_a_single_class_anchor_is_refused(anchor_tau, only, mode):
    world = SyntheticWorld(seed=3, anchor_tau=anchor_tau)
    with pytest.raises(DegenerateAnchor, match=f"degenerate: all 120 of its items are labelled {only}"):
        run(world, RQGMConfig(budget=20, mode=mode), seed=3)
    # the same world with a frozen judge never consults the anchor: it runs
    assert run(world, RQGMConfig(budget=20, mode="fixed"), seed=3).evaluations == 20


def test_check_anchor_counts_both_labels_and_sees_matched_pairs():
    x = np.zeros(3)
    assert check_anchor([[(x, True)], [(x, False)], [(x, True)]]) == {True: 2, False: 1}
    with pytest.raises(DegenerateAnchor, match="both labels"):
        check_anchor([[(x, False), (x, False)]] * 4)  # adversarial tasks: pairs, still one label
    assert check_anchor(SyntheticWorld(seed=0).anchor(True))[False] > 0  # the default anchors are fine


def test_judge_side_effects_of_a_lenient_anchor_are_claims():
    seeds = [0, 1, 2, 3]
    results = {arm: [run_arm(arm, s, 150, 60) for s in seeds] for arm in ("rqgm", "rqgm_lenient_anchor")}
    claims = lenient_anchor_judge_claims(results, seed=0)
    text = " | ".join(c.statement for c in claims)
    assert "accuracy" in text and "accept rate" in text and "AI/human bias" in text
    for c in claims:
        assert c.kind is Kind.PLANTED and c.ci is not None and c.rule is not None
        assert verdicts.reapply(c.rule).verdict == c.verdict
    acc = next(c for c in claims if "accuracy" in c.statement)
    want = np.mean([r["judge"]["accuracy"] for r in results["rqgm_lenient_anchor"]]) - np.mean(
        [r["judge"]["accuracy"] for r in results["rqgm"]])
    assert acc.measured == pytest.approx(want)


@pytest.mark.parametrize("adversarial", [False, True])
def test_the_shuffled_anchor_keeps_items_and_label_counts_but_not_the_truth(adversarial):
    anchor = SyntheticWorld(seed=5).anchor(adversarial)
    shuf = shuffled_labels(anchor, seed=5)
    assert [[x for x, _ in t] for t in shuf] == [[x for x, _ in t] for t in anchor]  # the same items, in order
    assert check_anchor(shuf) == check_anchor(anchor)
    moved = np.mean([t[0][1] != s[0][1] for t, s in zip(anchor, shuf, strict=True)])
    assert moved > 0.3  # labels no longer follow the items' truth
    if adversarial:  # matched twins keep one label between them
        assert all(len({y for _, y in t}) == 1 for t in shuf)
    assert shuffled_labels(anchor, seed=5) == shuf  # seeded
    # the loop runs on it (the negative control arm) and its replacements differ from the true anchor's
    w = SyntheticWorld(seed=5)
    ctl = run(w, RQGMConfig(budget=200, mode="rqgm", shuffle_anchor=True), seed=5)
    real = run(SyntheticWorld(seed=5), RQGMConfig(budget=200, mode="rqgm"), seed=5)
    assert ctl.evaluations == 200
    assert [r.step for r in ctl.replacements] != [r.step for r in real.replacements] or \
        ctl.final_writer.tolist() != real.final_writer.tolist()
