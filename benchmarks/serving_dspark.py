"""DSpark vs the decoders people use, same target, same held-out prompts, greedy, one run.

Peers: transformers ``generate`` (plain), transformers assisted generation with an AR draft
model (``assistant_model=``, a smaller LM trained on the same data), divelab plain decoding,
EAGLE-style AR drafter, DFlash-style parallel drafter, DSpark (Markov head + Alg. 1 scheduler
with the SPS curve profiled at start-up). Outputs are checked token-identical to plain greedy.
Also a batched load point (continuous batching) for plain vs DSpark. Writes JSON.

    python benchmarks/serving_dspark.py --target small --out benchmarks/serving_dspark.json
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="small", help="zoo name (smoke, small, quick) or HF checkpoint dir")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--gamma", type=int, default=8)
    ap.add_argument("--steps", type=int, default=120, help="drafter training steps (cached)")
    ap.add_argument("--load", type=int, default=8, help="concurrency for the batched point")
    ap.add_argument("--out", default="serving_dspark.json")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from divelab.lm import build_model, encode_split, load_model
    from divelab.lm.train import TrainConfig, train
    from divelab.serving.dspark import SpecEngine, calibrate, measure_sps, plain_greedy
    from divelab.serving.dspark.engine import Request
    from divelab.serving.dspark.reproduce import _drafter, _prompts
    from divelab.serving.dspark.training import DrafterTrainConfig

    torch.manual_seed(args.seed)
    target, tok = load_model(args.target)
    train_tok, test_tok = encode_split(tok, "train"), encode_split(tok, "test")
    prompts = _prompts(test_tok, args.prompts, 16, args.seed + 1)
    tkey = f"bench-{args.target}"
    tcfg = DrafterTrainConfig(steps=args.steps, seed=args.seed)
    dcfg = {"window": 16, "rank": 32}
    drafters = {"eagle-style": _drafter(target, tkey, "ar", args.gamma, train_tok, tcfg, {**dcfg, "n_layers": 1}),
                "dflash-style": _drafter(target, tkey, "parallel", args.gamma, train_tok, tcfg, dcfg),
                "dspark": _drafter(target, tkey, "markov", args.gamma, train_tok, tcfg, dcfg)}
    cal = calibrate(target, drafters["dspark"], _prompts(encode_split(tok, "val"), 6, 16, args.seed + 2))
    sps = measure_sps(target)

    # an AR assistant for transformers' assisted generation: the smallest tiny config, same vocab
    assistant = build_model("tiny-100k", target.config.vocab_size, seed=args.seed)
    train(assistant, train_tok, config=TrainConfig(steps=args.steps, batch_size=8, seq_len=128, lr=5e-3,
                                                     warmup=5, eval_every=0, seed=args.seed))
    assistant.eval()

    ref = [plain_greedy(target, p, args.max_new_tokens) for p in prompts]
    n_tok = sum(len(r) for r in ref)
    results: dict = {}

    def timed(name: str, fn) -> None:
        fn(prompts[0])  # warm-up
        t0 = time.perf_counter()
        outs = [fn(p) for p in prompts]
        dt = time.perf_counter() - t0
        results[name] = {"tokens_per_s": n_tok / dt, "seconds": dt, "identical_to_greedy": outs == ref}

    def hf(p, **kw):
        out = target.generate(torch.tensor([p]), max_new_tokens=args.max_new_tokens, do_sample=False,
                              min_new_tokens=args.max_new_tokens, pad_token_id=0, **kw)
        return out[0, len(p):].tolist()

    with torch.no_grad():
        timed("transformers generate", hf)
        timed("transformers assisted (assistant_model)", lambda p: hf(p, assistant_model=assistant))
        plain = SpecEngine(target, None, sps=sps)
        timed("divelab plain", lambda p: plain.generate(p, args.max_new_tokens))
        for name, d in drafters.items():
            sched = "dspark" if name == "dspark" else "fixed"
            eng = SpecEngine(target, d, sched, sps=sps, calibration=cal if name == "dspark" else None)
            timed(f"divelab {name} ({sched})", lambda p, e=eng: e.generate(p, args.max_new_tokens))
        base = results["transformers generate"]["tokens_per_s"]
        for r in results.values():
            r["speedup_vs_generate"] = r["tokens_per_s"] / base
        batched = {}
        for name, d, sched in (("plain", None, "fixed-0"), ("dspark", drafters["dspark"], "dspark"),
                               ("dflash-style fixed-γ", drafters["dflash-style"], "fixed")):
            eng = SpecEngine(target, d, sched, sps=sps, calibration=cal if name == "dspark" else None)
            reqs = [Request(prompts[i % len(prompts)], args.max_new_tokens, 0.0, i) for i in range(2 * args.load)]
            res = eng.serve(reqs, max_batch=args.load)
            batched[name] = {"throughput_tok_s": res.throughput, "per_user_tok_s": res.per_user_speed,
                             "identical_to_greedy": all(res.outputs[i] == ref[i % len(prompts)] for i in res.outputs)}
    out = {"target": args.target, "device": "cpu", "threads": torch.get_num_threads(), "gamma": args.gamma,
           "prompts": args.prompts, "max_new_tokens": args.max_new_tokens, "batch_size_1": results,
           f"batched_load_{args.load}": batched, "sps_profile": {"B": sps.batch_sizes.tolist(),
                                                                  "steps_per_s": np.round(sps.steps_per_s, 2).tolist()}}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
