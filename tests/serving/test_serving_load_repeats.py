"""benchmarks/serving_load.py: a load point over repeated sweeps — each mode's metrics averaged, DSpark's ratios to
plain paired by repeat with a t-interval over repeats."""

import pytest

from script_modules import load_script


def _module():
    return load_script("benchmarks/serving_load.py")


def _summary(per_user: float, total: float) -> dict:
    return {"per_user_tok_s_mean": per_user, "total_throughput_tok_s": total, "ttft_s_p50": 0.1, "itl_s_p50": 0.02,
            "itl_s_p99": 0.05, "tau": 1.5, "completion_tokens": 256, "ok": 2, "requests": 2}


def test_ratios_are_paired_by_repeat_with_an_interval():
    mod = _module()
    res = mod.summarise_repeats({"dspark": [_summary(20, 40), _summary(30, 60), _summary(25, 50)],
                                 "plain": [_summary(10, 40), _summary(20, 40), _summary(25, 25)]})
    assert res["per_user_speedup_per_repeat"] == [2.0, 1.5, 1.0]
    assert res["per_user_speedup"] == pytest.approx(1.5)  # the mean of paired ratios, not a ratio of means
    lo, hi = res["per_user_speedup_ci95"]
    assert lo < 1.5 < hi
    assert res["throughput_ratio"] == pytest.approx((1.0 + 1.5 + 2.0) / 3)
    assert res["dspark"]["per_user_tok_s_mean"] == pytest.approx(25) and len(res["dspark"]["repeats"]) == 3
    assert res["plain"]["completion_tokens"] == 3 * 256


def test_one_repeat_has_no_interval():
    res = _module().summarise_repeats({"dspark": [_summary(20, 40)], "plain": [_summary(10, 40)]})
    assert res["per_user_speedup"] == pytest.approx(2.0) and res["per_user_speedup_ci95"] is None
