"""E172 on an adapted subject: the word-problem generator, the DPO row builders and the claim logic (no SmolLM2:
a tiny chain-tokenizer checkpoint with a chat template stands in)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from divelab.interp.cliff_tokens import adapted, dpo_rows
from divelab.interp.cliff_tokens.dpo import SequencePair, TokenPair
from divelab.interp.cliff_tokens.task import chain_tokenizer, last_number
from divelab.interp.cliff_tokens.word_problems import STRUCTURES, problem_sets, solution_text

TEMPLATE = ("{% for m in messages %}{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}:{% endif %}")


def test_problems_are_correct_and_evaluation_never_meets_training() -> None:
    (train,) = problem_sets("train", [300], seed=0)
    held, det = problem_sets("eval", [150, 40], seed=1)
    q = {name: {p.meta["question"] for p, _ in s} for name, s in (("train", train), ("held", held), ("det", det))}
    assert len(q["train"]) == 300 and len(q["held"]) == 150 and len(q["det"]) == 40  # distinct within a set
    assert not q["train"] & (q["held"] | q["det"]) and not q["held"] & q["det"]
    # the wordings themselves are disjoint: no evaluation template is a training template
    for s in STRUCTURES:
        assert not set(s.wordings["train"]) & set(s.wordings["eval"])
    for p, trace in train + held + det:
        x = p.meta["numbers"]
        steps = next(s for s in STRUCTURES if s.name == p.meta["structure"]).steps(tuple(x))
        for a, op, b, r in steps:  # every step is right arithmetic and every intermediate stays positive
            assert r == (a + b if op == "+" else a - b if op == "-" else a * b) and r > 0
            assert f"{a} {op} {b} = {r}." in trace
        assert last_number(trace, p.answer) and str(steps[-1][3]) == p.answer
        assert all(str(v) in p.meta["question"] for v in x)
    # every structure and both families occur; the same seed gives the same problems
    assert {p.meta["structure"] for p, _ in held} == {s.name for s in STRUCTURES}
    assert [p.prompt for p, _ in problem_sets("eval", [150, 40], seed=1)[0]] == [p.prompt for p, _ in held]
    assert solution_text(STRUCTURES[0], (7, 5, 3)) == ("7 + 5 = 12. 12 - 3 = 9. The answer is 9.", 9)
    with pytest.raises(ValueError, match="family"):
        problem_sets("test", [1], seed=0)


class _MergingTokenizer:
    """Greedy longest match over {"a", "b", "ab", "c"}: "a" + "b" re-tokenises as one token, as BPE merges do."""

    vocab = {"a": 0, "b": 1, "ab": 2, "c": 3}

    def __call__(self, text, add_special_tokens=False):
        ids, i = [], 0
        while i < len(text):
            n = 2 if text[i:i + 2] in self.vocab else 1
            ids.append(self.vocab[text[i:i + n]])
            i += n
        return {"input_ids": ids}

    def decode(self, ids, **kw):
        inv = {v: k for k, v in self.vocab.items()}
        return "".join(inv[i] for i in ids)


def _ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def test_cliff_rows_keep_only_pairs_that_round_trip_and_budgets_match() -> None:
    tok = chain_tokenizer()
    ctx = tuple(_ids(tok, "3 5 8:3+5="))
    good = TokenPair(ctx, chosen=_ids(tok, "8")[0], rejected=_ids(tok, "9")[0], kind="sampled-off")
    rows, dropped = dpo_rows.cliff_rows([good], tok)
    assert dropped == 0 and rows == [{"prompt": "3 5 8:3+5=", "chosen": "8", "rejected": "9"}]
    # a tokenizer that merges "a" + "b" into one token: the pair's text no longer gives its token IDs back
    merging = _MergingTokenizer()
    merged = TokenPair((0,), chosen=1, rejected=3)  # "a" then "b" (tokenises as "ab") vs "a" then "c"
    kept = TokenPair((3,), chosen=0, rejected=1)
    assert dpo_rows.cliff_rows([merged, kept], merging) == ([{"prompt": "c", "chosen": "a", "rejected": "b"}], 1)
    eos = tok.eos_token_id
    seq = SequencePair(tuple(_ids(tok, "3 5:")), tuple(_ids(tok, "3+5=8>8")) + (eos,), tuple(_ids(tok, "3+5=9>9")))
    assert dpo_rows.sequence_rows([seq], tok, [eos]) == [{"prompt": "3 5:", "chosen": "3+5=8>8",
                                                          "rejected": "3+5=9>9"}]
    a = [{"prompt": str(i), "chosen": "1", "rejected": "2"} for i in range(7)]
    b = a[:3]
    ca, cb = dpo_rows.equal_budget(a, b, seed=0)
    assert len(ca) == len(cb) == 3 and cb == b and all(r in a for r in ca)
    assert dpo_rows.equal_budget(a, b, seed=0) == (ca, cb)


def test_competence_gate_and_dpo_claim_logic() -> None:
    ok = adapted.competence_claim("m", 0.5, (0.42, 0.58), 150, untuned=0.05)
    low = adapted.competence_claim("m", 0.1, (0.06, 0.16), 150, untuned=0.05)
    assert ok.verdict.value == "reproduced" and low.verdict.value == "not reproduced"
    assert adapted.in_window(0.2) and adapted.in_window(0.8) and not adapted.in_window(0.81)
    cfg = adapted.AdaptedConfig()
    comp = adapted.competence_text("m", 0.5, (0.42, 0.58), 150)
    # a clear win over both arms, three runs each
    acc = {"Cliff-DPO": np.array([0.60, 0.62, 0.61]), "full-sequence DPO": np.array([0.50, 0.49, 0.52]),
           "SFT start": np.array([0.45, 0.47, 0.46])}
    c = adapted.dpo_claim("m", acc, 12, cfg, comp, seed=0)
    assert c.compared_with == "full-sequence DPO" and c.measured == pytest.approx(100 * (0.61 - 0.5033), abs=0.1)
    assert c.verdict.value in ("direction holds", "reproduced") and "competence of" in c.note
    assert {b["name"] for b in c.baselines} == {"full-sequence DPO", "SFT start"} and c.mde is not None
    # a floor on every arm is uninformative, never "not separated"
    floor = {k: np.zeros(3) for k in acc}
    assert adapted.dpo_claim("m", floor, 12, cfg, comp, seed=0).verdict.value == "uninformative"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from divelab.lm import load_model
    from doubles import tiny_chain_checkpoint

    path = tiny_chain_checkpoint(tmp_path_factory.mktemp("adapted-ckpt"))

    def load():
        model, tok = load_model(str(path))
        tok.chat_template = TEMPLATE
        return model, tok

    return str(path), load


def test_outside_the_window_every_downstream_claim_is_uninformative(tiny, tmp_path, monkeypatch) -> None:
    from divelab.threads import torch_threads

    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path))
    path, load = tiny
    with torch_threads(1):
        claims, details = adapted.measure(adapted.SMOKE, seed=0, base=path, base_loader=load, label="tiny")
    # an untrained tiny model solves nothing: adapted, then gated at the competence check
    assert details["sft"]["used"] and details["sft"]["rows"] == adapted.SMOKE.sft_problems
    comp, *rest = claims
    assert comp.kind.value == "check" and comp.verdict.value == "not reproduced"
    assert "SFT adapter" in comp.statement and len(rest) == 4
    assert all(c.verdict.value == "uninformative" and "outside the window" in c.note for c in rest)


def test_inside_the_window_the_whole_pipeline_runs(tiny, tmp_path, monkeypatch) -> None:
    from divelab.threads import torch_threads

    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path))
    monkeypatch.setattr(adapted, "WINDOW", (0.0, 1.0))  # let the tiny model through to exercise every stage
    path, load = tiny
    real = adapted._detect_and_pair

    def with_pairs(model, tok, problems, cfg, seed):
        # an untrained model finds no cliffs and no right responses: give both arms pairs of digits
        found = real(model, tok, problems, cfg, seed)
        d = [tok.convert_tokens_to_ids(c) for c in "0123456789"]
        trs = found["traces"]
        found["pairs"] = [TokenPair(tuple(tr.prompt_ids), d[i % 10], d[(i + 1) % 10]) for i, tr in enumerate(trs)]
        found["seq_pairs"] = [SequencePair(tuple(tr.prompt_ids), (d[i % 10], d[3]), (d[(i + 1) % 10], d[4]))
                              for i, tr in enumerate(trs)]
        return found

    monkeypatch.setattr(adapted, "_detect_and_pair", with_pairs)
    monkeypatch.setattr(adapted, "DETECT_CHUNK", 2)  # two cached chunks, merged
    with torch_threads(1):
        claims, details = adapted.measure(adapted.SMOKE, seed=0, base=path, base_loader=load, label="tiny")
        again, details2 = adapted.measure(adapted.SMOKE, seed=0, base=path, base_loader=load, label="tiny")
    assert len(claims) == 5 and claims[0].verdict.value == "reproduced"
    assert details["detection"]["summary"]["traces"] == adapted.SMOKE.detect_problems * adapted.SMOKE.per_problem
    last = claims[-1]
    assert "Cliff-DPO" in last.statement and last.verdict is not None
    assert details["pairs"]["per_arm"] == 2 * adapted.SMOKE.detect_problems  # both arms cut to one budget
    assert len(details["dpo_runs"]) == 2 * adapted.SMOKE.dpo_runs
    assert last.compared_with in ("full-sequence DPO", "SFT start") or last.verdict.value == "uninformative"
    # everything came from the cache the second time: the same numbers
    assert [c.measured for c in again] == [c.measured for c in claims]
    # a detection chunk's cache key ignores the budgets that do not decide it
    other = replace(adapted.SMOKE, dpo_runs=5, detect_problems=9, eval_problems=7, sft=replace(adapted.SMOKE.sft, steps=3))
    assert adapted.detection_fields(other) == adapted.detection_fields(adapted.SMOKE)


def test_only_the_full_plan_sizes_the_adapted_study_and_set_reaches_its_trainers() -> None:
    from divelab import plans
    from divelab.interp.cliff_tokens import reproduce

    assert reproduce.PLANS["smoke"].real_llm is None and reproduce.PLANS["quick"].real_llm is None
    full = plans.apply_overrides(reproduce.PLANS["full"], {"real_llm.dpo.lr": "1e-4", "real_llm.sft.lora.r": "8"})
    assert full.real_llm.dpo.lr == 1e-4 and full.real_llm.sft.lora.r == 8
    recorded = plans.to_dict(full)["real_llm"]
    assert recorded["dpo"]["method"] == "dpo" and recorded["sft"]["steps"] == adapted.AdaptedConfig().sft.steps
