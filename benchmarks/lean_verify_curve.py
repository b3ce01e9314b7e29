"""What a k-token forward costs on the lean decoding path, relative to a 1-token forward.

A speculative verifier scores k draft tokens in one target forward; it pays off only if that forward
costs little more than a 1-token step. For SmolLM2-135M-Instruct on this CPU, per weight format
(``fp32``, ``bf16``, ``int8``) and cached context (64, 256, 512 tokens): the median wall time of
``--repeats`` forwards of k = 1..16 new tokens (each followed by ``rollback(k)``, so the context stays
fixed; k interleaved within each repeat so drift hits every k alike), and its ratio to k = 1. The
target is k <= 8 at <= 1.25x. ``--compile`` adds the same curve at one context with
``torch.compile`` for the formats that compile, and the compile time.

    python benchmarks/lean_verify_curve.py              # writes benchmarks/lean_verify_curve.json
    python benchmarks/lean_verify_curve.py --quick --out /tmp/c.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch

from divelab.lm.lean import LeanLM

LEAN_SOURCES = ("src/divelab/lm/lean", "benchmarks/lean_verify_curve.py", "benchmarks/lean_decoding.py")


def code_state(extra: tuple[str, ...] = ()) -> dict:
    """The commit measured, and whether the lean path's source (and ``extra`` paths) differed from it."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    git = ["git", "-C", str(root)]
    head = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run([*git, "status", "--porcelain", "--", *LEAN_SOURCES, *extra],
                           capture_output=True, text=True).stdout.strip()
    return {"commit": head, "lean_source_dirty": bool(dirty)} | ({"source_dirty": bool(dirty)} if extra else {})


def curve(lean: LeanLM, context: int, ks: list[int], repeats: int) -> dict:
    lean.reset()
    lean.forward([(17 * i) % 1000 + 10 for i in range(context)], last_only=True)
    times: dict[int, list[float]] = {k: [] for k in ks}
    draft = [(31 * i) % 1000 + 10 for i in range(max(ks))]
    for k in ks:  # warm-up: first calls of a shape allocate
        lean.forward(draft[:k])
        lean.rollback(k)
    for _ in range(repeats):
        for k in ks:
            t0 = time.perf_counter()
            lean.forward(draft[:k])
            times[k].append(time.perf_counter() - t0)
            lean.rollback(k)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"context": context, "median_ms": {str(k): med[k] * 1e3 for k in ks},
            "ratio_to_k1": {str(k): med[k] / med[1] for k in ks},
            "iqr_ms": {str(k): (float(torch.tensor(v).quantile(0.75) - torch.tensor(v).quantile(0.25))) * 1e3
                       for k, v in times.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".json")))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--formats", default="fp32,bf16,int8")
    ap.add_argument("--contexts", default="64,256,512")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile'd forwards at context 256")
    ap.add_argument("--compile-formats", default="fp32,bf16")
    ap.add_argument("--compile-only", action="store_true",
                    help="only the compiled timings, added to an existing --out (the eager curves are kept)")
    ap.add_argument("--quick", action="store_true", help="3 repeats, k in 1,4,8, one context (a fast look)")
    args = ap.parse_args()
    from divelab.lm import load_model
    from divelab.machine import numerics_facts

    torch.set_num_threads(args.threads)
    ks = [1, 4, 8] if args.quick else list(range(1, 17))
    contexts = [64] if args.quick else [int(c) for c in args.contexts.split(",")]
    repeats = 3 if args.quick else args.repeats
    load_before = os.getloadavg()
    t_start = time.perf_counter()
    model, _ = load_model("smollm2-135m-instruct")
    result: dict = {"model": "SmolLM2-135M-Instruct", "threads": args.threads, "repeats": repeats, "ks": ks,
                    "target": "k <= 8 at <= 1.25x a 1-token forward", "load_average_before": load_before,
                    "code": code_state(), "machine": {"cpus": os.cpu_count(), **numerics_facts()}, "formats": {}}
    for fmt in [] if args.compile_only else args.formats.split(","):
        lean = LeanLM.from_hf(model, fmt, max_len=max(contexts) + max(ks) + 1)
        rows = [curve(lean, c, ks, repeats) for c in contexts]
        worst = max(r["ratio_to_k1"][str(k)] for r in rows for k in ks if k <= 8)
        result["formats"][fmt] = {"curves": rows, "worst_ratio_k_le_8": worst, "meets_target": worst <= 1.25}
        print(fmt, [(r["context"], round(r["median_ms"]["1"], 1), round(r["ratio_to_k1"][str(min(8, max(ks)))], 2))
                    for r in rows], flush=True)
        del lean
    if args.compile or args.compile_only:
        comp_before, comp_rows = os.getloadavg(), {}
        result["compiled"] = {"formats": comp_rows, "load_average_before": comp_before}
        for fmt in args.compile_formats.split(","):
            try:
                lean = LeanLM.from_hf(model, fmt, max_len=256 + max(ks) + 1, compile=True)
                t0 = time.perf_counter()
                lean.forward([10, 11], last_only=True)  # compiles the k > 1 graph
                lean.forward([12])  # and the k = 1 graph
                compile_s = time.perf_counter() - t0
                row = curve(lean, 256, [k for k in ks if k in (1, 2, 4, 8, 16)], repeats)
                comp_rows[fmt] = {"compile_s": compile_s, **row}
                print("compiled", fmt, round(compile_s), round(row["median_ms"]["1"], 1), flush=True)
            except Exception as exc:  # a failed compile is a result: eager stays the default
                comp_rows[fmt] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                print("compiled", fmt, "failed:", type(exc).__name__, flush=True)
    result["load_average_after"] = os.getloadavg()
    result["wall_s"] = time.perf_counter() - t_start
    if "compiled" in result:
        result["compiled"].update(load_average_after=result["load_average_after"], code=result["code"])
    if args.compile_only:  # keep the eager run's record; the compiled timings carry their own machine state
        result = {**json.loads(Path(args.out).read_text()), "compiled": result["compiled"]}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()


def render_markdown(b: dict) -> str:
    """The docs block (docs/lean-decoding.md, ``results:lean-verify-curve``) from a saved run."""
    shown = [k for k in (2, 4, 8, 12, 16) if k in b["ks"]]
    la = (b["load_average_before"][0], b["load_average_after"][0])
    lines = [f"SmolLM2-135M-Instruct on {b['machine']['cpus']} CPUs ({b['machine'].get('cpu_model', '?')}), "
             f"{b['threads']} torch threads, median of {b['repeats']} forwards per cell, load average {la[0]:.2f} "
             f"before and {la[1]:.2f} after. Cost of a k-token forward relative to a 1-token forward "
             f"(target: {b['target']}).", "",
             "| format | context | 1-token forward (ms) | " + " | ".join(f"k={k}" for k in shown)
             + " | worst k≤8 | meets target |", "|---" * (5 + len(shown)) + "|"]
    for fmt, f in b["formats"].items():
        for r in f["curves"]:
            lines.append(f"| {fmt} | {r['context']} | {r['median_ms']['1']:.1f} | "
                         + " | ".join(f"{r['ratio_to_k1'][str(k)]:.2f}x" for k in shown)
                         + f" | {max(r['ratio_to_k1'][str(k)] for k in b['ks'] if k <= 8):.2f}x | "
                         + ("yes" if max(r['ratio_to_k1'][str(k)] for k in b['ks'] if k <= 8) <= 1.25 else "no")
                         + " |")
    if b.get("compiled"):
        eager = {fmt: next(r for r in f["curves"] if r["context"] == 256) for fmt, f in b["formats"].items()
                 if any(r["context"] == 256 for r in f["curves"])}
        lines += ["", "With `compile=True` (`torch.compile`, context 256):", "",
                  "| format | compile time (s) | 1-token forward, compiled (ms) | eager (ms) | 8-token ratio, compiled |",
                  "|---|---|---|---|---|"]
        for fmt, c in b["compiled"]["formats"].items():
            if "error" in c:
                lines.append(f"| {fmt} | failed: {c['error'][:80].replace('|', '/')} | | | |")
                continue
            e = eager.get(fmt, {}).get("median_ms", {}).get("1")
            lines.append(f"| {fmt} | {c['compile_s']:.0f} | {c['median_ms']['1']:.1f} | "
                         f"{'' if e is None else f'{e:.1f}'} | {c['ratio_to_k1'].get('8', float('nan')):.2f}x |")
    return "\n".join(lines) + "\n"
