"""divelab.stages: a full run resumes from its last finished stage; quick and plain calls never cache."""

from __future__ import annotations

import os
import textwrap

import pytest

from divelab import stages
from divelab.stages import run_context, stage


class Boom(RuntimeError):
    pass


def _two_stage_run(calls: list[str], scale: str, fail_second: bool = False, seed: int = 0) -> list[dict]:
    def second():
        calls.append("second")
        if fail_second:
            raise Boom
        return {"b": 2}

    with run_context("demo", "divelab.training.backtrack", scale, {"n": 3}, seed, total_weight=3) as records:
        a = stage("first", lambda: calls.append("first") or [1, 2, 3], weight=2)
        b = stage("second", second)
    assert a == [1, 2, 3] and b == {"b": 2}
    return records


def test_a_killed_full_run_resumes_from_the_first_unfinished_stage():
    calls: list[str] = []
    with pytest.raises(Boom):
        _two_stage_run(calls, "full", fail_second=True)
    assert calls == ["first", "second"]
    records = _two_stage_run(calls, "full")
    assert calls == ["first", "second", "second"]  # the first stage came from the cache
    assert [(r["name"], r["cached"]) for r in records] == [("first", True), ("second", False)]
    records = _two_stage_run(calls, "full")
    assert calls[-1] == "second" and len(calls) == 3 and all(r["cached"] for r in records)
    _two_stage_run(calls, "full", seed=1)  # another seed is another run
    assert calls[-2:] == ["first", "second"]


def test_quick_runs_and_plain_calls_never_cache():
    calls: list[str] = []
    _two_stage_run(calls, "quick")
    _two_stage_run(calls, "quick")
    assert calls == ["first", "second"] * 2
    assert stage("outside a run", lambda: 7) == 7
    with pytest.raises(ValueError, match="weight must be > 0"):
        stage("x", lambda: 1, weight=0)


def test_a_code_change_invalidates_the_cached_stages(monkeypatch):
    calls: list[str] = []
    _two_stage_run(calls, "full", seed=5)
    monkeypatch.setattr(stages, "package_source_hash", lambda package: "edited")
    _two_stage_run(calls, "full", seed=5)
    assert calls == ["first", "second"] * 2


def test_the_code_hash_needs_a_package():
    with pytest.raises(ValueError, match="not an importable package"):
        stages.package_source_hash("divelab.no_such_package")
    assert stages.package_source_hash("divelab.training.backtrack") == stages.package_source_hash(
        "divelab.training.backtrack")


def test_each_stage_says_when_it_starts_and_ends_with_the_time_left(monkeypatch, capsys):
    monkeypatch.delenv("DIVELAB_QUIET", raising=False)
    _two_stage_run([], "quick")
    err = capsys.readouterr().err
    assert "[demo] stage 'first': started" in err and "[demo] stage 'first': done in" in err
    assert "s left" in err.split("stage 'first': done")[1].splitlines()[0]
    assert "s left" not in err.split("stage 'second': done")[1]  # nothing is left after the last


def test_the_runner_records_the_stages_and_resumes_a_full_run(tmp_path, monkeypatch):
    pkg = tmp_path / "stagepkg" / "staged"
    pkg.mkdir(parents=True)
    (tmp_path / "stagepkg" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "reproduce.py").write_text(textwrap.dedent('''
        from dataclasses import dataclass
        from divelab.claims import Reproduction
        from divelab.stages import stage

        CALLS = []
        STAGE_WEIGHT = 2


        @dataclass(frozen=True)
        class Plan:
            n: int
            """how many."""


        PLANS = {"smoke": Plan(1), "quick": Plan(2), "full": Plan(3)}


        def run(plan, seed):
            stage("one", lambda: CALLS.append(1))
            stage("two", lambda: CALLS.append(2))
            return Reproduction(system="staged", title="t", scale="", seed=seed)
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    from divelab.scaleout import run_reproduction

    rep = run_reproduction("stagepkg.staged", "full", 0)
    assert [s["name"] for s in rep.details["stages"]] == ["one", "two"]
    assert "resumed" not in rep.details
    computed = sum(s["seconds"] for s in rep.details["stages"])
    rep = run_reproduction("stagepkg.staged", "full", 0)
    assert all(s["cached"] for s in rep.details["stages"])
    # the runtime is this process's; the record says what the loaded stages took when they were computed
    assert rep.details["resumed"] == {"stages_loaded": 2, "of_stages": 2, "loaded_stage_seconds": computed}
    import stagepkg.staged.reproduce as mod

    assert mod.CALLS == [1, 2]


def test_a_resumed_run_draws_the_same_random_numbers_as_an_uninterrupted_one():
    import random

    import numpy as np

    def run(fail: bool) -> list[float]:
        random.seed(3)
        np.random.seed(3)
        with run_context("demo", "divelab.training.backtrack", "full", {"rng": 1}, 9):
            stage("draws", lambda: [random.random(), float(np.random.rand())])
            if fail:
                raise Boom
            return stage("after", lambda: [random.random(), float(np.random.rand())])

    with pytest.raises(Boom):
        run(fail=True)
    random.seed(99)  # whatever the interpreter did in between
    np.random.seed(99)
    resumed = run(fail=False)  # "draws" comes from the cache, "after" runs
    assert resumed == run(fail=False)  # both from the cache now
    with run_context("demo", "divelab.training.backtrack", "quick", {"rng": 1}, 9):
        random.seed(3)
        np.random.seed(3)
        stage("draws", lambda: [random.random(), float(np.random.rand())])
        fresh = stage("after", lambda: [random.random(), float(np.random.rand())])
    assert resumed == fresh


def _seeded_draw(seed: int) -> list[float]:
    import numpy as np

    return np.random.default_rng(seed).random(3).tolist() + [float(os.getpid())]


def _parallel_run(calls: list[int], workers: str, monkeypatch, seed: int = 0) -> list:
    monkeypatch.setenv("DIVELAB_STAGE_WORKERS", workers)

    def one(s: int):
        calls.append(s)  # seen only when the stage runs in this process
        return _seeded_draw(s)

    with run_context("demo", "divelab.training.backtrack", "full", {"par": 1}, seed, total_weight=3) as records:
        values = stages.parallel_stages([(f"seed {s}", lambda s=s: one(s), 1.0) for s in range(3)])
    return values, records


def test_parallel_stages_match_one_worker_and_leave_the_callers_random_state(monkeypatch):
    import numpy as np

    np.random.seed(4)
    calls: list[int] = []
    two, records = _parallel_run(calls, "2", monkeypatch)
    after_two = np.random.rand()
    assert calls == []  # all three ran in forked workers
    assert {round(v[3]) for v in two} != {os.getpid()}
    assert sorted(r["name"] for r in records) == ["seed 0", "seed 1", "seed 2"] and not any(r["cached"] for r in records)
    np.random.seed(4)
    one, _ = _parallel_run(calls, "1", monkeypatch, seed=1)  # another run: nothing cached
    assert calls == [0, 1, 2] and np.random.rand() == after_two
    assert [v[:3] for v in one] == [v[:3] for v in two] == [_seeded_draw(s)[:3] for s in range(3)]
    again, records = _parallel_run(calls, "2", monkeypatch)  # the first run's stages, from the cache
    assert again == two and all(r["cached"] for r in records)


def test_parallel_stages_check_their_input(monkeypatch):
    with pytest.raises(ValueError, match="distinct names"):
        stages.parallel_stages([("a", lambda: 1, 1.0), ("a", lambda: 2, 1.0)])
    with pytest.raises(ValueError, match="weight must be > 0"):
        stages.parallel_stages([("a", lambda: 1, 0.0)])
    monkeypatch.setenv("DIVELAB_STAGE_WORKERS", "two")
    with pytest.raises(ValueError, match="DIVELAB_STAGE_WORKERS must be a whole number"):
        stages.stage_workers(3)
    monkeypatch.setenv("DIVELAB_STAGE_WORKERS", "8")
    assert stages.stage_workers(3) == 3
    assert stages.parallel_stages([("plain", lambda: 5, 1.0)]) == [5]  # outside a run it just runs
