"""The program world (HumanEval programs, evolving test suites): judge, anchor and erasure on constructed cases."""

import numpy as np
import pytest

from divelab.chat import ScriptedChatModel
from divelab.selfimprove.red_queen import RQGMConfig, compare_judges, judge_score, run
from divelab.selfimprove.red_queen.world_programs import ChatMutator, NotUsable, ProgramWorld, build_bench


@pytest.fixture(scope="module")
def bench():
    return build_bench("HumanEval/0")  # ~2 s in the sandbox when cold, then cached by program hash


def test_bench_truth_and_the_weak_suite_is_hackable(bench):
    w = ProgramWorld(bench)
    canon, stub = bench.canonical, bench.stubs[0]
    assert bench.quality(canon, "all") == 1.0 and w.truth(canon)
    assert all(w.true_quality(s) < 1.0 for s in bench.stubs) and not w.truth(stub)
    assert 0.0 < w.true_quality(w.initial_writer()) < 1.0
    weak = w.initial_judge()
    # the constructed weak suite: the constant stub passes it, the canonical solution fails its wrong test
    assert w.accepts(weak, (stub, None)) and not w.accepts(weak, (canon, None))
    assert bench.tests[max(weak)].kind == "wrong"
    # a suite of correct generated tests separates them the other way round
    good = frozenset(i for i, t in enumerate(bench.tests) if t.kind == "generated")
    assert w.accepts(good, (canon, None)) and not w.accepts(good, (stub, None))
    assert w.judge_accuracy(good) > w.judge_accuracy(weak) + 0.2
    # one-test items: acceptance is the suite pass rate
    rate = np.mean([w.accepts(weak, (canon, u)) for u in np.linspace(0, 0.999, 60)])
    assert rate == pytest.approx(w.__class__(bench, writer_items="test").judged_accept(canon, weak), abs=0.05)


def test_anchor_labels_replacement_rule_and_ties(bench):
    strict, lenient = ProgramWorld(bench, seed=1), ProgramWorld(bench, seed=1, anchor_mode="lenient")
    for (item, label), in strict.anchor():
        assert label == (bench.quality(item[0], "anchor") == 1.0)
    assert strict.anchor_label(bench.canonical)
    assert all(lenient.anchor_label(c) for c in bench.programs if strict.anchor_label(c))  # lenient ⊇ strict
    half = [c for c in bench.programs if bench.quality(c, "anchor") == 0.5]
    assert all(lenient.anchor_label(c) and not strict.anchor_label(c) for c in half)
    weak = strict.initial_judge()
    good = frozenset(i for i, t in enumerate(bench.tests) if t.kind == "generated")
    anchor = strict.anchor()
    assert compare_judges(judge_score(strict, weak, anchor), judge_score(strict, good, anchor)).replace
    assert not compare_judges(judge_score(strict, good, anchor), judge_score(strict, weak, anchor)).replace
    assert not compare_judges(judge_score(strict, good, anchor), judge_score(strict, frozenset(good), anchor)).replace
    with pytest.raises(ValueError, match="anchor_mode"):
        ProgramWorld(bench, anchor_mode="kind")


def test_erasure_in_the_program_world_removes_exactly_old_judge_records(bench):
    r = next(res for s in range(8) if (res := run(ProgramWorld(bench, seed=s), RQGMConfig(budget=250), seed=s))
             .replacements)
    epoch = len(r.replacements)
    assert r.archive.erased > 0
    assert all(rec.epoch == epoch for rec in r.archive.records if "judge" in rec.deps)
    assert any(rec.epoch < epoch for rec in r.archive.records if not rec.deps)  # judge-role records survive
    ne = run(ProgramWorld(bench, seed=0), RQGMConfig(budget=250, mode="no_erasure"), seed=0)
    assert ne.archive.erased == 0 and len({rec.epoch for rec in ne.archive.records}) == len(ne.replacements) + 1


def test_chat_mutator_programs_run_lazily_in_the_sandbox(bench):
    renamed = bench.canonical.replace("distance", "gap")
    model = ScriptedChatModel(replies=[f"Here:\n```python\n{renamed}\n```", "no code here (", "```python\nx = 1\n```"])
    mut = ChatMutator(model, bench.task)
    w = ProgramWorld(bench, chat_mutator=mut, p_chat=1.0)
    rng = np.random.default_rng(0)
    new = w.mutate_writer(bench.initial_writer, rng)
    assert new != bench.initial_writer and new not in (bench.canonical, *bench.stubs)
    assert w.true_quality(new) == 1.0 and bench.programs[new].origin == "chat"  # ran in the sandbox just now
    assert w.mutate_writer(new, rng) == new and w.mutate_writer(new, rng) == new  # unusable replies: kept
    assert mut.calls == 3 and mut.rejected == 2


def test_coevolved_suite_as_openevolve_evaluator(bench, tmp_path):
    from divelab.selfimprove.red_queen import JudgeEvaluator

    w = ProgramWorld(bench)
    good = frozenset(i for i, t in enumerate(bench.tests) if t.kind == "generated")
    f = tmp_path / "prog.py"
    f.write_text(bench.canonical)
    assert JudgeEvaluator(w, good, n_items=4).evaluate(str(f))["combined_score"] == 1.0
    assert JudgeEvaluator(w, good, n_items=4).evaluate(bench.stubs[0])["combined_score"] == 0.0
    assert JudgeEvaluator(w, w.initial_judge(), n_items=4).evaluate(bench.stubs[0])["combined_score"] == 1.0
    with pytest.raises(TypeError, match="Python source"):
        w.load_program(3)


def test_bad_tasks_are_refused():
    with pytest.raises(ValueError, match="unknown task"):
        build_bench("HumanEval/999")
    with pytest.raises(NotUsable, match="hidden tests"):
        build_bench("HumanEval/32")
