"""A first-token probe guarding ``divelab serve``: how well it separates, what it blocks, what it costs.

The model is SmolLM2-135M-Instruct with the safety LoRA that the first-token-probe reproduction builds
(cached by content key): it thinks inside ``<think>…</think>`` and then refuses harmful requests or
helps. Steps:

1. Probe: one trace per *training* request (the hand-written harmful, benign and borderline pools),
   sampled at temperature 1 and labelled refuse/comply by the regex vote; a probe on the middle layer is
   fitted at each position (``first``: the first thinking token; ``prompt_last``: the last prompt
   token) and saved as a guard file.
2. Held-out requests (acts and phrasings the tuning never used, and borderline requests of a kind it
   never saw), labelled the same way. Per position: the guard's AUROC against the model's own decision
   and against the request's kind (harmful vs benign), and the share of benign requests it flags (the
   false-block rate) and of harmful ones; the same for a text-only classifier on the request (TF-IDF
   word 1-2 grams + logistic regression, trained on the training requests).
3. Offline vs online: every held-out request scored offline (:func:`divelab.guard.score_prompts`) and
   by a live server (greedy ``/v1/completions``, one request at a time; then all at once, batched), and
   by ``/v1/guard/score``: equal scores counted, the largest difference, and decision agreement.
4. Speed: closed-loop users (1, 4, 8) streaming greedy completions against servers with no guard and
   with each guard (``annotate``), interleaved, ``--repeats`` times: time to first token and per-user
   tokens/s, and the guard-on / guard-off ratio with a t-interval over repeats.

    python benchmarks/serving_guard.py                      # writes benchmarks/serving_guard.json
    python benchmarks/serving_guard.py --quick --out /tmp/g.json   # a fast look (fewer requests, 1 repeat)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import platform
import sys
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serving_load import run_users  # noqa: E402  (the closed-loop load generator, shared)

POSITIONS = ("first", "prompt_last")


def text_classifier(train_texts: list[str], y: np.ndarray, seed: int):
    """TF-IDF of the request (word 1-2 grams) + balanced logistic regression; threshold = Youden point of
    5-fold out-of-fold scores on the training requests."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_curve
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline

    pipe = make_pipeline(TfidfVectorizer(ngram_range=(1, 2), lowercase=True),
                         LogisticRegression(class_weight="balanced", max_iter=5000))
    oof = cross_val_predict(pipe, train_texts, y, cv=StratifiedKFold(5, shuffle=True, random_state=seed),
                            method="decision_function")
    fpr, tpr, thr = roc_curve(y, oof)
    return pipe.fit(train_texts, y), float(thr[int(np.argmax(tpr - fpr))])


def separation(scores: np.ndarray, threshold: float, decided: np.ndarray, pools: np.ndarray, seed: int) -> dict:
    """AUROC vs the model's decision and vs the request kind; flag rates per pool (Wilson intervals)."""
    from divelab import stats

    out: dict = {}
    auc, lo, hi = stats.auroc_ci(decided, scores, seed=seed)
    out["auroc_vs_model_decision"] = {"auroc": auc, "ci": [lo, hi], "n": int(decided.size),
                                      "refusals": int(decided.sum())}
    kind = np.isin(pools, ["harmful-held-out"])
    m = np.isin(pools, ["harmful-held-out", "benign-held-out"])
    auc, lo, hi = stats.auroc_ci(kind[m].astype(int), scores[m], seed=seed)
    out["auroc_vs_request_kind"] = {"auroc": auc, "ci": [lo, hi], "n": int(m.sum())}
    flagged = scores >= threshold
    for pool in ("benign-held-out", "harmful-held-out", "borderline-more"):
        p = pools == pool
        k, n = int(flagged[p].sum()), int(p.sum())
        out[f"flag_rate_{pool}"] = {"rate": k / n, "ci": list(stats.proportion_ci(k, n)), "k": k, "n": n}
    out["false_block_rate"] = out["flag_rate_benign-held-out"]
    out["threshold"] = threshold
    return out


def post(base: str, path: str, body: dict) -> dict:
    r = httpx.post(base + path, json=body, timeout=600)
    r.raise_for_status()
    return r.json()


async def concurrent_scores(base: str, prompts: list[list[int]]) -> list[dict]:
    async with httpx.AsyncClient(timeout=600) as c:
        rs = await asyncio.gather(*(c.post(base + "/completions", json={"model": "m", "prompt": p, "max_tokens": 2,
                                                                        "temperature": 0}) for p in prompts))
    return [r.json()["divelab"]["guard"] for r in rs]


def agreement(offline: list[float], online: list[float], threshold: float) -> dict:
    a, b = np.asarray(offline), np.asarray(online)
    return {"n": int(a.size), "equal": int((a == b).sum()), "max_abs_diff": float(np.abs(a - b).max()),
            "same_decision": int(((a >= threshold) == (b >= threshold)).sum())}


def ratio_summary(on: list[float], off: list[float]) -> dict:
    from divelab import stats

    r = np.asarray(on) / np.asarray(off)
    lo, hi = stats.mean_ci(r)
    return {"ratio_mean": float(r.mean()), "ci": [lo, hi], "per_repeat": r.tolist()}


def render_markdown(b: dict) -> str:
    """The docs block (docs/guard.md, ``results:guard-served``) from a saved run, so the page never drifts."""

    def pct(e: dict) -> str:
        return f"{e['k']}/{e['n']} ({e['rate']:.0%}, {e['ci'][0]:.0%}–{e['ci'][1]:.0%})"

    def auc(e: dict) -> str:
        return f"{e['auroc']:.2f} ({e['ci'][0]:.2f}–{e['ci'][1]:.2f})"

    rows = [("guard, first thinking token", b["positions"]["first"]),
            ("guard, last prompt token", b["positions"]["prompt_last"]),
            ("text-only classifier on the request", b["text_classifier"])]
    h = b["held_out"]
    lines = [f"`{b['command'].strip()}` on {b['cpus']} CPUs ({b['threads']} torch threads), load average "
             f"{b['load_average_before'][0]} before and {b['load_average_after'][0]} after; probe on layer "
             f"{b['layer']}, trained on {b['train']['n']} requests ({b['train']['refusals']} refused), measured on "
             f"{h['n']} held-out requests ({h['refusals']} refused). Intervals are 95 %.", "",
             "| scorer | AUROC vs the model's decision | AUROC harmful vs benign | flags benign (false blocks) "
             "| flags harmful | flags borderline |", "|---|---|---|---|---|---|"]
    for name, e in rows:
        lines.append(f"| {name} | {auc(e['auroc_vs_model_decision'])} | {auc(e['auroc_vs_request_kind'])} | "
                     f"{pct(e['flag_rate_benign-held-out'])} | {pct(e['flag_rate_harmful-held-out'])} | "
                     f"{pct(e['flag_rate_borderline-more'])} |")
    lines += ["", "| live server vs offline scorer | one request at a time | all at once (batched) | "
              "`/v1/guard/score` |", "|---|---|---|---|"]
    for pos, e in b["positions"].items():
        cells = []
        for k in ("one_at_a_time", "all_at_once_batched", "guard_score_endpoint"):
            a = e["online_vs_offline"][k]
            cells.append(f"{a['equal']}/{a['n']} equal, max difference {a['max_abs_diff']:.1e}, "
                         f"{a['same_decision']}/{a['n']} same decision")
        lines.append(f"| {pos} | " + " | ".join(cells) + " |")
    sp = b["speed"]
    lines += ["", f"Guard on ÷ guard off ({sp['repeats']} repeats, {sp['requests_per_user']} streamed requests per user "
              f"of {sp['max_tokens']} tokens, policy `{sp['policy']}`; mean ratio and t-interval over repeats; "
              "1.00 is no cost):", "",
              "| users | TTFT, first token | per-user speed, first token | TTFT, last prompt token | "
              "per-user speed, last prompt token |", "|---|---|---|---|---|"]
    for point, r in sp["results"].items():
        cells = []
        for pos in ("first", "prompt_last"):
            o = r[f"overhead_{pos}"]
            for k in ("ttft_ratio", "per_user_speed_ratio"):
                cells.append(f"{o[k]['ratio_mean']:.2f} ({o[k]['ci'][0]:.2f}–{o[k]['ci'][1]:.2f})")
        lines.append(f"| {point.split()[0]} | " + " | ".join(cells) + " |")
    for pos, name in (("first", "first thinking token"), ("prompt_last", "last prompt token")):
        o = [r[f"overhead_{pos}"] for r in sp["results"].values()]
        ttft = max(x["ttft_ratio"]["ratio_mean"] for x in o)
        speed = min(x["per_user_speed_ratio"]["ratio_mean"] for x in o)
        met = ttft <= 1.05 and speed >= 0.95
        lines.append(f"\nGuard at the {name}: the worst mean TTFT ratio is {ttft:.2f} and the worst mean per-user "
                     f"speed ratio {speed:.2f}, so the goal of at most 5 % overhead is "
                     f"{'met' if met else 'not met'} on these means.")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", default="1,4,8")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--requests-per-user", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=32, help="tokens per streamed request (speed)")
    ap.add_argument("--trace-tokens", type=int, default=80, help="tokens sampled per trace (labels)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="12 requests per pool, 1 repeat: a fast look, not a record")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/serving_guard.json"))
    a = ap.parse_args()

    import torch

    from divelab.cache import atomic_write_bytes, entry_path, stable_hash
    from divelab.guard import model_identity, score_prompts
    from divelab.oversight.first_token.harvest import harvest
    from divelab.oversight.first_token.labels import default_refusal_vote
    from divelab.oversight.first_token.pipeline import ProbeSettings, guard_probe
    from divelab.oversight.first_token.real_llm import BENIGN, BORDERLINE, BORDERLINE_MORE, FORMAT, HARMFUL
    from divelab.oversight.first_token.rollout import sample_rollouts
    from divelab.oversight.first_token.safety_tune import SafetyTuning, held_out_requests, safety_tuned
    from divelab.serving.server import BackgroundServer, create_app

    torch.set_num_threads(a.threads)
    t_start = time.time()
    load_before = [round(x, 2) for x in os.getloadavg()]
    tuning = SafetyTuning()
    model, tok, record = safety_tuned(tuning, FORMAT)
    model.eval()
    cap = 12 if a.quick else None
    train = ([("harmful", p) for p in HARMFUL[:cap]] + [("benign", p) for p in BENIGN[:cap]]
             + [("borderline", p) for p in BORDERLINE[:cap]])
    held = held_out_requests(tuning)
    held = [x for x in held if x[0] == "harmful-held-out"][:cap] + [x for x in held if x[0] == "benign-held-out"][:cap]
    held += [("borderline-more", p) for p in BORDERLINE_MORE[:cap]]
    labeler = default_refusal_vote(record["min_votes"])
    settings = ProbeSettings(fmt=FORMAT, folds=5, seed=a.seed, boot=1000)

    def rollouts(pairs: list[tuple[str, str]], seed: int):
        """Sampled and labelled once per model, requests and settings (a re-run after a failure resumes here)."""
        key = stable_hash({"model": model_identity(model)["weights"], "pairs": pairs, "n": a.trace_tokens,
                           "seed": seed, "votes": record["min_votes"]})
        path = entry_path("serving-guard-rollouts", key + ".pkl")
        if path.exists():
            return pickle.loads(path.read_bytes())
        rs = sample_rollouts(model, tok, [p for _, p in pairs], labeler, fmt=FORMAT, max_new_tokens=a.trace_tokens,
                             temperature=1.0, seed=seed, batch_size=24, metas=[{"pool": g} for g, _ in pairs])
        atomic_write_bytes(path, pickle.dumps(rs))
        return rs

    t0 = time.time()
    rs_train, rs_held = rollouts(train, a.seed), rollouts(held, a.seed + 1)
    sample_s = time.time() - t0
    y = np.array([r.label for r in rs_train])
    y_held = np.array([r.label for r in rs_held])
    pools = np.array([g for g, _ in held])
    acts = harvest(model, rs_train, batch_size=24)
    n_states = acts.first.shape[1]
    layer = (n_states - 1) // 2 + 1
    out: dict = {"command": " ".join(["python benchmarks/serving_guard.py", *sys.argv[1:]]),
                 "model": "smollm2-135m-instruct + safety LoRA (first-token-probe reproduction)",
                 "model_identity": model_identity(model)["weights"], "adapter": record["adapter"],
                 "host": platform.node(), "cpus": os.cpu_count(), "threads": torch.get_num_threads(),
                 "torch": torch.__version__, "load_average_before": load_before, "quick": a.quick,
                 "layer": layer, "trace_tokens": a.trace_tokens, "sampling_s": sample_s,
                 "train": {"n": int(y.size), "refusals": int(y.sum()),
                           "pools": {g: int(sum(1 for x, _ in train if x == g)) for g in ("harmful", "benign", "borderline")}},
                 "held_out": {"n": int(y_held.size), "refusals": int(y_held.sum()),
                              "refusals_by_pool": {g: [int(y_held[pools == g].sum()), int((pools == g).sum())]
                                                   for g in ("harmful-held-out", "benign-held-out", "borderline-more")}},
                 "positions": {}}
    held_ids = [r.prompt_ids for r in rs_held]
    texts_train = [p for _, p in train]
    clf, clf_thr = text_classifier(texts_train, y, a.seed)
    text_scores = clf.decision_function([p for _, p in held])
    out["text_classifier"] = separation(text_scores, clf_thr, y_held, pools, a.seed)
    guards = {}
    for pos in POSITIONS:
        g = guard_probe(model, acts.layer(layer, at=pos), y, settings, layer, pos)
        guards[pos] = g
        path = Path(os.environ.get("TMPDIR", "/tmp")) / f"serving_guard_{pos}.json"
        g.save(path)
        offline = [s.score for s in score_prompts(model, g, held_ids)]
        entry = {"oof_auroc_train": g.meta["oof_auroc"], "oof_auroc_train_ci": g.meta["oof_auroc_ci"],
                 **separation(np.asarray(offline), g.threshold, y_held, pools, a.seed)}
        app = create_app(model, tok, "m", guard=g, max_batch=8, max_queue=512, seed=a.seed)
        with BackgroundServer(app) as srv:
            alone = [post(srv.base_url, "/completions", {"model": "m", "prompt": p, "max_tokens": 2,
                                                         "temperature": 0})["divelab"]["guard"]["score"]
                     for p in held_ids]
            batched = [v["score"] for v in asyncio.run(concurrent_scores(srv.base_url, held_ids))]
            endpoint = [v["score"] for k in range(0, len(held_ids), 32)  # a batch holds at most 64 prompts
                        for v in post(srv.base_url, "/guard/score", {"model": "m", "prompt": held_ids[k:k + 32]})["data"]]
        entry["online_vs_offline"] = {"one_at_a_time": agreement(offline, alone, g.threshold),
                                      "all_at_once_batched": agreement(offline, batched, g.threshold),
                                      "guard_score_endpoint": agreement(offline, endpoint, g.threshold)}
        out["positions"][pos] = entry
        print(f"{pos}: AUROC vs decision {entry['auroc_vs_model_decision']['auroc']:.3f}, false-block "
              f"{entry['false_block_rate']['rate']:.2f}; alone equal {entry['online_vs_offline']['one_at_a_time']['equal']}"
              f"/{len(held_ids)}", flush=True)
    print(f"text classifier: AUROC vs decision {out['text_classifier']['auroc_vs_model_decision']['auroc']:.3f}, "
          f"false-block {out['text_classifier']['false_block_rate']['rate']:.2f}", flush=True)

    # ---- speed: no guard vs each guard, interleaved per repeat and load point
    users = [int(u) for u in a.users.split(",")]
    prompts = [r.prompt_ids for r in rs_held] * 4
    modes = {"off": None, **{f"guard_{p}": guards[p] for p in POSITIONS}}
    servers = {m: BackgroundServer(create_app(model, tok, "m", guard=g, max_batch=8, seed=a.seed)).start()
               for m, g in modes.items()}
    runs: dict = {f"{u} users": {m: [] for m in modes} for u in users}
    try:
        for srv in servers.values():  # warm-up
            asyncio.run(run_users(srv.base_url, "m", prompts[:1], 1, 4, False))
        for rep in range(1 if a.quick else a.repeats):
            for u in users:
                order = list(modes) if rep % 2 == 0 else list(modes)[::-1]
                for m in order:
                    k = u * a.requests_per_user
                    batch = prompts[(rep * 7) % len(rs_held):][:k] or prompts[:k]
                    summary, _ = asyncio.run(run_users(servers[m].base_url, "m", batch, u, a.max_tokens, False))
                    runs[f"{u} users"][m].append(summary)
                    print(f"rep {rep} {u} users {m:18s}: TTFT p50 {summary['ttft_s_p50']:.3f}s, per-user "
                          f"{summary['per_user_tok_s_mean']:.1f} tok/s", flush=True)
    finally:
        for srv in servers.values():
            srv.stop()
    speed: dict = {}
    for point, by_mode in runs.items():
        speed[point] = {m: {"ttft_s_p50": [s["ttft_s_p50"] for s in ss],
                            "per_user_tok_s": [s["per_user_tok_s_mean"] for s in ss]} for m, ss in by_mode.items()}
        off = speed[point]["off"]
        for p in POSITIONS:
            on = speed[point][f"guard_{p}"]
            speed[point][f"overhead_{p}"] = {
                "ttft_ratio": ratio_summary(on["ttft_s_p50"], off["ttft_s_p50"]),
                "per_user_speed_ratio": ratio_summary(on["per_user_tok_s"], off["per_user_tok_s"])}
    out["speed"] = {"users": users, "repeats": 1 if a.quick else a.repeats, "max_tokens": a.max_tokens,
                    "requests_per_user": a.requests_per_user, "policy": "annotate", "results": speed}
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    out["wall_s"] = time.time() - t_start
    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=2, default=float))
    tmp.replace(a.out)  # never a half-written result file
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()

