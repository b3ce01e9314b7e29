"""G2PO's runs on public games (TextWorldExpress) at a tiny size: trained in forked workers, each starting its own
simulator, and reported apart from the TextWorld set-ups."""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil

import pytest

from divelab.rl.substrate_testbed import SubstrateTestbedConfig
from divelab.training.g2po.reproduce import PLANS, PUBLIC, _claims_public, run_experiment

needs_twx = pytest.mark.skipif(importlib.util.find_spec("textworld_express") is None or shutil.which("java") is None,
                               reason="TextWorldExpress is optional and runs on Java: pip install "
                                      "textworld-express==1.1.0, and install Java 11+")
TINY = SubstrateTestbedConfig(params="numLocations=3,numDistractorItems=0,includeDoors=0,limitInventorySize=0",
                              train_episodes=2, eval_episodes=1, max_steps=4, sft_episodes=2, sft_steps=5)


@needs_twx
def test_public_runs_train_in_forked_workers_and_are_reported_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path))
    monkeypatch.setenv("DIVELAB_STAGE_WORKERS", "2")  # forked workers: each must start its own simulator
    plan = dataclasses.replace(PLANS["smoke"], public=TINY, public_seeds=2)
    data = run_experiment(plan, 0)
    public = data["public_runs"]
    assert {(r["seed"], r["condition"], r["method"]) for r in public} == {
        (s, c, m) for s in (0, 1) for c in ("repeat", "control") for m in ("grpo", "gigpo", "g2po")}
    assert all(r["setup"] == PUBLIC for r in public) and all(r["setup"] != PUBLIC for r in data["runs"])
    assert PUBLIC not in data["setups"] and all(":train:" in g for g in data["public"]["games"])
    # with no repeated state G2PO's graph has no edges: it trains exactly as GRPO on the control games
    ctl = {(r["seed"], r["method"]): r["success"] for r in public if r["condition"] == "control"}
    assert all(ctl[(s, "g2po")] == ctl[(s, "grpo")] for s in (0, 1))
    # the coin collector's rooms repeat within a group
    rep = next(r for r in public if r["condition"] == "repeat")
    assert rep["distinct_states"][0] < rep["n_steps"][0]
    (claim,) = _claims_public(data)
    assert claim.replication["n"] == 2 and 0.0 <= data["public"]["random_success"] <= 1.0
