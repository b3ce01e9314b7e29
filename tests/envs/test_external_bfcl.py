"""The BFCL v4 reader and scorer: small fixture files in BFCL's own format (tests/envs/external_fixtures/bfcl),
and the real data shipped in the installed ``bfcl-eval`` wheel."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from divelab.envs import bfcl

FIXTURES = Path(__file__).parent / "external_fixtures" / "bfcl"


def record(category: str, index: int = 0) -> bfcl.BFCLRecord:
    return bfcl.load_category(category, FIXTURES)[index]


def test_reader_gives_typed_records_with_their_answers() -> None:
    r = record("simple", 1)
    assert r.id == "simple_python_1" and r.category == "simple"
    assert [m["role"] for m in r.messages] == ["system", "user"]
    assert r.question.startswith("Average the scores")
    assert r.functions[0].name == "stats_mean" and r.functions[0].required == ["values", "city"]
    assert r.ground_truth[0]["stats_mean"]["values"] == [[3, 4, 5]]
    assert record("irrelevance").ground_truth == []  # no answer file: abstention is the answer
    assert len(record("parallel").ground_truth) == 2


def test_correct_calls_pass_as_bfcl_allows() -> None:
    tri = record("simple")
    # int accepted for a float, an optional parameter left out, strings compared loosely
    assert bfcl.score(tri, [{"geometry.triangle_area": {"base": 10, "height": 5}}]).correct
    assert bfcl.score(tri, "[geometry.triangle_area(base=10, height=5.0, unit='Units')]").correct
    mean = record("simple", 1)
    assert bfcl.score(mean, [{"stats_mean": {"values": [3, 4, 5], "city": "new york ny"}}]).correct
    assert bfcl.score(mean, [{"stats_mean": {"values": [3, 4, 5], "city": "NYC", "options": {"round": 2}}}]).correct
    # parallel: order-free
    play = record("parallel")
    calls = [{"spotify.play": {"artist": "Maroon 5", "duration": 15}},
             {"spotify.play": {"artist": "Taylor Swift", "duration": 20}}]
    assert bfcl.score(play, calls).correct
    assert bfcl.score(record("multiple"), 'country_info.capital(country="brazil")').correct
    assert bfcl.score(record("irrelevance"), "I cannot answer that with these tools.").correct
    assert bfcl.score(record("irrelevance"), []).correct and bfcl.score(record("irrelevance"), [{}]).correct
    assert bfcl.score(record("live_relevance"), [{"search_engine.query": {"prompt": "fusion"}}]).correct
    # functions named a.b may be called a_b, as BFCL allows for APIs that forbid dots
    assert bfcl.score(tri, [{"geometry_triangle_area": {"base": 10, "height": 5}}], dots_as_underscores=True).correct


@pytest.mark.parametrize(("category", "index", "prediction", "error_type"), [
    ("simple", 0, [{"geometry.triangle_area": {"base": 11, "height": 5}}], "value_error"),  # wrong value
    ("simple", 0, [{"geometry.triangle_area": {"base": 10}}], "missing_required"),
    ("simple", 0, [{"triangle_area": {"base": 10, "height": 5}}], "wrong_func_name"),
    ("simple", 0, [{"geometry.triangle_area": {"base": "10", "height": 5}}], "type_error"),
    ("simple", 0, [{"geometry.triangle_area": {"base": 10, "height": 5, "colour": "red"}}], "unexpected_param"),
    ("simple", 0, [{"geometry.triangle_area": {"base": 10, "height": 5}}] * 2, "wrong_count"),
    ("simple", 0, "the area is 25", "decode_error"),
    ("simple", 1, [{"stats_mean": {"values": [3, 4], "city": "NYC"}}], "value_error"),  # list element-wise
    ("simple", 1, [{"stats_mean": {"values": [3, 4, 5], "city": "NYC", "options": {"round": 3}}}], "value_error"),
    ("simple", 1, [{"stats_mean": {"values": "3, 4, 5", "city": "NYC"}}], "type_error"),
    ("multiple", 0, [{"country_info.population": {"country": "Brazil"}}], "wrong_func_name"),
    ("parallel", 0, [{"spotify.play": {"artist": "Taylor Swift", "duration": 20}}] * 2, "no_match"),
    ("parallel", 0, [{"spotify.play": {"artist": "Taylor Swift", "duration": 20}}], "wrong_count"),
    ("irrelevance", 0, [{"determine_body_mass_index": {"weight": 70.0, "height": 1.8}}], "irrelevance"),
    ("irrelevance", 0, "determine_body_mass_index(weight=70.0, height=1.8)", "irrelevance"),
    ("live_relevance", 0, [], "relevance"),
])
def test_wrong_predictions_score_zero(category: str, index: int, prediction, error_type: str) -> None:
    result = bfcl.score(record(category, index), prediction)
    assert not result.correct and result.error_type == error_type, result


def test_parse_calls_and_accuracy() -> None:
    assert bfcl.parse_calls("[a.b(x=1, y=[1, 2]), c(z='q')]") == [{"a.b": {"x": 1, "y": [1, 2]}}, {"c": {"z": "q"}}]
    assert bfcl.parse_calls("") == []
    for bad in ("a(1)", "a(x=y)", "hello world", "[1, 2]"):
        with pytest.raises(ValueError):
            bfcl.parse_calls(bad)
    records = [record("simple"), record("irrelevance")]
    acc = bfcl.accuracy(records, {"simple_python_0": [{"geometry.triangle_area": {"base": 10, "height": 5}}]})
    assert acc == {"simple": 1.0, "irrelevance": 1.0}
    assert bfcl.accuracy(records, {"irrelevance_0": "determine_body_mass_index(weight=1.0, height=1.0)"}) == \
        {"simple": 0.0, "irrelevance": 0.0}


def test_bad_category_and_missing_files_say_what_is_allowed(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown BFCL category 'simple_java'; allowed: simple, multiple"):
        bfcl.load_category("simple_java", FIXTURES)
    with pytest.raises(FileNotFoundError, match="no BFCL questions"):
        bfcl.load_category("live_simple", FIXTURES)
    (tmp_path / "BFCL_v4_multiple.json").write_text((FIXTURES / "BFCL_v4_multiple.json").read_text())
    with pytest.raises(ValueError, match="has no possible answer"):
        bfcl.load_category("multiple", tmp_path)


def test_missing_package_names_the_install_command(monkeypatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match="pip install --no-deps bfcl-eval"):
        bfcl.data_dir()


def _inconsistent(r: bfcl.BFCLRecord) -> bool:
    """Ground truth that no call can meet under BFCL's rules: a parameter with nothing allowed, an answer
    parameter the function does not declare, or a required parameter the answer does not list."""
    for answer in r.ground_truth:
        name, params = next(iter(answer.items()))
        fn = next(f for f in r.functions if f.name == name)
        if any(a == [] for a in params.values()) or any(p not in fn.properties and "" not in a
                                                         for p, a in params.items()) \
                or any(p not in params for p in fn.required):
            return True
    return False


def test_sample_is_seeded_salted_and_capped(tmp_path: Path) -> None:
    line = (FIXTURES / "BFCL_v4_irrelevance.json").read_text().strip()
    (tmp_path / "BFCL_v4_irrelevance.json").write_text(
        "\n".join(line.replace('"irrelevance_0"', f'"irrelevance_{i}"') for i in range(40)))
    ids = lambda recs: [r.id for r in recs]  # noqa: E731
    a = bfcl.sample([("irrelevance", 6)], 3, 164, tmp_path)
    assert len(a) == 6 and ids(a) == ids(bfcl.sample([("irrelevance", 6)], 3, 164, tmp_path))
    assert ids(a) == sorted(ids(a), key=lambda i: int(i.split("_")[1]))  # file order
    assert ids(a) != ids(bfcl.sample([("irrelevance", 6)], 3, 167, tmp_path))  # another experiment's draw
    assert ids(a) != ids(bfcl.sample([("irrelevance", 6)], 4, 164, tmp_path))
    assert len(bfcl.sample([("irrelevance", 99)], 3, 164, tmp_path)) == 40  # all of it when asked for more


@pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None,
                    reason=f"the real BFCL data ships in the bfcl-eval wheel; install it with: {bfcl.INSTALL}")
def test_real_bfcl_data_parses_and_its_own_answers_pass() -> None:
    for category in bfcl.CATEGORIES:
        records = bfcl.load_category(category)
        assert records, category
        assert len({r.id for r in records}) == len(records)
        for r in records:
            assert r.question and (r.functions or "irrelevance" in category), r.id  # a few offer no function
            if "relevance" in category:  # (ir)relevance: no reference answer to replay
                assert not r.ground_truth
                continue
            assert r.ground_truth, r.id
            # the reference answer passes, except where the ground truth contradicts the function itself
            ok = bfcl.score(r, bfcl.reference_calls(r)).correct
            assert ok or _inconsistent(r), (r.id, bfcl.score(r, bfcl.reference_calls(r)))
        broken = sum(_inconsistent(r) for r in records)
        assert broken <= 0.01 * len(records), (category, broken)
