"""Cached assets for ``benchmarks/serving_dspark.py``: targets, prompts, drafters, an assistant model.

* ``smollm2``: SmolLM2-135M-Instruct (``divelab.lm.load_model``). Chat prompts are built from
  templates × topics; topics are split, so benchmark prompts use topics no drafter saw. Training
  data are SmolLM2's own responses (greedy and T=1, batched ``generate``), as DSpark trains on the
  target's responses. A Markov (DSpark) and an AR (EAGLE-style) drafter are trained jointly on them
  (shared target forward), and a tiny same-vocabulary LM is trained on them as the assisted-generation
  assistant.
* ``tiny``: the zoo ``small`` recipe (tiny-1m) trained for 400 steps instead of 100 (the 100-step one
  answers almost everything with " self. self."), drafters trained on its own samples.

Everything is cached under ``divelab.cache.entry_path("dspark-bench", key)``; a second call loads.
"""

from __future__ import annotations

import time

import numpy as np
import torch

TEMPLATES = ["Explain {t} in two sentences.", "Write a short poem about {t}.", "List three facts about {t}.",
             "What is the history of {t}?", "Give me a tip about {t}.", "Why do people like {t}?",
             "Describe {t} to a child.", "Write a haiku about {t}."]
TOPICS = ["the ocean", "coffee", "volcanoes", "the moon", "bicycles", "python programming", "bees", "rain",
          "chess", "bread", "mountains", "music", "trains", "photosynthesis", "the internet", "cats",
          "gardening", "winter", "libraries", "electricity", "friendship", "deserts", "soccer", "robots",
          "tea", "rivers", "the sun", "dinosaurs", "painting", "airplanes", "forests", "mathematics"]
TEST_TOPICS = ["penguins", "clocks", "jazz", "glaciers", "honey", "lighthouses", "origami", "thunderstorms"]

# sized for a CPU shared by ~8 jobs: a few CPU-minutes in all (a GPU could afford 10-100x more)
SMOL_CFG = {"v": 4, "n_train_gen": 32, "gen_tokens": 48, "steps": 70, "batch": 2, "seq_len": 64, "gamma": 8,
            "assistant_steps": 120}
TINY_CFG = {"v": 4, "zoo_steps": 400, "n_regen": 96, "steps": 150, "batch": 8, "seq_len": 64, "gamma": 8,
            "assistant_steps": 120}


def chat_prompts(tok, topics: list[str]) -> list[list[int]]:
    out = []
    for t in topics:
        for tpl in TEMPLATES:
            msgs = [{"role": "user", "content": tpl.format(t=t)}]
            ids = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
            if hasattr(ids, "keys"):
                ids = ids["input_ids"]
            out.append(list(map(int, ids)))
    return out


@torch.no_grad()
def hf_batched_generate(target, prompts: list[list[int]], max_new_tokens: int, pad_id: int, do_sample: bool,
                        seed: int, batch: int = 32) -> list[list[int]]:
    """Left-padded batched HF generate; returns the new tokens (no padding) per prompt."""
    torch.manual_seed(seed)
    outs = []
    for lo in range(0, len(prompts), batch):
        chunk = prompts[lo: lo + batch]
        p = max(len(x) for x in chunk)
        ids = torch.full((len(chunk), p), pad_id, dtype=torch.long)
        att = torch.zeros_like(ids)
        for i, x in enumerate(chunk):
            ids[i, p - len(x):] = torch.tensor(x)
            att[i, p - len(x):] = 1
        g = target.generate(ids, attention_mask=att, max_new_tokens=max_new_tokens, do_sample=do_sample,
                            temperature=1.0 if do_sample else None, top_k=0 if do_sample else None,
                            top_p=1.0 if do_sample else None, pad_token_id=pad_id)
        outs.extend(row[p:].tolist() for row in g)
    return outs


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


def load_assets(which: str, seed: int = 0, log=print) -> dict:
    """Build (first call) or load the cached assets of ``which`` (smollm2 | tiny)."""
    from transformers import AutoModelForCausalLM

    from divelab.cache import atomic_dir, entry_path, stable_hash
    from divelab.serving.dspark import load_drafter, save_drafter

    if which == "smollm2":
        from divelab.lm import load_model

        target, tok = load_model("smollm2-135m-instruct")
        cfg, n_heads = SMOL_CFG, 9
        train_prompts = chat_prompts(tok, TOPICS)
        test_prompts = chat_prompts(tok, TEST_TOPICS)
        pad = int(tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
        eos = int(tok.eos_token_id)
    elif which == "tiny":
        from divelab.lm import encode_split, pretrained

        target, tok = pretrained("small", steps=TINY_CFG["zoo_steps"])
        cfg, n_heads = TINY_CFG, 4
        rng = np.random.default_rng(seed)
        test = encode_split(tok, "test")
        starts = rng.integers(0, len(test) - 40, size=64)
        test_prompts = [test[s: s + 16].astype(np.int64).tolist() for s in starts]
        train_prompts = None
        pad, eos = 0, int(tok.eos_token_id) if tok.eos_token_id is not None else 0
    else:
        raise ValueError(f"unknown benchmark target {which!r}; allowed: smollm2, tiny")
    target.eval()
    key = stable_hash({"which": which, "cfg": cfg, "seed": seed})
    path = entry_path("dspark-bench", key)
    if not (path / "assistant" / "config.json").exists():
        t0 = time.perf_counter()
        if which == "smollm2":
            half = cfg["n_train_gen"] // 2
            rng = np.random.default_rng(seed)
            pick = rng.permutation(len(train_prompts))[: cfg["n_train_gen"]]
            ps = [train_prompts[i] for i in pick]
            log(f"[assets] SmolLM2 responses for {len(ps)} training prompts ...")
            resp = (hf_batched_generate(target, ps[:half], cfg["gen_tokens"], pad, False, seed)
                    + hf_batched_generate(target, ps[half:], cfg["gen_tokens"], pad, True, seed))
            rows = [p + [t for t in r if t != pad] for p, r in zip(ps, resp, strict=True)]
            stream = _stream(rows, eos)
        else:
            from divelab.lm import encode_split
            from divelab.serving.dspark.training import regenerate

            train_tok = encode_split(tok, "train")
            half = cfg["n_regen"] // 2
            stream = np.concatenate([regenerate(target, train_tok, half, cfg["seq_len"] + 16, 16, 1.0, seed).ravel(),
                                     regenerate(target, train_tok, half, cfg["seq_len"] + 16, 16, 0.0, seed).ravel()])
        log(f"[assets] {len(stream)} training tokens in {time.perf_counter() - t0:.0f}s; training drafters ...")
        mk, ar, logs = _train_pair(target, stream, cfg, seed, n_heads)
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
        a = load_assets(w)
        print(w, a["path"], a["meta"], flush=True)
