"""The lean decoding path (divelab.lm.lean) against HF's own forward and generate, on a randomly
initialised small Llama (grouped-query attention, tied and untied heads): seconds, no training."""

from __future__ import annotations

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from divelab.lm import generate as hf_sampling_generate
from divelab.lm.lean import FORMATS, LeanLM, forward_many, lean_generate

VOCAB = 300


# init: a wide initialisation (HF's is 0.02) makes every token depend strongly on its context, so a
# cache bug changes the argmax; rounding tests use HF's, where bf16 error does not compound chaotically
def _llama(tie: bool = True, kv_heads: int = 2, bias: bool = False, seed: int = 0, init: float = 0.2,
           hidden: int = 64, heads: int = 4, intermediate: int = 128, layers: int = 3) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=kv_heads, intermediate_size=intermediate, max_position_embeddings=256,
                      tie_word_embeddings=tie, attention_bias=bias, initializer_range=init, eos_token_id=VOCAB - 1, bos_token_id=0)
    model = LlamaForCausalLM(cfg).eval()
    if bias:  # HF initialises biases to zero: make them matter
        with torch.no_grad():
            for layer in model.model.layers:
                layer.self_attn.q_proj.bias.normal_(0, 0.5)
                layer.self_attn.k_proj.bias.normal_(0, 0.5)
    return model


def _ids(n: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(1, VOCAB - 1, (n,), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("tie,kv_heads,bias", [(True, 2, False), (False, 4, False), (True, 1, True)])
def test_fp32_logits_match_hf_forward(tie: bool, kv_heads: int, bias: bool) -> None:
    model = _llama(tie, kv_heads, bias)
    ids = _ids(40)
    with torch.no_grad():
        ref = model(ids[None]).logits[0]
    lean = LeanLM.from_hf(model, "fp32", max_len=64)
    assert (lean.forward(ids) - ref).abs().max().item() < 1e-4
    assert lean.length == 40


@pytest.mark.parametrize("fmt,tol", [("bf16", 0.05), ("int8", 0.1)])
def test_low_precision_formats_stay_close(fmt: str, tol: float) -> None:
    model = _llama(init=0.02)
    ids = _ids(30)
    with torch.no_grad():
        ref = model(ids[None]).logits[0]
    out = LeanLM.from_hf(model, fmt, max_len=64).forward(ids)
    assert out.dtype == torch.float32
    err = ((out - ref).abs().max() / ref.abs().max()).item()
    assert 0 < err < tol  # close relative to the logits' scale, and not secretly running fp32


def test_k_token_forward_equals_k_single_token_forwards() -> None:
    model = _llama()
    ids = _ids(24)
    lean = LeanLM.from_hf(model, "fp32", max_len=64)
    lean.forward(ids[:16])
    block = lean.forward(ids[16:])
    lean.rollback(8)
    singles = torch.cat([lean.forward(ids[i:i + 1]) for i in range(16, 24)])
    assert (block - singles).abs().max().item() < 1e-5


def test_rollback_then_reforward_gives_identical_logits() -> None:
    model = _llama()
    ids = _ids(30)
    lean = LeanLM.from_hf(model, "fp32", max_len=64)
    lean.forward(ids[:20])
    first = lean.forward(ids[20:26])
    lean.rollback(6)
    lean.forward(_ids(5, seed=7))  # a rejected draft overwrites the rows past the kept prefix
    lean.rollback(5)
    assert lean.length == 20
    again = lean.forward(ids[20:26])
    assert torch.equal(first, again)


def test_rollback_bounds() -> None:
    lean = LeanLM.from_hf(_llama(), "fp32", max_len=8)
    lean.forward([1, 2, 3])
    with pytest.raises(ValueError, match="cannot roll back 4"):
        lean.rollback(4)
    with pytest.raises(ValueError, match="max_len"):
        lean.forward(list(range(1, 7)))


@pytest.mark.parametrize("tie", [True, False])
def test_greedy_is_token_identical_to_hf_generate(tie: bool) -> None:
    model = _llama(tie)
    prompt = _ids(12)
    hf = model.generate(prompt[None], attention_mask=torch.ones(1, 12, dtype=torch.long), max_new_tokens=40,
                        do_sample=False, eos_token_id=None, pad_token_id=0)[0, 12:].tolist()
    out = lean_generate(LeanLM.from_hf(model, "fp32", max_len=64), prompt.tolist(), max_new_tokens=40,
                        eos_token_id=[])
    assert out.tokens[0] == hf


def test_seeded_sampling_matches_divelab_generate_and_repeats() -> None:
    model = _llama()
    prompt = _ids(10).tolist()
    lean = LeanLM.from_hf(model, "fp32", max_len=64)
    a = lean_generate(lean, prompt, max_new_tokens=30, temperature=1.0, top_p=0.9, seed=3, eos_token_id=[])
    b = lean_generate(lean, prompt, max_new_tokens=30, temperature=1.0, top_p=0.9, seed=3, eos_token_id=[])
    c = lean_generate(lean, prompt, max_new_tokens=30, temperature=1.0, top_p=0.9, seed=4, eos_token_id=[])
    ref = hf_sampling_generate(model, prompt, max_new_tokens=30, temperature=1.0, top_p=0.9, seed=3,
                               eos_token_id=-1)
    assert a.tokens == b.tokens == ref.tokens
    assert a.tokens != c.tokens
    assert a.logprobs[0] == pytest.approx(ref.logprobs[0], abs=1e-4)


def test_generation_stops_at_eos() -> None:
    model = _llama()
    prompt = _ids(10).tolist()
    lean = LeanLM.from_hf(model, "fp32", max_len=64)
    free = lean_generate(lean, prompt, max_new_tokens=20, eos_token_id=[]).tokens[0]
    stop = lean_generate(lean, prompt, max_new_tokens=20, eos_token_id=free[4])
    assert stop.tokens[0] == free[:free.index(free[4]) + 1]
    assert stop.finished == [True]


def test_other_architectures_are_refused_by_name() -> None:
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=50, n_embd=16, n_layer=1, n_head=2))
    with pytest.raises(ValueError, match="LlamaForCausalLM.*GPT2LMHeadModel.*'gpt2'"):
        LeanLM.from_hf(gpt2)


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="allowed: " + ", ".join(FORMATS)):
        LeanLM.from_hf(_llama(), "fp16")



@pytest.mark.parametrize("fmt", FORMATS)
def test_row_invariant_forwards_give_one_token_rows_bit_for_bit(fmt: str) -> None:
    """With ``row_invariant`` a k-token forward's rows are exactly the k one-token forwards' rows (what lets a
    greedy speculative verifier commit the tokens plain decoding would), in every format."""
    # SmolLM2's MLP width (1536): there oneDNN's one-row bf16 product rounds some rows otherwise than its
    # many-row product does (seen on an AMD Zen 4), which a narrow test model never showed
    model = _llama(kv_heads=1, hidden=192, heads=3, intermediate=1536)
    for seed in range(4):
        ids = _ids(26, seed)
        lean = LeanLM.from_hf(model, fmt, max_len=64, row_invariant=True)
        lean.forward(ids[:16])
        singles = torch.cat([lean.forward(ids[i:i + 1]) for i in range(16, 26)])
        for k in (2, 3, 5, 10):
            lean.rollback(lean.length - 16)
            assert torch.equal(lean.forward(ids[16:16 + k]), singles[:k]), (seed, k)


def test_forward_hidden_returns_hf_hidden_states() -> None:
    model = _llama()
    ids = _ids(20)
    with torch.no_grad():
        ref = model(ids[None], output_hidden_states=True)
    lean = LeanLM.from_hf(model, "fp32", max_len=64)
    logits, hidden = lean.forward_hidden(ids, [0, 2, 3, 1])
    assert (logits - ref.logits[0]).abs().max().item() < 1e-4
    for i, h in zip([0, 2, 3, 1], hidden, strict=True):
        assert (h - ref.hidden_states[i][0]).abs().max().item() < 1e-4, i
    with pytest.raises(ValueError, match="0..3"):
        lean.forward_hidden(ids[:2], [4])


def test_fork_shares_the_weights_and_has_its_own_cache() -> None:
    lean = LeanLM.from_hf(_llama(), "bf16", max_len=64)
    other = lean.fork(max_len=16)
    assert other.w is lean.w and other.cache is not lean.cache and other.cache.max_len == 16
    a = lean.forward(_ids(10))
    assert other.length == 0
    assert torch.equal(other.forward(_ids(10)), a)


@pytest.mark.parametrize("fmt", FORMATS)
def test_forward_many_rows_equal_each_sequence_alone(fmt: str) -> None:
    """Several sequences stepped together give each one, bit for bit, what its own forwards give (row-invariant
    products), and leave every cache where its own forward would: serving requests together changes no token."""
    model = _llama(kv_heads=1, hidden=192, heads=3, intermediate=1536)
    base = LeanLM.from_hf(model, fmt, max_len=64, row_invariant=True)
    prompts = [_ids(n, seed) for n, seed in ((9, 1), (14, 2), (5, 3))]
    steps = [[_ids(1, 10 + i), _ids(3, 20 + i), _ids(1, 30 + i)] for i in range(3)]
    alone, together = [base.fork() for _ in prompts], [base.fork() for _ in prompts]
    for s, p in zip(alone + together, prompts + prompts, strict=True):
        s.forward(p)
    for step in range(3):  # mixed widths in one forward: 1-, 3- and 1-token appends
        tokens = [steps[i][(step + i) % 3] for i in range(3)]
        want = [s.forward_hidden(t, [0, 2]) for s, t in zip(alone, tokens, strict=True)]
        got = forward_many(together, tokens, [0, 2])
        for (wl, wh), (gl, gh) in zip(want, got, strict=True):
            assert torch.equal(wl, gl)
            assert all(torch.equal(a, b) for a, b in zip(wh, gh, strict=True))
    assert [s.length for s in together] == [s.length for s in alone]
    last = forward_many(together, [_ids(1, 40), _ids(2, 41), _ids(1, 42)], last_only=True)
    assert [lg.shape[0] for lg, _ in last] == [1, 1, 1]


def test_forward_many_without_row_invariance_matches_within_rounding() -> None:
    model = _llama(init=0.02)
    base = LeanLM.from_hf(model, "fp32", max_len=64)
    a, b, a2, b2 = base.fork(), base.fork(), base.fork(), base.fork()
    for s, p in ((a, _ids(7, 1)), (b, _ids(11, 2)), (a2, _ids(7, 1)), (b2, _ids(11, 2))):
        s.forward(p)
    got = forward_many([a, b], [_ids(4, 3), _ids(2, 4)])
    assert torch.allclose(got[0][0], a2.forward(_ids(4, 3)), atol=1e-5)
    assert torch.allclose(got[1][0], b2.forward(_ids(2, 4)), atol=1e-5)


def test_forward_many_rejects_bad_input() -> None:
    base = LeanLM.from_hf(_llama(), "fp32", max_len=16)
    other = LeanLM.from_hf(_llama(), "fp32", max_len=16)
    s = base.fork()
    with pytest.raises(ValueError, match="one token list per sequence"):
        forward_many([s], [[1], [2]])
    with pytest.raises(ValueError, match="forked from one model"):
        forward_many([s, other], [[1], [2]])
    with pytest.raises(ValueError, match="forked from one model"):
        forward_many([s, s], [[1], [2]])
    with pytest.raises(ValueError, match="at least one token"):
        forward_many([s, base.fork()], [[1], []])


def test_compiled_forward_matches_eager_and_refuses_row_invariance() -> None:
    # one layer and one compiled forward keep inductor's compile to seconds; the pre-packed oneDNN products
    # must pass through it as opaque calls (inductor cannot lower them itself: it raised before they were)
    model = _llama(layers=1)
    ids = _ids(6)
    compiled = LeanLM.from_hf(model, "fp32", max_len=32, compile=True)
    got = compiled.forward(ids)
    assert compiled.compiled and compiled.length == 6
    torch.testing.assert_close(got, LeanLM.from_hf(model, "fp32", max_len=32).forward(ids), atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="row_invariant"):
        LeanLM.from_hf(model, "fp32", compile=True, row_invariant=True)
