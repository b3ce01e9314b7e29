"""The guard engine alone: the layer tap reads what ``output_hidden_states`` returns, the collapsed probe
scores as the sklearn pipeline does, the file round-trips, and a probe for another model is refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from divelab.guard import GuardProbe, LayerTap, from_sklearn, load_guard, model_identity, score_prompts
from hf_tiny import bpe_tokenizer, tiny_gpt2, tiny_qwen2


@pytest.fixture(scope="module", params=["qwen2", "gpt2"])
def tiny(request):
    tok = bpe_tokenizer()
    return (tiny_qwen2 if request.param == "qwen2" else tiny_gpt2)(tok), tok


def _probe(model, layer: int, position: str = "prompt_last", seed: int = 0) -> GuardProbe:
    d = int(model.config.hidden_size)
    w = np.random.default_rng(seed).normal(size=d)
    return GuardProbe(layer=layer, position=position, weights=tuple(w), bias=0.1, threshold=0.0,
                      model=model_identity(model))


@torch.no_grad()
def test_tap_reads_every_hidden_state(tiny) -> None:
    model, tok = tiny
    ids = torch.tensor([tok.encode("def f(x):\n    return x + 1\n")])
    ref = model(ids, output_hidden_states=True).hidden_states
    for k in range(len(ref)):
        seen = []
        tap = LayerTap(model, k)
        with tap.reading(seen.append):
            model(ids)
        tap.remove()
        assert torch.equal(seen[0], ref[k]), k
    with pytest.raises(ValueError, match="out of range"):
        LayerTap(model, len(ref))


def test_collapsed_probe_scores_as_the_pipeline() -> None:
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 32)) * rng.uniform(0.1, 5, size=32) + rng.normal(size=32)
    y = (X[:, 0] + rng.normal(size=80) > 0).astype(int)
    pipe = make_pipeline(StandardScaler(), PCA(n_components=10, random_state=0),
                         LogisticRegression(C=0.03, class_weight="balanced", max_iter=5000)).fit(X, y)
    g = from_sklearn(pipe, layer=1, position="first", threshold=0.0, model={})
    np.testing.assert_allclose(g.scores(X), pipe.decision_function(X), rtol=0, atol=1e-9)
    with pytest.raises(ValueError, match="StandardScaler"):
        from_sklearn(make_pipeline(LogisticRegression()).fit(X, y), layer=1, position="first", threshold=0, model={})


def test_file_round_trip_and_errors(tiny, tmp_path: Path) -> None:
    model, _ = tiny
    g = _probe(model, 1)
    path = g.save(tmp_path / "probe.json")
    assert load_guard(path, model) == g
    with pytest.raises(ValueError, match="no guard probe"):
        GuardProbe.read(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text(json.dumps({"layer": 1}))
    with pytest.raises(ValueError, match="not a guard probe"):
        GuardProbe.read(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="position"):
        GuardProbe(layer=1, position="last", weights=(0.0,), bias=0.0, threshold=0.0, model={})


def test_a_probe_for_another_model_is_refused(tiny, tmp_path: Path) -> None:
    model, tok = tiny
    path = _probe(model, 1).save(tmp_path / "probe.json")
    other_weights = (tiny_qwen2 if model.config.model_type == "qwen2" else tiny_gpt2)(tok, seed=1)
    with pytest.raises(ValueError, match="weights differ"):
        load_guard(path, other_weights)
    other_arch = (tiny_gpt2 if model.config.model_type == "qwen2" else tiny_qwen2)(tok)
    with pytest.raises(ValueError, match="not on the served model"):
        load_guard(path, other_arch)


@torch.no_grad()
def test_offline_scores_read_the_named_position(tiny) -> None:
    """``prompt_last`` reads the prompt's last state; ``first`` reads the greedy first token's state."""
    model, tok = tiny
    prompt = tok.encode("import os\nprint(")
    for position in ("prompt_last", "first"):
        g = _probe(model, 2, position)
        got = score_prompts(model, g, [prompt])[0]
        ids = torch.tensor([prompt])
        if position == "first":
            first = int(model(ids).logits[0, -1].argmax())
            assert got.first_token == first
            ids = torch.tensor([prompt + [first]])
        h = model(ids, output_hidden_states=True).hidden_states[2][0, -1].double().numpy()
        assert got.score == pytest.approx(float(h @ g.w + g.bias), abs=1e-4)
        assert got.flagged == (got.score >= g.threshold)
