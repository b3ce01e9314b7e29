"""DSpark vs the decoders people use, same target, same held-out prompts, greedy, one run.

Peers at batch size 1: transformers ``generate`` (plain), transformers assisted generation with an
AR draft model (``assistant_model=``: a tiny-100k LM trained on the same target-regenerated
data), divelab plain decoding, EAGLE-style AR drafter, DFlash-style parallel drafter (fixed-γ),
DSpark (Markov head + Algorithm 1 with the SPS curve profiled at start-up), each at every γ
asked. Outputs are checked token-identical to plain greedy. Then a load point (continuous
batching, ``--load`` concurrent requests): divelab plain vs DFlash-style vs DSpark.

The drafters are the ones ``reproduce(scale="quick")`` trains for the ``small`` target (shared
cache), so a second run does not train. Torch runs single-threaded by default (``--threads``):
1-M-parameter models are dispatch-bound and intra-op threads only add synchronisation.

    python benchmarks/serving_dspark.py --target small --prompts 16 --max-new-tokens 64 \
        --gammas 4 8 --load 8 --out benchmarks/serving_dspark.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="small", choices=["smoke", "small", "quick"], help="zoo target")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--prompt-len", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--gammas", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--load", type=int, default=8, help="concurrency for the batched point")
    ap.add_argument("--repeats", type=int, default=3, help="timed passes over the prompts (median)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="serving_dspark.json")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from divelab.cache import entry_path, stable_hash
    from divelab.lm import build_model, encode_split, pretrained
    from divelab.lm.train import TrainConfig, train
    from divelab.lm.zoo import recipe, recipe_key
    from divelab.scale import pick
    from divelab.serving.dspark import SpecEngine, calibrate, measure_sps, plain_greedy
    from divelab.serving.dspark.engine import Request
    from divelab.serving.dspark.reproduce import _prompts, build_drafters
    from divelab.serving.dspark.training import DrafterTrainConfig, regenerate

    # the reproduction scale whose drafters match this target (so they are shared, cached)
    scale = {"smoke": "smoke", "small": "quick", "quick": "full"}[args.target]
    torch.manual_seed(args.seed)
    target, tok = pretrained(args.target)
    target.eval()
    train_tok, test_tok = encode_split(tok, "train"), encode_split(tok, "test")
    tkey = f"zoo-{recipe_key(recipe(args.target))}"
    gammas = sorted(set(args.gammas))
    all_g = sorted(set(pick(scale, smoke=[4], quick=[4, 8, 16], full=[4, 8, 16])) | set(gammas))
    tcfg = DrafterTrainConfig(steps=pick(scale, smoke=3, quick=200, full=1500), seed=args.seed, lr=5e-3,
                              batch_size=pick(scale, smoke=2, quick=8, full=16))
    dcfg = {"window": 16, "rank": pick(scale, smoke=8, quick=32, full=64)}
    n_regen = pick(scale, smoke=16, quick=512, full=4096)
    t_train = time.perf_counter()
    drafters = build_drafters(target, tkey, train_tok, scale, args.seed, tcfg, dcfg, all_g,
                              pick(scale, smoke=4, quick=8, full=8), n_regen)
    ar = drafters[("ar", max(all_g))]
    prompts = _prompts(test_tok, args.prompts, args.prompt_len, args.seed + 1)
    cal = {g: calibrate(target, drafters[("markov", g)], _prompts(encode_split(tok, "val"), 8, 16, args.seed + 2),
                        gamma=g) for g in gammas}

    # an AR assistant for transformers' assisted generation: the tiny-100k config with the target's
    # vocabulary, trained on the same target-regenerated data as the drafters (cached)
    akey = stable_hash({"assistant": tkey, "n": n_regen, "seed": args.seed, "steps": 300, "v": 1})
    apath = entry_path("dspark-assistants", akey)
    if (apath / "config.json").exists():
        from transformers import AutoModelForCausalLM

        assistant = AutoModelForCausalLM.from_pretrained(apath, local_files_only=True)
    else:
        from divelab.cache import atomic_dir

        data = regenerate(target, train_tok, n_regen, tcfg.seq_len + 16, temperature=1.0, seed=args.seed)
        assistant = build_model("tiny-100k", target.config.vocab_size, seed=args.seed)
        train(assistant, data.reshape(-1), config=TrainConfig(steps=300, batch_size=16, seq_len=96, lr=5e-3,
                                                                warmup=10, eval_every=0, seed=args.seed),
              description="assistant")
        with atomic_dir(apath) as tmp:
            assistant.save_pretrained(tmp)
    assistant.eval()
    train_s = time.perf_counter() - t_train
    sps = measure_sps(target)

    ref = [plain_greedy(target, p, args.max_new_tokens) for p in prompts]
    n_tok = sum(len(r) for r in ref)
    results: dict = {}

    def timed(name: str, fn, **extra) -> None:
        fn(prompts[0])  # warm-up
        times, outs = [], None
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            outs = [fn(p) for p in prompts]
            times.append(time.perf_counter() - t0)
        dt = statistics.median(times)
        results[name] = {"tokens_per_s": n_tok / dt, "seconds": dt, "identical_to_greedy": outs == ref,
                         **{k: v() if callable(v) else v for k, v in extra.items()}}
        print(f"{name:55s} {n_tok / dt:9.1f} tok/s  identical={outs == ref}", flush=True)

    def hf(p, **kw):
        out = target.generate(torch.tensor([p]), max_new_tokens=args.max_new_tokens, do_sample=False,
                              min_new_tokens=args.max_new_tokens, pad_token_id=0, **kw)
        return out[0, len(p):].tolist()

    with torch.no_grad():
        timed("transformers generate", hf)
        timed("transformers assisted (assistant_model)", lambda p: hf(p, assistant_model=assistant))
        plain = SpecEngine(target, None, sps=sps)
        timed("divelab plain", lambda p: plain.generate(p, args.max_new_tokens))
        for g in gammas:
            for name, d, sched, c in (("eagle-style", ar, "fixed", None),
                                      ("dflash-style", drafters[("parallel", g)], "fixed", None),
                                      ("dspark markov, fixed-γ", drafters[("markov", g)], "fixed", None),
                                      ("dspark", drafters[("markov", g)], "dspark", cal[g])):
                eng = SpecEngine(target, d, sched, sps=sps, calibration=c, gamma=g)
                steps: list = []
                orig = eng.step

                def counting(states, force_ell=None, _o=orig, _s=steps):
                    rec = _o(states, force_ell)
                    _s.append(rec)
                    return rec

                eng.step = counting  # type: ignore[method-assign]
                timed(f"divelab {name} ({sched}) γ={g}", lambda p, e=eng: e.generate(p, args.max_new_tokens),
                      gamma=g, tau=lambda s=steps: float(np.mean([r.accepted.sum() + len(r.accepted) for r in s])),
                      mean_verify_len=lambda s=steps: float(np.mean([r.ell.mean() + 1 for r in s])))
        base = results["transformers generate"]["tokens_per_s"]
        for r in results.values():
            r["speedup_vs_generate"] = r["tokens_per_s"] / base

        batched = {}
        g = max(gammas)
        reqs = [Request(prompts[i % len(prompts)], args.max_new_tokens, 0.0, i) for i in range(2 * args.load)]
        for name, d, sched, c in (("divelab plain", None, "fixed-0", None),
                                  (f"dflash-style fixed-γ γ={g}", drafters[("parallel", g)], "fixed", None),
                                  (f"dspark γ={g}", drafters[("markov", g)], "dspark", cal[g])):
            eng = SpecEngine(target, d, sched, sps=sps, calibration=c, gamma=g if d is not None else None)
            eng.serve(reqs[: args.load], max_batch=args.load)  # warm-up
            res = eng.serve(reqs, max_batch=args.load)
            batched[name] = {"throughput_tok_s": res.throughput, "per_user_tok_s": res.per_user_speed,
                             "tau": res.tau, "identical_to_greedy":
                             all(res.outputs[i] == ref[i % len(prompts)] for i in res.outputs)}
            print(f"load {args.load}: {name:35s} {res.throughput:8.1f} tok/s aggregate, "
                  f"{res.per_user_speed:7.1f} tok/s/user", flush=True)
    out = {"target": args.target, "target_parameters": sum(p.numel() for p in target.parameters()),
           "device": "cpu", "threads": torch.get_num_threads(), "gammas": gammas, "prompts": args.prompts,
           "prompt_len": args.prompt_len, "max_new_tokens": args.max_new_tokens, "repeats": args.repeats,
           "drafter_training_s": train_s, "batch_size_1": results, f"batched_load_{args.load}": batched,
           "sps_profile": {"B": sps.batch_sizes.tolist(), "steps_per_s": np.round(sps.steps_per_s, 2).tolist()}}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
