"""divelab.lm.adapt: LoRA with TRL's trainers on a tiny checkpoint, cached, resumable, with clear errors."""

from __future__ import annotations

import json

import pytest
import torch


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """A tiny Llama checkpoint with a character tokenizer, saved as an HF directory (what a user passes)."""
    from doubles import tiny_chain_checkpoint

    return str(tiny_chain_checkpoint(tmp_path_factory.mktemp("adapt-ckpt")))


ROWS = [{"prompt": f"{a}+{b}=", "completion": f"{(a + b) % 10}<eos>"} for a in range(10) for b in range(4)]


def _config(**kw):
    from divelab.lm.adapt import AdaptConfig, LoraSpec

    base = dict(method="sft", steps=6, lr=5e-3, batch_size=8, max_length=32, save_every=3,
                lora=LoraSpec(r=4, alpha=8))
    return AdaptConfig(**{**base, **kw})


def _completion_logprob(model, tok, rows) -> float:
    total = 0.0
    for r in rows:
        p, c = tok(r["prompt"])["input_ids"], tok(r["completion"])["input_ids"]
        ids = torch.tensor([p + c])
        with torch.no_grad():
            logp = model(ids).logits.log_softmax(-1)[0, len(p) - 1:-1]
        total += float(logp[torch.arange(len(c)), torch.tensor(c)].sum())
    return total / len(rows)


def test_sft_learns_the_completions_and_is_cached(ckpt, monkeypatch):
    from divelab.lm import adapt as adapt_mod
    from divelab.lm import load_model

    adapter = adapt_mod.adapt(ckpt, ROWS, _config(steps=30))
    losses = [h["loss"] for h in adapter.record["log"] if "loss" in h]
    assert len(losses) == 30 and losses[-1] < losses[0]
    base, tok = load_model(ckpt)
    tuned, _ = adapter.load()
    assert _completion_logprob(tuned, tok, ROWS[:8]) > _completion_logprob(base, tok, ROWS[:8]) + 0.1
    merged, _ = adapter.load(merge=True)
    assert not hasattr(merged, "peft_config")

    # the same inputs load from the cache without training; other rows or another seed train anew
    monkeypatch.setattr(adapt_mod, "_train", lambda *a, **k: pytest.fail("retrained a cached adapter"))
    again = adapt_mod.adapt(ckpt, ROWS, _config(steps=30))
    assert again.path == adapter.path and adapt_mod.find(adapter.key).record["n_rows"] == len(ROWS)
    assert adapt_mod.adapter_key(ckpt, ROWS[:-1], _config(steps=30)) != adapter.key
    assert adapt_mod.adapter_key(ckpt, ROWS, _config(steps=30, seed=1)) != adapter.key


def test_a_killed_run_resumes_from_its_last_checkpoint(ckpt, monkeypatch):
    from transformers import TrainerCallback

    from divelab.cache import entry_path
    from divelab.lm import adapt as adapt_mod

    made = adapt_mod._trainer

    class Killed(RuntimeError):
        pass

    class _KillAt4(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == 4:
                raise Killed

    def killing_trainer(*a, **k):
        t = made(*a, **k)
        t.add_callback(_KillAt4())
        return t

    config = _config(steps=6, save_every=3, seed=7)
    monkeypatch.setattr(adapt_mod, "_trainer", killing_trainer)
    with pytest.raises(Killed):
        adapt_mod.adapt(ckpt, ROWS, config)
    key = adapt_mod.adapter_key(ckpt, ROWS, config)
    assert adapt_mod.find(key) is None  # nothing half-written in the cache
    assert (entry_path("adapters-partial", key) / "checkpoint-3").is_dir()
    monkeypatch.setattr(adapt_mod, "_trainer", made)
    adapter = adapt_mod.adapt(ckpt, ROWS, config)
    assert adapter.record["resumed_from_step"] == 3
    assert [h["step"] for h in adapter.record["log"] if "loss" in h][-1] == 6
    assert not entry_path("adapters-partial", key).exists()


def test_dpo_and_grpo_train_with_trl(ckpt):
    from divelab.lm.adapt import adapt

    pairs = [{"prompt": r["prompt"], "chosen": r["completion"], "rejected": "0<eos>"} for r in ROWS[:16]]
    dpo = adapt(ckpt, pairs, _config(method="dpo", steps=2, beta=0.1))
    assert dpo.record["config"]["method"] == "dpo" and any("loss" in h for h in dpo.record["log"])

    def digit_reward(prompts, completions, **_):
        return [float(bool(c) and c[0].isdigit()) for c in completions]

    grpo = adapt(ckpt, [{"prompt": r["prompt"]} for r in ROWS[:8]],
                 _config(method="grpo", steps=2, batch_size=4, num_generations=4, max_completion_length=4),
                 reward_funcs=[digit_reward])
    assert any("reward" in h for h in grpo.record["log"])
    assert grpo.record["rewards"][0].endswith("digit_reward")


@pytest.mark.parametrize("kw, rows, match", [
    ({"method": "ppo"}, ROWS, "method 'ppo' is not one of sft, dpo, grpo"),
    ({"method": "dpo"}, ROWS, r"row 0 has columns \['completion', 'prompt'\]; dpo rows need \{prompt, chosen, rejected\}"),
    ({}, [], "no training rows"),
    ({"method": "grpo", "batch_size": 6, "num_generations": 4}, ROWS, "multiple of num_generations"),
    ({"method": "grpo", "num_generations": 1, "batch_size": 4}, ROWS, "num_generations must be >= 2"),
    ({"steps": 0}, ROWS, "steps must be >= 1"),
])
def test_bad_input_says_what_is_wrong_and_what_is_allowed(ckpt, kw, rows, match):
    from divelab.lm.adapt import adapt

    with pytest.raises(ValueError, match=match):
        adapt(ckpt, rows, _config(**kw))


def test_grpo_needs_a_reward_and_only_grpo_takes_one(ckpt):
    from divelab.lm.adapt import adapt

    with pytest.raises(ValueError, match="grpo needs at least one reward function"):
        adapt(ckpt, [{"prompt": "1+1="}], _config(method="grpo", batch_size=4))
    with pytest.raises(ValueError, match="reward_funcs only apply to grpo, not sft"):
        adapt(ckpt, ROWS, _config(), reward_funcs=[len])


def test_the_command_trains_then_loads_and_reports_bad_files(ckpt, tmp_path):
    from typer.testing import CliRunner

    from divelab.cli import app

    data = tmp_path / "rows.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in ROWS[:8]) + "\n")
    args = ["adapt", str(data), "--model", ckpt, "--steps", "2", "--batch-size", "4", "--lora-r", "2",
            "--max-length", "32"]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "adapter: " in res.output and "sft on " in res.output and "8 rows, 2 steps" in res.output

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(ROWS[0]) + "\n[1, 2]\n")
    wide = {"COLUMNS": "400"}  # one line per message, as a log would show it
    res = CliRunner().invoke(app, ["adapt", str(bad), "--model", ckpt], env=wide)
    assert res.exit_code == 2 and "bad.jsonl:2: a JSON object per line is needed, got list" in res.output
    res = CliRunner().invoke(app, ["adapt", str(data), "--model", ckpt, "--method", "grpo",
                                   "--reward", "nonexistent_module_x:f"], env=wide)
    assert res.exit_code == 2 and "--reward 'nonexistent_module_x:f'" in res.output
    res = CliRunner().invoke(app, ["adapt", str(data), "--lora-r", "0"], env=wide)
    assert res.exit_code == 2 and "--lora-r" in res.output and "allowed:" in res.output


def test_a_stop_rule_ends_training_at_its_target_and_enters_the_key(ckpt):
    from divelab.lm.adapt import StopRule, adapt, adapter_key

    calls: list[bool] = []

    def score(model) -> float:
        assert not model.training  # checked in eval mode
        calls.append(True)
        return float(len(calls))

    rule = StopRule(score=score, target=2, every=3, version="count-v1")
    adapter = adapt(ckpt, ROWS, _config(steps=30), stop=rule)
    assert adapter.record["stop_checks"] == [[3, 1.0], [6, 2.0]]
    assert adapter.record["steps_trained"] == 6
    assert adapter.key != adapter_key(ckpt, ROWS, _config(steps=30))
    assert adapter.key != adapter_key(ckpt, ROWS, _config(steps=30), stop=StopRule(score, 2, 3, "count-v2"))
    with pytest.raises(ValueError, match="every must be >= 1"):
        StopRule(score, 1.0, every=0)


def test_top_layer_modules_names_the_projections_of_the_top_layers_only():
    from divelab.lm.adapt import LLAMA_PROJECTIONS, top_layer_modules

    mods = top_layer_modules(2, n_layers=5)
    assert mods[0] == "layers.3.self_attn.q_proj" and mods[-1] == "layers.4.mlp.down_proj"
    assert len(mods) == 2 * len(LLAMA_PROJECTIONS)
    with pytest.raises(ValueError, match="1..5"):
        top_layer_modules(6, n_layers=5)
