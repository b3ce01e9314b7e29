"""Continuations per second for cliff-token potentials (JSON out): the vectorised KV-cached batch sampler of
``divelab.interp.cliff_tokens`` beside ``divelab.lm.generate`` (same model, same prefixes, same batch sizes), on
the reproduction's tiny chain model. Potentials are the method's whole cost (the paper: ~4,000 GPU-hours).

    .venv/bin/python benchmarks/interp_cliff_tokens.py --rows 64 256 1024 --out cliff.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import torch

from divelab.interp.cliff_tokens.model import ChainModelSpec, load_chain_model
from divelab.interp.cliff_tokens.potential import sample_batch
from divelab.lm.sampling import generate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    model, tok, meta = load_chain_model(ChainModelSpec())
    prefix = tok("3 4 5 6 7:3+4=7 ", add_special_tokens=False)["input_ids"]
    eos = tok.eos_token_id
    res = {"model": f"chain model, {meta['params']} parameters", "prefix_tokens": len(prefix),
           "machine": {"platform": platform.platform(), "torch": torch.__version__, "cpu_count": os.cpu_count(),
                       "threads": 1, "load_average_1min": os.getloadavg()[0]}, "runs": []}
    for rows in args.rows:
        for name in ("cliff_tokens.sample_batch", "divelab.lm.generate"):
            speeds = []
            for r in range(args.repeats):
                t = time.perf_counter()
                if name.startswith("cliff"):
                    out = sample_batch(model, [prefix] * rows, max_new_tokens=40, eos=[eos], pad_id=0,
                                       generator=torch.Generator().manual_seed(r))
                    n_tok = sum(map(len, out))
                else:
                    g = generate(model, [prefix] * rows, max_new_tokens=40, eos_token_id=eos, pad_token_id=0, seed=r)
                    n_tok = sum(map(len, g.tokens))
                dt = time.perf_counter() - t
                speeds.append((rows / dt, n_tok / dt))
            speeds.sort()
            med = speeds[len(speeds) // 2]
            res["runs"].append({"sampler": name, "rows": rows, "continuations_per_s": round(med[0], 1),
                                "tokens_per_s": round(med[1], 1)})
            print(res["runs"][-1])
    res["machine"]["load_average_1min_after"] = os.getloadavg()[0]
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
