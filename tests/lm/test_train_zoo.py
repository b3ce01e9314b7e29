"""Training loop (loss goes down, resume == uninterrupted), the zoo cache, load_model, CLI."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from divelab.lm import load_model, zoo
from divelab.lm.models import build_model
from divelab.lm.train import SequenceSource, TrainConfig, lr_lambda, train

# a learnable stream: a repeated random 50-token pattern over a 64-token vocabulary
PATTERN = np.random.default_rng(0).integers(0, 64, 50)
STREAM = np.tile(PATTERN, 200)
TINY = TrainConfig(steps=30, batch_size=4, seq_len=32, lr=1e-2, warmup=3, eval_every=10, eval_batches=2)


def test_training_reduces_loss_and_is_deterministic():
    r1 = train(build_model("tiny-100k", 64, seed=0), STREAM, STREAM, TINY)
    assert len(r1.train_losses) == 30 and [s for s, _ in r1.val_losses] == [10, 20, 30]
    assert r1.val_losses[-1][1] < 0.6 * r1.val_losses[0][1]
    assert np.mean(r1.train_losses[-5:]) < 0.6 * np.mean(r1.train_losses[:5])
    assert r1.tokens_seen == 30 * 4 * 32
    r2 = train(build_model("tiny-100k", 64, seed=0), STREAM, STREAM, TINY)
    assert r1.train_losses == r2.train_losses


def test_schedule_warms_up_then_decays_to_min_ratio():
    f = lr_lambda(TrainConfig(steps=100, warmup=10, min_lr_ratio=0.1))
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0)
    assert f(10) == pytest.approx(1.0) and f(55) == pytest.approx(0.55) and f(100) == pytest.approx(0.1)


def test_resume_after_interrupt_equals_uninterrupted(tmp_path):
    cfg = TrainConfig(steps=8, batch_size=2, seq_len=16, lr=1e-2, warmup=2, eval_every=4, eval_batches=1,
                      ckpt_every=3)
    ref_model = build_model("tiny-100k", 64, seed=1)
    ref = train(ref_model, STREAM, STREAM, cfg, ckpt_dir=tmp_path / "ref")

    def interrupt(step: int, loss: float) -> None:
        if step == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(build_model("tiny-100k", 64, seed=1), STREAM, STREAM, cfg, ckpt_dir=tmp_path / "run", callback=interrupt)
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["step-00000003"]
    model = build_model("tiny-100k", 64, seed=1)
    res = train(model, STREAM, STREAM, cfg, ckpt_dir=tmp_path / "run")
    assert res.resumed_from == 3
    assert res.train_losses == ref.train_losses and res.val_losses == ref.val_losses
    for (n, a), (_, b) in zip(ref_model.state_dict().items(), model.state_dict().items(), strict=True):
        assert torch.equal(a, b), n
    with pytest.raises(ValueError, match=r"different configuration \(differs in \['lr'\]\)"):
        train(build_model("tiny-100k", 64, seed=1), STREAM, STREAM, replace(cfg, lr=1e-3), ckpt_dir=tmp_path / "run")


def test_sequence_source_masks_prompt_and_padding():
    src = SequenceSource([[5, 6, 7, 8], [9, 10]], pad_token_id=0, loss_masks=[[0, 0, 1, 1], [0, 1]])
    b = src.eval_batches(1, 2, 16)[0]
    assert b["input_ids"].tolist() == [[5, 6, 7, 8], [9, 10, 0, 0]]
    assert b["labels"].tolist() == [[-100, -100, 7, 8], [-100, 10, -100, -100]]
    assert b["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    with pytest.raises(ValueError, match="loss mask"):
        SequenceSource([[1, 2]], 0, loss_masks=[[1]])


def test_bad_train_config_is_rejected():
    with pytest.raises(ValueError, match="steps must be >= 1"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match="shorter than seq_len"):
        train(build_model("tiny-100k", 64), np.arange(10), config=TrainConfig(steps=1, seq_len=32))


SMOKE = {"steps": 4}


def test_zoo_trains_once_then_loads_and_load_model_reads_local_dirs(tmp_path):
    model, tok = zoo.pretrained("smoke", **SMOKE)
    path = zoo.model_path("smoke", **SMOKE)
    assert (path / "model.safetensors").exists() and (path / "tokenizer.json").exists()
    assert zoo.info("smoke", **SMOKE)["result"]["final_val_loss"] > 0
    mtime = (path / "model.safetensors").stat().st_mtime_ns
    whole = zoo.split_loss(model, tok, "val", zoo.recipe("smoke").corpus, seq_len=128)
    assert whole["tokens"] > 1000 and whole["ppl"] == pytest.approx(np.exp(whole["loss"]))
    assert abs(whole["loss"] - zoo.info("smoke", **SMOKE)["result"]["final_val_loss"]) < 0.5
    again, _ = load_model("smoke", **SMOKE)  # from the cache, not retrained
    assert (path / "model.safetensors").stat().st_mtime_ns == mtime
    ids = torch.tensor([tok.encode("import os\n")])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, again(ids).logits)
    # a user's own checkpoint directory
    model.save_pretrained(tmp_path / "mine")
    tok.save_pretrained(tmp_path / "mine")
    mine, mine_tok = load_model(tmp_path / "mine")
    assert mine_tok.decode(mine_tok.encode("x = 1\n")) == "x = 1\n"
    with torch.no_grad():
        assert torch.equal(model(ids).logits, mine(ids).logits)


def test_interrupted_cache_write_leaves_no_entry(monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(zoo, "_write_meta", boom)  # fails inside atomic_dir, after weights were written
    with pytest.raises(RuntimeError, match="disk full"):
        zoo.ensure_trained("smoke", steps=2)
    path = zoo.model_path("smoke", steps=2)
    assert not path.exists()
    assert not [p for p in path.parent.iterdir() if p.name.startswith(f".{path.name}")]


def test_load_model_bad_names(tmp_path):
    with pytest.raises(ValueError, match="allowed zoo names: smoke, small, quick, full, tiny-100k"):
        load_model("gpt-17")
    with pytest.raises(ValueError, match="no config.json"):
        load_model(tmp_path)
    with pytest.raises(ValueError, match="unknown recipe override"):
        zoo.recipe("smoke", stepz=3)


def test_cli_train_lm(monkeypatch):
    from typer.testing import CliRunner

    from divelab.cli import app

    res = CliRunner().invoke(app, ["train-lm", "--recipe", "smoke", "--steps", "4"])
    assert res.exit_code == 0, res.output
    assert str(zoo.model_path("smoke", steps=4, seed=0)) in res.output and "val loss" in res.output
    bad = CliRunner().invoke(app, ["train-lm", "--recipe", "nope"])
    assert bad.exit_code == 2 and "allowed" in bad.output


def test_public_api_resolves_lazily():
    import divelab.lm as lm

    for name in lm.__all__:
        assert getattr(lm, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        lm.nope  # noqa: B018


def test_interrupted_zoo_training_resumes_from_its_checkpoint(monkeypatch):
    real_train = zoo.train

    def interrupted(*args, **kwargs):
        def stop(step: int, loss: float) -> None:
            if step == 5:
                raise KeyboardInterrupt
        return real_train(*args, callback=stop, **kwargs)

    monkeypatch.setattr(zoo, "train", interrupted)
    with pytest.raises(KeyboardInterrupt):
        zoo.ensure_trained("smoke", steps=6, ckpt_every=2)
    assert not zoo.model_path("smoke", steps=6, ckpt_every=2).exists()
    monkeypatch.setattr(zoo, "train", real_train)
    path = zoo.ensure_trained("smoke", steps=6, ckpt_every=2)
    meta = zoo.info("smoke", steps=6, ckpt_every=2)
    assert meta["result"]["resumed_from"] == 4 and len(meta["result"]["train_losses"]) == 6
    assert not (path.parent.parent / "runs" / path.name).exists()  # checkpoints cleared once done
