"""Engine behaviour on tiny random-init models: greedy identity, sampled-output statistics, errors,
training / save / load, calibration, determinism, and the smoke reproduction."""

import itertools

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from divelab.lm.models import build_model
from divelab.serving.dspark import (
    Drafter,
    DrafterConfig,
    DrafterTrainConfig,
    Request,
    SpecEngine,
    fit_sts,
    load_drafter,
    plain_greedy,
    save_drafter,
    train_drafter,
)
from divelab.serving.dspark.calibration import calibration_report, ece, roc_auc, survival_labels
from divelab.serving.dspark.sps import SPSCurve

SPS = SPSCurve.synthetic_accelerator(0.01, 8)


@pytest.fixture(scope="module")
def target():
    return build_model("tiny-100k", 41, seed=1).double()


def test_engine_forwards_use_no_deprecated_transformers_argument(target, recwarn):
    """Every target forward of the engine (prefill, verify, plain greedy) passes its KV cache the way the
    installed transformers wants it (``cache=``, not the deprecated ``past_key_values=``)."""
    d = Drafter.for_target(target, DrafterConfig(kind="markov", gamma=4, window=8, rank=8)).double()
    SpecEngine(target, d, "dspark", sps=SPS, engine="hf").generate([3, 17, 5], 6)
    plain_greedy(target, [3, 17, 5], 4)
    assert not [w for w in recwarn if issubclass(w.category, FutureWarning)], [str(w.message) for w in recwarn]


def test_rollback_undoes_a_step_that_failed_part_way():
    """A verify forward that raises after every layer wrote to the batched KV cache: ``rollback`` crops
    the cache back to the committed slots and decoding goes on token-identical to plain greedy (without
    it, the failed step's other drafts stay in the cache and change the output)."""
    target = build_model("tiny-100k", 41, seed=1).double()
    with torch.no_grad():  # weights scaled up, so the next token depends on more than the last one
        for p in target.parameters():
            if p.ndim == 2:
                p.mul_(3.0)
    prompts = [[3, 17, 5, 9, 1], [22, 8, 8]]
    ref = [plain_greedy(target, p, 10) for p in prompts]
    cfg = DrafterConfig(kind="markov", gamma=4, window=8, rank=8)
    torch.manual_seed(0)
    d = Drafter.for_target(target, cfg).double()
    eng = SpecEngine(target, d, "dspark", sps=SPS, engine="hf")
    states = eng.prefill_many([Request(p, 10, rid=i) for i, p in enumerate(prompts)])
    eng.step(states)

    def fail(*_):
        raise RuntimeError("injected failure in the last layer")

    # the failing step verifies other drafts (another drafter's, all of them) than the retried step will
    torch.manual_seed(7)
    eng.drafter = Drafter.for_target(target, cfg).double()
    hook = target.model.layers[-1].register_forward_hook(fail)  # every layer has written to the cache by then
    try:
        with pytest.raises(RuntimeError, match="injected"):
            eng.step(states, force_ell=np.full(len(states), 4))
    finally:
        hook.remove()
    eng.drafter = d
    eng.rollback(states)
    while live := [s for s in states if not s.done]:
        eng.step(live)
    assert [s.out for s in states] == ref


def test_greedy_identical_for_every_drafter_and_scheduler(target):
    prompts = [[3, 17, 5, 9, 1], [22, 8, 8]]
    ref = [plain_greedy(target, p, 10) for p in prompts]
    hf = target.generate(torch.tensor([prompts[0]]), max_new_tokens=10, do_sample=False)[0, 5:].tolist()
    assert ref[0] == hf
    for kind in ("parallel", "markov", "rnn", "ar"):
        d = Drafter.for_target(target, DrafterConfig(kind=kind, gamma=4, window=8, rank=8)).double()
        for sch in ("fixed-1", "fixed", "threshold-0.3", "dspark", "stale-k", "global-argmax"):
            eng = SpecEngine(target, d, sch, sps=SPS, engine="hf")
            assert eng.generate(prompts[0], 10) == ref[0], (kind, sch)
        res = SpecEngine(target, d, "dspark", sps=SPS, engine="hf").serve(
            [Request(p, 10, arrival_s=0.001 * i, rid=i) for i, p in enumerate(prompts)], max_batch=2)
        assert [res.outputs[i] for i in range(2)] == ref, kind
    plain = SpecEngine(target, None, sps=SPS, engine="hf")
    assert [plain.generate(p, 10) for p in prompts] == ref


def test_sampled_outputs_match_exact_target_sequence_probabilities():
    v = 4
    tgt = build_model("tiny-100k", v, seed=4).double()
    with torch.no_grad():  # make the target peaked so drafts are sometimes accepted
        tgt.lm_head.weight.mul_(8.0) if not tgt.config.tie_word_embeddings else tgt.model.norm.weight.mul_(8.0)
    prompt = [1, 2, 3]
    seqs = list(itertools.product(range(v), repeat=3))
    with torch.no_grad():
        batch = torch.tensor([prompt + list(s) for s in seqs])
        logp = torch.log_softmax(tgt(batch).logits.double(), -1)
        exact_p = np.array([float(sum(logp[i, 2 + k, s[k]] for k in range(3))) for i, s in enumerate(seqs)])
    exact_p = np.exp(exact_p)
    d = Drafter.for_target(tgt, DrafterConfig(kind="markov", gamma=2, window=4, rank=4)).double()
    flat = SPSCurve.synthetic_accelerator(0.01, 100_000, max_b=8)  # verifying is free: drafts get sent
    eng = SpecEngine(tgt, d, "dspark", sps=flat, temperature=1.0, seed=0, engine="hf")
    n = 800
    res = eng.serve([Request(prompt, 3, rid=i) for i in range(n)], max_batch=200)
    counts = np.zeros(len(seqs))
    for out in res.outputs.values():
        counts[(out[0] * v + out[1]) * v + out[2]] += 1
    assert sum(s.accepted.sum() for s in res.steps) > 0  # drafts were really verified and accepted
    big = exact_p * n >= 5  # bin the tail
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(exact_p[big], exact_p[~big].sum()) * n
    assert chisquare(obs, exp).pvalue > 1e-3


def test_mismatch_and_argument_errors(target):
    other = build_model("tiny-100k", 50, seed=0)
    d = Drafter.for_target(target, DrafterConfig(kind="markov", gamma=2, window=4, rank=4))
    with pytest.raises(ValueError, match="vocab_size"):
        d.attach(other)
    wide = build_model("tiny-100k", 41, seed=0, hidden_size=64)
    with pytest.raises(ValueError, match="hidden_size"):
        d.attach(wide)
    with pytest.raises(ValueError, match="gamma"):
        DrafterConfig(kind="markov", gamma=0)
    with pytest.raises(ValueError, match="gamma"):
        SpecEngine(target, None, sps=SPS, gamma=0)
    with pytest.raises(ValueError, match="unknown scheduler"):
        SpecEngine(target, d.double(), "nope", sps=SPS)
    with pytest.raises(ValueError, match="unknown drafter kind"):
        DrafterConfig(kind="medusa")


def test_train_save_load_and_determinism(target, tmp_path):
    stream = np.random.default_rng(0).integers(0, 41, 4000)
    cfg = DrafterTrainConfig(steps=4, batch_size=2, seq_len=24, anchors_per_seq=4, seed=3)
    logs = []
    for _ in range(2):
        torch.manual_seed(0)
        d = Drafter.for_target(target, DrafterConfig(kind="rnn", gamma=3, window=6, rank=4)).double()
        logs.append(train_drafter(target, d, stream, cfg).losses)
    assert logs[0] == logs[1] and all(np.isfinite(logs[0]))
    path = save_drafter(d, tmp_path / "dr")
    d2, _ = load_drafter(path, target)
    ctx = torch.randn(2, 6, 48, dtype=torch.float64)
    mask = torch.ones(2, 6, dtype=torch.bool)
    a = torch.tensor([1, 2])
    o1, o2 = d.draft(ctx, mask, a, 0.0), d2.draft(ctx, mask, a, 0.0)
    assert torch.equal(o1.tokens, o2.tokens) and torch.allclose(o1.conf_logits, o2.conf_logits)


def test_sts_reduces_ece_and_preserves_order():
    rng = np.random.default_rng(0)
    n, g = 4000, 4
    true_c = rng.uniform(0.3, 0.95, size=(n, g))
    survive = (rng.uniform(size=(n, g)) < true_c).cumprod(axis=1)
    z = 3.0 * np.log(true_c / (1 - true_c))  # over-confident logits
    cal = fit_sts(z, survive.astype(float))
    raw, sts = calibration_report(z, survive, None), calibration_report(z, survive, cal)
    assert sts["mean_ece"] < 0.5 * raw["mean_ece"]
    assert raw["auc"][0] == pytest.approx(sts["auc"][0], abs=1e-9)  # position 1: a monotone map
    for k in range(g):  # each c_k is rescaled by an order-preserving map
        assert np.array_equal(np.argsort(z[:, k], kind="stable"), np.argsort(cal.apply(z)[:, k], kind="stable"))
    assert np.all(cal.temperatures > 1.0)
    assert ece(np.array([0.9, 0.1]), np.array([1, 0])) == pytest.approx(0.1)
    assert roc_auc(np.array([0.1, 0.9]), np.array([0, 1])) == 1.0
    assert survival_labels(np.array([0, 2]), 3).tolist() == [[0, 0, 0], [1, 1, 0]]


def test_joint_training_matches_single_and_regenerate(target):
    from divelab.serving.dspark import train_drafters
    from divelab.serving.dspark.training import regenerate

    stream = np.random.default_rng(1).integers(0, 41, 3000)
    cfg = DrafterTrainConfig(steps=3, batch_size=2, seq_len=20, anchors_per_seq=3, seed=5)

    def fresh(kind):
        torch.manual_seed(0)
        return Drafter.for_target(target, DrafterConfig(kind=kind, gamma=3, window=5, rank=4)).double()

    single = train_drafter(target, fresh("markov"), stream, cfg).losses
    joint = train_drafters(target, [fresh("markov"), fresh("parallel")], stream, cfg)
    assert joint[0].losses == single  # sharing the target forward changes nothing for the first drafter
    assert joint[1].losses != single
    rows = regenerate(target, stream, n_seqs=3, length=12, prompt_len=5, seed=2)
    assert rows.shape == (3, 12) and rows.max() < 41
    assert np.array_equal(rows, regenerate(target, stream, n_seqs=3, length=12, prompt_len=5, seed=2))
    # training windows come from inside the rows
    cfg2 = DrafterTrainConfig(steps=2, batch_size=2, seq_len=10, anchors_per_seq=2, seed=5)
    assert np.isfinite(train_drafter(target, fresh("rnn"), rows, cfg2).losses).all()
    with pytest.raises(ValueError, match="shorter than seq_len"):
        train_drafter(target, fresh("rnn"), rows[:, :8], cfg2)


def test_draft_confidences_equal_teacher_forced_on_own_drafts(target):
    """The batched confidence call after the sequential loop gives c_k from x_{k-1} exactly as
    teacher forcing on the drafter's own samples does (no look-ahead at x_k)."""
    torch.manual_seed(0)
    for kind in ("markov", "rnn", "parallel"):
        d = Drafter.for_target(target, DrafterConfig(kind=kind, gamma=4, window=5, rank=4)).double()
        ctx = torch.randn(3, 5, 48, dtype=torch.float64)
        mask = torch.ones(3, 5, dtype=torch.bool)
        anchor = torch.tensor([1, 7, 30])
        out = d.draft(ctx, mask, anchor, 1.0, torch.Generator().manual_seed(0))
        logits, conf = d.forward_train(ctx, mask, anchor, out.tokens)
        assert torch.allclose(out.conf_logits.double(), conf, atol=1e-6), kind
        assert torch.allclose(out.probs, torch.softmax(logits, -1), atol=1e-9), kind


def test_the_anchor_head_sham_keeps_the_weights_and_drops_the_conditioning_on_the_drafted_token(target):
    """The negative control of the Markov head's claims: the same trained drafter, its head fed the block's
    anchor at every slot. Slot 1 is drafted as before (its previous token is the anchor); later slots no longer
    follow the drafted prefix; the weights are shared and the original drafter is untouched."""
    from divelab.serving.dspark.drafter import anchor_head_sham

    torch.manual_seed(3)
    d = Drafter.for_target(target, DrafterConfig(kind="markov", gamma=4, window=6, rank=8)).double()
    with torch.no_grad():
        d.w2.weight.normal_(0, 3.0)  # a trained head's bias matters; the zero init would hide the switch
    sham = anchor_head_sham(d)
    assert sham.head_input == "anchor" and d.head_input == "drafted" and sham.w1.weight is d.w1.weight
    differs = False
    for seed in range(6):
        g = torch.Generator().manual_seed(seed)
        ctx = torch.randn(2, 6, d.config.hidden_size, generator=g, dtype=torch.float64)
        mask = torch.ones(2, 6, dtype=torch.bool)
        anchor = torch.randint(0, 41, (2,), generator=g)
        a, b = d.draft(ctx, mask, anchor, 0.0).tokens, sham.draft(ctx, mask, anchor, 0.0).tokens
        assert torch.equal(a[:, 0], b[:, 0])
        differs |= not torch.equal(a, b)
    assert differs
    with pytest.raises(ValueError, match="needs a markov drafter"):
        anchor_head_sham(Drafter.for_target(target, DrafterConfig(kind="parallel", gamma=4, window=6)))
