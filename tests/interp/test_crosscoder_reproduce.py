from divelab.scaleout import run_reproduction


def test_smoke_reproduction(tmp_path, monkeypatch):
    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path))
    rep = run_reproduction("divelab.interp.crosscoder", "smoke", 0)
    names = [c.statement for c in rep.claims]
    assert any("exclusivity holds exactly" in n for n in names)
    assert all(c.kind is not None for c in rep.claims)
    excl = next(c for c in rep.claims if "exclusivity holds exactly" in c.statement)
    assert excl.measured == 0.0
    assert rep.details["cells"]
    steer = next(c for c in rep.claims if c.statement.startswith("steering one A-exclusive feature"))
    assert not steer.baselines or {b["name"] for b in steer.baselines} >= {"no steering",
                                                                          "difference-of-means steering"}
    # one DFC cell at smoke scale: one crosscoder training run cannot separate the method from the run
    assert steer.rule["name"] == "uninformative" or steer.rule["args"]["training_runs"] >= 2
    # the set-up reports whether its exclusive block lives on held-out positions, per DFC cell
    live = next(c for c in rep.claims if c.statement.startswith("the A-exclusive latents are alive"))
    assert live.kind == "check" and 0.0 <= live.measured <= 1.0
    dfc = [c for c in rep.details["cells"] if c["arch"] == "DFC"]
    assert all(set(c["heldout"]) == {"alive", "mean_when_on", "fire_tool", "fire_generic"} for c in dfc)


def test_dead_exclusive_features_make_the_exclusive_claims_uninformative():
    from divelab.interp.crosscoder.reproduce import failed_setup

    assert "every A-exclusive feature is dead" in failed_setup([0, 0], 120)
    assert failed_setup([0, 3], 120) == ""


def test_the_format_bound_needs_its_positive_control_and_reads_the_interval():
    from divelab.claims import Verdict
    from divelab.interp.crosscoder.reproduce import format_ruling

    # nothing emits the call syntax, not even the sibling through the same reconstruction: vacuous
    assert format_ruling(0.0, 60, control_rate=0.0).verdict is Verdict.UNINFORMATIVE
    # 0/60 is not "never": the Wilson upper end is above zero
    assert format_ruling(0.0, 60, control_rate=0.5).verdict is Verdict.NOT_SEPARATED
    assert format_ruling(0.2, 60, control_rate=0.5).verdict is Verdict.NOT_REPRODUCED
