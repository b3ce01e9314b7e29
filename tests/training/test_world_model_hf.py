"""The language world model (E167) on Hugging Face causal LMs with their own tokenizers, and
``divelab world-model train --model``."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from divelab.envs.toy import CorridorEnv
from divelab.threads import torch_threads
from divelab.training.world_model import (
    WorldModel,
    collect_transitions,
    lm_train,
    rl_train,
    train_tokenizer,
    unique_transitions,
)
from divelab.training.world_model.model import prompt_text, target_text
from divelab.training.world_model.transitions import save_transitions
from hf_tiny import MODELS, bpe_tokenizer, tiny_gpt2, tiny_model_and_tokenizer


def corridor_log():
    make = lambda g: CorridorEnv(n_rooms=3, goal=2, max_steps=6, game_id=g)  # noqa: E731
    return unique_transitions(collect_transitions(make, ["c3"], 6, 6, seed=0))


@pytest.mark.parametrize("arch", list(MODELS))
def test_hf_world_model_learns_transitions_and_stops_at_eos(arch: str) -> None:
    model, tok = tiny_model_and_tokenizer(arch)
    wm = WorldModel(model, tok)
    assert wm.subword and wm.end_id == tok.eos_token_id and wm.max_new_tokens == 200
    ts = corridor_log()[:2]
    target = target_text(ts[0], reasoning=True)
    ids = wm.encode_target(target)
    assert ids[-1] == tok.eos_token_id and wm.decode(ids) == target  # markers are plain text, eos ends it
    with torch_threads(1):
        losses = lm_train(wm, ts, "sft", steps=300, lr=3e-3, batch_size=2)
        assert losses[-1] < 0.2 * losses[0]
        preds = wm.predict([(t.state, t.action) for t in ts])
    for p, t in zip(preds, ts, strict=True):  # memorised: greedy decoding writes the target and stops
        assert p.well_formed and p.state == t.next_state and p.reward == float(t.reward > 0), p.text
    gens = wm.generate([prompt_text(ts[0].state, ts[0].action)])
    assert gens[0][-1] == wm.end_id  # the completion keeps its end id (pad == eos for some tokenizers)
    with torch_threads(1):
        means = rl_train(wm, ts, steps=1, group=2, prompts=2)
    assert len(means) == 1


def test_hf_world_model_saves_and_loads_with_its_tokenizer(tmp_path) -> None:
    tok = bpe_tokenizer()
    wm = WorldModel(tiny_gpt2(tok), tok)
    wm.save(tmp_path / "wm")
    back = WorldModel.load(tmp_path / "wm")
    assert back.subword and back.end_id == wm.end_id and back.pad_id == wm.pad_id
    ts = corridor_log()[:1]
    text = prompt_text(ts[0].state, ts[0].action)
    assert back.encode(text) == wm.encode(text)
    with torch.no_grad():
        assert back.generate([text]) == wm.generate([text])


def test_word_level_world_model_is_unchanged() -> None:
    ts = corridor_log()
    tok = train_tokenizer(ts)
    wm = WorldModel.new(tok, seed=0)
    assert not wm.subword and wm.max_new_tokens == 80
    assert (wm.pad_id, wm.end_id) == (tok.token_to_id("[PAD]"), tok.token_to_id("[END]"))
    target = target_text(ts[0], reasoning=True)
    assert wm.encode_target(target) == tok.encode(target).ids  # [END] is the format's own last token
    ids = tok.encode(target).ids
    assert wm.decode(ids + [wm.pad_id]) == " ".join(tok.id_to_token(i) for i in ids)


def test_world_model_refuses_a_tokenizer_without_eos_or_markers() -> None:
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    no_eos = PreTrainedTokenizerFast(tokenizer_object=bpe_tokenizer().backend_tokenizer)
    with pytest.raises(ValueError, match=r"has no eos_token.*tokenizer.eos_token"):
        WorldModel(tiny_gpt2(bpe_tokenizer()), no_eos)
    bare = Tokenizer(models.WordLevel({"go": 0, "[UNK]": 1}, unk_token="[UNK]"))
    with pytest.raises(ValueError, match=r"lacks the world-model special tokens.*train_tokenizer\(\)"):
        WorldModel(tiny_gpt2(bpe_tokenizer()), bare)


def test_cli_trains_a_world_model_on_a_local_checkpoint(tmp_path) -> None:
    from divelab.cli import app

    tok = bpe_tokenizer()
    ckpt = tmp_path / "ckpt"
    tiny_gpt2(tok).save_pretrained(ckpt)
    tok.save_pretrained(ckpt)
    log = tmp_path / "log.jsonl"
    save_transitions(corridor_log(), log)
    out = tmp_path / "wm"
    res = CliRunner().invoke(app, ["world-model", "train", str(log), "--out", str(out), "--model", str(ckpt),
                                   "--cpt-steps", "2", "--sft-steps", "2", "--rl-steps", "0"])
    assert res.exit_code == 0, res.output
    assert WorldModel.load(out).subword
    res = CliRunner().invoke(app, ["world-model", "eval", str(out), str(log)])
    assert res.exit_code == 0 and "overall: n=" in res.output, res.output


@pytest.mark.parametrize("bad", ["not-a-model-name", "EMPTY_DIR", "LOG_FILE"])
def test_cli_model_that_is_not_a_model_exits_2_with_an_error(tmp_path, bad: str) -> None:
    from divelab.cli import app

    log = tmp_path / "log.jsonl"
    save_transitions(corridor_log(), log)
    (tmp_path / "empty").mkdir()
    model = {"EMPTY_DIR": str(tmp_path / "empty"), "LOG_FILE": str(log)}.get(bad, bad)
    res = CliRunner().invoke(app, ["world-model", "train", str(log), "--out", str(tmp_path / "wm"),
                                   "--model", model, "--cpt-steps", "1", "--sft-steps", "0", "--rl-steps", "0"])
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith(f"error: --model {model}: "), res.stderr
    assert "zoo name" in res.stderr or "config.json" in res.stderr
    assert not (tmp_path / "wm").exists()
