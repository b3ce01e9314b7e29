"""DSpark on the lean target engine (the default): greedy identity with the same engine's plain greedy in
every weight format, drafts verified by one k-token forward and rolled back in place, exact sampling (χ²
against the lean model's own sequence probabilities), `divelab serve` on it through the `openai` client,
and the one-line refusal of an architecture it does not run."""

from __future__ import annotations

import itertools

import numpy as np
import openai
import pytest
import torch
from scipy.stats import chisquare
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
from typer.testing import CliRunner

import divelab.lm.lean.model as lean_model
import divelab.serving.dspark.engine as engine_module
from divelab.lm.lean import FORMATS, LeanLM, forward_many, lean_generate
from divelab.serving.dspark import Drafter, DrafterConfig, Request, SpecEngine
from divelab.serving.dspark.lean_target import LeanTarget, measure_lean_sps
from divelab.serving.dspark.sps import SPSCurve
from divelab.serving.server import BackgroundServer, build_app, create_app

SPS = SPSCurve.synthetic_accelerator(0.01, 8)
FLAT = SPSCurve.synthetic_accelerator(0.01, 100_000, max_b=8)  # verifying is free: every draft is sent
PROMPTS = [[3, 1, 4, 1, 5], [2, 7], [6, 6, 6, 0, 2, 5, 3], [4], [1, 2, 3, 4, 5, 6, 7, 0, 1]]


def _llama(vocab: int = 8, seed: int = 0, init: float = 0.2) -> LlamaForCausalLM:
    """A small random Llama: a wide initialisation makes each token depend on its context (a cache bug
    changes the output), a small vocabulary makes an untrained drafter's guesses right often enough."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                      num_key_value_heads=2, intermediate_size=128, max_position_embeddings=256,
                      initializer_range=init, eos_token_id=None, bos_token_id=0)
    return LlamaForCausalLM(cfg).eval()


def _drafter(target, kind: str, gamma: int = 4, seed: int = 0) -> Drafter:
    torch.manual_seed(seed)
    return Drafter.for_target(target, DrafterConfig(kind=kind, gamma=gamma, window=6, rank=4))


@pytest.fixture(scope="module")
def target():
    return _llama()


@pytest.mark.parametrize("fmt", FORMATS)
def test_greedy_dspark_is_the_same_engines_plain_greedy(target, fmt):
    plain = SpecEngine(target, None, sps=SPS, fmt=fmt)
    assert plain.engine == "lean" and plain.fmt == fmt  # the default engine
    ref = [plain.generate(p, 16) for p in PROMPTS]
    assert len({tuple(r) for r in ref}) > 1  # the prompts lead to different continuations
    if fmt != "fp32":  # one-token steps are the lean path's own (fp32 multiplies two copies of a row, see LeanLM)
        lean = LeanLM.from_hf(target, fmt, max_len=64)
        assert [lean_generate(lean, p, max_new_tokens=16, eos_token_id=[]).tokens[0] for p in PROMPTS] == ref
    accepted = partial = 0
    for kind, sched in [("markov", "dspark"), ("parallel", "fixed"), ("rnn", "threshold-0.3"), ("ar", "fixed-2")]:
        eng = SpecEngine(target, _drafter(target, kind), sched, sps=SPS, fmt=fmt)
        for p, r in zip(PROMPTS, ref, strict=True):
            st = eng.prefill(Request(p, 16))
            while not st.done:
                rec = eng.step([st])
                accepted += int(rec.accepted.sum())
                partial += int(((rec.accepted > 0) & (rec.accepted < rec.ell)).sum())
            assert st.out == r, (fmt, kind, sched, p)
        res = SpecEngine(target, _drafter(target, kind), sched, sps=SPS, fmt=fmt).serve(
            [Request(p, 16, arrival_s=0.001 * i, rid=i) for i, p in enumerate(PROMPTS)], max_batch=3)
        assert [res.outputs[i] for i in range(len(PROMPTS))] == ref, (fmt, kind, "batched")
    assert accepted >= 10 and partial > 0  # drafts were accepted, and some rounds rolled rejected ones back


def test_one_forward_per_verification_and_rollback_in_place(target, monkeypatch):
    """Each step is one forward in which every request appends its 1 + ℓ tokens to its own static cache;
    the rejected drafts are dropped by shortening that cache (same tensors, no second prefill)."""
    calls: list[list[int]] = []

    def counted(seqs, tokens, *a, **kw):
        calls.append([len(t) for t in tokens])
        return forward_many(seqs, tokens, *a, **kw)

    monkeypatch.setattr(engine_module, "forward_many", counted)
    eng = SpecEngine(target, _drafter(target, "markov"), "fixed", sps=SPS, fmt="bf16")
    prompts = PROMPTS[4:6]
    states = eng.prefill_many([Request(p, 20, rid=i) for i, p in enumerate(prompts)])
    seqs, keys = [s.seq for s in states], [s.seq.cache.keys.data_ptr() for s in states]
    assert calls == [[len(p) for p in prompts]]  # one prefill forward for both prompts
    assert [s.length for s in seqs] == [len(p) for p in prompts]
    while not all(s.done for s in states):
        live = [s for s in states if not s.done]
        calls.clear()
        rec = eng.step(live)
        assert calls == [[1 + int(e) for e in rec.ell]]  # one forward verifies every request's anchor and drafts
        for st, seq, key in zip(states, seqs, keys, strict=True):
            assert st.seq is seq and seq.cache.keys.data_ptr() == key
            assert seq.length == st.n_cached == len(st.req.prompt) + len(st.out) - 1  # the anchor is not cached yet


def test_rollback_after_a_failed_step_keeps_every_request_exact(target, monkeypatch):
    ref = [SpecEngine(target, None, sps=SPS).generate(p, 12) for p in PROMPTS[:3]]
    eng = SpecEngine(target, _drafter(target, "markov"), "fixed", sps=SPS)
    states = eng.prefill_many([Request(p, 12, rid=i) for i, p in enumerate(PROMPTS[:3])])
    eng.step(states)
    attend = lean_model._attend

    def fail_third(seq, *a, **kw):  # the third request's attention fails after the first two wrote their caches
        if seq is states[2].seq:
            raise RuntimeError("injected")
        return attend(seq, *a, **kw)

    monkeypatch.setattr(lean_model, "_attend", fail_third)
    with pytest.raises(RuntimeError, match="injected"):
        eng.step(states)
    monkeypatch.undo()
    eng.rollback(states)
    assert [s.seq.length for s in states] == [s.n_cached for s in states]
    while not all(s.done for s in states):
        eng.step([s for s in states if not s.done])
    assert [s.out for s in states] == ref


def _exact_sequence_probs(model, fmt: str, prompt: list[int], v: int, n: int) -> tuple[list, np.ndarray]:
    """P(first n tokens) under the lean model in ``fmt`` at temperature 1, by enumeration."""
    # the engine's numerics (its one-token and k-token rows agree bit for bit)
    lean = LeanLM.from_hf(model, fmt, max_len=32, row_invariant=True)
    seqs = list(itertools.product(range(v), repeat=n))
    probs = []
    for s in seqs:
        lean.reset()
        logp = torch.log_softmax(lean.forward(prompt + list(s)).double(), -1)
        probs.append(float(np.exp(sum(float(logp[len(prompt) - 1 + k, s[k]]) for k in range(n)))))
    return seqs, np.array(probs)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("draft_vocab", [0, 2])
def test_sampled_outputs_match_exact_lean_sequence_probabilities(fmt, draft_vocab):
    v, prompt, n_req = 4, [1, 2, 3], 800
    tgt = _llama(vocab=v, seed=4, init=0.02)
    with torch.no_grad():  # peaked, so drafts are sometimes accepted
        tgt.model.norm.weight.mul_(60.0)
    seqs, exact = _exact_sequence_probs(tgt, fmt, prompt, v, 3)
    assert exact.sum() == pytest.approx(1.0, abs=1e-6) and exact.max() < 0.9
    torch.manual_seed(0)
    d = Drafter.for_target(tgt, DrafterConfig(kind="markov", gamma=2, window=4, rank=4, draft_vocab=draft_vocab))
    if draft_vocab:
        d.set_draft_vocab([0, 2])  # half the tokens cannot be proposed: the residual must supply them
    res = SpecEngine(tgt, d, "dspark", sps=FLAT, temperature=1.0, seed=0, fmt=fmt).serve(
        [Request(prompt, 3, rid=i) for i in range(n_req)], max_batch=50)
    counts = np.zeros(len(seqs))
    for out in res.outputs.values():
        counts[(out[0] * v + out[1]) * v + out[2]] += 1
    assert sum(int(s.accepted.sum()) for s in res.steps) > 100  # drafts were really verified and accepted
    big = exact * n_req >= 5  # bin the tail
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(exact[big], exact[~big].sum()) * n_req
    assert chisquare(obs, exp).pvalue > 1e-3


def test_sampling_negative_control_detects_a_lossy_verifier(monkeypatch):
    """The χ² test above can fail: accepting every draft (no rejection sampling) is caught."""
    from divelab.serving.dspark import engine as engine_mod

    v, prompt, n_req = 4, [1, 2, 3], 800
    tgt = _llama(vocab=v, seed=4, init=0.02)
    with torch.no_grad():
        tgt.model.norm.weight.mul_(60.0)
    seqs, exact = _exact_sequence_probs(tgt, "fp32", prompt, v, 3)
    real = engine_mod.verify_batch

    def accept_all(dtok, dprob, logits, ell, temperature, gen):
        acc, nxt = real(dtok, dprob, logits, ell, temperature, gen)
        return ell.clone(), torch.where(acc == ell, nxt, torch.multinomial(
            torch.softmax(logits[torch.arange(len(ell)), ell].double(), -1), 1, generator=gen).squeeze(-1))

    monkeypatch.setattr(engine_mod, "verify_batch", accept_all)
    torch.manual_seed(0)
    d = Drafter.for_target(tgt, DrafterConfig(kind="markov", gamma=2, window=4, rank=4))
    res = SpecEngine(tgt, d, "dspark", sps=FLAT, temperature=1.0, seed=0).serve(
        [Request(prompt, 3, rid=i) for i in range(n_req)], max_batch=50)
    counts = np.zeros(len(seqs))
    for out in res.outputs.values():
        counts[(out[0] * v + out[1]) * v + out[2]] += 1
    big = exact * n_req >= 5
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(exact[big], exact[~big].sum()) * n_req
    assert chisquare(obs, exp).pvalue < 1e-3


def test_lean_sps_is_measured_on_the_lean_forward(target):
    curve = measure_lean_sps(LeanTarget(target, "bf16"), batch_sizes=[1, 4, 8], repeats=2)
    assert "lean bf16" in curve.label and curve.meta["engine"] == "lean"
    assert np.all(curve.steps_per_s > 0) and np.all(np.diff(curve.steps_per_s) <= 0)


def test_engine_choice_and_errors(target):
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=8, n_embd=16, n_layer=1, n_head=2)).eval()
    with pytest.raises(ValueError, match=r"runs LlamaForCausalLM models .*not GPT2LMHeadModel.*engine='hf'"):
        SpecEngine(gpt2, None, sps=SPS)
    assert SpecEngine(gpt2, None, sps=SPS, engine="hf").engine == "hf"
    assert SpecEngine(gpt2, None, sps=SPS, engine="auto").engine == "hf"
    assert SpecEngine(target, None, sps=SPS, engine="auto", fmt="int8").fmt == "int8"
    with pytest.raises(ValueError, match="allowed: lean, hf, auto"):
        SpecEngine(target, None, sps=SPS, engine="vllm")
    with pytest.raises(ValueError, match="allowed: fp32, bf16, int8"):
        SpecEngine(target, None, sps=SPS, fmt="fp16")
    with pytest.raises(ValueError, match="hf engine runs the model as loaded"):
        SpecEngine(target, None, sps=SPS, engine="hf", fmt="bf16")
    shared = LeanTarget(target, "bf16")  # one set of converted weights for several engines
    assert SpecEngine(target, None, sps=SPS, engine=shared).lean is shared


# ------------------------------------------------------------------------------------------- divelab serve
@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory, model):
    """A checkpoint directory of an architecture the lean path does not run (the smoke tokenizer beside it)."""
    _, tok = model
    d = tmp_path_factory.mktemp("gpt2")
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=16, n_layer=1, n_head=2, n_positions=256)).save_pretrained(d)
    tok.save_pretrained(d)
    return d


@pytest.mark.parametrize("fmt", ["bf16", "int8"])
def test_serve_plain_and_speculative_on_the_lean_engine_through_openai(model, fmt):
    target, tok = model
    prompts = ["def add(a, b):", "import os\n", "class Stack:\n    def"]
    ref = [tok.decode(SpecEngine(target, None, sps=SPS, fmt=fmt).generate(tok.encode(p), 12),
                      skip_special_tokens=True) for p in prompts]
    torch.manual_seed(0)
    drafter = Drafter.for_target(target, DrafterConfig(kind="markov", gamma=4, window=8, rank=8))
    for d in (None, drafter):
        app = create_app(target, tok, "smoke", d, sps=SPS, max_batch=2, fmt=fmt)
        assert app.state.engine.lean is not None and app.state.engine.lean.fmt == fmt
        assert app.state.engine.speculative == (d is not None)
        with BackgroundServer(app) as srv:
            sdk = openai.OpenAI(base_url=srv.base_url, api_key="-", max_retries=0)
            got = [sdk.completions.create(model="smoke", prompt=p, max_tokens=12, temperature=0).choices[0].text
                   for p in prompts]
            echo = sdk.completions.create(model="smoke", prompt=prompts[0], max_tokens=2, temperature=0, echo=True,
                                          logprobs=1)
            seeded = [sdk.completions.create(model="smoke", prompt=prompts[1], max_tokens=8, temperature=0.9,
                                             seed=5).choices[0].text for _ in range(2)]
        assert got == ref, (fmt, d is not None)
        lp = echo.choices[0].logprobs.token_logprobs
        assert lp[0] is None and all(x is not None and x <= 0 for x in lp[1:])  # prompt logprobs on the lean path
        assert seeded[0] == seeded[1]


def test_build_app_defaults_to_lean_and_refuses_other_architectures(gpt2_dir):
    app = build_app("smoke", "none", fmt="bf16")
    assert app.state.engine.lean is not None and app.state.engine.lean.fmt == "bf16"
    with pytest.raises(ValueError, match=r"not GPT2LMHeadModel.*--engine hf"):
        build_app(str(gpt2_dir), "none")
    assert build_app(str(gpt2_dir), "none", engine="hf").state.engine.lean is None
    assert build_app(str(gpt2_dir), "none", engine="auto").state.engine.lean is None


def test_cli_refuses_an_unsupported_architecture_in_one_line(gpt2_dir):
    from divelab.cli import app as cli

    for args in (["serve", "--model", str(gpt2_dir), "--drafter", "none"],
                 ["dspark", "generate", "x", "--target", str(gpt2_dir)]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, result.output
        lines = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
        assert len(lines) == 1 and "GPT2LMHeadModel" in lines[0] and "--engine hf" in lines[0], result.output
    ok = CliRunner().invoke(cli, ["dspark", "generate", "x", "--target", str(gpt2_dir), "--engine", "hf",
                                  "--max-new-tokens", "3"])
    assert ok.exit_code == 0, ok.output


def test_guard_and_device_pick_the_hf_engine(model):
    from divelab.serving.server.app import default_engine
    from divelab.serving.server.engine_loop import EngineLoop

    target, tok = model
    assert default_engine(target) == "lean" and default_engine(target, guard="probe.json") == "hf"
    with pytest.raises(ValueError, match="guard reads the HF model's own layers.*--engine hf"):
        EngineLoop(target, tok, guard=object(), engine="lean")
    loop = EngineLoop(target, tok, guard=object(), engine="auto")  # auto gives way to the guard
    assert loop.lean is None
    loop.close()
