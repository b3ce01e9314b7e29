"""InfoTree's arena on public games (TextWorldExpress): trained on the simulator's train split, scored on held-out
dev games, judged by the same rules as the home-grown families; and said so when the simulator is missing."""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil

import pytest

from divelab.claims import Kind, Reproduction, Verdict
from divelab.envs.substrate import SubstrateUnavailable
from divelab.rl.substrate_testbed import SubstrateTestbedConfig
from divelab.training.infotree import reproduce as it

needs_twx = pytest.mark.skipif(importlib.util.find_spec("textworld_express") is None or shutil.which("java") is None,
                               reason="TextWorldExpress is optional and runs on Java: pip install "
                                      "textworld-express==1.1.0, and install Java 11+")
TINY = SubstrateTestbedConfig(params="numLocations=3,numDistractorItems=0,includeDoors=0,limitInventorySize=0",
                              train_episodes=2, eval_episodes=4, max_steps=4, sft_episodes=2, sft_steps=5)


def test_quick_and_smoke_skip_the_public_family_and_full_plans_it():
    assert it.PLANS["smoke"].external is None and it.PLANS["quick"].external is None
    full = it.PLANS["full"].external
    assert full is not None and full.simulator == "twx" and full.max_steps == it.PLANS["full"].textworld.max_steps
    assert it.PLANS["full"].external_env_steps == it.PLANS["full"].textworld_env_steps
    assert "smoke and quick skip it" in it.SETUP


def test_a_missing_simulator_is_one_not_checkable_claim(monkeypatch):
    def missing(plan, seed):
        raise SubstrateUnavailable("TextWorldExpress needs the Python package 'textworld_express'")

    monkeypatch.setattr(it, "_external_family", missing)
    plan = dataclasses.replace(it.PLANS["smoke"], external=TINY, external_env_steps=40)
    families, claims = it._external_not_run(plan, 0)
    assert families == [] and len(claims) == 1
    assert claims[0].verdict is Verdict.NOT_CHECKABLE and "textworld_express" in claims[0].note


@needs_twx
def test_the_public_family_trains_on_train_games_and_is_scored_on_held_out_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path))
    plan = dataclasses.replace(it.PLANS["smoke"], external=TINY, external_env_steps=40)
    rep = Reproduction(system="infotree", title="t", scale="smoke", seed=0)
    claims = it._claims_arena(plan, 0, rep)
    public = [c for c in claims if f"({it.EXTERNAL})" in c.statement]
    # both InfoTree claims on the public games: the mixed-outcome ratio with the starting policy and training
    assert {c.statement.split(" (")[0] for c in public} == {
        "Mixed-outcome ratio at an equal group budget with the starting policy",
        "Success after training at equal env steps, tree vs independent GRPO"}
    for c in public:
        assert c.kind is Kind.EMPIRICAL and c.verdict is not Verdict.NOT_CHECKABLE
        assert "TextWorldExpress" in c.falsifier and c.rule["args"]["control"]["name"].startswith("tree (root only)")
    arena = rep.details["arena"][it.EXTERNAL]
    trained, scored = arena["config"]["games"], arena["config"]["scored_on"]
    assert all(":train:" in g for g in trained) and all(":dev:" in g for g in scored)
    assert len(scored) == TINY.eval_episodes and not set(trained) & set(scored)
    success = next(c for c in public if c.statement.startswith("Success"))
    assert "4 held-out games, never trained on" in success.note
