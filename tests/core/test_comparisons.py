"""Comparative claims: every baseline recorded, the verdict taken against the strongest."""

import numpy as np
import pytest

from divelab import stats, verdicts
from divelab.claims import Claim, Kind
from divelab.comparisons import against_strongest


def test_the_strongest_baseline_decides_not_the_weakest():
    rng = np.random.default_rng(0)
    method = 0.6 + 0.05 * rng.standard_normal(40)
    weak, strong = 0.1 + 0.05 * rng.standard_normal(40), method + 0.03 + 0.01 * rng.standard_normal(40)
    cmp = against_strongest(method, {"random": weak, "kNN": strong})
    assert cmp.strongest == "kNN" and cmp.effect < 0 and cmp.ci[1] < 0
    claim = Claim("router beats every alternative", "+5 points", cmp.effect, kind=Kind.EMPIRICAL, ci=cmp.ci,
                  ruling=verdicts.direction(cmp.effect, cmp.ci, why="n"), **cmp.claim_fields())
    assert claim.verdict is verdicts.Verdict.NOT_REPRODUCED
    assert {b["name"] for b in claim.baselines} == {"random", "kNN"}


def test_lower_is_better_picks_the_lowest_and_flips_the_sign():
    cmp = against_strongest([1.0, 1.1, 0.9], {"eager": [3.0, 3.1, 2.9], "O3": [1.5, 1.6, 1.4]}, better="lower")
    assert cmp.strongest == "O3" and cmp.expected_sign == -1 and cmp.effect < 0


def test_a_claim_judged_against_a_weaker_baseline_is_refused():
    base = [{"name": "random", "value": 0.1, "ci": None}, {"name": "kNN", "value": 0.8, "ci": None}]
    with pytest.raises(ValueError, match="strongest baseline measured is 'kNN'"):
        Claim("x", "y", 0.5, kind=Kind.EMPIRICAL, ruling=verdicts.direction(0.4, (0.3, 0.5), why="n"),
              baselines=base, better="higher", compared_with="random")
    with pytest.raises(ValueError, match="better must be"):
        Claim("x", "y", 0.5, kind=Kind.EMPIRICAL, ruling=verdicts.direction(0.4, (0.3, 0.5), why="n"),
              baselines=base, compared_with="kNN")


def test_cluster_interval_is_wider_than_the_unit_interval_when_units_share_a_task():
    rng = np.random.default_rng(1)
    tasks = np.repeat(np.arange(6), 10)
    task_effect = rng.normal(0.1, 0.3, 6)[tasks]
    a = task_effect + 0.02 * rng.standard_normal(60)
    b = np.zeros(60)
    _, lo_u, hi_u = stats.paired_diff_ci(a, b)
    _, lo_c, hi_c = stats.cluster_diff_ci(a, b, tasks)
    assert hi_c - lo_c > 2 * (hi_u - lo_u)
    cmp = against_strongest(a, {"none": b}, clusters=tasks)
    assert cmp.ci == pytest.approx((lo_c, hi_c))


def test_minimal_detectable_effect_shrinks_with_n():
    assert stats.mde_two_sample(1.0, 10) > stats.mde_two_sample(1.0, 100) > 0
    assert stats.mde_two_sample(1.0, 34) == pytest.approx(0.49, abs=0.02)  # d≈0.49 at n=34, 80% power


def test_the_report_shows_every_baseline_with_the_strongest_first():
    from divelab.report.render import claims_table_md

    cmp = against_strongest([0.9, 0.8, 0.85], {"random": [0.1, 0.2, 0.15], "kNN": [0.7, 0.75, 0.8]})
    c = Claim("router beats every alternative", "+5 points", cmp.effect, kind=Kind.EMPIRICAL, ci=cmp.ci,
              ruling=verdicts.direction(cmp.effect, cmp.ci, why="n"), **cmp.claim_fields())
    row = claims_table_md([c])[-1]
    assert "judged against the strongest baseline, kNN" in row and "also measured: random" in row


def test_the_claims_page_example_runs(capsys):
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "claims.md").read_text()
    block = page.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(block, "docs/claims.md", "exec"), {})
    assert capsys.readouterr().out.startswith("kNN router ")


def test_t_interval_over_a_handful_of_seeds_is_wider_than_a_bootstrap() -> None:
    # three training seeds: a bootstrap over three differences is far too narrow, the t-interval is not
    method, base = [0.50, 0.62, 0.55], [0.45, 0.50, 0.52]
    boot = against_strongest(method, {"base": base})
    t = against_strongest(method, {"base": base}, interval="t")
    assert t.effect == pytest.approx(boot.effect)
    assert t.ci[1] - t.ci[0] > boot.ci[1] - boot.ci[0]
    assert t.ci == pytest.approx(stats.mean_ci(np.subtract(method, base)))
    assert t.baselines[0]["ci"] == pytest.approx(list(stats.mean_ci(base)))
    with pytest.raises(ValueError, match="interval"):
        against_strongest(method, {"base": base}, interval="wild")


def test_the_comparison_states_the_smallest_effect_its_design_detects():
    from divelab import stats
    from divelab.claims import Claim, Kind
    from divelab.verdicts import direction

    rng = np.random.default_rng(0)
    base = rng.normal(0, 1, 30)
    method = base + 0.3 + rng.normal(0, 0.5, 30)
    cmp = against_strongest(method, {"b": base})
    assert cmp.mde == pytest.approx(stats.mde_two_sample(float(np.std(method - base, ddof=1)), 30))
    wider = against_strongest(method[:8], {"b": base[:8]})
    assert wider.mde > cmp.mde  # fewer units, a larger detectable effect
    tasks = np.repeat(np.arange(6), 5)
    assert against_strongest(method, {"b": base}, clusters=tasks).mde > cmp.mde  # 6 clusters, not 30 units
    c = Claim(statement="s", paper_value="p", measured=cmp.effect, ci=cmp.ci, kind=Kind.EMPIRICAL, unit="pts",
              ruling=direction(cmp.effect, cmp.ci, why="test"), **cmp.claim_fields())
    assert c.mde == cmp.mde and "at 80 % power" in c.power_text() and "pts" in c.power_text()
    one = against_strongest([1.0], {"b": [0.0]})
    c1 = Claim(statement="s", paper_value="p", measured=1.0, kind=Kind.EMPIRICAL, ruling=direction(1.0, exact=True, why="test"),
               **one.claim_fields())
    assert c1.power_text() == "too few units to detect any effect"
    assert Claim.from_dict(c1.to_dict()).mde == float("inf") and c1.to_dict()["mde"] == "inf"


def test_an_empirical_claim_with_an_interval_reads_its_detectable_effect_off_the_interval():
    from divelab import stats
    from divelab.claims import Claim, Kind
    from divelab.verdicts import direction

    c = Claim(statement="s", paper_value="p", measured=0.1, ci=(-0.1, 0.3), kind=Kind.EMPIRICAL,
              ruling=direction(0.1, (-0.1, 0.3), why="test"))
    assert c.mde == pytest.approx(stats.mde_from_ci(-0.1, 0.3)) and c.mde == pytest.approx(0.2 * 2.8016 / 1.96, rel=1e-3)
    check = Claim(statement="s", paper_value="p", measured=0.1, ci=(-0.1, 0.3), kind=Kind.CHECK,
                  ruling=direction(0.1, (-0.1, 0.3), why="test"))
    assert check.mde is None and check.power_text() == ""
    with pytest.raises(ValueError, match="finite interval"):
        stats.mde_from_ci(1.0, 0.0)


def test_no_spread_states_no_detectable_effect():
    from divelab.claims import Claim, Kind
    from divelab.verdicts import uninformative

    tie = Claim(statement="s", paper_value="p", measured=0.0, ci=(0.0, 0.0), kind=Kind.EMPIRICAL,
                ruling=uninformative("exact tie"))
    assert tie.mde is None and tie.power_text() == ""
    zero = against_strongest([1.0, 1.0, 1.0], {"b": [1.0, 1.0, 1.0]})
    assert zero.mde == 0.0
    c = Claim(statement="s", paper_value="p", measured=0.0, ci=(0.0, 0.0), kind=Kind.EMPIRICAL,
              ruling=uninformative("exact tie"), **zero.claim_fields())
    assert c.power_text() == ""


def test_a_claim_that_measures_something_else_reads_its_detectable_effect_off_its_own_interval():
    from divelab.claims import Claim, Kind
    from divelab.verdicts import direction

    cmp = against_strongest([10.0, 12.0, 11.0, 13.0], {"b": [20.0, 25.0, 21.0, 24.0]}, better="lower")
    assert "mde" not in cmp.claim_fields(measures_effect=False)
    ratio = Claim(statement="s", paper_value="p", measured=0.5, ci=(0.4, 0.6), unit="x baseline", kind=Kind.EMPIRICAL,
                  ruling=direction(cmp.effect, cmp.ci, expected_sign=-1, why="test"),
                  **cmp.claim_fields(measures_effect=False))
    assert ratio.mde == pytest.approx(stats.mde_from_ci(0.4, 0.6)) and ratio.mde != cmp.mde


def test_the_detectable_effect_is_set_beside_the_paper_effect():
    from divelab.claims import Claim, Kind
    from divelab.verdicts import direction, value

    def claim(paper, ci=(0.0, 0.4), ruling=None):
        return Claim(statement="s", paper_value="p", measured=0.2, ci=ci, kind=Kind.EMPIRICAL, unit="pts",
                     ruling=ruling or direction(0.2, ci, paper=paper, why="test"))

    small = claim(0.05)  # the interval's width detects about 0.29: the paper's 0.05 is out of reach
    assert small.paper_effect() == 0.05 and "(0.05 pts) is smaller: under-powered here" in small.power_text()
    assert "enough for the paper's effect (0.5 pts)" in claim(0.5).power_text()
    assert claim((-0.8, -0.3)).paper_effect() == 0.3  # a band: its end nearer zero
    assert claim((-0.1, 0.3)).paper_effect() is None  # a band across zero states no size
    assert claim((0.0, 6.6)).paper_effect() is None  # "up to +6.6": no smallest effect to resolve
    assert claim(None).paper_effect() is None and claim(None).power_text().endswith("at 80 % power")
    valued = claim(0.5, ruling=value(0.2, paper=0.5, ci=(0.0, 0.4)))
    assert valued.paper_effect() is None  # a value claim's paper number is a level, not an effect
