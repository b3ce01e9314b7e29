"""AutoCog (E176): strategies, the grammar's dial, loss, design check, trace/resume, chat roles, export."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest

from divelab.chat import ScriptedChatModel
from divelab.science.autocog import (
    AutoCog,
    ChatArbiter,
    ChatReviser,
    Design,
    LoopConfig,
    Proposal,
    Task,
    Theory,
    dial,
    export_html,
    get_strategy,
    neighbours,
    normalised_loss,
    optimise,
    simulate,
    simulation_check,
    welch,
)
from divelab.science.autocog import strategies as S
from divelab.science.autocog.design import random_designs
from divelab.science.autocog.metrics import LIBRARY
from divelab.science.autocog.simulate import choice_prob
from divelab.science.autocog.task import candidate_pool
from divelab.science.autocog.theory import tallying_theory, ttb_theory, wadd_theory

TASK = Task((0.9, 0.8, 0.7, 0.6), 10)


def _score(fn, a, b, **kw):
    return float(fn(np.asarray([a], float), np.asarray([b], float), TASK, **kw)[0])


# ---------------------------------------------------------------- strategies vs hand-computed choices
def test_strategies_match_hand_computed_scores():
    a, b = [10, 0, 0, 0], [0, 4, 4, 4]
    assert _score(S.ttb, a, b) == 1.0  # best cue favours A
    assert _score(S.tallying, a, b) == pytest.approx(-0.5)  # 1 cue for A, 3 for B, 4 discriminate
    # WADD: (0.9*10 - (0.8+0.7+0.6)*4) / 10 / (0.9+0.8+0.7+0.6) = (9 - 8.4) / 30
    assert _score(S.wadd, a, b) == pytest.approx(0.6 / 30)
    # DR-WADD alpha=0.5: u(x)=sqrt(x+1); (0.9*(sqrt11-1) - 2.1*(sqrt5-1)) / (sqrt11-1) / 3.0
    num = 0.9 * (np.sqrt(11) - 1) - 2.1 * (np.sqrt(5) - 1)
    assert _score(S.drwadd, a, b, alpha=0.5) == pytest.approx(num / (np.sqrt(11) - 1) / 3.0)
    assert _score(S.drwadd, a, b, alpha=0.5) < 0 < _score(S.wadd, a, b)  # the logged DR-vs-WADD conflict
    # take-the-worst decides by the least valid discriminating cue (cue 4: 0 vs 4 -> B)
    assert _score(S.ttw, a, b) == -1.0
    # ties on the best cue: TTB moves on to the next cue
    assert _score(S.ttb, [5, 3, 0, 0], [5, 7, 0, 0]) == -1.0
    assert _score(S.ttb, [5, 5, 5, 5], [5, 5, 5, 5]) == 0.0


def test_choice_rule_and_simulated_choice_rates():
    p = {"beta": np.array([4.0]), "eps": np.array([0.1]), "kappa": np.array([0.0])}
    # (1 - eps) * sigmoid(beta * score) + eps / 2
    assert float(choice_prob(p, np.array([0.5]))[0]) == pytest.approx(0.9 / (1 + np.exp(-2.0)) + 0.05)
    design = Design(TASK, (((10, 0, 0, 0), (0, 4, 4, 4)),), n_trials=96)
    rng = np.random.default_rng(0)
    d = simulate(get_strategy("ttb"), design, 200, rng)
    assert d.chose_a.mean() > 0.9  # TTB picks A (beta 4..12 on score 1, lapse <= 0.1)
    d = simulate(get_strategy("drwadd"), design, 200, rng)
    assert d.chose_a.mean() < 0.35  # concave utilities prefer the spread option B
    d = simulate(get_strategy("random"), design, 200, rng)
    assert abs(d.chose_a.mean() - 0.5) < 0.03
    d = simulate(get_strategy("perseveration"), design, 200, rng)
    rep = (d.chose_left[:, 1:] == d.chose_left[:, :-1]).mean()
    assert rep > 0.75  # kappa 1.5..2.5 -> repeat probability ~0.82..0.92
    assert abs(d.chose_a.mean() - 0.5) < 0.05  # sides are counterbalanced: no product preference


# ---------------------------------------------------------------- the dial
def test_grammar_limits_equal_the_strategies():
    pool = candidate_pool(TASK, 200, np.random.default_rng(1)).astype(float)
    a, b = pool[:, 0], pool[:, 1]
    prm = {}
    for th, fn in ((ttb_theory(), S.ttb), (dial(2000.0, 0.0), S.ttb), (tallying_theory(), S.tallying),
                   (dial(0.0, 0.0), S.tallying), (wadd_theory(), S.wadd), (dial(1.0, 1.0), S.wadd)):
        np.testing.assert_allclose(th.score(prm, a, b, TASK), fn(a, b, TASK), atol=1e-12, err_msg=th.name)
    np.testing.assert_allclose(dial(1.0, 1.0, alpha=0.4).score(prm, a, b, TASK), S.drwadd(a, b, TASK, alpha=0.4),
                               atol=1e-12)
    # and in between, the dial is not an endpoint
    mid = dial(3.0, 0.5).score(prm, a, b, TASK)
    assert np.abs(mid - S.wadd(a, b, TASK)).max() > 0.05 and np.abs(mid - S.ttb(a, b, TASK)).max() > 0.05


def test_theory_validation_and_neighbours():
    with pytest.raises(ValueError, match="order must be one of"):
        Theory(order="middle")
    with pytest.raises(ValueError, match="unknown theory field"):
        Theory.from_dict({"gamma": 1.0, "banana": 2})
    t = Theory.from_dict(wadd_theory().to_dict())
    assert t.key == wadd_theory().key
    nb = neighbours(t)
    assert len({n.key for n in nb}) == len(nb) and t.key not in {n.key for n in nb}
    assert any(n.alpha == 0.7 for n in nb) and any(not n.cue_use for n in nb)


# ---------------------------------------------------------------- loss
def test_normalised_loss_by_hand():
    # obs 0: real .5, cand .7, previous .9 -> spread .4, d=.5 ; obs 1: real .2, cand .2 -> 0 ; nan -> 1
    loss, d = normalised_loss([0.7, 0.2, float("nan")], [0.5, 0.2, 0.3], [[0.9, 0.4, 0.3]])
    assert d == pytest.approx([0.5, 0.0, 1.0])
    assert loss == pytest.approx(0.5)
    with pytest.raises(ValueError, match="differ in length"):
        normalised_loss([0.1], [0.1, 0.2])


# ---------------------------------------------------------------- design
def test_welch_and_optimiser_picks_a_discriminating_design():
    t, p = welch(np.r_[np.zeros(25), np.ones(25)], np.r_[np.zeros(25), np.ones(25)], 25)
    assert p == pytest.approx(1.0)
    cache: dict = {}

    def sim(th, design):
        k = (th.key, design.pairs)
        if k not in cache:
            cache[k] = simulate(th, design, 50, np.random.default_rng(0))
        return cache[k]

    pool = candidate_pool(TASK, 200, np.random.default_rng(0))
    # planted pair: TTB vs tallying differ exactly on best-cue-vs-majority pairs
    best = optimise(ttb_theory(), tallying_theory(), pool, TASK, sim, np.random.default_rng(0))
    assert best.accepted and best.best_p < 1e-6
    arr = best.design.array.astype(float)
    conflict = np.sign(S.ttb(arr[:, 0], arr[:, 1], TASK)) * np.sign(S.tallying(arr[:, 0], arr[:, 1], TASK)) < 0
    assert conflict.mean() >= 0.5  # most chosen pairs are TTB-vs-tallying conflicts
    # two identical theories can never be told apart: the check refuses every design
    same = simulation_check(Proposal(best.design, list(LIBRARY.values())), wadd_theory(),
                            Theory("copy", gamma=1.0, tau=1.0), sim)
    assert not same.accepted
    # the optimiser beats random designs on the planted pair
    rand = [simulation_check(Proposal(d, list(LIBRARY.values())), ttb_theory(), tallying_theory(), sim).best_p
            for d in random_designs(pool, TASK, np.random.default_rng(3), n_designs=3)]
    assert best.best_p <= min(rand)


def test_design_validation():
    with pytest.raises(ValueError, match="identical"):
        Design(TASK, (((1, 2, 3, 4), (1, 2, 3, 4)),))
    with pytest.raises(ValueError, match="integers in 0..10"):
        Design(TASK, (((11, 2, 3, 4), (1, 2, 3, 4)),))
    with pytest.raises(ValueError, match="validities"):
        Task((0.4, 0.9))


# ---------------------------------------------------------------- the loop: trace and resume
def test_trace_resumes_after_a_kill(tmp_path):
    cfg = LoopConfig(n_runs=20, pool_size=80)
    gt = get_strategy("wadd")
    ref = AutoCog(gt, cfg, seed=3, trace_dir=tmp_path / "ref").run(3)

    class Killed(Exception):
        pass

    def kill_after_first(rec):
        if rec["cycle"] == 1:
            raise Killed

    with pytest.raises(Killed):
        AutoCog(gt, cfg, seed=3, trace_dir=tmp_path / "run").run(3, on_cycle=kill_after_first)
    files = sorted(p.name for p in (tmp_path / "run" / "cycles").glob("*.json"))
    assert files == ["0000.json", "0001.json"]
    resumed = AutoCog(gt, cfg, seed=3, trace_dir=tmp_path / "run")
    assert resumed.next_cycle == 2
    out = resumed.run(3)
    assert [r["theories"] for r in out] == [r["theories"] for r in ref]
    np.testing.assert_allclose([r["losses"] for r in out], [r["losses"] for r in ref], rtol=1e-12)
    rec = json.loads((tmp_path / "run" / "cycles" / "0002.json").read_text())
    assert {"tried", "theories", "losses", "winner", "verdict"} <= set(rec)
    if rec.get("ran"):  # the raw data of every experiment is in the trace
        assert len(rec["ran"][0]["data"]["chose_left"]) == cfg.n_participants
    with pytest.raises(ValueError, match="different run"):
        AutoCog(gt, cfg, seed=4, trace_dir=tmp_path / "run")


# ---------------------------------------------------------------- chat roles
def test_chat_roles_with_a_scripted_model():
    cfg = LoopConfig(n_runs=20, pool_size=80)
    arbiter_model = ScriptedChatModel(replies=[
        "I think theory 2 lost.",  # invalid: no JSON -> retried
        '{"loser": 1, "verdict": "new_model", "diagnosis": "misses conflict trials"}'])
    reviser_model = ScriptedChatModel(replies=[
        '{"theory": {"name": "x", "gamma": "lots"}}',  # invalid code -> retried with the error shown
        json.dumps({"theory": {**wadd_theory().to_dict(), "name": "WADD (chat)"}})])
    arb, rev = ChatArbiter(arbiter_model), ChatReviser(reviser_model)
    loop = AutoCog(get_strategy("wadd"), cfg, seed=0, arbiter=arb, reviser=rev)
    rec = loop.step(0)
    assert len(arbiter_model.calls) == 2 and "invalid" in arbiter_model.calls[1][-1].content
    assert "gamma must be a number" in reviser_model.calls[1][-1].content
    v = rec["verdict"]
    assert v["loser"] == 1 and v["diagnosis"] == "misses conflict trials"
    assert v["revision"]["proposed"]["name"] == "WADD (chat)"
    # the accept gate: kept only if the loss strictly improves on the loser's
    assert v["revision"]["kept"] == (v["revision"]["candidate_loss"] < v["revision"]["loser_loss"])


# ---------------------------------------------------------------- export
def _export(tmp_path):
    design = Design(TASK, (((10, 0, 0, 0), (0, 4, 4, 4)), ((5, 6, 2, 1), (6, 5, 1, 2))), n_trials=8)
    return design, export_html(design, tmp_path / "exp.html", min_rt_ms=50, iti_ms=10)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_exported_experiment_logic_runs_in_node(tmp_path):
    design, path = _export(tmp_path)
    html = path.read_text()
    script = html.split('<script>\n"use strict";', 1)[1].split("</script>", 1)[0]
    cfg = html.split('type="application/json">', 1)[1].split("</script>", 1)[0]
    js = tmp_path / "exp.js"
    js.write_text('"use strict";' + script + f"\nconst cfg = {cfg};\n"
                  "console.log(JSON.stringify(AutoCog.runHeadless(cfg, 'p1')));")
    out = json.loads(subprocess.run(["node", str(js)], capture_output=True, text=True, check=True, timeout=60).stdout)
    assert len(out) == 8 and sorted(r["pair"] for r in out) == [0, 0, 0, 0, 1, 1, 1, 1]
    for r in out:  # the auto-responder is take-the-best: A on pair 0 (10 vs 0), B on pair 1 (5 vs 6)
        a, b = (list(x) for x in design.pairs[r["pair"]])
        assert [r["left"], r["right"]] == ([b, a] if r["swapped"] else [a, b])
        assert r["chose_a"] == (r["pair"] == 0)  # chose_a undoes the side swap
        assert r["chose_left"] == (r["chose_a"] != r["swapped"])


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_exported_experiment_runs_in_chromium(tmp_path):
    design, path = _export(tmp_path)
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=20000",
           "--dump-dom", path.as_uri() + "?auto=1&pid=test"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert 'id="done"' in dom
    data = json.loads(dom.split('<pre id="autocog-data">', 1)[1].split("</pre>", 1)[0].replace("&quot;", '"'))
    assert len(data["trials"]) == 8
    assert all(t["rt"] >= 50 for t in data["trials"])  # the key lock held
    assert sum(t["chose_a"] for t in data["trials"] if t["pair"] == 0) == 4  # TTB auto-responder picks A


# ---------------------------------------------------------------- AutoRA
def test_one_cycle_through_autoras_state_and_its_experimentalist():
    pytest.importorskip("autora.state")
    pytest.importorskip("autora.experimentalist.model_disagreement")
    from divelab.science.autocog import autora_cycle, disagreement_scores

    pool = candidate_pool(TASK, 60, np.random.default_rng(0))
    theories = [ttb_theory(), tallying_theory()]
    ours, impl_ours = disagreement_scores(pool, theories, TASK, use_autora=False)
    theirs, impl = disagreement_scores(pool, theories, TASK, use_autora=True)
    assert impl.startswith("autora") and not impl_ours.startswith("autora")
    np.testing.assert_allclose(theirs, ours, atol=1e-12)  # same numbers with or without AutoRA

    loop = AutoCog(get_strategy("ttb"), LoopConfig(n_runs=20, pool_size=80), seed=0)
    state = autora_cycle(loop, 0)
    assert [t.key for t in state.models] == [t.key for t in loop.theories]
    assert len(state.experiment_data) == len(loop.observations) > 0
    assert set(state.conditions["experiment"]) and loop.next_cycle == 1
