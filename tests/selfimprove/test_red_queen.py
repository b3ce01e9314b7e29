import json

import numpy as np
import pytest

from divelab import verdicts
from divelab.chat import ScriptedChatModel
from divelab.selfimprove.red_queen import (
    Archive,
    ChatJudge,
    ExternalJudge,
    JudgeEvaluator,
    Record,
    RQGMConfig,
    SyntheticWorld,
    best_belief,
    checkpoint_bound,
    checkpoints,
    compare_judges,
    run,
    source_bias,
)


def test_best_belief_is_beta_quantile_and_monotone():
    from scipy import stats

    assert best_belief(30, 10, 0.1) == pytest.approx(stats.beta.ppf(0.1, 31, 11))
    assert best_belief(31, 9) > best_belief(30, 10)
    with pytest.raises(ValueError, match="eps"):
        best_belief(1, 1, eps=1.5)


def test_replacement_strict_and_ties_keep_incumbent():
    assert compare_judges((80, 20), (90, 10)).replace
    assert not compare_judges((90, 10), (80, 20)).replace
    tie = compare_judges((50, 50), (50, 50))
    assert not tie.replace and tie.reason == "tie keeps incumbent"
    # more evidence at the same rate is a higher lower bound: strict improvement
    assert compare_judges((8, 2), (80, 20)).replace


def test_erasure_removes_exactly_judge_dependent_records():
    a = Archive(writer=0, judge=0)
    a.add_child(0, 1, 0)
    recs = [Record(0, "writer", True, frozenset({"judge"}), 0, 1), Record(1, "judge", False, frozenset(), 0, 2),
            Record(1, "writer", False, frozenset({"judge", "other"}), 0, 3),
            Record(1, "writer", True, frozenset({"other"}), 0, 4)]
    for r in recs:
        a.record(r)
    assert a.erase("judge") == 2
    assert a.records == [recs[1], recs[3]]
    assert a.clade_counts("writer")[0].tolist() == [1, 0]  # node 1's surviving success counts for its parent


@pytest.mark.parametrize("budget", [8, 9, 100, 1000, 12345])
def test_checkpoint_count_bound(budget):
    cps = checkpoints(budget)
    assert len(cps) <= checkpoint_bound(budget)
    assert all(b == 2 * a for a, b in zip(cps, cps[1:], strict=False))


def test_run_modes_and_erasure_bookkeeping():
    w = SyntheticWorld(seed=1)
    r = run(w, RQGMConfig(budget=200, mode="rqgm"), seed=1)
    assert r.evaluations == 200 and len(r.archive.nodes) > 10
    assert all("judge" not in rec.deps or rec.epoch == len(r.replacements) for rec in r.archive.records)
    fixed = run(SyntheticWorld(seed=1), RQGMConfig(budget=200, mode="fixed"), seed=1)
    assert not fixed.replacements and fixed.final_judge is fixed.initial_judge
    again = run(SyntheticWorld(seed=1), RQGMConfig(budget=200, mode="rqgm"), seed=1)
    assert again.final_writer.tolist() == r.final_writer.tolist()
    with pytest.raises(ValueError, match="allowed"):
        RQGMConfig(mode="nope")


def test_the_starting_writer_is_at_the_true_quality_ceiling():
    w = SyntheticWorld(seed=0)
    best = w.best_true_quality()
    assert w.true_quality(w.initial_writer()) == pytest.approx(best)
    rng = np.random.default_rng(0)
    assert all(w.true_quality(w.mutate_writer(w.initial_writer(), rng)) <= best + 1e-12 for _ in range(200))


def test_frozen_biased_judge_is_gamed():
    w = SyntheticWorld(seed=3)
    r = run(w, RQGMConfig(budget=400, mode="fixed"), seed=3)
    before = w.writer_stats(w.initial_writer(), w.initial_judge())
    after = w.writer_stats(r.final_writer, r.initial_judge)
    assert after["judged_accept"] > before["judged_accept"] + 0.1
    assert after["true_quality"] < before["true_quality"] - 0.1


def test_evaluator_contract_and_openevolve(tmp_path):
    w = SyntheticWorld()
    ev = JudgeEvaluator(w, w.initial_judge(), n_items=32)
    p = tmp_path / "writer.json"
    p.write_text(json.dumps(w.initial_writer().tolist()))
    out = ev.evaluate(str(p))
    assert 0 <= out["combined_score"] <= 1 and out == ev.evaluate(w.initial_writer())
    assert ev.cascade(str(p), threshold=1.01)["stage"] == 1.0
    assert ev.cascade(str(p), threshold=0.0)["stage"] == 2.0
    eo = pytest.importorskip("openevolve.evaluation_result")
    judge = ExternalJudge(lambda prog: eo.EvaluationResult.from_dict(ev.evaluate(prog)), threshold=0.0)
    assert judge.accepts(str(p))
    assert not ExternalJudge(lambda prog: {"combined_score": 0.2}, 0.5).accepts(None)


def test_chat_judge_with_scripted_model_and_source_bias():
    model = ScriptedChatModel(fn=lambda msgs, tools: "ACCEPT" if "style=ai" in msgs[-1].content else "no idea")
    judge = ChatJudge(model, render=lambda x: f"style={x}")
    bias = source_bias(judge.accepts, {"ai": ["ai"] * 3, "human": ["human"] * 3 + ["ai"]})
    assert bias["accept_ai"] == 1.0 and bias["ratio"] == pytest.approx(4.0)
    assert judge.calls == 2 and judge.unparsed == 1  # cached by rendered text; "no idea" counted as unparsed
    with pytest.raises(ValueError, match="sources"):
        source_bias(judge.accepts, {"a": []})


def test_smoke_reproduction_claims_are_ruled_and_reapply(monkeypatch):
    monkeypatch.setenv("DIVELAB_QUIET", "1")
    from divelab.scaleout import run_reproduction

    rep = run_reproduction("divelab.selfimprove.red_queen", "smoke", 0)
    assert len(rep.claims) >= 10
    for c in rep.claims:
        if c.rule is not None:
            assert verdicts.reapply(c.rule).verdict == c.verdict
    assert rep.to_dict()["details"]["arms"]["fixed"]["replacements"] == 0
    assert np.isfinite(rep.details["arms"]["rqgm"]["true_quality"])
    # world 2, the HumanEval program world, is in the same report
    prog = [c for c in rep.claims if c.statement.startswith("program world")]
    assert len(prog) == 4 and all(c.ci is not None for c in prog)
    # the weak suite and the lenient anchor are ours: only the method comparison is empirical, and it is
    # judged against the strongest baseline measured, erasure ablation included
    assert [c.kind.value for c in prog] == ["planted", "planted", "empirical", "planted"]
    # the trivial baselines (no search, a random pick from the same archive) are among those the strongest is
    # taken from, and the comparison carries its audit trail: a falsifier, the shuffled-anchor control, the unit
    assert {b["name"] for b in prog[2].baselines} == {"seeded buggy writer (no search)", "random node of RQGM's "
                                                      "archive", "frozen weak suite", "self-judging",
                                                      "replacement without erasure"}
    assert prog[2].compared_with == max(prog[2].baselines, key=lambda b: b["value"])["name"]
    assert rep.planted and "style weight" in rep.planted
    main = next(c for c in rep.claims if c.statement.startswith("full RQGM minus the strongest baseline"))
    assert {b["name"] for b in main.baselines} == {"starting writer (no search)", "random node of RQGM's archive",
                                                   "fixed judge", "self-judging", "replacement without erasure"}
    # the starting writer already sits at the highest true quality the effort budget allows: a ceiling no
    # search can beat, so the controlled world cannot test "higher quality at equal budget"
    assert main.compared_with == "starting writer (no search)"
    assert main.verdict is verdicts.Verdict.UNINFORMATIVE and main.reason.startswith("ceiling")
    # the ceiling is ruled uninformative, a rule with no control argument: its shuffled-anchor arm still runs
    # (in details); the program world's comparison carries the control in its rule
    assert main.falsifier and prog[2].falsifier
    assert prog[2].rule["args"]["control"]["name"] == "RQGM with the anchor's labels shuffled"
    assert main.replication == {"unit": "seeds (one run of every arm each)", "n": 3, "clustered_by": ""}
    assert prog[2].replication == {"unit": "runs (task × seed)", "n": 4, "clustered_by": "HumanEval tasks"}
    # every claim that has an interval names its replication unit, and no value is compared with a measured
    # baseline as if it were chance
    assert all(c.replication for c in rep.claims if c.ci is not None)
    assert not [c.statement for c in rep.claims if c.rule and c.rule["args"].get("chance") is not None]
    # re-ranking with the same items is true for any other judge: not an empirical finding
    rerank = [c for c in rep.claims if c.statement.startswith("replacement re-ranks")]
    assert all(c.kind.value == "by construction" for c in rerank)
    assert rep.details["arms"]["rqgm_shuffled_anchor"]["replacements"] >= 0
    assert all(c.rule["args"].get("exact") for c in rep.claims if c.rule and c.rule["name"] == "bound")
    pw = rep.details["program_world"]
    assert pw["tasks"] == ["HumanEval/0", "HumanEval/3"] and pw["arms"]["fixed"]["replacements"] == 0
    assert pw["arms"]["self_judge"]["replacements"] == 0  # self-judging never replaces the incumbent
    assert pw["arms"]["fixed"]["judged_accept"] == 1.0  # the frozen weak suite is gamed even at smoke scale


def test_program_world_headline_rests_on_at_least_twelve_tasks_with_replicates():
    from divelab.selfimprove.red_queen import reproduce_programs
    from divelab.selfimprove.red_queen.reproduce import PLANS

    assert len(set(reproduce_programs.TASKS)) == len(reproduce_programs.TASKS) >= 12
    for scale in ("quick", "full"):
        p = PLANS[scale].programs
        assert p.tasks >= 12 and p.seeds >= 2, scale
    assert set(reproduce_programs.BASELINES) == {"fixed", "self_judge", "no_erasure"} < set(reproduce_programs.ARMS)
    with pytest.raises(ValueError, match="tasks"):
        reproduce_programs.Plan(tasks=len(reproduce_programs.TASKS) + 1, seeds=2, budget=10)
