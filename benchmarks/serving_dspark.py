"""DSpark vs the strongest decoders we can run, on real targets, interleaved in one run, T=0 and T=1.

Targets (built and cached by ``benchmarks/dspark_assets.py``):
* ``smollm2`` — SmolLM2-135M-Instruct with the drafter ``divelab dspark train-drafter --target
  smollm2-135m-instruct`` builds (the one ``divelab serve`` uses), on held-out chat prompts (topics no
  drafter saw);
* ``tiny`` — the zoo tiny-1m trained 4× longer than the degenerate ``small`` target.
distinct-2/4 of the target's own outputs is printed beside every τ: a high τ on a repetitive
target says little about the drafter.

Peers at batch 1 (each prompt runs every peer before the next prompt: interleaved, so a burst of
machine load hits all peers alike): transformers ``generate``; prompt-lookup decoding and assisted
generation with a tiny same-vocabulary LM trained on the target's own responses, each with its
token count tuned over {2, 4, 8} on a warm-up prompt; on SmolLM2,
llama.cpp (``llama-cpp-python``) on the shipped Q4_1 GGUF, plain and in its own prompt-lookup
speculative mode (tuned alike; skipped with the reason recorded where it is not installed); divelab plain decoding; the drafters at fixed
γ and DSpark with Algorithm 1 (SPS profiled at start-up, STS-calibrated confidences). Speed-ups carry
a 95 % interval over prompts; DSpark rows carry a profile (drafting / verification / other). Greedy
outputs are checked token-identical to plain greedy. Under load: HF static batched ``generate`` vs
divelab plain and DSpark continuous batching, aggregate and per-user tokens/s at each load. The
machine's load average before and after is recorded: near 0 before means an idle machine.

    python benchmarks/serving_dspark.py --targets smollm2 --threads 2 --out benchmarks/serving_dspark.json
    python benchmarks/serving_dspark.py --quick --targets tiny --out /tmp/tiny.json
    python benchmarks/serving_dspark.py --targets smollm2 --threads 2 --engines lean --fmt fp32 bf16 --out FILE

``--engines`` picks the target engines the divelab rows run on (default ``hf``, the HF model's batched
forward): ``lean`` adds the same rows on the lean engine (static
cache, k-token verification, in-place rollback; weights in ``--fmt``), named ``... [lean FMT]``, with
their SPS profiled on the lean forward and their greedy identity checked against the lean engine's own
plain greedy decoding; several formats (``--fmt fp32 bf16``) each get their rows.

CPU here; ``--device cuda`` runs the same code on a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))


def distinct_n(seqs: list[list[int]], n: int) -> float:
    grams = [tuple(s[i: i + n]) for s in seqs for i in range(len(s) - n + 1)]
    return len(set(grams)) / max(1, len(grams))


def machine_state() -> dict:
    """What the numbers were measured on: a load average near 0 before the run means an idle machine."""
    import os
    import platform

    return {"load_average_1_5_15": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "torch": torch.__version__, "machine": platform.machine(),
            "processor": platform.processor() or platform.machine()}


def bench_target(name: str, args, log=print) -> dict:
    from divelab import stats
    from divelab.serving.dspark import Request, SpecEngine, measure_sps, plain_greedy
    from divelab.serving.dspark.lean_target import LeanTarget, measure_lean_sps
    from dspark_assets import load_assets, load_smollm2

    if name == "smollm2":
        a = load_smollm2(seed=args.seed, n_prompts=args.prompts + 1)
        drafters = {"DSpark Markov": a["drafter"]}
        g = a["drafter"].config.gamma
    else:
        a = load_assets(name, seed=args.seed)
        drafters = {"EAGLE-style AR drafter + KV cache": a["ar"], "DSpark Markov": a["markov"]}
        g = args.gamma
    dev = torch.device(args.device)
    target = a["target"].to(dev)
    drafters = {k: d.to(dev) for k, d in drafters.items()}
    mk = drafters["DSpark Markov"]
    assistant = a["assistant"].to(dev)
    warm, prompts = a["prompts"][0], a["prompts"][1: args.prompts + 1]  # the first prompt only tunes and warms up
    m, eos, pad = args.max_new_tokens, a["eos"], a["pad"]
    t0 = time.perf_counter()
    sps = measure_sps(target, batch_sizes=[1, 2, 4, 8, 16, 32], repeats=args.sps_repeats)
    sps_s = time.perf_counter() - t0
    ref = [plain_greedy(target, p, m, eos_token_id=eos) for p in prompts]
    # each target engine the divelab rows run on: (row-name suffix, engine argument, SPS curve, greedy reference)
    kinds: dict = {}
    if "hf" in args.engines:
        kinds["hf"] = ("", "hf", sps, ref)
    for fmt in args.fmt if "lean" in args.engines else ():
        lt = LeanTarget(target, fmt)  # one set of converted weights for every lean row of this format
        lean_sps = measure_lean_sps(lt, batch_sizes=[1, 2, 4, 8, 16, 32], repeats=args.sps_repeats)
        lean_plain = SpecEngine(target, None, sps=lean_sps, eos_token_id=eos, engine=lt)
        kinds[f"lean {fmt}"] = (f" [lean {fmt}]", lt, lean_sps, [lean_plain.generate(p, m) for p in prompts])
    out: dict = {"target": name, "parameters": sum(p.numel() for p in target.parameters()),
                 "drafter_parameters": sum(p.numel() for n_, p in mk.named_parameters()),
                 "draft_vocab": int(len(mk.vocab_ids)), "gamma": g, "prompts": len(prompts),
                 "assistant_parameters": sum(p.numel() for p in assistant.parameters()),
                 "assets": a["meta"], "sps_profile_s": sps_s,
                 "sps": {"B": sps.batch_sizes.tolist(), "steps_per_s": np.round(sps.steps_per_s, 2).tolist()},
                 "engines": {k: {"sps": {"B": c.batch_sizes.tolist(), "steps_per_s": np.round(c.steps_per_s, 2).tolist(),
                                         "label": c.label}} for k, (_, _, c, _) in kinds.items()},
                 "greedy_distinct_2": distinct_n(ref, 2), "greedy_distinct_4": distinct_n(ref, 4)}
    log(f"[{name}] target greedy distinct-2 {out['greedy_distinct_2']:.3f} distinct-4 {out['greedy_distinct_4']:.3f}")

    def hf(p, temp, **kw):
        ids = torch.tensor([p], device=dev)
        samp = {"do_sample": True, "temperature": 1.0, "top_k": 0, "top_p": 1.0} if temp > 0 else {"do_sample": False}
        o = target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=m, eos_token_id=eos,
                            pad_token_id=pad, **samp, **kw)
        return o[0, len(p):].tolist()

    def assisted(k):
        def f(p, temp):
            assistant.generation_config.num_assistant_tokens = k
            assistant.generation_config.num_assistant_tokens_schedule = "constant"
            return hf(p, temp, assistant_model=assistant)
        return f

    # llama.cpp on the GGUF SmolLM2 ships as (SmolLM2 only; skipped with a reason where it is not installed)
    llama_plain, llama_lookup = None, {}
    if name == "smollm2" and args.device == "cpu" and not args.no_llama:
        from lean_decoding import llama_cpp_peer

        n_ctx = max(len(p) for p in a["prompts"]) + m + 16
        llama_plain, why = llama_cpp_peer(args.threads, n_ctx, eos)
        if llama_plain is None:
            out["peers_failed"] = {"llama.cpp Q4_1 GGUF": why}
        else:
            from lean_decoding import LLAMA_INFO

            llama_lookup = {k: llama_cpp_peer(args.threads, n_ctx, eos, lookup=k)[0] for k in (2, 4, 8)}
            out["llama_cpp"] = dict(LLAMA_INFO)
    results: dict = {}
    for temp in args.temps:
        engines, greedy_ref = {}, {}
        for sfx, eng_arg, curve, kref in kinds.values():
            engines[f"divelab plain{sfx}"] = SpecEngine(target, None, sps=curve, temperature=temp, eos_token_id=eos,
                                                        seed=args.seed, engine=eng_arg)
            for dn, d in drafters.items():
                engines[f"{dn}, fixed γ={g}{sfx}"] = SpecEngine(target, d, "fixed", sps=curve, gamma=g,
                                                               temperature=temp, eos_token_id=eos, seed=args.seed,
                                                               engine=eng_arg)
            engines[f"DSpark Markov + Alg. 1, γ≤{g}{sfx}"] = SpecEngine(
                target, mk, "dspark", sps=curve, gamma=g, calibration=a.get("calibration"), temperature=temp,
                eos_token_id=eos, seed=args.seed, engine=eng_arg)
            greedy_ref.update({nm: kref for nm in engines if nm not in greedy_ref})
        peers = {"transformers generate": lambda p, t: hf(p, t)}
        # the peers' own knobs are tuned on the warm-up prompt (not timed in the table): each gets its best
        tune: dict = {"prompt lookup": {}, "assisted": {}, "llama.cpp lookup": {}}
        for k in (2, 4, 8):
            t1 = time.perf_counter()
            hf(warm, temp, prompt_lookup_num_tokens=k)
            tune["prompt lookup"][k] = time.perf_counter() - t1
            t1 = time.perf_counter()
            assisted(k)(warm, temp)
            tune["assisted"][k] = time.perf_counter() - t1
            if llama_lookup.get(k) is not None:
                t1 = time.perf_counter()
                llama_lookup[k](warm, temp, args.seed, m)
                tune["llama.cpp lookup"][k] = time.perf_counter() - t1
        best_pld = min(tune["prompt lookup"], key=tune["prompt lookup"].get)
        best_k = min(tune["assisted"], key=tune["assisted"].get)
        peers[f"prompt lookup ({best_pld} tokens, tuned)"] = (lambda p, t, k=best_pld: hf(p, t, prompt_lookup_num_tokens=k))
        peers[f"assisted generation (tiny-1m assistant, k={best_k} tuned)"] = assisted(best_k)
        if llama_plain is not None:  # the shipped Q4_1 GGUF on llama.cpp's own kernels, seeded per prompt
            peers["llama.cpp Q4_1 GGUF"] = (lambda p, t: llama_plain(p, t, args.seed + len(p), m))
        if tune["llama.cpp lookup"]:
            best_l = min(tune["llama.cpp lookup"], key=tune["llama.cpp lookup"].get)
            peers[f"llama.cpp Q4_1 GGUF, prompt lookup ({best_l} tokens, tuned)"] = (
                lambda p, t, f=llama_lookup[best_l]: f(p, t, args.seed + len(p), m))
        for nm, e in engines.items():
            peers[nm] = (lambda p, t, e=e: e.generate(p, m))
        rec: dict = {nm: {"seconds": 0.0, "tokens": 0, "outs": [], "steps": [], "per_prompt": []} for nm in peers}
        for nm, e in engines.items():  # count rounds for τ
            orig = e.step

            def counting(states, force_ell=None, _o=orig, _r=rec[nm]["steps"]):
                r = _o(states, force_ell)
                _r.append(r)
                return r
            e.step = counting  # type: ignore[method-assign]
        for fn in peers.values():  # warm-up
            fn(warm[:8], temp)
        for rec_ in rec.values():
            rec_["steps"].clear()
        torch.manual_seed(args.seed)
        for rep in range(args.repeats):
            for p in prompts:  # interleaved: every peer on this prompt before the next prompt
                for nm, fn in peers.items():
                    t1 = time.perf_counter()
                    o = fn(p, temp)
                    dt = time.perf_counter() - t1
                    rec[nm]["seconds"] += dt
                    rec[nm]["tokens"] += len(o)
                    rec[nm]["per_prompt"].append((len(o), dt))
                    if rep == 0:
                        rec[nm]["outs"].append(o)
        rows = {}
        base = rec["transformers generate"]["tokens"] / rec["transformers generate"]["seconds"]
        gen_pp = np.array([n / t for n, t in rec["transformers generate"]["per_prompt"]])
        for nm, r in rec.items():
            tps = r["tokens"] / r["seconds"]
            # per prompt (and repeat): this peer's tokens/s over generate's on the same prompt; the
            # interval is over prompts, the unit that varies (a t-interval of the mean ratio)
            ratio = np.array([n / t for n, t in r["per_prompt"]]) / gen_pp
            row = {"tokens_per_s": tps, "speedup_vs_generate": tps / base,
                   "speedup_per_prompt_mean": float(ratio.mean()),
                   "speedup_per_prompt_ci95": list(stats.mean_ci(ratio)) if len(ratio) > 1 else None,
                   "tokens": r["tokens"], "distinct_2": distinct_n(r["outs"], 2), "distinct_4": distinct_n(r["outs"], 4)}
            # a divelab row's per-prompt ratio against the strongest references a CPU user has: the same
            # engine's plain decoding (what speculation must beat) and llama.cpp on the shipped GGUF
            sfx = next((k[0] for k in kinds.values() if k[0] and nm.endswith(k[0])), "")
            for key, ref_nm in (("speedup_vs_plain_same_engine", f"divelab plain{sfx}"),
                                ("speedup_vs_llama_cpp", "llama.cpp Q4_1 GGUF")):
                if nm in engines and ref_nm in rec and ref_nm != nm:
                    rr = np.array([n / t for n, t in r["per_prompt"]]) / np.array(
                        [n / t for n, t in rec[ref_nm]["per_prompt"]])
                    row[key] = {"peer": ref_nm, "mean": float(rr.mean()),
                                "ci95": list(stats.mean_ci(rr)) if len(rr) > 1 else None}
            row["tok_s_per_prompt"] = [round(n / t, 3) for n, t in r["per_prompt"]]
            if temp == 0:  # a lean row against the lean engine's own plain greedy decoding
                row["identical_to_greedy"] = r["outs"] == greedy_ref.get(nm, ref)
            if r["steps"]:
                row["tau"] = float(np.mean([s.accepted.sum() + len(s.accepted) for s in r["steps"]]))
                row["mean_verify_len"] = float(np.mean([s.ell.mean() + 1 for s in r["steps"]]))
                step_s = sum(s.step_s for s in r["steps"])
                # where a round's time goes: drafting (backbone + sequential head), the target's
                # verification forward, and the rest (acceptance, cache rollback, bookkeeping)
                row["profile_share"] = {"drafting": sum(s.draft_s for s in r["steps"]) / step_s,
                                        "verification": sum(s.verify_s for s in r["steps"]) / step_s,
                                        "other": 1 - sum(s.draft_s + s.verify_s for s in r["steps"]) / step_s}
            if nm.startswith(("assisted", "prompt lookup")):
                row["tuning_s_per_k"] = tune["assisted" if nm.startswith("assisted") else "prompt lookup"]
            rows[nm] = row
            log(f"[{name} T={temp}] {nm:52s} {tps:7.1f} tok/s  ×{tps / base:4.2f}  τ={row.get('tau', float('nan')):4.2f}"
                f"  distinct-4 {row['distinct_4']:.2f}" + (f"  identical={row['identical_to_greedy']}"
                                                            if temp == 0 else ""))
        results[f"T={temp:g}"] = rows
    out["batch_size_1"] = results

    # ---------------------------------------------------------------- under load (greedy)
    load_rows = {}
    for load in args.loads:
        ps = [prompts[i % len(prompts)] for i in range(load)]
        row = {}
        # HF static batched generate: left-padded, one batch, everyone waits for the longest
        p_len = max(len(p) for p in ps)
        ids = torch.full((load, p_len), pad, dtype=torch.long, device=dev)
        att = torch.zeros_like(ids)
        for i, p in enumerate(ps):
            ids[i, p_len - len(p):] = torch.tensor(p, device=dev)
            att[i, p_len - len(p):] = 1
        t1 = time.perf_counter()
        o = target.generate(ids, attention_mask=att, max_new_tokens=m, do_sample=False, eos_token_id=eos,
                            pad_token_id=pad)
        dt = time.perf_counter() - t1
        ntok = sum(len([t for t in r[p_len:].tolist() if t != pad]) for r in o)
        row["HF static batched generate"] = {"throughput_tok_s": ntok / dt, "per_user_tok_s": ntok / load / dt}
        for sfx, eng_arg, curve, kref in kinds.values():
            for nm, d, sch in (("divelab plain", None, "fixed-0"), (f"DSpark Alg. 1 γ≤{g}", mk, "dspark"),
                               *((f"{dn} fixed γ={g}", d, "fixed") for dn, d in drafters.items())):
                e = SpecEngine(target, d, sch, sps=curve, gamma=g if d is not None else None, eos_token_id=eos,
                               calibration=a.get("calibration") if sch == "dspark" else None, engine=eng_arg)
                res = e.serve([Request(p, m, 0.0, i) for i, p in enumerate(ps)], max_batch=load)
                row[nm + sfx] = {"throughput_tok_s": res.throughput, "per_user_tok_s": res.per_user_speed,
                                 "tau": res.tau if d is not None else 1.0,
                                 "identical_to_greedy": all(res.outputs[i] == kref[i % len(prompts)]
                                                            for i in res.outputs)}
        for nm, r in row.items():
            log(f"[{name} load {load}] {nm:40s} {r['throughput_tok_s']:7.1f} tok/s total "
                f"{r['per_user_tok_s']:6.1f} tok/s/user")
        load_rows[str(load)] = row
    out["under_load_greedy"] = load_rows
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--targets", nargs="+", default=["tiny", "smollm2"], choices=["tiny", "smollm2"])
    ap.add_argument("--quick", action="store_true", help="bounded run: 2 prompts, 24 new tokens, 1 repeat")
    ap.add_argument("--prompts", type=int, default=16, help="held-out prompts timed (one more tunes and warms up)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--gamma", type=int, default=8)
    ap.add_argument("--pld", type=int, default=4, help="prompt_lookup_num_tokens")
    ap.add_argument("--temps", type=float, nargs="+", default=[0.0, 1.0])
    ap.add_argument("--loads", type=int, nargs="*", default=[1, 2, 4, 8],
                    help="concurrent requests of the under-load section (none: skip it; benchmarks/serving_load.py "
                         "measures the served engine)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--sps-repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--engines", nargs="+", default=["hf"], choices=["hf", "lean"],
                    help="target engines of the divelab rows (lean: CPU, Llama-family targets)")
    ap.add_argument("--fmt", nargs="+", default=["fp32"], choices=["fp32", "bf16", "int8"],
                    help="the lean engine's weight formats (each gets its own rows)")
    ap.add_argument("--no-llama", action="store_true", help="skip the llama.cpp peers (llama-cpp-python)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="serving_dspark.json")
    args = ap.parse_args()
    if args.quick:
        args.prompts, args.max_new_tokens, args.repeats, args.loads, args.sps_repeats = 2, 24, 1, [4], 3
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    from divelab.machine import numerics_facts
    from lean_verify_curve import code_state

    out = {"command": "python benchmarks/serving_dspark.py " + " ".join(sys.argv[1:]), "device": args.device,
           "threads": torch.get_num_threads(), "machine_before": machine_state(), "args": vars(args),
           "code": code_state(("src/divelab/serving", "benchmarks/serving_dspark.py", "benchmarks/dspark_assets.py")),
           "machine": numerics_facts(), "targets": {}}
    if "lean" in args.engines and args.device != "cpu":
        ap.error("the lean engine runs on the CPU: drop lean from --engines with --device cuda")
    for name in args.targets:
        out["targets"][name] = bench_target(name, args)
        out["wall_s"] = time.perf_counter() - t0
        out["machine_after"] = machine_state()
        tmp = Path(args.out).with_suffix(".tmp")
        tmp.write_text(json.dumps(out, indent=2))
        tmp.replace(args.out)  # never a half-written result file
    print(f"wrote {args.out} in {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
