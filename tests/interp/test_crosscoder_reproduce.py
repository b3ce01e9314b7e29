from divelab.interp.crosscoder.reproduce import reproduce


def test_smoke_reproduction(tmp_path, monkeypatch):
    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path))
    rep = reproduce("smoke", seed=0)
    names = [c.statement for c in rep.claims]
    assert any("exclusivity holds exactly" in n for n in names)
    assert all(c.kind is not None for c in rep.claims)
    excl = next(c for c in rep.claims if "exclusivity holds exactly" in c.statement)
    assert excl.measured == 0.0
    assert rep.details["cells"]
