"""Training and sampling speed of the divelab tiny models on this machine (JSON out).

For each model config: seconds per training step at a given batch x seq_len (AdamW, the divelab
loop), and tokens/s, with 1 and with 2 torch threads side by side. For sampling, divelab's seeded KV-cache ``generate`` beside Hugging Face's
``model.generate`` (greedy, same model, same prompt) in the same process.

    .venv/bin/python benchmarks/lm_training.py --configs tiny-100k tiny-1m tiny-4m --steps 5 --out lm.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np
import torch

from divelab.lm.models import build_model, count_parameters
from divelab.lm.sampling import generate
from divelab.lm.train import TrainConfig, train


def bench_train(name: str, vocab: int, steps: int, batch_size: int, seq_len: int, threads: int) -> dict:
    stream = np.random.default_rng(0).integers(0, vocab, 200_000)
    model = build_model(name, vocab)
    cfg = TrainConfig(steps=steps + 1, batch_size=batch_size, seq_len=seq_len, warmup=1, eval_every=0,
                      num_threads=threads)
    times: list[float] = []
    last = [time.perf_counter()]

    def tick(step: int, loss: float) -> None:
        now = time.perf_counter()
        times.append(now - last[0])
        last[0] = now

    train(model, stream, None, cfg, callback=tick)
    per_step = float(np.median(times[1:]))  # the first step pays one-off allocation costs
    return {"config": name, "threads": threads, "parameters": count_parameters(model), "batch_size": batch_size, "seq_len": seq_len,
            "s_per_step": per_step, "tokens_per_s": batch_size * seq_len / per_step}


def bench_sampling(name: str, vocab: int, new_tokens: int) -> dict:
    model = build_model(name, vocab)
    prompt = list(range(1, 33))
    t0 = time.perf_counter()
    ours = generate(model, prompt, max_new_tokens=new_tokens, greedy=True, eos_token_id=None).tokens[0]
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    hf = model.generate(torch.tensor([prompt]), max_new_tokens=new_tokens, do_sample=False, pad_token_id=0,
                        eos_token_id=None)
    t_hf = time.perf_counter() - t0
    return {"config": name, "new_tokens": new_tokens, "divelab_tokens_per_s": new_tokens / t_ours,
            "hf_generate_tokens_per_s": new_tokens / t_hf, "same_tokens": ours == hf[0, len(prompt):].tolist()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", nargs="+", default=["tiny-100k", "tiny-1m", "tiny-4m"])
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="torch threads to compare")
    ap.add_argument("--out", default="lm_training.json")
    args = ap.parse_args()
    torch.set_num_threads(1)  # sampling; training sets its own per run
    result = {"machine": {"platform": platform.platform(), "torch": torch.__version__,
                          "cpu_count": os.cpu_count(),
                          "load_average_1min": os.getloadavg()[0]},
              "training": [bench_train(c, args.vocab, args.steps, args.batch_size, args.seq_len, t)
                           for c in args.configs for t in args.threads],
              "sampling": [bench_sampling(c, args.vocab, args.new_tokens) for c in args.configs]}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
