"""E170 on a real coder: generated tasks, the sandboxed critics, and dev-only selection (no model needed)."""

from __future__ import annotations

import copy
import random

import pytest

from divelab.codetasks.harness import evaluate
from divelab.coding.bayes_control import attempts, live_generated
from divelab.coding.bayes_control.live_generated import GenConfig, analyse, eval_tasks, split
from divelab.coding.bayes_control.tasks_generated import EVAL_FAMILIES, TRAIN_FAMILIES, generated_tasks

ONE_PER_FAMILY = [next(g for g in generated_tasks(EVAL_FAMILIES) if g.family == f.key) for f in EVAL_FAMILIES]
# the last instance too: its parameter is the most extreme (e.g. an example whose answer is None)
LAST_PER_FAMILY = [[g for g in generated_tasks(fams) if g.family == f.key][-1]
                   for fams in (EVAL_FAMILIES, TRAIN_FAMILIES) for f in fams]


def test_training_and_evaluation_families_are_disjoint():
    assert not {f.key for f in TRAIN_FAMILIES} & {f.key for f in EVAL_FAMILIES}
    assert not {f.entry for f in TRAIN_FAMILIES} & {f.entry for f in EVAL_FAMILIES}
    ids = [g.task.task_id for g in generated_tasks()]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("g", LAST_PER_FAMILY, ids=lambda g: g.task.task_id)
def test_reference_passes_its_tests_and_a_mutant_fails(g):
    t = g.task
    assert t.n_tests == 8 and t.n_doc_examples == 2
    ok = evaluate(t, g.solution)
    assert ok.doc_passed and ok.n_failed(t.n_tests) == 0
    bad = evaluate(t, t.prompt + "    return None\n")  # a wrong body: the hidden suite must catch it
    assert bad.n_failed(t.n_tests) > 0


def test_self_consistency_runs_in_the_sandbox_and_scores_agreement():
    g = ONE_PER_FAMILY[0]
    ref = attempts.outputs_on(g, g.solution)
    assert len(ref) == len(g.extra_inputs) and all(o.startswith("ok:") for o in ref)
    broken = attempts.outputs_on(g, g.task.prompt + "    return 1 / 0\n")
    assert all(o == "error:ZeroDivisionError" for o in broken)
    scores = attempts.agreement([ref, ref, ref, broken])
    assert scores[0] == pytest.approx(2 / 3) and scores[3] == 0.0  # errors agree with nobody


def test_code_of_stops_at_the_fence():
    g = ONE_PER_FAMILY[0]
    code = attempts.code_of(g, f"def {g.task.entry_point}(xs):\n    return 0\n```\nprint('chatter')")
    assert code.startswith(f"def {g.task.entry_point}(") and "chatter" not in code


def _fake_attempts(tasks, seed=0):
    rng = random.Random(seed)
    out = {}
    for g in tasks:
        p = rng.random() * 0.7
        rows = []
        for _ in range(6):
            c = rng.random() < p
            rows.append({"syntax": True, "pyflakes": rng.random() < 0.9, "public": rng.random() < (0.9 if c else 0.3),
                         "agreement": rng.random() * (1.0 if c else 0.6), "review": rng.gauss(0.5 if c else 0.0, 1),
                         "mean_logprob": rng.gauss(-0.4, 0.2), "correct": c})
        out[g.task.task_id] = rows
    return out


def test_selection_never_looks_at_test_tasks():
    cfg = GenConfig(reps=3, replicates=2)
    tasks = eval_tasks(cfg)
    run = {"attempts": _fake_attempts(tasks), "families": {g.task.task_id: g.family for g in tasks}}
    test, reps = split(sorted(run["attempts"]), run["families"], cfg, 0)
    for calib, dev in reps:
        assert not set(test) & (set(calib) | set(dev)) and not set(calib) & set(dev)
    _, d1 = analyse(run, cfg, 0)
    changed = copy.deepcopy(run)
    for t in test:  # rewrite the test tasks' outcomes: the dev picks and the fitted beliefs must not move
        for r in changed["attempts"][t]:
            r["correct"], r["public"] = not r["correct"], not r["public"]
    _, d2 = analyse(changed, cfg, 0)
    assert [(p["bayes"], p["simple"], p["dev_mean"]) for p in d1["picks"]] == \
        [(p["bayes"], p["simple"], p["dev_mean"]) for p in d2["picks"]]
    assert d1["fits"] == d2["fits"]
    assert d1["test_mean_per_100"] != d2["test_mean_per_100"]


def test_competence_outside_the_window_makes_the_comparison_uninformative():
    cfg = GenConfig(reps=2, replicates=2)
    tasks = eval_tasks(cfg)
    att = _fake_attempts(tasks)
    for rows in att.values():
        for r in rows:
            r["correct"] = False
    claims, d = analyse({"attempts": att, "families": {g.task.task_id: g.family for g in tasks}}, cfg, 0)
    assert d["competence"]["pass_at_1"] == 0.0
    assert all(c.verdict.value == "uninformative" for c in claims)


def test_not_checkable_without_a_sub_plan():
    from divelab.claims import Reproduction

    rep = Reproduction(system="bayes-control", title="t", scale="smoke", seed=0)
    live_generated.add_to(rep, None)
    assert [c.verdict.value for c in rep.claims] == ["not checkable here"]


def test_the_plan_sizes_the_real_coder_and_set_reaches_it(monkeypatch):
    from divelab import plans
    from divelab.claims import Reproduction
    from divelab.coding.bayes_control import reproduce
    from divelab.lm import real

    assert reproduce.PLANS["smoke"].live_llm is None and reproduce.PLANS["quick"].live_llm is None
    full = reproduce.PLANS["full"].live_llm
    assert full.adapt.steps == 60 and full.adapt.lora.r == 16 and len(full.adapt.lora.target_modules) == 8 * 7
    plan = plans.resolve(reproduce, "full", {"live_llm.reps": "5", "live_llm.adapt.steps": "7"})
    assert plan.live_llm.reps == 5 and plan.live_llm.adapt.steps == 7
    assert plans.to_dict(plan)["live_llm"]["adapt"]["steps"] == 7  # recorded in results.json
    seen = []
    monkeypatch.setattr(real, "is_available", lambda name=real.SMOLLM2: True)
    monkeypatch.setattr(live_generated, "measure", lambda cfg, seed: (seen.append(cfg), ([], {}))[1])
    rep = Reproduction(system="bayes-control", title="t", scale="full", seed=0)
    live_generated.add_to(rep, plan.live_llm, 0)
    assert seen == [plan.live_llm]  # the sub-plan given, not a size looked up by scale


def test_claims_carry_the_audit_trail_and_the_shuffled_label_control():
    cfg = GenConfig(reps=2, replicates=2)
    tasks = eval_tasks(cfg)
    run = {"attempts": _fake_attempts(tasks), "families": {g.task.task_id: g.family for g in tasks}}
    claims, d = analyse(run, cfg, 0)
    util, auc = claims
    simple = {"always-verify", "never-verify", "verify-if-critics-pass", "ship-if-critics-pass",
              *(f"fixed-threshold@{t:g}" for t in cfg.thresholds)}
    assert {b["name"] for b in util.baselines} == simple  # every simple rule, judged against the strongest
    assert util.compared_with == max(simple, key=d["test_mean_per_100"].get)
    for c in claims:
        assert c.falsifier and c.replication["n"] > 0
        assert c.rule["args"]["control"]["name"].startswith(("Bayesian controller", "belief")), c.rule
        assert "shuffled labels" in c.rule["args"]["control"]["name"]
    # the public-tests critic carries evidence in the fake data; on shuffled labels it carries next to none
    real = [f["belief"]["critics"][2] for f in d["fits"]]  # [alpha, beta]
    sham = [f["belief"]["critics"][2] for f in d["shuffled_label_fits"]]
    assert all(a - b > 0.3 for a, b in real)
    assert all(abs(a - b) < 0.15 for a, b in sham)
    assert all(p["sham"].endswith("(shuffled labels)") for p in d["picks"])
