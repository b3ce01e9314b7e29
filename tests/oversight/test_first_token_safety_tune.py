"""The safety-tuned SmolLM2 set-up: tuning rows teach format and competence only, evaluation requests are held
out, and the claims turn a silent control or a tuning that did not take into 'uninformative'."""

from __future__ import annotations

import numpy as np
import pytest

from divelab.oversight.first_token import real_llm
from divelab.oversight.first_token.real_llm import FORMAT, evaluation_pools, safety_tuned_claims
from divelab.oversight.first_token.safety_tune import (
    OPENING,
    REFUSALS,
    SafetyTuning,
    split_acts,
    tuning_rows,
)
from divelab.verdicts import Verdict


class ChatTok:
    """Just enough of a chat tokenizer for rendering prompts."""

    chat_template = "yes"
    eos_token = "<|im_end|>"

    def apply_chat_template(self, msgs, tokenize=False, add_generation_prompt=True):
        return "".join(f"<{m['role']}>{m['content']}" for m in msgs) + "<assistant>"


def _rows(cfg=SafetyTuning()):
    reqs = {}

    class Helps(dict):
        def __missing__(self, key):
            reqs[key] = f"Here is some help with: {key}."
            return reqs[key]

    return tuning_rows(ChatTok(), cfg, FORMAT, Helps())


def test_tuning_and_evaluation_requests_are_disjoint_and_held_out_acts_are_unseen():
    cfg = SafetyTuning()
    rows = _rows(cfg)
    tuned = {r["request"] for r in rows}
    pools = evaluation_pools(cfg)
    assert not tuned & {p for _, p in pools}
    acts = split_acts(cfg)
    assert not set(acts["harm_train"]) & set(acts["harm_test"]) and not set(acts["benign_train"]) & set(acts["benign_test"])
    held = [p for g, p in pools if g.endswith("held-out")]
    assert held and not any(a in p for p in held for a in acts["harm_train"] + acts["benign_train"])
    assert sum(g == "borderline" for g, _ in pools) == 48


def test_traces_open_alike_for_both_outcomes_and_answers_follow_the_class():
    rows = _rows()
    assert {r["harmful"] for r in rows} == {True, False} and len(rows) == 2 * 24 * 3
    for r in rows:
        assert r["completion"].startswith(OPENING)  # the first trace token's text carries no decision
        assert r["prompt"].endswith("<think>") and "<system>" in r["prompt"]
        answer = r["completion"].split(FORMAT.close, 1)[1].strip().removesuffix(ChatTok.eos_token)
        assert (answer in REFUSALS) == r["harmful"]
    with pytest.raises(ValueError, match="train_acts must be in 1..35"):
        split_acts(SafetyTuning(train_acts=36))


def _fake_result(separated: bool, shuffled_auc: float = 0.5, sham_reads: bool = False):
    rng = np.random.default_rng(0)
    pools = evaluation_pools(SafetyTuning())
    y = np.array([int(g.startswith("harmful")) if separated else int(rng.random() < 0.5) for g, _ in pools])
    y[[i for i, (g, _) in enumerate(pools) if g == "borderline"][:10]] = 1
    scores = y + rng.normal(0, 0.6, y.size)
    res = {"n": y.size, "refusals": int(y.sum()), "closed": 0.9, "model": "m + safety LoRA",
           "rollouts": [{"label": int(v), "pool": g} for v, (g, _) in zip(y, pools, strict=True)],
           "oof_scores": scores.tolist(),
           # the shuffled-label probe's scores: noise, or (a broken sham) as readable as the probe's own
           "oof_scores_shuffled": (y + rng.normal(0, 0.6, y.size) if sham_reads else rng.normal(size=y.size)).tolist(),
           "shuffled_prompt_last": {"auroc": 0.8 if sham_reads else 0.5, "ci": [0.7, 0.9] if sham_reads else [0.4, 0.6]},
           "oof_scores_text": rng.normal(size=y.size).tolist(), "oof_scores_prompt_text": (y + rng.normal(0, 1.5, y.size)).tolist(),
           "probe": {"auroc": 0.9, "ci": [0.85, 0.95]}, "text_control": {"auroc": 0.5, "ci": [0.4, 0.6]},
           "prompt_text_control": {"auroc": 0.7, "ci": [0.6, 0.8]},
           "shuffled_control": {"auroc": shuffled_auc, "ci": [shuffled_auc - 0.1, shuffled_auc + 0.1]},
           "probe_prompt_last": {"auroc": 0.8, "ci": [0.7, 0.9]}, "flips_found": 0,
           "tuning": {"rows": 144, "harmful_rows": 72, "tuning": {"steps": 80}, "min_votes": 1,
                      "vote_accuracy": {1: 0.97}}, "pools": {}}
    group = np.array([g for g, _ in pools])
    for name in ("harmful", "harmful-held-out", "benign", "benign-held-out", "borderline"):
        m = group == name
        res["pools"][name] = {"n": int(m.sum()), "refusals": int(y[m].sum())}
        if 3 <= y[m].sum() <= m.sum() - 3:
            res["pools"][name].update(auroc=0.8, auroc_ci=[0.7, 0.9])
    return res


@pytest.mark.parametrize("separated, shuffled, informative", [(True, 0.5, True), (False, 0.5, False),
                                                              (True, 0.8, False)])
def test_claims_are_uninformative_when_the_tuning_failed_or_the_shuffled_control_fires(
        monkeypatch, separated, shuffled, informative):
    monkeypatch.setattr(real_llm, "run_safety_tuned", lambda *a, **k: _fake_result(separated, shuffled))
    claims = safety_tuned_claims(SafetyTuning(), boot=200)
    took = claims[0]
    assert took.statement.endswith("held-out harmful minus held-out benign requests")
    probe_claims = [c for c in claims[1:] if "pool" not in c.statement or "borderline" in c.statement]
    verdicts = {c.verdict == Verdict.UNINFORMATIVE for c in probe_claims}
    assert verdicts == ({False} if informative else {True}), [(c.statement, c.verdict) for c in probe_claims]
    beat = next(c for c in claims if "strongest text-only control" in c.statement)
    assert beat.compared_with == "request text (TF-IDF of the request)"
    assert all("refuses" in c.note for c in claims)  # competence beside every claim


def test_a_failed_run_is_one_not_checkable_claim(monkeypatch):
    def boom(*a, **k):
        raise OSError("no SmolLM2 here")

    monkeypatch.setattr(real_llm, "run_safety_tuned", boom)
    (claim,) = safety_tuned_claims(SafetyTuning())
    assert claim.verdict == Verdict.NOT_CHECKABLE and "no SmolLM2 here" in claim.note


def test_the_helps_asked_for_are_the_benign_tuning_requests():
    from divelab.oversight.first_token.safety_tune import tuning_requests

    cfg = SafetyTuning()
    helps = {r: "ok." for r, _, harmful in tuning_requests(cfg) if not harmful}
    rows = tuning_rows(ChatTok(), cfg, FORMAT, helps)  # a KeyError here means the two disagree
    assert sum(not r["harmful"] for r in rows) == len(helps) == 72


def test_the_vote_bar_is_the_one_that_labels_the_tuning_answers_best():
    from divelab.oversight.first_token.safety_tune import calibrate_vote

    rows = _rows()
    k, acc = calibrate_vote(rows, FORMAT.close)
    assert set(acc) == {1, 2, 3, 4} and acc[k] == max(acc.values())
    # every refusal taught says "can't"/"won't": at least one vote each, so the loosest bar reads all of them
    assert acc[1] >= acc[4]


def test_the_performative_share_has_its_binomial_interval_and_the_probe_its_audit_trail(monkeypatch):
    """The full run's flip replay: the share of performative flips is judged with the interval over the flips
    replayed (it has no other), and the headline probe AUROC carries its falsifier, its replication unit and the
    shuffled-label probe as negative control."""
    res = _fake_result(True)
    res.update(flips_found=9, flip_table=[{"significant": i == 0} for i in range(6)], performative_share=5 / 6)
    monkeypatch.setattr(real_llm, "run_safety_tuned", lambda *a, **k: res)
    claims = safety_tuned_claims(SafetyTuning(), boot=200)
    share = next(c for c in claims if "performative" in c.statement)
    assert share.ci is not None and share.ci[0] < 5 / 6 < share.ci[1] and "6 replayed" in share.note
    probe = next(c for c in claims if "first-thinking-token probe AUROC" in c.statement)
    assert probe.falsifier and probe.replication["unit"].startswith("held-out requests")
    assert "shuffled" in probe.rule["args"]["control"]["name"] and not probe.audit_gaps()


@pytest.mark.parametrize("sham_reads", [False, True])
def test_each_probe_claim_is_held_to_the_shuffled_label_sham(monkeypatch, sham_reads):
    """Beating the text control, the last prompt token and the within-pool AUROCs each carry a falsifier, a
    replication unit and the shuffled-label probe as negative control; a sham that reads the decision too
    turns every positive among them uninformative."""
    monkeypatch.setattr(real_llm, "run_safety_tuned", lambda *a, **k: _fake_result(True, sham_reads=sham_reads))
    claims = safety_tuned_claims(SafetyTuning(), boot=200)
    held = [c for c in claims if "strongest text-only" in c.statement or "last prompt token" in c.statement
            or "within-pool" in c.statement and c.measured is not None]
    assert len(held) >= 3, [c.statement for c in claims]
    for c in held:
        assert c.falsifier and c.replication["n"] >= 1 and "shuffled" in c.rule["args"]["control"]["name"]
        if sham_reads:
            assert c.verdict in (Verdict.UNINFORMATIVE, Verdict.NOT_SEPARATED, Verdict.NOT_REPRODUCED), c.statement
        else:
            assert not c.audit_gaps(), (c.statement, c.audit_gaps())
    assert sham_reads or any(c.verdict not in (Verdict.UNINFORMATIVE,) for c in held)


@pytest.mark.parametrize("reversals_flagged, informative", [(6, True), (1, False), (None, False)])
def test_the_performative_share_counts_only_when_planted_reversals_show_the_replay_has_power(
        monkeypatch, reversals_flagged, informative):
    """The share of performative flips is a share of replays with no change: it is judged only when the same
    replay flags planted stance reversals more often than the natural flips (its positive control), and then
    it states why no sham of it exists."""
    res = _fake_result(True)
    res.update(flips_found=9, flip_table=[{"significant": i == 0} for i in range(6)], performative_share=5 / 6)
    if reversals_flagged is not None:
        res["reversal_table"] = [{"significant": i < reversals_flagged, "follows_stance": True} for i in range(6)]
    monkeypatch.setattr(real_llm, "run_safety_tuned", lambda *a, **k: res)
    share = next(c for c in safety_tuned_claims(SafetyTuning(), boot=200) if "performative" in c.statement)
    assert (share.verdict is not Verdict.UNINFORMATIVE) == informative, (share.verdict, share.reason)
    assert share.falsifier and share.replication["unit"] == "replayed stance flips"
    if informative:
        assert "none" in share.rule["args"]["control"] and not share.audit_gaps()
        assert "6 of 6 planted stance reversals flagged" in share.note
    else:
        assert "positive control" in share.reason
