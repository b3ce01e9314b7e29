"""Cached assets for ``benchmarks/serving_dspark.py``: targets, prompts, drafters, an assistant model.

* ``smollm2`` (:func:`load_smollm2`): SmolLM2-135M-Instruct with the drafter that
  ``divelab dspark train-drafter --target smollm2-135m-instruct`` builds (trained on SmolLM2's own
  responses to chat prompts; what ``divelab serve`` uses by default), and a tiny same-vocabulary LM
  trained on the same responses as the assisted-generation assistant. Benchmark prompts use topics
  no drafter or assistant saw.
* ``tiny`` (:func:`load_assets`): the zoo ``small`` recipe (tiny-1m) trained for 400 steps instead of 100
  (the 100-step one answers almost everything with " self. self."), drafters trained on its own samples.

Everything is cached in the divelab cache; a second call loads.
"""

from __future__ import annotations

import time

import numpy as np
import torch

ASSISTANT_STEPS = 400  # the SmolLM2 assistant: tiny-1m, about one pass over the drafter's training tokens
TINY_CFG = {"v": 4, "zoo_steps": 400, "n_regen": 96, "steps": 150, "batch": 8, "seq_len": 64, "gamma": 8,
            "assistant_steps": 120}


def _train_pair(target, stream: np.ndarray, cfg: dict, seed: int, n_heads: int):
    from divelab.serving.dspark import Drafter, DrafterConfig, DrafterTrainConfig, train_drafters

    torch.manual_seed(seed)
    dc = {"gamma": cfg["gamma"], "n_layers": 1, "window": 16, "rank": 32, "n_heads": n_heads}
    mk = Drafter.for_target(target, DrafterConfig(kind="markov", **dc))
    ar = Drafter.for_target(target, DrafterConfig(kind="ar", **dc))
    tc = DrafterTrainConfig(steps=cfg["steps"], batch_size=cfg["batch"], seq_len=cfg["seq_len"], anchors_per_seq=8,
                            lr=3e-3, decay=4.0, seed=seed)
    logs = train_drafters(target, [mk, ar], stream, tc, description="markov+ar drafters")
    return mk, ar, logs


def _train_assistant(stream: np.ndarray, vocab: int, steps: int, seed: int):
    from divelab.lm import build_model
    from divelab.lm.train import TrainConfig, train

    a = build_model("tiny-1m", vocab, seed=seed)
    train(a, stream, config=TrainConfig(steps=steps, batch_size=8, seq_len=96, lr=5e-3, warmup=10, eval_every=0,
                                        seed=seed), description="assistant")
    return a.eval()


def _stream(rows: list[list[int]], eos: int) -> np.ndarray:
    return np.asarray([t for r in rows for t in (r + [eos])], dtype=np.int64)


def load_smollm2(seed: int = 0, n_prompts: int = 16, log=print) -> dict:
    """SmolLM2-135M-Instruct with the drafter ``divelab dspark train-drafter --target smollm2-135m-instruct``
    builds (the server's default; built here if missing), a tiny same-vocabulary assistant trained on
    the same responses, and ``n_prompts`` held-out chat prompts (topics no drafter or assistant saw)."""
    import json

    from transformers import AutoModelForCausalLM

    from divelab.cache import atomic_dir, entry_path, stable_hash
    from divelab.lm import load_model
    from divelab.serving.dspark import chat_data, load_drafter
    from divelab.serving.dspark.chat_drafter import (
        ChatDrafterRecipe,
        build_chat_drafter,
        recipe_prompts,
        training_rows,
    )

    recipe = ChatDrafterRecipe(seed=seed)
    path = build_chat_drafter(recipe, log=log)
    target, tok = load_model(recipe.target)
    target.eval()
    drafter, cal = load_drafter(path, target)
    _, _, bench = recipe_prompts(tok, recipe)
    if len(bench) < n_prompts:
        raise ValueError(f"only {len(bench)} held-out benchmark prompts, asked for {n_prompts}")
    prompts = [bench[i] for i in np.random.default_rng(seed + 2).permutation(len(bench))[:n_prompts]]
    eos = int(tok.eos_token_id)
    pad = int(tok.pad_token_id if tok.pad_token_id is not None else eos)
    a_key = stable_hash({"assistant": recipe.data_key(), "steps": ASSISTANT_STEPS, "seed": seed})
    a_path = entry_path("dspark-bench-assistant", a_key)
    if not (a_path / "config.json").exists():
        rows, _ = training_rows(target, tok, recipe)
        log(f"[assets] training the tiny same-vocabulary assistant on {sum(map(len, rows))} tokens ...")
        assistant = _train_assistant(chat_data.token_stream(rows, eos), int(target.config.vocab_size),
                                     ASSISTANT_STEPS, seed)
        with atomic_dir(a_path) as tmp:
            assistant.save_pretrained(tmp)
    assistant = AutoModelForCausalLM.from_pretrained(a_path, local_files_only=True).eval()
    meta = json.loads((path / "meta.json").read_text())
    return {"target": target, "tok": tok, "drafter": drafter, "calibration": cal, "assistant": assistant,
            "prompts": prompts, "pad": pad, "eos": eos, "meta": meta, "path": str(path)}


def load_assets(which: str, seed: int = 0, log=print) -> dict:
    """Build (first call) or load the cached assets of the ``tiny`` target (its Markov and AR drafters
    trained on its own samples, and an assistant); SmolLM2's come from :func:`load_smollm2`."""
    from transformers import AutoModelForCausalLM

    from divelab.cache import atomic_dir, entry_path, stable_hash
    from divelab.lm import encode_split, pretrained
    from divelab.serving.dspark import load_drafter, save_drafter
    from divelab.serving.dspark.training import regenerate

    if which != "tiny":
        raise ValueError(f"unknown benchmark target {which!r}; allowed: tiny (SmolLM2: load_smollm2)")
    target, tok = pretrained("small", steps=TINY_CFG["zoo_steps"])
    cfg = TINY_CFG
    rng = np.random.default_rng(seed)
    test = encode_split(tok, "test")
    starts = rng.integers(0, len(test) - 40, size=64)
    test_prompts = [test[s: s + 16].astype(np.int64).tolist() for s in starts]
    pad, eos = 0, int(tok.eos_token_id) if tok.eos_token_id is not None else 0
    target.eval()
    key = stable_hash({"which": which, "cfg": cfg, "seed": seed})
    path = entry_path("dspark-bench", key)
    if not (path / "assistant" / "config.json").exists():
        t0 = time.perf_counter()
        train_tok = encode_split(tok, "train")
        half = cfg["n_regen"] // 2
        stream = np.concatenate([regenerate(target, train_tok, half, cfg["seq_len"] + 16, 16, 1.0, seed).ravel(),
                                 regenerate(target, train_tok, half, cfg["seq_len"] + 16, 16, 0.0, seed).ravel()])
        log(f"[assets] {len(stream)} training tokens in {time.perf_counter() - t0:.0f}s; training drafters ...")
        mk, ar, logs = _train_pair(target, stream, cfg, seed, 4)
        assistant = _train_assistant(stream, int(target.config.vocab_size), cfg["assistant_steps"], seed)
        with atomic_dir(path) as tmp:
            save_drafter(mk, tmp / "markov")
            save_drafter(ar, tmp / "ar")
            assistant.save_pretrained(tmp / "assistant")
            (tmp / "meta.json").write_text(__import__("json").dumps(
                {"build_s": time.perf_counter() - t0, "train_tokens": int(len(stream)),
                 "final_loss": {"markov": logs[0].losses[-1], "ar": logs[1].losses[-1]}}))
    mk, _ = load_drafter(path / "markov", target)
    ar, _ = load_drafter(path / "ar", target)
    assistant = AutoModelForCausalLM.from_pretrained(path / "assistant", local_files_only=True).eval()
    meta = __import__("json").loads((path / "meta.json").read_text())
    return {"target": target, "tok": tok, "markov": mk, "ar": ar, "assistant": assistant, "prompts": test_prompts,
            "pad": pad, "eos": eos, "meta": meta, "path": str(path)}


if __name__ == "__main__":
    import sys

    torch.set_num_threads(1)
    for w in sys.argv[1:] or ["smollm2"]:
        a = load_smollm2() if w == "smollm2" else load_assets(w)
        print(w, a["path"], flush=True)
