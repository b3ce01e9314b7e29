"""Tests of the E175 crosscoder component: exact exclusivity, exact no-op, planted-direction recovery, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from divelab.interp.crosscoder import (
    Crosscoder,
    CrosscoderConfig,
    cohens_d,
    prescale_topk,
    rank_features,
    steer_features,
    task,
    train_crosscoder,
)


def _planted(n=600, d=16, seed=0):
    """A and B share random structure; A alone carries a planted direction on 'behaviour' examples."""
    g = torch.Generator().manual_seed(seed)
    atoms = torch.randn(6, d, generator=g)
    atoms[:, 3] = 0.0
    pick = (torch.rand(n, 6, generator=g) < 0.3).float() * (1 + torch.rand(n, 6, generator=g))
    shared = pick @ atoms
    labels = (torch.rand(n, generator=g) < 0.5).long()
    v = torch.zeros(d)
    v[3] = 1.0
    acts_b = shared + 0.05 * torch.randn(n, d, generator=g)
    acts_a = shared + 4.0 * labels[:, None].float() * v + 0.05 * torch.randn(n, d, generator=g)
    return acts_a, acts_b, labels.numpy(), v


def test_exclusivity_exact_after_training():
    a, b, _, _ = _planted()
    cc = train_crosscoder(a, b, CrosscoderConfig(dict_size=32, k=4, excl_share=0.125, lambda_excl=1e-3, steps=150))
    assert cc.forbidden_max() == 0.0
    assert torch.all(cc.W_dec[cc.a_slice, 1] == 0) and torch.all(cc.W_dec[cc.b_slice, 0] == 0)
    assert torch.all(cc.W_enc[1][:, cc.a_slice] == 0) and torch.all(cc.W_enc[0][:, cc.b_slice] == 0)
    # a plain crosscoder has no exclusive features
    assert Crosscoder(16, CrosscoderConfig(dict_size=32, k=4, excl_share=0.0)).partition() == ["shared"] * 32


def test_planted_direction_recovered_as_exclusive_feature():
    a, b, labels, v = _planted()
    # a shared-feature penalty is what pushes the A-only signal into the A-exclusive block (with the paper's
    # lambda_shared = 1e-3 the shared features absorb it here; see docs/systems/crosscoder.md)
    cc = train_crosscoder(a, b, CrosscoderConfig(dict_size=32, k=4, excl_share=0.125, steps=400, lambda_shared=0.2,
                                                 lr=3e-3))
    top = rank_features(cc, a, b, labels, partition="A", top=3)[0]
    assert top.partition == "A" and top.cohens_d > 1.5 and top.auroc > 0.8
    cos = torch.nn.functional.cosine_similarity(cc.direction(top.index, 0).detach(), v, dim=0)
    assert float(cos) > 0.9
    assert float(cc.direction(top.index, 1).abs().max()) == 0.0  # it cannot write into B at all


def test_uniform_prescale_is_exact_noop_and_alpha_one_steering_is_identity():
    a, b, labels, _ = _planted(n=200)
    cc = train_crosscoder(a, b, CrosscoderConfig(dict_size=32, k=4, excl_share=0.125, steps=50))
    ref = prescale_topk(cc, a, b, 1.0)
    for alpha in (2.0, 5.0, 10.0):
        assert torch.equal(prescale_topk(cc, a, b, alpha), ref)
    assert torch.equal(steer_features(cc, 0, [0, 1], 1.0)(a, b), a)
    # scaling only some features is not a no-op in general
    assert not torch.equal(prescale_topk(cc, a, b, 50.0, features=cc.a_slice), ref)


def test_cohens_d_and_bad_input():
    pos, neg = np.array([[1.0], [2.0], [3.0]]), np.array([[0.0], [1.0], [2.0]])
    assert cohens_d(pos, neg)[0] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="dict_size"):
        CrosscoderConfig(dict_size=8, k=9)
    with pytest.raises(ValueError, match="shape"):
        train_crosscoder(torch.zeros(4, 3), torch.zeros(4, 5), CrosscoderConfig(dict_size=8, k=2))


def test_task_rubric():
    p = task.Prompt("tools: 1 mail 2 calc 3 maps. ask: email bob |", "mail", ("mail", "calc", "maps"))
    assert task.score(p, "<call mail>") == {"format": 1.0, "correct": 1.0, "selection": 1.0}
    assert task.score(p, "<call calc>")["correct"] == 0.0
    assert task.score(p, "i would use mail.") == {"format": 0.0, "correct": 0.0, "selection": 1.0}


def _tiny_pair(tmp_path, hidden=(32, 32)):
    from divelab.lm.models import build_model

    tok = task.tokenizer()
    dirs = []
    for i, h in enumerate(hidden):
        m = build_model("tiny-100k", vocab_size=len(tok), seed=i, hidden_size=h, max_position_embeddings=128)
        d = tmp_path / f"m{i}"
        m.save_pretrained(d)
        tok.save_pretrained(d)
        dirs.append(d)
    return dirs


def test_cli_diff_models_and_errors(tmp_path):
    from typer.testing import CliRunner

    from divelab.cli import app

    base, sib = _tiny_pair(tmp_path)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("\n".join(json.dumps({"prompt": p.text, "label": int(p.is_tool)})
                                 for p in task.prompts(40, seed=0)))
    r = CliRunner().invoke(app, ["diff-models", "--base", str(base), "--sibling", str(sib), "--prompts",
                                 str(prompts), "--out", str(tmp_path / "out"), "--dict-size", "32", "--k", "4",
                                 "--steps", "20"])
    assert r.exit_code == 0, r.output
    res = json.loads((tmp_path / "out" / "features.json").read_text())
    assert res["forbidden_max"] == 0.0 and res["features"] and "kl_ablate" in res["features"][0]
    b2, s2 = _tiny_pair(tmp_path / "x", hidden=(32, 48))
    r = CliRunner().invoke(app, ["diff-models", "--base", str(b2), "--sibling", str(s2), "--prompts", str(prompts)])
    assert r.exit_code == 2 and "hidden sizes differ" in r.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x"}\n')
    r = CliRunner().invoke(app, ["diff-models", "--base", str(base), "--sibling", str(sib), "--prompts", str(bad)])
    assert r.exit_code == 2 and "expected" in r.output


def test_dead_latents_are_tracked_over_a_window_of_tokens():
    cc = Crosscoder(8, CrosscoderConfig(dict_size=16, k=2, excl_share=0.125, dead_window=100))
    f = torch.zeros(60, 16)
    f[:, 3] = 1.0
    cc.track_firing(f)
    assert not cc.dead_latents().any()  # 60 tokens < the 100-token window
    cc.track_firing(f)
    dead = cc.dead_latents()
    assert not dead[3] and int(dead.sum()) == 15  # only the latent that fired is alive


def test_auxk_gives_gradient_to_dead_latents_only():
    a, b, _, _ = _planted(n=64)
    cc = Crosscoder(16, CrosscoderConfig(dict_size=32, k=2, excl_share=0.125))
    # latents that never win the top-k get no gradient from the main loss ...
    in_topk = (cc.encode(a, b) > 0).any(0)
    losers = torch.nonzero(~in_topk & (cc.pre_acts(a, b) > 0).any(0)).flatten()
    assert losers.numel()
    cc.loss(a, b)[0].backward()
    assert float(cc.W_enc.grad[:, :, losers].abs().max()) == 0.0
    # ... and do from AuxK once they are marked dead; alive latents' gradient is unchanged by it
    main = cc.W_enc.grad[:, :, in_topk].clone()
    cc.zero_grad()
    dead = torch.zeros(32, dtype=torch.bool)
    dead[losers] = True
    total, st = cc.loss(a, b, dead=dead)
    total.backward()
    assert st["auxk"] > 0 and float(cc.W_enc.grad[:, :, losers].abs().max()) > 0
    assert torch.allclose(cc.W_enc.grad[:, :, in_topk], main)


def test_auxk_keeps_more_exclusive_latents_alive_on_planted_data():
    a, b, _, _ = _planted()

    def alive(aux: float, seed: int) -> int:
        cc = train_crosscoder(a, b, CrosscoderConfig(dict_size=32, k=4, excl_share=0.125, steps=400, lr=3e-3,
                                                     aux_coeff=aux, dead_window=2000, seed=seed))
        return int((cc.encode(a, b)[:, cc.a_slice] > 0).any(0).sum())

    with_aux, without = [alive(1 / 32, s) for s in (0, 1)], [alive(0.0, s) for s in (0, 1)]
    assert sum(with_aux) > sum(without) and min(with_aux) == 4


def test_resampling_reinitialises_only_dead_latents_and_keeps_exclusivity():
    from divelab.interp.crosscoder.dfc import resample_dead

    a, b, _, _ = _planted(n=200)
    cc = train_crosscoder(a, b, CrosscoderConfig(dict_size=32, k=2, excl_share=0.125, steps=30, dead_window=100))
    opt = torch.optim.Adam(cc.parameters(), lr=1e-3)
    cc.loss(a, b)[0].backward()
    opt.step()
    dead = torch.zeros(32, dtype=torch.bool)
    dead[[0, 5, 20]] = True  # an A-exclusive, a B-exclusive and a shared latent
    cc.since_fired[:] = 0
    cc.since_fired[dead] = 10**6
    before = cc.W_dec.detach().clone()
    assert resample_dead(cc, a, b, opt, torch.Generator().manual_seed(0)) == 3
    assert torch.equal(cc.W_dec[~dead], before[~dead])  # live latents untouched
    assert not torch.equal(cc.W_dec[dead], before[dead]) and float(cc.b_enc[dead].abs().max()) == 0.0
    assert cc.forbidden_max() == 0.0  # an A-exclusive latent still cannot touch B
    assert float(opt.state[cc.W_dec]["exp_avg"][dead].abs().max()) == 0.0


def test_resampling_keeps_more_exclusive_latents_alive_on_planted_data():
    a, b, _, _ = _planted()

    def alive(resample: tuple, seed: int) -> int:
        cc = train_crosscoder(a, b, CrosscoderConfig(dict_size=64, k=4, excl_share=0.125, steps=400, lr=3e-3,
                                                     dead_window=2000, resample=resample, seed=seed))
        return int((cc.encode(a, b)[:, cc.a_slice] > 0).any(0).sum())

    with_rs, without = [alive((0.2, 0.4, 0.6), s) for s in (0, 1)], [alive((), s) for s in (0, 1)]
    assert sum(with_rs) > sum(without)


def test_generation_harvest_reads_exactly_the_positions_generate_edits():
    from divelab.interp.crosscoder import generate, harvest_generation_pairs
    from divelab.lm.models import build_model

    tok = task.tokenizer()
    m_a, m_b = (build_model("tiny-100k", vocab_size=len(tok), seed=s, hidden_size=32, max_position_embeddings=128)
                for s in (0, 1))
    for m in (m_a, m_b):
        m.config.eos_token_id, m.config.pad_token_id = tok.eos_token_id, tok.pad_token_id
        m.eval()
    prompt = task.prompts(1, seed=3)[0].text
    seen: list[torch.Tensor] = []

    def record(x, o):
        seen.append(x.clone())
        return x

    with torch.no_grad():
        resp = generate(m_a, tok, [prompt], layer=1, edit=record, max_new_tokens=6)[0]
        a, b, owner = harvest_generation_pairs(m_a, m_b, tok, [prompt, prompt], [resp, ""], layer=1,
                                               progress=False)
    n = len(tok(resp, add_special_tokens=False)["input_ids"])
    assert a.shape == b.shape == (n + 2, 32) and owner.tolist() == [0] * (n + 1) + [1]
    # the last edit call of generation saw the last prompt token and the response tokens fed back
    last = seen[-1][0]
    assert torch.allclose(a[:last.shape[0]], last, atol=1e-5)
    assert torch.allclose(a[-1], a[0], atol=1e-5)  # an empty response: only the last prompt token
