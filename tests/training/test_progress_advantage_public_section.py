"""E173's public section (public_check.py, public_claims.py): planned at full only, said so when the simulator is
missing, uninformative when the oracle is not exact or every rollout has the same outcome, and otherwise judged by
the TextWorld claims' own functions with statements that pair with the TextWorld deterministic ones. The
reproduction's wiring runs at smoke with the language-model runs replaced by a toy corridor (the real ones train
for minutes); one slow test plays real TextWorldExpress games end to end at a tiny size."""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil

import pytest

from divelab.claims import Kind, Verdict
from divelab.envs.substrate import SubstrateUnavailable
from divelab.rl.presets import TESTBEDS
from divelab.rl.substrate_testbed import SubstrateTestbedConfig
from divelab.training.progress_advantage import public_check as PC
from divelab.training.progress_advantage import reproduce as R
from divelab.training.progress_advantage.lm_claims import SHAM, statements
from divelab.training.progress_advantage.public_claims import NOT_RUN, public_claims
from divelab.training.progress_advantage.twcheck import EvalConfig, TWCheckConfig

needs_twx = pytest.mark.skipif(importlib.util.find_spec("textworld_express") is None or shutil.which("java") is None,
                               reason="TextWorldExpress is optional and runs on Java: pip install "
                                      "textworld-express==1.1.0, and install Java 11+")
TINY = SubstrateTestbedConfig(params="numLocations=3,numDistractorItems=0,includeDoors=0,limitInventorySize=0",
                              train_episodes=2, eval_episodes=3, max_steps=4, sft_episodes=2, sft_steps=5)
EV = EvalConfig(reps=4, n=4, mc_steps=6, mc_rollouts=4)
TINY_PLAN = PC.PublicPlan(testbed=TINY, iterations=1, group_size=2, evaluation=EV, training_runs=2, max_states=50)


# -- a toy stand-in for a trained pair on explored games ---------------------------------------------------
def _corridor(goal: int = 0, cap: int = 10**6):
    from divelab.envs.toy import CorridorEnv

    return CorridorEnv(n_rooms=3, goal=goal, max_steps=cap)


def _toy_result(seed: int, config: dict, goal: int = 0, max_steps: int = 5) -> dict:
    """What twcheck.evaluate returns, for a pair of untrained tiny LMs on a three-room corridor."""
    from divelab.lm.models import build_model
    from divelab.rl.policy import LMPolicy, PolicyConfig, train_word_tokenizer
    from divelab.rl.testbed import SMALL_LM
    from divelab.training.progress_advantage.state_graph import explore
    from divelab.training.progress_advantage.twcheck import evaluate

    tok = train_word_tokenizer(["room 0. you see nothing.", "room 1. you see a key.",
                                "you win. look wait go west go east take key"])
    policy, reference = (LMPolicy(build_model("tiny-100k", tok.get_vocab_size(), seed=s, **SMALL_LM), tok,
                                  PolicyConfig(history=0, head_tokens=0, tail_tokens=16)) for s in (seed, seed + 100))
    graph = explore(_corridor(goal), max_states=20)[1]
    return evaluate(policy, reference, tok, lambda g: _corridor(goal, max_steps), ["corridor"],
                    lambda: {"corridor": graph}, beta=0.05, slip=0.0, max_steps=max_steps, ev=EV, seed=seed,
                    config=config, curves={"rl_success": [0.5], "kl": [0.0]})


def _public_config(seed: int) -> dict:
    return {**dataclasses.asdict(PC.PublicPairConfig(testbed=TINY, seed=seed)), "eval": dataclasses.asdict(EV)}


def _games(consistent: bool = True, complete: bool = True) -> PC.PublicGames:
    check = {"consistent": consistent, "depth": 1, "merged_states": 3, "paths_checked": 6,
             "n_mismatches": 0 if consistent else 1, "unexplored": 0, "env_steps": 40,
             "mismatches": [] if consistent else [{"path": ["pull lever", "take coin"], "what": "outcome"}]}
    rec = {"states": 3, "complete": complete, "real_steps": 12, "uniform_success": 0.2, "check": check}
    return PC.PublicGames(["twx:coin:train:p@0"], ["twx:coin:dev:p@0"], {}, {}, {"twx:coin:dev:p@0": rec})


# -- plans and the cases where the section cannot speak -----------------------------------------------------
def test_the_public_section_is_planned_at_full_only_with_the_textworld_recipe() -> None:
    assert R.PLANS["smoke"].public is None and R.PLANS["quick"].public is None
    full, pub = R.PLANS["full"], R.PLANS["full"].public
    assert pub is not None and pub.testbed.simulator == "twx" and pub.testbed.game == "coin"
    assert pub.testbed.max_steps == full.testbed.max_steps == TESTBEDS["full"].max_steps
    assert (pub.iterations, pub.group_size, pub.training_runs) == (full.iterations, full.group_size,
                                                                    full.training_runs)
    ev, tw = pub.evaluation, full.evaluation
    assert ev.n == tw.n and ev.reps * pub.testbed.eval_episodes == tw.reps * full.testbed.n_games
    assert pub.beta == TWCheckConfig().beta and pub.check_depth >= 1
    for bad in ({"training_runs": 0}, {"check_depth": 0},
                {"testbed": dataclasses.replace(TINY, simulator="scienceworld")}):
        with pytest.raises(ValueError, match="training_runs|check_depth|TextWorldExpress"):
            dataclasses.replace(TINY_PLAN, **bad)


def test_no_plan_and_no_simulator_are_one_not_checkable_claim_each(monkeypatch) -> None:
    none = public_claims(PC.public_check(None, 0), 0)
    assert len(none) == 1 and none[0].verdict is Verdict.NOT_CHECKABLE and "full scale only" in none[0].note
    assert none[0].statement == NOT_RUN and "TextWorldExpress" in none[0].statement

    def missing(*_a):
        raise SubstrateUnavailable("TextWorldExpress needs the Python package 'textworld_express', which is not "
                                   "installed; install it with: pip install textworld-express==1.1.0")

    monkeypatch.setattr(PC, "public_games", missing)
    sec = PC.public_check(TINY_PLAN, 0)
    assert sec["status"] == "unavailable"
    claims = public_claims(sec, 0)
    assert len(claims) == 1 and claims[0].verdict is Verdict.NOT_CHECKABLE
    assert "pip install textworld-express" in claims[0].note


@pytest.mark.parametrize("consistent, complete, why", [(False, True, "changed what 1 game"),
                                                       (True, False, "did not fit in max_states")])
def test_an_oracle_that_is_not_exact_makes_every_claim_uninformative_and_nothing_is_trained(
        monkeypatch, consistent: bool, complete: bool, why: str) -> None:
    monkeypatch.setattr(PC, "public_games", lambda *_a: _games(consistent, complete))
    monkeypatch.setattr(PC, "run_once", lambda *_a: pytest.fail("trained on games whose oracle is not exact"))
    sec = PC.public_check(TINY_PLAN, 0)
    assert sec["status"] == "inexact" and why in sec["why"] and "not exact" in sec["why"]
    claims = public_claims(sec, 0)
    assert [c.statement for c in claims] == list(statements(PC.LABEL, EV.n).values())
    assert all(c.verdict is Verdict.UNINFORMATIVE and c.measured is None and why in c.reason for c in claims)
    # the same games with an exact oracle do train
    monkeypatch.setattr(PC, "public_games", lambda *_a: _games())
    monkeypatch.setattr(PC, "run_once", lambda plan, games, seed: {"seed": seed})
    ran = PC.public_check(TINY_PLAN, 7)
    assert ran["status"] == "ran" and ran["runs"] == [{"seed": 7}, {"seed": 8}]


def test_a_floor_makes_the_claims_uninformative_with_their_numbers_kept() -> None:
    # the key two rooms away and one step allowed: every rollout loses
    runs = [_toy_result(s, _public_config(s), goal=2, max_steps=1) for s in (0, 1)]
    assert not any(any(r["policy"]["_scores"]["success"]) for r in runs)
    claims = public_claims({"status": "ran", "runs": runs}, 0)
    assert claims and all(c.verdict is Verdict.UNINFORMATIVE and "a floor" in c.reason for c in claims)
    assert any(c.measured is not None for c in claims)


# -- the reproduction's wiring at smoke -----------------------------------------------------------------------
def test_the_reproduction_adds_public_claims_that_pair_with_the_textworld_deterministic_ones(monkeypatch) -> None:
    from divelab.report.public import home_grown, is_public

    tw_cfg = lambda s: {**dataclasses.asdict(TWCheckConfig(testbed=TESTBEDS["smoke"])),  # noqa: E731
                        "eval": dataclasses.asdict(EV)}
    monkeypatch.setattr(R, "lm_check", lambda plan, seed: {
        "TextWorld deterministic": [_toy_result(seed + r, tw_cfg(seed + r)) for r in range(2)]})
    monkeypatch.setattr(PC, "public_games", lambda *_a: _games())
    monkeypatch.setattr(PC, "run_once", lambda plan, games, seed: _toy_result(seed + 50, _public_config(seed)))
    rep = R.run(dataclasses.replace(R.PLANS["smoke"], public=TINY_PLAN), 0)
    pub = rep.details["public"]
    assert pub["status"] == "ran" and len(pub["runs"]) == TINY_PLAN.training_runs
    assert all(not k.startswith("_") for r in pub["runs"] for k in r["policy"])  # raw arrays stripped
    assert pub["games"]["twx:coin:dev:p@0"]["check"]["consistent"]
    public = [c for c in rep.claims if f"({PC.LABEL}" in c.statement or f", {PC.LABEL})" in c.statement]
    said = statements(PC.LABEL, EV.n)
    assert {said["best-of-n"], said["aggregation"]} <= {c.statement for c in public} <= set(said.values())
    for c in public:  # the TextWorld claims' rules: over training runs, against the strongest, with the sham
        assert c.kind is Kind.EMPIRICAL and c.verdict is not Verdict.NOT_CHECKABLE and is_public(c)
        assert c.replication["unit"] == "training runs" and c.rule["args"]["control"]["name"] == SHAM
        # AUROC, localisation and correlation count only the runs where they are defined
        assert c.replication["n"] == TINY_PLAN.training_runs or c.statement not in (said["best-of-n"],
                                                                                     said["aggregation"])
        if c.statement != said["step correlation"]:  # its label sits in nested brackets report.public cannot swap
            home = home_grown(c, rep.claims)
            assert home is not None and home.statement == c.statement.replace(PC.LABEL, "TextWorld deterministic")
    bon = next(c for c in public if c.statement == said["best-of-n"])
    assert "random pick" in {b["name"] for b in bon.baselines} and "TextWorldExpress" in bon.falsifier
    assert "TextWorldExpress" in rep.setup and "nothing fetched" in rep.setup
    assert any("textworldexpress" in f.name for f in rep.figures)


@pytest.mark.slow
@needs_twx
def test_real_public_games_are_explored_checked_trained_on_and_scored_held_out(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path))
    sec = PC.public_check(TINY_PLAN, 0)
    assert sec["status"] == "ran", sec.get("why")
    assert len(sec["games"]) == TINY.train_episodes + TINY.eval_episodes
    assert all(r["complete"] and r["check"]["consistent"] for r in sec["games"].values())
    for r in sec["runs"]:
        assert all(":dev:" in g for g in r["games"]) and len(r["games"]) == TINY.eval_episodes
        assert r["policy"]["n_rollouts"] == TINY.eval_episodes * EV.reps * EV.n
        assert set(r["optimal_success"].values()) == {1.0}
    claims = public_claims(sec, 0)
    assert claims and all(c.verdict is not Verdict.NOT_CHECKABLE for c in claims)
