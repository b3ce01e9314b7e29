"""The chat drafter recipe end to end on the smoke model (given a chat template): data, vocabulary,
training in lm.fit with a learning curve, resume, cache, and the sparse loss it trains with."""

import json

import numpy as np
import pytest
import torch

import divelab.lm
from divelab.serving.dspark import chat_data, load_drafter
from divelab.serving.dspark.chat_drafter import (
    ChatDrafterRecipe,
    build_chat_drafter,
    default_drafter_dir,
    sparse_dspark_loss,
)
from divelab.serving.dspark.drafter import Drafter, DrafterConfig
from divelab.serving.dspark.training import DrafterTrainConfig, dspark_loss, position_weights

TEMPLATE = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}>{% endif %}"
RECIPE = ChatDrafterRecipe(target="smoke", n_prompts=8, max_new_tokens=12, gen_batch=4, gamma=3, window=4, rank=4,
                           draft_vocab=64, steps=6, blocks_per_step=16, warmup=2, eval_every=3, eval_prompts=4,
                           code_eval_prompts=2)


@pytest.fixture
def chat_smoke(monkeypatch):
    real = divelab.lm.load_model

    def load(name):
        model, tok = real(name)
        tok.chat_template = TEMPLATE
        return model, tok

    monkeypatch.setattr(divelab.lm, "load_model", load)
    yield load
    from divelab.serving.dspark.chat_drafter import _latest_pointer

    _latest_pointer("smoke").unlink(missing_ok=True)  # other tests serve the smoke model without speculation


def test_recipe_builds_once_records_a_learning_curve_and_loads(chat_smoke):
    assert default_drafter_dir("smoke", RECIPE) is None
    lines = []
    path = build_chat_drafter(RECIPE, log=lines.append)
    assert default_drafter_dir("smoke", RECIPE) == path
    meta = json.loads((path / "meta.json").read_text())
    assert [p["step"] for p in meta["learning_curve"]] == [0, 3, 6]
    assert all(1.0 <= p[k] <= 1 + RECIPE.gamma for p in meta["learning_curve"] for k in ("tau_greedy", "tau_greedy_code"))
    assert all(len(p["survive_greedy_code"]) == RECIPE.gamma for p in meta["learning_curve"])
    assert meta["learning_curve"][-1]["drafted_tokens_seen"] == 6 * 16 * RECIPE.gamma
    assert meta["response_tokens"] > 0 and 0 < meta["draft_vocab_coverage"] <= 1
    assert 0 < meta["draft_vocab_coverage_code"] <= 1 and meta["responses"] == RECIPE.n_prompts
    target, _ = chat_smoke("smoke")
    drafter, cal = load_drafter(path, target)
    assert drafter.reduced and len(drafter.vocab_ids) == 64 and cal is not None
    assert not path.with_name(path.name + ".ckpt").exists()  # the checkpoint goes once the drafter is saved
    assert build_chat_drafter(RECIPE, log=lines.append) == path  # cached: nothing rebuilt
    assert sum(x.endswith("training ...") for x in lines) == 1
    # the server's default: the drafter built for the model; "none" turns speculation off
    from divelab.serving.server.runner import build_app, resolve_drafter

    assert default_drafter_dir("smoke") == path and resolve_drafter("smoke", None) == path
    assert resolve_drafter("smoke", "none") is None and resolve_drafter("small", "auto") is None
    assert build_app("smoke").state.engine.speculative
    assert not build_app("smoke", "none").state.engine.speculative


def test_train_drafter_command_builds_the_chat_drafter(chat_smoke, tmp_path):
    from typer.testing import CliRunner

    from divelab.cli import app

    args = ["dspark", "train-drafter", "--target", "smoke", "--steps", "2", "--prompts", "4", "--draft-vocab", "32",
            "--out", str(tmp_path / "copy")]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert (tmp_path / "copy" / "drafter_config.json").exists() and default_drafter_dir("smoke") is not None
    res = CliRunner().invoke(app, ["dspark", "train-drafter", "--target", "smoke", "--corpus", str(tmp_path),
                                   "--prompts", "4"], env={"COLUMNS": "200"})
    assert res.exit_code == 2 and "--prompts apply to a chat model" in res.output


def test_more_responses_per_prompt_extend_the_one_pass_data(chat_smoke):
    """A second pass of (sampled) responses to the same prompts: the first pass is the one-pass recipe's own
    cached data, the rows double, and the stacked features are the per-row features of both passes."""
    from divelab.cache import entry_path
    from divelab.serving.dspark.chat_drafter import training_rows

    target, tok = chat_smoke("smoke")
    one = ChatDrafterRecipe(**{**RECIPE.__dict__, "seed": 3})
    two = ChatDrafterRecipe(**{**one.__dict__, "samples_per_prompt": 2})
    assert two.data_key() == one.data_key() and two.key() != one.key()
    rows1, starts1 = training_rows(target, tok, one)
    rows2, starts2 = training_rows(target, tok, two)
    assert rows2[: len(rows1)] == rows1 and len(rows2) == 2 * len(rows1) and starts2 == starts1 * 2
    assert [r[:s] for r, s in zip(rows2[len(rows1):], starts1, strict=True)] == [r[:s] for r, s in zip(rows1, starts1, strict=True)]
    data_dir = entry_path("dspark-responses", two.data_key())
    both = chat_data.build_features(target, rows2, (1, 2), 4, data_dir / "test-features", shard_rows=3,
                                    breaks=(len(rows1),))
    assert (data_dir / "test-features" / "pass-1-shard-00000").is_dir()  # the second pass starts its own shards
    assert isinstance(both["feats"], np.memmap) and len(both["feats"]) == len(both["tokens"]) == both["offsets"][-1]
    first = chat_data.build_features(target, rows1, (1, 2), 4, data_dir / "test-features", shard_rows=3)
    np.testing.assert_array_equal(first["feats"], both["feats"][: len(first["feats"])])  # the first pass's shards reused
    again = chat_data.build_features(target, rows2, (1, 2), 4, data_dir / "test-other", shard_rows=len(rows2))
    np.testing.assert_allclose(np.asarray(again["feats"], dtype=np.float32), np.asarray(both["feats"], dtype=np.float32),
                               atol=2e-2)  # features of a row do not depend on how rows are sharded


def test_code_prompts_are_humaneval_requests_in_the_chat_template(chat_smoke):
    _, tok = chat_smoke("smoke")
    a, b = chat_data.code_prompts(tok, 3, seed=0), chat_data.code_prompts(tok, 3, seed=0)
    assert a == b and len(a) == 3 and "def " in tok.decode(a[0]) and tok.decode(a[0]).endswith(">")
    with pytest.raises(ValueError, match="n must be in 1..164"):
        chat_data.code_prompts(tok, 0, seed=0)
    with pytest.raises(ValueError, match="samples_per_prompt must be >= 1"):
        ChatDrafterRecipe(samples_per_prompt=0)


def test_a_killed_build_resumes_to_the_same_drafter(chat_smoke, monkeypatch, tmp_path):
    from divelab.serving.dspark import chat_drafter

    recipe = ChatDrafterRecipe(**{**RECIPE.__dict__, "seed": 1, "steps": 9, "code_eval_prompts": 0})
    calls = {"n": 0}
    real_point = chat_drafter.expected_tau

    def dies_after_first_checkpoint(*a, **k):
        calls["n"] += 1
        if calls["n"] == 3:  # the points at steps 0 and 3 are done and step 3 is checkpointed
            raise KeyboardInterrupt
        return real_point(*a, **k)

    monkeypatch.setattr(chat_drafter, "expected_tau", dies_after_first_checkpoint)
    with pytest.raises(KeyboardInterrupt):
        build_chat_drafter(recipe, log=lambda s: None)
    monkeypatch.setattr(chat_drafter, "expected_tau", real_point)
    resumed = build_chat_drafter(recipe, log=lambda s: None)
    meta = json.loads((resumed / "meta.json").read_text())
    assert meta["resumed_from"] == 3
    import shutil

    shutil.rmtree(resumed)  # the same recipe built in one go ends with the same weights
    fresh = build_chat_drafter(recipe, log=lambda s: None)
    assert json.loads((fresh / "meta.json").read_text())["resumed_from"] is None
    assert meta["final_loss"] == pytest.approx(json.loads((fresh / "meta.json").read_text())["final_loss"])


def test_sparse_loss_equals_the_full_loss_when_the_top_k_holds_all_the_mass():
    torch.manual_seed(0)
    target = divelab.lm.build_model("tiny-100k", 12, seed=0)
    d = Drafter.for_target(target, DrafterConfig(kind="markov", gamma=3, window=4, rank=4))
    n, g, v = 5, 3, 12
    d_logits, conf, t_logits = torch.randn(n, g, v), torch.randn(n, g), torch.randn(n, g, v)
    tokens = torch.randint(0, v, (n, g))
    p_t = torch.softmax(t_logits, -1)
    top_p, top_ids = p_t.topk(v, -1)  # k = V: nothing is cut
    w, cfg = position_weights(g, 4.0), DrafterTrainConfig()
    full, _ = dspark_loss(d_logits, conf, t_logits, tokens, w, cfg)
    sparse, _ = sparse_dspark_loss(d, d_logits, conf, top_ids, top_p, tokens, w, cfg)
    assert torch.allclose(full, sparse, atol=1e-5)
    cut, _ = sparse_dspark_loss(d, d_logits, conf, top_ids[..., :3], top_p[..., :3], tokens, w, cfg)
    assert torch.isfinite(cut) and not torch.allclose(cut, full)


def test_recipe_and_data_errors_name_what_is_wrong(chat_smoke):
    with pytest.raises(ValueError, match="steps must be >= 1"):
        ChatDrafterRecipe(steps=0)
    with pytest.raises(ValueError, match="exceeds the .* training prompts"):
        build_chat_drafter(ChatDrafterRecipe(**{**RECIPE.__dict__, "n_prompts": 10**6}), log=lambda s: None)
    rows = [[1, 2, 3, 3], [3, 5]]
    assert chat_data.most_frequent(rows, 2, always=(9,)).tolist() == [9, 3]
    assert chat_data.coverage(rows, np.array([3]), [2, 0]) == pytest.approx(3 / 4)  # responses: 3 3 / 3 5


def test_chat_prompts_need_a_chat_model():
    _, tok = divelab.lm.load_model("smoke")
    tok.chat_template = None
    with pytest.raises(ValueError, match="no chat template"):
        chat_data.chat_prompts(tok, ["bees"])
