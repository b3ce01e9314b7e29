"""tools/cross_isa.py: a re-run under another kernel ISA is compared claim by claim with the saved record."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))  # cross_isa imports readme_results as a sibling module

import cross_isa  # noqa: E402

from divelab.claims import Kind, Verdict  # noqa: E402


def _rep(isa: str, *claims) -> SimpleNamespace:
    """What the tool reads of a loaded Reproduction."""
    return SimpleNamespace(claims=list(claims), environment={"torch_cpu_capability": isa, "commit": "a" * 12})


def _claim(measured, verdict, ci=None, statement="s") -> SimpleNamespace:
    return SimpleNamespace(statement=statement, kind=Kind.EMPIRICAL, measured=measured, verdict=Verdict(verdict),
                           ci=ci)


def test_a_verdict_that_moved_is_flagged_with_its_values():
    saved = _rep("AVX512", _claim(1.0, "reproduced", (0.5, 1.5)), _claim(2.0, "not reproduced", statement="t"))
    rerun = _rep("AVX2", _claim(1.2, "reproduced", (0.7, 1.7)), _claim(2.0, "direction holds", statement="t"))
    e = cross_isa.entry("metis", "quick", 0, "avx2", saved, rerun)
    assert e["isa"] == "AVX2" and e["saved_isa"] == "AVX512"
    first, second = e["claims"]
    assert first["same_verdict"] and not first["same_value"] and first["within_interval"] is True
    assert not second["same_verdict"] and second["same_value"] and second["within_interval"] is None
    assert e["summary"] == {"claims": 2, "same_verdict": 1, "same_value": 1}


def test_a_value_outside_the_saved_interval_and_a_missing_claim_are_said():
    saved = _rep("AVX512", _claim(1.0, "reproduced", (0.9, 1.1)), _claim(3.0, "reproduced", statement="gone"))
    rows = cross_isa.compare_claims(saved, _rep("AVX2", _claim(1.5, "reproduced")))
    assert rows[0]["within_interval"] is False and rows[0]["same_verdict"]
    assert rows[1]["verdict"] is None and not rows[1]["same_verdict"]


def test_a_run_on_another_isa_than_asked_is_refused():
    with pytest.raises(RuntimeError, match="asked for ISA avx2 but the run used AVX512"):
        cross_isa.entry("metis", "quick", 0, "avx2", _rep("AVX512"), _rep("AVX512"))


def test_saving_replaces_the_same_system_scale_and_isa_only(tmp_path):
    path = tmp_path / "stability.json"
    old = [{"system": "metis", "scale": "quick", "isa": "AVX2", "x": 1},
           {"system": "metis", "scale": "quick", "isa": "DEFAULT", "x": 1}]
    path.write_text(json.dumps({"version": 1, "runs": old}))
    cross_isa.merge(path, [{"system": "metis", "scale": "quick", "isa": "AVX2", "x": 2}])
    runs = json.loads(path.read_text())["runs"]
    assert sorted((r["isa"], r["x"]) for r in runs) == [("AVX2", 2), ("DEFAULT", 1)]
    assert not list(tmp_path.glob("*.tmp"))


def test_an_unknown_system_is_a_clear_error(capsys):
    assert cross_isa.main(["no-such-system", "--scale", "quick"]) == 2
    assert "no saved quick result for no-such-system" in capsys.readouterr().err


def test_the_readme_summary_counts_held_verdicts_and_names_systems_that_moved():
    import readme_results

    def run(system, claims, held, same):
        return {"system": system, "scale": "quick", "isa": "AVX2", "saved_isa": "AVX512", "saved_commit": "c1",
                "summary": {"claims": claims, "same_verdict": held, "same_value": same}}

    saved = {("quick", "a"): "c1", ("quick", "b"): "c1"}
    text = readme_results.stability({"runs": [run("a", 4, 4, 4), run("b", 5, 3, 1)]}, systems=3, saved=saved)
    assert "- quick: 2 of 3 systems re-run under AVX2 against their saved AVX512 runs: 7 of 9 verdicts held, " \
           "5 values identical. Verdicts moved in b (2 of 5 claims)." in text
    assert "- full: not yet checked" in text
    assert "No verdict moved." in readme_results.stability({"runs": [run("a", 4, 4, 2)]}, systems=1, saved=saved)
    # a system re-saved since its check: the old comparison says nothing about the new run
    resaved = readme_results.stability({"runs": [run("a", 4, 4, 4), run("b", 5, 3, 1)]}, systems=3,
                                       saved={("quick", "a"): "c1", ("quick", "b"): "c2"})
    assert "1 of 3 systems" in resaved and "not yet re-checked: b" in resaved and "Verdicts moved" not in resaved


def test_system_pages_say_per_claim_whether_the_verdict_held_against_the_run_saved_now(tmp_path, monkeypatch):
    import readme_results

    row = {"statement": "s", "same_verdict": False, "verdict": "not separated from noise"}
    report = {"runs": [{"system": "x", "scale": "quick", "isa": "AVX2", "saved_commit": "c1", "claims": [row]}]}
    path = tmp_path / "stability.json"
    path.write_text(json.dumps(report))
    monkeypatch.setattr(readme_results, "STABILITY", path)
    rep = SimpleNamespace(system="x", scale="quick", environment={"commit": "c1"}, claims=[])
    assert readme_results.isa_notes(rep) == {"s": "verdict moved under AVX2: not separated from noise"}
    rep.environment["commit"] = "c2"  # re-saved since: the old comparison is not about this run
    assert readme_results.isa_notes(rep) == {}


def test_a_check_on_another_machine_is_named_and_kept_beside_the_same_isa_here(tmp_path):
    import readme_results

    saved = _rep("AVX512", _claim(1.0, "reproduced", (0.5, 1.5)))
    saved.environment["cpu_model"] = "Intel(R) Xeon(R) Processor"
    rerun = _rep("AVX512", _claim(1.1, "reproduced", (0.6, 1.6)))
    rerun.environment["cpu_model"] = "AMD EPYC"
    e = cross_isa.entry("metis", "quick", 0, "avx512", saved, rerun)
    assert readme_results.where(e) == "AVX512 on AMD EPYC"
    path = tmp_path / "stability.json"
    here = {"system": "metis", "scale": "quick", "isa": "AVX512", "cpu_model": "Intel(R) Xeon(R) Processor", "x": 1}
    path.write_text(json.dumps({"version": 1, "runs": [here]}))
    cross_isa.merge(path, [e])
    assert len(json.loads(path.read_text())["runs"]) == 2

    def run(system, where_cpu):
        return {"system": system, "scale": "quick", "isa": "AVX512", "saved_isa": "AVX512", "saved_commit": "c1",
                "cpu_model": where_cpu, "saved_cpu_model": "Intel(R) Xeon(R) Processor",
                "summary": {"claims": 2, "same_verdict": 2, "same_value": 0}}

    text = readme_results.stability({"runs": [run("a", "AMD EPYC"), run("a", "Intel(R) Xeon(R) Processor")]},
                                    systems=1, saved={("quick", "a"): "c1"})
    assert "re-run under AVX512 on AMD EPYC against their saved AVX512 runs: 2 of 2 verdicts held" in text
    assert "re-run under AVX512 against their saved AVX512 runs" in text
    # two machines whose CPUs report one model name are told apart by OpenBLAS's detected core
    same_name = {"isa": "AVX2", "cpu_model": "AMD EPYC", "saved_cpu_model": "AMD EPYC",
                 "numpy_blas": "openblas 0.3.30 core Haswell", "saved_numpy_blas": "openblas 0.3.30 core SkylakeX"}
    assert readme_results.where(same_name) == "AVX2 on AMD EPYC (OpenBLAS core Haswell)"
    assert readme_results.where({**same_name, "saved_numpy_blas": same_name["numpy_blas"]}) == "AVX2"


def test_keep_copies_each_re_run_whole_result_for_inspection(tmp_path, monkeypatch):
    def fake_run(system, scale, seed, isa, out, cache):
        out.mkdir(parents=True)
        (out / "results.json").write_text('{"per_run": [1, 2]}')
        return _rep("AVX2")

    monkeypatch.setattr(cross_isa, "run_under", fake_run)
    cross_isa.main(["metis", "--scale", "quick", "--keep", str(tmp_path / "kept")])
    assert (tmp_path / "kept" / "metis-quick-avx2" / "results.json").read_text() == '{"per_run": [1, 2]}'
