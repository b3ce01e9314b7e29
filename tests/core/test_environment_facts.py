"""Every result records the machine it ran on: how busy it was and which commit of the source ran."""

from __future__ import annotations

import re


def test_a_result_records_the_load_and_the_commit_it_ran_from(monkeypatch):
    from divelab import claims

    facts = claims.environment_facts()
    assert re.fullmatch(r"\d+\.\d\d \d+\.\d\d \d+\.\d\d", facts["load_1_5_15_min"])
    # the tests run from a git checkout: a commit, marked dirty when the source differs from it
    assert re.fullmatch(r"[0-9a-f]{12}(\+dirty)?", facts["commit"])
    monkeypatch.setattr(claims, "_source_commit", lambda: "")  # an installed package outside a checkout
    assert "commit" not in claims.environment_facts()


def test_the_runner_records_the_load_at_the_end_of_a_run(fake_system):
    from divelab.scaleout.tasks import run_reproduction

    rep = run_reproduction(fake_system.module, "smoke", 0)
    assert re.fullmatch(r"\d+\.\d\d \d+\.\d\d \d+\.\d\d", rep.environment["load_1_5_15_min_at_end"])
    assert "load_1_5_15_min" in rep.environment


def test_the_runner_records_the_commit_the_run_started_from(fake_system, monkeypatch):
    import importlib

    from divelab import claims
    from divelab.scaleout.tasks import run_reproduction

    # a commit lands while the run works (before it builds its Reproduction): the run must not be credited to it
    head = {"commit": "a" * 12}
    monkeypatch.setattr(claims, "_source_commit", lambda: head["commit"])
    mod = importlib.import_module(f"{fake_system.module}.reproduce")
    original = mod.run

    def run_while_a_commit_lands(plan, seed):
        head["commit"] = "b" * 12
        return original(plan, seed)

    monkeypatch.setattr(mod, "run", run_while_a_commit_lands)
    rep = run_reproduction(fake_system.module, "smoke", 0)
    assert rep.environment["commit"] == "a" * 12
