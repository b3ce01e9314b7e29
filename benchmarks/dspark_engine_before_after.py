"""Engine cost per token before (git HEAD copy of the package, put on sys.path as ``dspark_old`` by
the caller) and after the issue-#24 changes: same target, same drafter weights, greedy, so both
engines make identical decisions (checked) and the ratio is pure engine overhead.

    python benchmarks/dspark_engine_before_after.py /path/with/dspark_old
"""

from __future__ import annotations

import json
import sys
import time

import torch


def main() -> None:
    sys.path.insert(0, sys.argv[1])
    torch.set_num_threads(1)
    import dspark_old as old

    import divelab.serving.dspark as new
    from divelab.lm import encode_split, pretrained

    target, tok = pretrained("small")
    target.eval()
    test = encode_split(tok, "test")
    prompts = [test[i * 500: i * 500 + 16].tolist() for i in range(4)]
    torch.manual_seed(0)
    dn = new.Drafter.for_target(target, new.DrafterConfig(kind="markov", gamma=8, window=16, rank=32))
    do = old.Drafter.for_target(target, old.DrafterConfig(kind="markov", gamma=8, window=16, rank=32))
    do.load_state_dict(dn.state_dict())
    sps = new.SPSCurve.synthetic_accelerator(0.01, 64)
    sps_o = old.SPSCurve.synthetic_accelerator(0.01, 64)
    res = {}
    for name, mod, d, s in (("before", old, do, sps_o), ("after", new, dn, sps)):
        # the HF engine on both sides (the lean engine came later): the ratio stays that of the same engine
        eng = mod.SpecEngine(target, d, "fixed", sps=s, gamma=8, **({"engine": "hf"} if mod is new else {}))
        eng.generate(prompts[0], 8)
        outs, t0 = [], time.perf_counter()
        for _ in range(2):
            outs = [eng.generate(p, 48) for p in prompts]
        dt = (time.perf_counter() - t0) / 2
        reqs = [mod.Request(prompts[i % 4], 48, 0.0, i) for i in range(8)]
        eng.serve(reqs[:2], max_batch=8)
        t1 = time.perf_counter()
        sv = eng.serve(reqs, max_batch=8)
        dt8 = time.perf_counter() - t1
        res[name] = {"batch1_tok_s": sum(map(len, outs)) / dt, "load8_tok_s": sv.total_tokens / dt8, "outs": outs,
                     "serve_outs": [sv.outputs[i] for i in range(8)]}
        print(name, round(res[name]["batch1_tok_s"], 1), round(res[name]["load8_tok_s"], 1), flush=True)
    same = res["before"]["outs"] == res["after"]["outs"] and res["before"]["serve_outs"] == res["after"]["serve_outs"]
    summary = {k: {kk: v for kk, v in r.items() if "outs" not in kk} for k, r in res.items()}
    summary["identical_outputs"] = same
    summary["speedup_batch1"] = res["after"]["batch1_tok_s"] / res["before"]["batch1_tok_s"]
    summary["speedup_load8"] = res["after"]["load8_tok_s"] / res["before"]["load8_tok_s"]
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
