"""The real-LLM path of E175 (LoRA sibling, teacher-forced strict scoring, claims) on a tiny char-level model."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
import torch

from divelab.claims import Kind
from divelab.interp.crosscoder import real_llm, task
from divelab.interp.crosscoder.dfc import CrosscoderConfig
from divelab.interp.crosscoder.interventions import generate


@pytest.fixture()
def tiny(tmp_path, monkeypatch):
    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path / "cache"))
    from divelab.lm.models import build_model

    tok = task.tokenizer()
    model = build_model("tiny-100k", vocab_size=len(tok), seed=0, max_position_embeddings=128,
                        num_hidden_layers=2, hidden_size=32, intermediate_size=64)
    for c in (model.config, model.generation_config):
        c.eos_token_id, c.pad_token_id = tok.eos_token_id, tok.pad_token_id
    model.eval()
    from divelab.threads import torch_threads

    with torch_threads(1):  # tiny tensors: thread hand-offs cost more than they save on a shared CPU
        yield model, tok


def test_teacher_forced_score_matches_greedy_generation(tiny):
    model, tok = tiny
    prompts = real_llm._tool_prompts(6, seed=1)
    with torch.no_grad():
        resp = generate(model, tok, [p.text for p in prompts], max_new_tokens=10)
        # the scorer's teacher-forced argmax check accepts exactly the greedy reply, and not a changed one
        same = real_llm.strict_correct(model, real_llm.make_batch(tok, prompts, replies=resp))
        changed = [r[:-1] + ("a" if r[-1] != "a" else "b") for r in resp]
        other = real_llm.strict_correct(model, real_llm.make_batch(tok, prompts, replies=changed))
        right = real_llm.strict_correct(model, real_llm.make_batch(tok, prompts))
    assert all(len(r) >= 2 for r in resp)
    assert same.tolist() == [1.0] * 6 and other.tolist() == [0.0] * 6
    want = np.array([task.score(p, r)["correct"] for p, r in zip(prompts, resp, strict=True)])
    assert np.array_equal(right, want)


def test_measure_pair_end_to_end_on_a_tiny_model(tiny):
    model, tok = tiny
    base_state = {k: v.clone() for k, v in model.state_dict().items()}
    adapt = dataclasses.replace(real_llm.RealPlan().adapt, steps=3, batch_size=4, lr=5e-3, save_every=1)
    plan = real_llm.RealPlan(layer=0, harvest=24, select=4, eval=6, adapt=adapt, check=4, check_every=1, target=1.1,
                             cells=(CrosscoderConfig(dict_size=16, k=2, excl_share=0.125, steps=20),
                                    CrosscoderConfig(dict_size=16, k=2, excl_share=0.0, steps=20)),
                             alphas=(4.0,))
    with torch.no_grad():
        claims, details = real_llm.measure_pair(model, tok, plan, base_name="tiny-test", label="tiny")
    assert claims[0].kind is Kind.BY_CONSTRUCTION and len(claims) == 4
    assert claims[1].kind is Kind.CHECK and "alive on held-out" in claims[1].statement
    # the best cell is judged against the strongest alternative, and one crosscoder run cannot separate it
    steer = claims[2]
    assert steer.compared_with
    assert steer.rule["args"].get("training_runs") == 1 or steer.verdict.value == "uninformative"
    assert details["sibling_training"]["steps"] == 3 and len(details["sibling_training"]["history"]) == 3
    assert details["cells"][0]["forbidden_max"] == 0.0
    # the base is untouched and the merged sibling differs from it (LoRA merged in), and is cached
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in base_state.items())
    from divelab.lm import adapt

    cached = adapt.find(details["sibling_training"]["adapter"])
    assert cached is not None and cached.record["n_rows"] == 3 * 4
    sib, _ = cached.load(merge=True, base_loader=lambda: (__import__("copy").deepcopy(model), tok))
    assert any(not torch.equal(v, sib.state_dict()[k]) for k, v in base_state.items() if k in sib.state_dict())
    # a second call reuses the cached sibling (no training): same numbers
    with torch.no_grad():
        _, again = real_llm.measure_pair(model, tok, plan, base_name="tiny-test", label="tiny")
    assert again["sibling_correct"] == details["sibling_correct"]


def test_chat_text_falls_back_to_raw_text_without_template(tiny):
    _, tok = tiny
    p = task.tool_prompt(random.Random(0))
    assert real_llm.chat_text(tok, p) == p.text
