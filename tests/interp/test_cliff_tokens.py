"""Cliff tokens (E172): the cliff test on hand-computed cases, potentials on a model with a known answer
distribution, the taxonomy, single-token DPO on exactly one position, the CLI and the smoke reproduction."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from divelab.interp.cliff_tokens import (
    ENTROPY_BOUNDARY,
    Problem,
    RolloutConfig,
    TokenPair,
    classify,
    cliff_del_keep,
    cliff_matrix,
    detect,
    dpo_sigmoid_loss,
    find_cliffs,
    is_cliff,
    required_drop,
    train_dpo,
)
from divelab.interp.cliff_tokens.dpo import DPOConfig, token_logprobs_at_end
from divelab.interp.cliff_tokens.task import (
    chain_answer,
    chain_problem,
    chain_solution,
    chain_tokenizer,
    last_number,
)
from doubles import KnownModel


@pytest.fixture(autouse=True)
def _one_thread():
    from divelab.threads import torch_threads

    with torch_threads(1):  # tiny models: one thread is faster on a shared machine, and deterministic
        yield


# -- the cliff test ------------------------------------------------------------------------------------------------


def _by_hand(kp: int, kc: int, n: int) -> bool:
    pp, pc = kp / n, kc / n
    se = math.sqrt(pp * (1 - pp) / n + pc * (1 - pc) / n)
    return pp - pc > 0.1 + 1.6448536269514722 * se


def test_cliff_test_hand_computed_cases() -> None:
    # 1.0 -> 0.78125: SE = sqrt(.78125 * .21875 / 64) = .0517, threshold .185, drop .219 -> cliff
    assert is_cliff(64, 50, 64)
    # 0.5 -> 0.3125: SE = .0852, threshold .240, drop .1875 -> not a cliff, although a larger drop than above
    assert not is_cliff(32, 20, 64)
    # 0.5 -> 0.25: drop .25 > .1 + 1.645 * .0820 = .235 -> cliff
    assert is_cliff(32, 16, 64)
    # a drop of exactly delta0 from certainty is never enough
    assert not is_cliff(64, 58, 64)
    # rises are never cliffs
    assert not is_cliff(10, 60, 64)


def test_required_drop_is_largest_near_one_half() -> None:
    drops = {p: required_drop(p, 64) for p in (0.3, 0.5, 0.8, 0.9, 1.0)}
    assert drops[0.5] > drops[0.8] > drops[0.9] > drops[1.0] > 0.1  # 0.25, 0.234, 0.219, 0.1875
    assert drops[0.5] > drops[0.3]
    assert drops[0.5] == pytest.approx(0.25, abs=1e-9)  # 32 -> 16 is the first cliff from 0.5
    assert required_drop(0.05, 64) == float("inf")  # nothing below 0.05 can drop by more than delta0 + noise


def test_matrix_matches_formula_everywhere() -> None:
    for n in (8, 64):
        m = cliff_matrix(n)
        assert m.shape == (n + 1, n + 1)
        assert all(m[a, b] == _by_hand(a, b, n) for a in range(n + 1) for b in range(n + 1))
    with pytest.raises(ValueError, match="k_curr"):
        is_cliff(3, 70, 64)
    with pytest.raises(ValueError, match="positive integer"):
        cliff_matrix(0)


def test_find_cliffs_compares_consecutive_computed_prefixes() -> None:
    ks = [60, None, None, 20, 18, None, 2]
    spans = find_cliffs(ks, 64)
    assert [(s.start, s.end) for s in spans] == [(0, 3), (4, 6)]
    assert spans[0].k_prev == 60 and spans[0].k_curr == 20
    assert find_cliffs([None, None], 64) == []


def test_taxonomy() -> None:
    assert ENTROPY_BOUNDARY == pytest.approx(0.056, abs=1e-3)
    assert classify(1, 0.01) == "deterministic"
    assert classify(1, 0.5) == "uncertain"
    assert classify(3, 0.01) == "sampled-off"
    with pytest.raises(ValueError):
        classify(0, 0.1)


def test_chain_task_and_checkers() -> None:
    assert chain_solution([3, 5, 8]) == "3+5=8 8+8=6>6"
    p = chain_problem([3, 5, 8])
    assert p.prompt == "3 5 8:" and p.answer == "6"
    assert chain_answer("3+5=8 8+8=6>6", "6") and not chain_answer("3+5=8 8+8=7>7", "6")
    assert last_number("so the answer is 1,000.", "1000") and not last_number("no number", "3")
    tok = chain_tokenizer()
    ids = tok("3+5=8>8", add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == "3+5=8>8"


# -- potentials on a model with a known answer distribution ----------------------------------------------------


def test_potentials_and_cliff_on_known_distribution() -> None:
    tok = chain_tokenizer()
    model = KnownModel(tok)
    det = detect(model, tok, [Problem(":", "1")], checker="exact",
                 config=RolloutConfig(n=400, max_new_tokens=4, batch_rows=1024, seed=1), per_problem=12)
    starts = np.array([t.ks[0] / t.n for t in det.traces])
    assert abs(starts.mean() - 0.3) < 0.05  # 12 x 400 draws of a 0.3 coin
    for tr in det.traces:
        assert tr.ks[1] == (400 if tr.correct else 0)  # a single-digit response is its own potential
        assert len(tr.cliffs) == (0 if tr.correct else 1)
    wrong = list(det.cliffs)
    assert wrong and all(c.token == 1 and c.text == "0" and c.kind == "uncertain" for c in wrong)
    assert all(c.entropy == pytest.approx(-(0.3 * math.log(0.3) + 0.7 * math.log(0.7)), abs=1e-4) for c in wrong)
    iv = cliff_del_keep(det)
    assert all(i.pass_del == 1.0 and i.pass_keep == 0.0 for i in iv)


def test_early_stop_leaves_unrecoverable_prefixes_uncomputed() -> None:
    tok = chain_tokenizer()
    model = KnownModel(tok, p_one=1e-9)  # never right
    det = detect(model, tok, [Problem(":", "1")], checker="exact",
                 config=RolloutConfig(n=16, max_new_tokens=4, batch_rows=16), per_problem=1, zero_patience=1)
    tr = det.traces[0]
    assert tr.ks[0] == 0 and tr.ks[-1] == 0 and not det.cliffs


# -- single-token DPO ------------------------------------------------------------------------------------------


def test_dpo_loss_value() -> None:
    z = torch.zeros(3)
    assert dpo_sigmoid_loss(z, z, z, z, 0.1).tolist() == pytest.approx([math.log(2)] * 3)
    up = dpo_sigmoid_loss(torch.tensor([1.0]), torch.tensor([-1.0]), torch.zeros(1), torch.zeros(1), 0.5)
    assert float(up) == pytest.approx(-math.log(1 / (1 + math.exp(-1.0))))


def test_single_token_dpo_flows_through_exactly_one_position() -> None:
    from divelab.lm.models import build_model

    model = build_model("tiny-100k", vocab_size=17, seed=0)
    ctx = [[16, 5, 12, 7], [16, 4, 9]]
    c, r, logits = token_logprobs_at_end(model, ctx, torch.tensor([3, 4]), torch.tensor([5, 6]), return_logits=True)
    dpo_sigmoid_loss(c, r, c.detach() * 0, r.detach() * 0, 0.1).sum().backward()
    g = logits.grad.abs().sum(-1)  # (rows, positions)
    for i, cx in enumerate(ctx):
        nonzero = torch.nonzero(g[i]).flatten().tolist()
        assert nonzero == [len(cx) - 1]


def test_train_dpo_raises_the_chosen_token_at_its_context() -> None:
    from divelab.lm.models import build_model

    model = build_model("tiny-100k", vocab_size=17, seed=0)
    pairs = [TokenPair((16, 5, 12), 7, 8, "uncertain"), TokenPair((16, 4, 12), 9, 3, "sampled-off")]

    def margins(m):
        c, r = token_logprobs_at_end(m, [p.context for p in pairs], torch.tensor([p.chosen for p in pairs]),
                                     torch.tensor([p.rejected for p in pairs]))
        return (c - r).detach()

    before = margins(model)
    res = train_dpo(model, pairs, DPOConfig(lr=1e-2, epochs=8, batch_size=2, lora_r=4, lora_alpha=8,
                                            lora_dropout=0.0))
    after = margins(res.model)
    assert (after - before > 0.5).all()
    assert res.positions == 2 and res.pairs == 2
    assert torch.equal(margins(model), before)  # the reference model is untouched
    with pytest.raises(ValueError, match="at least one"):
        train_dpo(model, [])


# -- the CLI ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    from doubles import tiny_chain_checkpoint

    return tiny_chain_checkpoint(tmp_path_factory.mktemp("ckpt"))


def _task(tmp_path, rows, name: str = "task") -> str:
    p = tmp_path / f"{name}.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return str(p)


def test_cli_runs_on_a_checkpoint_on_disk(tiny_checkpoint, tmp_path) -> None:
    from divelab.interp.cliff_tokens.cli import run_find_cliffs

    task = _task(tmp_path, [{"prompt": "3 4:", "answer": "7"}, {"prompt": "1 2:", "answer": "3"}])
    plot = tmp_path / "p.png"
    out = run_find_cliffs(str(tiny_checkpoint), task, checker="contains", n=8, per_problem=2, max_new_tokens=6,
                          plot=plot)
    assert out["summary"]["traces"] == 4 and len(out["traces"]) == 4
    assert all(len(t["potentials"]) == len(t["response"]) + 1 or t["potentials"] for t in out["traces"])
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_cli_errors(tiny_checkpoint, tmp_path) -> None:
    from typer.testing import CliRunner

    from divelab.cli import make_app
    from divelab.interp.cliff_tokens.cli import run_find_cliffs

    no_answer = _task(tmp_path, [{"prompt": "3 4:"}])
    with pytest.raises(ValueError, match="no reference answer"):
        run_find_cliffs(str(tiny_checkpoint), no_answer)
    never = _task(tmp_path, [{"prompt": "3 4:", "answer": "never-produced"}], "never")
    with pytest.raises(ValueError, match="accepted none"):
        run_find_cliffs(str(tiny_checkpoint), never, checker="exact", n=4, max_new_tokens=4)
    with pytest.raises(ValueError, match="unknown checker"):
        run_find_cliffs(str(tiny_checkpoint), never, checker="magic", n=4)
    res = CliRunner().invoke(make_app(), ["find-cliffs", "--model", str(tiny_checkpoint), "--task", no_answer])
    assert res.exit_code == 2 and "no reference answer" in " ".join(res.output.split())


# -- the reproduction ------------------------------------------------------------------------------------------


def test_smoke_reproduction_computes_claims() -> None:
    from divelab.claims import Kind
    from divelab.scaleout import run_reproduction

    rep = run_reproduction("divelab.interp.cliff_tokens", "smoke", 0)
    assert rep.system == "cliff-tokens" and len(rep.claims) >= 6
    check = rep.claims[0]
    assert check.kind == Kind.CHECK and check.verdict.value == "reproduced"
    assert all(c.kind is not None for c in rep.claims)
    assert rep.figures and "cost" in rep.details
    # one timing of each arm is not a verdict; Cliff-DPO is one claim, judged against every arm of the run
    timing = [c for c in rep.claims if "wall-clock" in c.statement or "headline hides" in c.statement]
    assert all(c.verdict.value == "not checkable here" and "interleaved" in c.note for c in timing)
    assert not any("del beats cliff-keep" in c.statement or "random positions" in c.statement for c in rep.claims)
    dpo = [c for c in rep.claims if c.statement.startswith("Cliff-DPO raises accuracy over the strongest")]
    for c in dpo:
        assert {b["name"] for b in c.baselines} == {"starting model", "full-sequence"}
        assert c.rule["args"]["training_runs"] >= 3


def test_dpo_runs_replicate_the_training_run_and_the_held_out_problems(monkeypatch) -> None:
    from types import SimpleNamespace

    from divelab.interp.cliff_tokens import reproduce as rp

    seen = []  # (run's problems, arm or None for the starting model, DPO seed)

    def fake_train(model, pairs, cfg):
        return SimpleNamespace(model=(pairs[0], cfg.seed), seconds=0.0)

    def fake_acc(model, tok, problems, plan, seed):
        arm, dpo_seed = model if isinstance(model, tuple) else (None, None)
        seen.append((tuple(p.prompt for p in problems), arm, dpo_seed))
        return np.full(len(problems), 0.5)

    monkeypatch.setattr(rp.dpo, "train_dpo", fake_train)
    monkeypatch.setattr(rp, "_acc", fake_acc)
    plan = rp.PLANS["smoke"]
    out = rp._dpo_runs(object(), None, {"cliff": ["c"], "full-sequence": ["s"]}, plan, seed=0)
    assert all(len(v) == plan.dpo_runs >= 3 for v in out["accuracy"].values())
    runs = [seen[i:i + 3] for i in range(0, len(seen), 3)]  # the starting model, then each arm, per run
    assert len(runs) == plan.dpo_runs
    for run in runs:
        assert len({r[0] for r in run}) == 1  # every arm of a run is scored on that run's problems
    assert len({run[0][0] for run in runs}) == plan.dpo_runs  # each run draws its own problems
    for arm in ("c", "s"):
        assert len({r[2] for r in seen if r[1] == arm}) == plan.dpo_runs  # and its own DPO seed


def test_dpo_verdicts_read_the_interval_over_runs() -> None:
    from divelab import stats
    from divelab.claims import Verdict
    from divelab.interp.cliff_tokens.reproduce import PLANS, _dpo_verdicts

    acc = {"starting model": np.array([0.70, 0.72, 0.71, 0.69]), "cliff": np.array([0.60, 0.74, 0.66, 0.70]),
           "full-sequence": np.array([0.50, 0.62, 0.40, 0.55]), "random-token": np.array([0.30, 0.35, 0.32, 0.28])}
    (main,) = _dpo_verdicts(acc, {"cliff": 9, "full-sequence": 20, "random-token": 9}, PLANS["smoke"], seed=0)
    assert main.compared_with == "starting model"  # the strongest alternative, not full-sequence DPO
    assert {b["name"] for b in main.baselines} == {"starting model", "full-sequence"}
    assert main.ci == pytest.approx(stats.mean_ci(100 * (acc["cliff"] - acc["starting model"])))
    assert main.rule["args"]["training_runs"] == 4 and main.verdict is Verdict.NOT_SEPARATED
    assert "runs detect a difference" in main.note
    # random-token DPO (detection removed) is the negative control, against the same strongest baseline
    ctl = main.rule["args"]["control"]
    assert ctl["effect"] == pytest.approx(np.mean(100 * (acc["random-token"] - acc["starting model"])))
    assert main.falsifier and main.replication["n"] == 4


def test_the_detection_claims_carry_their_controls() -> None:
    from types import SimpleNamespace

    from divelab.claims import Kind, Verdict
    from divelab.interp.cliff_tokens import detection_claims

    # 8 of 10 wrong traces with a cliff, 2 of 10 right ones: a clear effect; shuffled labels do not show it
    traces = [SimpleNamespace(correct=i >= 10) for i in range(20)]
    det = SimpleNamespace(traces=traces, by_trace=lambda: {i: [] for i in (*range(8), 10, 11)}, cliffs=[])
    c = detection_claims.wrong_vs_right(det, seed=0)
    assert c.kind is Kind.EMPIRICAL and c.measured == pytest.approx(0.6)
    assert c.verdict is Verdict.DIRECTION_HOLDS and c.falsifier and c.replication["n"] == 20
    assert abs(c.rule["args"]["control"]["effect"]) < 0.6
    # on-policy continuations cannot produce real deterministic cliffs: the taxonomy cannot speak
    det.cliffs = [SimpleNamespace(kind=k) for k in ("deterministic", "uncertain", "sampled-off")]
    t = detection_claims.taxonomy(det, on_policy=True, paper_value="three", measured_text="x")
    assert t.verdict is Verdict.UNINFORMATIVE and "Monte Carlo" in t.reason
    assert detection_claims.taxonomy(det, on_policy=False, paper_value="three", measured_text="x").verdict \
        is Verdict.REPRODUCED


def test_the_plan_sizes_the_real_llm_run_and_only_full_runs_it(monkeypatch) -> None:
    from divelab.claims import Reproduction
    from divelab.interp.cliff_tokens import real_llm
    from divelab.interp.cliff_tokens.reproduce import PLANS
    from divelab.lm import real

    assert PLANS["full"].real_llm is not None
    assert PLANS["smoke"].real_llm is None and PLANS["quick"].real_llm is None
    seen = []
    monkeypatch.setattr(real, "is_available", lambda: True)
    monkeypatch.setattr(real_llm, "measure_smollm2", lambda cfg=None, **kw: (seen.append(cfg), ([], {}))[1])
    real_llm.add_to(Reproduction("cliff-tokens", "t", "", 0), real_llm.RealConfig(problems=2), 0)
    assert [c.problems for c in seen] == [2]
