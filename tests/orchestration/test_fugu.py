"""Fugu / Fugu-Ultra (E166): tasks, workers, router training, baselines, Conductor and the reproduction."""

from __future__ import annotations

import numpy as np
import pytest

from divelab.chat import ScriptedChatModel, user
from divelab.orchestration.fugu import (
    SVF,
    Conductor,
    FuguRouter,
    HashingFeatures,
    KNNRouter,
    LinearRouter,
    MFRouter,
    RecursionCapError,
    SkillWorker,
    ToolMemory,
    Worker,
    WorkflowError,
    calibrate_lambda,
    cascade,
    default_pool,
    entropy,
    format_reward,
    group_advantages,
    make_tasks,
    parallel_then_select,
    parse_workflow,
    record,
    score,
    solve,
    tune_cascade,
)
from divelab.orchestration.fugu.matched import CASCADE_MATCHED, held_to_cascade, train_and_score


def test_tasks_are_solved_exactly_from_every_phrasing():
    tasks = make_tasks(300, seed=3)
    assert {t.family for t in tasks} == {"add", "mul", "reverse", "count", "sort"}
    assert all(solve(t.prompt) == (t.family, t.answer) for t in tasks)
    assert score(tasks[0], f"reasoning...\nANSWER: {tasks[0].answer}") == 1.0
    assert score(tasks[0], "ANSWER: nope") == 0.0
    with pytest.raises(ValueError, match=">= 1"):
        make_tasks(0)
    with pytest.raises(ValueError, match="allowed"):
        make_tasks(3, mix={"poetry": 1.0})


def test_skill_worker_follows_its_profile_and_is_replayable():
    tasks = make_tasks(400, seed=1)
    good = SkillWorker("g", {f: 1.0 for f in ("add", "mul", "reverse", "count", "sort")}, decay=0.0)
    half = SkillWorker("h", {"add": 0.5}, decay=0.0)
    assert all(score(t, good.complete([user(t.prompt)]).message.content) for t in tasks)
    adds = [t for t in tasks if t.family == "add"]
    acc = np.mean([score(t, half.complete([user(t.prompt)]).message.content) for t in adds])
    assert 0.35 < acc < 0.65
    again = [half.complete([user(t.prompt)]).message.content for t in adds]
    assert again == [half.complete([user(t.prompt)]).message.content for t in adds]
    with pytest.raises(ValueError, match="unknown task families"):
        SkillWorker("x", {"poetry": 0.5})


@pytest.fixture(autouse=True)
def _one_blas_thread():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


def _planted(n=300, seed=0):
    """Worker i is best on family i (planted best-worker-per-cluster structure)."""
    fams = ("add", "mul", "reverse", "count", "sort")
    tasks = make_tasks(n, seed=seed)
    rng = np.random.default_rng(seed)
    r = np.full((n, 5), 0.2) + rng.normal(0, 0.05, (n, 5))
    for q, t in enumerate(tasks):
        r[q, fams.index(t.family)] = 0.9
    feats = HashingFeatures(64)
    return tasks, feats([[user(t.prompt)] for t in tasks]), np.clip(r, 0, 1), fams


def test_router_recovers_planted_best_worker_per_cluster():
    tasks, x, r, fams = _planted()
    tr, te = slice(0, 200), slice(200, 300)
    names = [f"w{i}" for i in range(5)]
    router = LinearRouter(names, x.shape[1]).fit_sft(x[tr], r[tr], tau=0.1)
    router.fit_cma(x[tr], r[tr], iters=10, popsize=12, seed=0)
    want = np.array([fams.index(t.family) for t in tasks[200:]])
    assert (router.route(x[te]) == want).mean() > 0.9
    assert (KNNRouter(5).fit(x[tr], r[tr]).route(x[te]) == want).mean() > 0.9
    assert (MFRouter(6).fit(x[tr], r[tr]).route(x[te]) == want).mean() > 0.8
    assert router.history["cma_fitness"][-1] >= LinearRouter.fitness(
        LinearRouter(names, x.shape[1]).fit_sft(x[tr], r[tr], tau=0.1).w, x[tr], r[tr])


def test_entropy_collapses_without_diversity_bonus():
    tasks, x, _, _ = _planted(300, seed=2)
    rng = np.random.default_rng(0)
    r = np.clip(np.full((300, 4), 0.5) + rng.normal(0, 0.02, (300, 4)), 0, 1)
    r[:, 0] = 0.6  # one dominant worker everywhere
    names = ["a", "b", "c", "d"]
    start = LinearRouter(names, x.shape[1]).fit_sft(x, r, tau=1.0)  # soft start, near uniform
    h0 = entropy(start.probs(x).mean(axis=0))
    nodiv = LinearRouter(names, x.shape[1], w=start.w.copy()).fit_cma(x, r, w_div=0.0, sigma0=0.5, iters=40,
                                                                      popsize=16, seed=0)
    div = LinearRouter(names, x.shape[1], w=start.w.copy()).fit_cma(x, r, w_div=0.15, sigma0=0.5, iters=40,
                                                                    popsize=16, seed=0)
    h_nodiv, h_div = entropy(nodiv.probs(x).mean(axis=0)), entropy(div.probs(x).mean(axis=0))
    assert h_nodiv < 0.6 * h0
    assert h_div > h_nodiv + 0.3
    assert (nodiv.route(x) == 0).mean() > 0.95


def test_sft_rejects_bad_shapes():
    with pytest.raises(ValueError, match="same N"):
        LinearRouter(["a", "b"], 3).fit_sft(np.zeros((4, 3)), np.zeros((5, 2)))
    with pytest.raises(ValueError, match="distinct"):
        LinearRouter(["a"], 3)


def test_svf_zero_offsets_identity_and_energy_renormalised():
    w = np.random.default_rng(0).normal(size=(6, 4))
    s = SVF(w)
    assert np.allclose(s.weight(), w)
    d = np.array([0.5, 0.0, -0.2, 0.1])
    w2 = s.weight(d)
    assert np.isclose(np.linalg.svd(w2, compute_uv=False).sum(), s.s.sum())
    assert not np.allclose(w2, w)
    with pytest.raises(ValueError, match="shape"):
        s.weight(np.zeros(3))


# --- Conductor ----------------------------------------------------------------------------------

def test_workflow_validation_rejects_forward_refs_cycles_and_bad_shapes():
    ok = parse_workflow({"model_id": ["a", "b"], "subtasks": ["x", "y"], "access_list": ["none", [0]]}, {"a", "b"})
    assert ok.visible(1) == [0]
    bad = [
        ({"model_id": ["a", "b"], "subtasks": ["x", "y"], "access_list": [[1], "none"]}, "forward reference"),
        ({"model_id": ["a"], "subtasks": ["x"], "access_list": [[0]]}, "cycle"),
        ({"model_id": ["a", "b"], "subtasks": ["x"], "access_list": ["all", "all"]}, "equal length"),
        ({"model_id": ["zzz"], "subtasks": ["x"], "access_list": ["all"]}, "unknown model_id"),
        ({"model_id": ["a"], "subtasks": ["x"], "access_list": ["some"]}, "access must be"),
        ("{not json", "not valid JSON"),
        ({"model_id": ["a"]}, "lacks"),
    ]
    for spec, msg in bad:
        with pytest.raises(WorkflowError, match=msg):
            parse_workflow(spec, {"a", "b"})


def test_isolation_worker_prompt_holds_only_its_access_list():
    a = ScriptedChatModel(fn=lambda m, t: "ANSWER: SECRET-A")
    b = ScriptedChatModel(fn=lambda m, t: "ANSWER: SECRET-B")
    c = ScriptedChatModel(fn=lambda m, t: "ANSWER: done")
    cond = Conductor([Worker("a", a), Worker("b", b), Worker("c", c)])
    run = cond.run("What is 2 + 2?", {"model_id": ["a", "b", "c"], "subtasks": ["s1", "s2", "s3"],
                                       "access_list": ["none", "none", [1]]})
    seen_c = "\n".join(m.text() for m in c.calls[0])
    assert "SECRET-B" in seen_c and "SECRET-A" not in seen_c
    assert "SECRET-A" not in "\n".join(m.text() for m in b.calls[0])
    assert run.answer == "done" and len(run.steps) == 3


def test_recursion_cap_and_shared_memory():
    w = Worker("a", SkillWorker("a", {"add": 1.0}, decay=0.0))
    depths = []

    def planner(q, depth):
        depths.append(depth)
        return {"model_id": ["self", "a"], "subtasks": ["", "answer"], "access_list": ["none", "all"]}

    cond = Conductor([w], planner=planner, max_depth=2)
    with pytest.raises(RecursionCapError, match="max_depth=2"):
        cond.solve("What is 2 + 3?")
    assert max(depths) == 2 and cond.max_depth_seen == 2
    mem = ToolMemory()
    mem.add("a: search(q='x')")
    cond2 = Conductor([w], memory=mem)
    cond2.run("What is 2 + 3?", {"model_id": ["a"], "subtasks": ["go"], "access_list": ["none"]})
    assert "search(q='x')" in w.model.calls[-1][0].content


def test_format_reward_and_group_advantages():
    cond = Conductor(default_pool())
    q = "What is 12 + 30?"
    good = parallel_then_select(["general-l", "arith-s", "arith-s"], "tiny-xs")
    good["model_id"][1] = "arith-s"
    rewards = [
        format_reward("{broken", lambda wf: cond.run(q, wf).answer, lambda a: a == "42"),
        format_reward({"model_id": ["arith-s"], "subtasks": ["x"], "access_list": [[3]]},
                      lambda wf: cond.run(q, wf).answer, lambda a: a == "42"),
        format_reward(good, lambda wf: "41", lambda a: a == "42"),
        format_reward(good, lambda wf: "42", lambda a: a == "42"),
    ]
    assert rewards == [0.0, 0.0, 0.5, 1.0]
    adv = group_advantages(rewards)
    assert np.isclose(adv.mean(), 0) and adv[3] > adv[2] > adv[0]
    assert np.allclose(group_advantages([0.5, 0.5]), 0)


def test_isolation_beats_herding_with_anchoring_workers():
    tasks = [t for t in make_tasks(300, seed=5) if t.family == "mul"]
    pool = default_pool()
    cond = Conductor(pool)
    res = {}
    for iso in (True, False):
        wf = parallel_then_select(["tiny-xs", "arith-s", "arith-s"], "tiny-xs", isolated=iso)
        res[iso] = np.mean([cond.run(t.prompt, wf).answer == t.answer for t in tasks])
    assert res[True] > res[False]


def test_replay_cache_and_live_router_agree(tmp_path, monkeypatch):
    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path))
    tasks = make_tasks(120, seed=9)
    pool = default_pool()
    o1 = record(tasks, pool, 2, cache_key="t")
    o2 = record(tasks, pool, 2, cache_key="t")
    assert list(tmp_path.rglob("*.npz")) and np.array_equal(o1.reward, o2.reward)
    assert o1.answers.dtype.kind == "U"
    feats = HashingFeatures(64)
    x = feats([[user(t.prompt)] for t in tasks])
    r = LinearRouter(o1.workers, x.shape[1]).fit_sft(x, o1.reward.mean(axis=2))
    live = FuguRouter(default_pool(), r, feats)
    got = [score(t, live.complete([user(t.prompt)]).message.content) for t in tasks[:30]]
    choice = r.route(x[:30])
    assert got == [o1.reward[q, choice[q], 0] for q in range(30)]
    assert live.log[0]["worker"] in o1.workers


def test_cascade_tuned_within_a_budget_and_lambda_on_per_query_costs():
    rng = np.random.default_rng(0)
    n = 200
    rewards = (rng.random((n, 4)) < [0.4, 0.5, 0.6, 0.9]).astype(float)
    answers = np.where(rewards == 1, "right", rng.choice(["a", "b"], size=(n, 4)))
    cost = np.tile([1.0, 1.0, 2.0, 8.0], (n, 1))
    pick = tune_cascade(answers, rewards, cost, budget=4.0)
    assert pick is not None
    (a, b), t = pick
    assert cascade(answers, rewards, cost, (a, b), t)[1].mean() <= 4.0
    assert tune_cascade(answers, rewards, cost, budget=1.5) is None  # two calls cost at least 2
    # λ calibrated on an (N, L) matrix of per-query costs holds the per-query spend to the target
    per_query = cost * rng.uniform(0.5, 1.5, size=(n, 1))
    scores = rng.random((n, 4))

    def route(lam: float) -> np.ndarray:
        return (scores - lam * per_query).argmax(axis=1)

    lam = calibrate_lambda(route, per_query, 2.0)
    assert lam > 0 and per_query[np.arange(n), route(lam)].mean() <= 2.0


def test_router_is_held_to_the_tuned_cascades_own_budget_on_the_training_queries():
    # two cheap workers right 70% of the time (wrong answers differ, so they rarely agree on one) and an expensive
    # one right nearly always: the best cascade asks the cheap pair and escalates on disagreement, which costs
    # less than the expensive worker the unpenalised router calls, so the router's λ must bind
    rng = np.random.default_rng(0)
    n = 200
    reward = (rng.random((n, 3, 1)) < [[0.7], [0.7], [0.95]]).astype(float)
    answers = np.where(reward == 1, "right", np.char.add("w", rng.integers(0, 10**6, (n, 3, 1)).astype(str)))
    cost = np.broadcast_to(np.array([0.5, 0.5, 10.0])[None, :, None], (n, 3, 1)).copy()
    tr, te = np.arange(100), np.arange(100, 200)
    x = np.c_[rng.normal(size=(n, 7)), np.ones(n)]  # a constant feature lets the bias-free router prefer a worker
    s = train_and_score(["c1", "c2", "exp"], x, reward, cost, answers, tr, te, rng, 0,
                        tau=0.1, cma_iters=3, popsize=6, w_div=0.0)
    assert s.picks["cascade (tuned on train)"] == "c1 + c2 agree, else exp"
    cascade_cost = cascade(answers[tr, :, 0], reward[tr, :, 0], cost[tr, :, 0], (0, 1), 2)[1].mean()
    assert s.cascade_budget == pytest.approx(cascade_cost)
    assert s.cascade_lam is not None and s.cascade_lam["fugu"] > 0   # the router alone would spend more
    # both arms (and every one-call baseline) spend at most the cascade's budget on the training queries
    free = cost[tr, s.fugu.route(s.xtr), 0].mean()
    held = cost[tr, s.fugu.route(s.xtr, cost[tr, :, 0].mean(axis=0) / 10.0, s.cascade_lam["fugu"]), 0].mean()
    assert held <= s.cascade_budget < free
    assert s.cascade_train_cost is not None and set(s.cascade_train_cost) == {*CASCADE_MATCHED, "fugu @ cascade budget"}
    assert all(v <= s.cascade_budget * (1 + 1e-9) for v in s.cascade_train_cost.values())
    assert held_to_cascade([s]) == (list(CASCADE_MATCHED), [], None)


def test_queries_for_an_effect_match_the_minimum_detectable_effect():
    from divelab.orchestration.fugu.reproduce import PAPER_EFFECT, _n_for
    from divelab.stats import mde_two_sample

    n = _n_for(0.3, PAPER_EFFECT)
    assert mde_two_sample(0.3, n) <= PAPER_EFFECT < mde_two_sample(0.3, n - 1)


def test_reproduce_smoke():
    from divelab.orchestration.fugu.reproduce import MATCHED, PLANS
    from divelab.scaleout import run_reproduction

    rep = run_reproduction("divelab.orchestration.fugu", "smoke", 0)
    assert len(rep.claims) >= 7
    assert all(c.kind is not None for c in rep.claims)
    live = [c for c in rep.claims if c.statement.startswith("live routing")][0]
    assert live.measured == 1.0 and live.rule["args"]["exact"] is True
    # one comparison at matched cost, against the strongest of every baseline held to the same budget
    head = [c for c in rep.claims if c.statement.startswith("router (SFT + sep-CMA-ES) vs the strongest baseline "
                                                             "at matched cost")]
    assert len(head) == 1 and not any(c.statement.startswith("router vs ") for c in rep.claims)
    assert {b["name"] for b in head[0].baselines} == set(MATCHED)
    assert head[0].compared_with == max(head[0].baselines, key=lambda b: b["value"])["name"]
    assert "minimum detectable effect" in head[0].note and "paper's gap" in head[0].note
    # every baseline was held to the router's budget on the training queries of every run
    runs = rep.details["runs"]
    assert len(runs) == PLANS["smoke"].train_runs
    for r in runs:
        assert all(v <= r["budget"] * (1 + 1e-6) for v in r["train_cost"].values()), r
    # the other direction: the tuned cascade's own training cost is the budget, and every arm is held to it
    at_cascade = [c for c in rep.claims if c.statement.startswith("router (SFT + sep-CMA-ES) held to the cascade")]
    assert len(at_cascade) == 1 and {b["name"] for b in at_cascade[0].baselines} == set(CASCADE_MATCHED)
    assert at_cascade[0].compared_with == max(at_cascade[0].baselines, key=lambda b: b["value"])["name"]
    for r in runs:
        assert all(v <= r["cascade_budget"] * (1 + 1e-6) for v in r["cascade_train_cost"].values()), r
    # every router is retrained in every run, and the comparisons say so
    for c in rep.claims:
        if c.rule and c.rule["name"] == "direction" and c.kind.value == "empirical":
            assert c.rule["args"]["training_runs"] == PLANS["smoke"].train_runs, c.statement
            assert "minimum detectable effect" in c.note, c.statement
    # herding is written by the workers' copy probability: planted, and the set-up says so
    herd = [c for c in rep.claims if c.statement.startswith("isolation")]
    assert all(c.kind.value == "planted" for c in herd) and rep.planted
    assert rep.details["table"]["oracle"]["success"] >= rep.details["table"]["fugu (SFT+CMA)"]["success"]
