"""Open-loop load test of ``divelab serve``: DSpark vs the same server without speculation.

For each server mode (``dspark``: target + drafter; ``plain``: the same target, no drafter) and
each arrival rate, ``--requests`` streamed requests arrive as a Poisson process (open loop: a
request is sent at its arrival time whether or not earlier ones finished), bounded by
``--time-limit`` seconds per rate. With ``--users 1,4,16`` the load is a closed loop instead: that
many clients at once, each sending ``--requests-per-user`` requests one after another (per-user
speed and total throughput at each concurrency). Measured on the client side over loopback HTTP:

* per-user tokens/s  = completion tokens / (last chunk − first chunk) of each request (decode speed);
* TTFT               = first content chunk − send time;
* ITL p50 / p99      = gaps between chunks, each gap split evenly over the tokens it carried;
* total throughput   = all completion tokens / (last response end − first send).

Greedy decoding (temperature 0), so both modes must return identical texts; the run checks it.
τ (committed tokens per verification round) is read from the server's ``/metrics``.

    python benchmarks/serving_load.py --model small --drafter auto --rates 1,2,4 --requests 8
    python benchmarks/serving_load.py --model smollm2-135m-instruct --drafter none --chat --rates 0.5 --requests 4
    python benchmarks/serving_load.py --model small --drafter none --users 1,4,16 --threads 2   # closed loop
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from pathlib import Path

import httpx
import numpy as np


def auto_drafter(target) -> Path | None:
    """A cached DSpark drafter (Markov head, largest γ ≤ 8) whose sizes fit ``target``, from the
    DSpark reproduction's cache; None when there is none."""
    from divelab.cache import cache_root

    best = None
    for cfg_file in sorted((cache_root() / "dspark-drafters").glob("*/drafter_config.json")):
        c = json.loads(cfg_file.read_text())
        if (c["kind"] == "markov" and c["vocab_size"] == target.config.vocab_size and c["gamma"] <= 8
                and c.get("target_hidden", target.config.hidden_size) == target.config.hidden_size):
            if best is None or c["gamma"] > best[0]:
                best = (c["gamma"], cfg_file.parent)
    return None if best is None else best[1]


def prompts_for(tok, chat: bool, n: int, seed: int) -> list:
    if chat:  # held-out topics: no drafter trained on them
        from divelab.serving.dspark.chat_data import TEMPLATES, TEST_TOPICS

        return [[{"role": "user", "content": TEMPLATES[(i * 7) % len(TEMPLATES)].format(t=TEST_TOPICS[i % len(TEST_TOPICS)])}]
                for i in range(n)]
    from divelab.lm import encode_split

    val = encode_split(tok, "val")
    rng = np.random.default_rng(seed)
    return [val[s: s + 24].astype(int).tolist() for s in rng.integers(0, len(val) - 30, size=n)]


async def one_request(client: httpx.AsyncClient, url: str, body: dict, delay: float, chat: bool) -> dict:
    await asyncio.sleep(delay)
    sent = time.perf_counter()
    chunks: list[tuple[float, int]] = []
    text, tokens = [], 0
    async with client.stream("POST", url, json=body) as r:
        if r.status_code != 200:
            return {"status": r.status_code, "sent": sent, "end": time.perf_counter()}
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            d = json.loads(line[6:])
            if d.get("usage"):
                tokens = d["usage"]["completion_tokens"]
            for c in d.get("choices", []):
                piece = c.get("delta", {}).get("content") if chat else c.get("text")
                if piece:
                    chunks.append((time.perf_counter(), int(d.get("x_divelab_tokens", 1))))
                    text.append(piece)
    return {"status": 200, "sent": sent, "end": time.perf_counter(), "chunks": chunks, "text": "".join(text),
            "tokens": tokens}


def summarise(results: list[dict], wall: float) -> dict:
    ok = [r for r in results if r["status"] == 200 and r["chunks"]]
    ttft = [r["chunks"][0][0] - r["sent"] for r in ok]
    speed, itl = [], []
    for r in ok:
        ts = [t for t, _ in r["chunks"]]
        if r["tokens"] > 1 and ts[-1] > ts[0]:
            speed.append((r["tokens"] - r["chunks"][0][1]) / (ts[-1] - ts[0]))
        for (t0, _), (t1, k) in zip(r["chunks"], r["chunks"][1:], strict=False):
            itl += [(t1 - t0) / k] * k
    toks = sum(r["tokens"] for r in ok)

    def q(xs: list[float], p: float) -> float:
        return float(np.percentile(xs, p)) if xs else float("nan")

    return {"requests": len(results), "ok": len(ok), "rejected_429": sum(r["status"] == 429 for r in results),
            "completion_tokens": toks, "total_throughput_tok_s": toks / wall if wall > 0 else float("nan"),
            "per_user_tok_s_mean": float(np.mean(speed)) if speed else float("nan"),
            "per_user_tok_s_p50": q(speed, 50), "ttft_s_p50": q(ttft, 50), "ttft_s_p99": q(ttft, 99),
            "itl_s_p50": q(itl, 50), "itl_s_p99": q(itl, 99), "wall_s": wall}


async def run_rate(base: str, model: str, prompts: list, rate: float, max_tokens: int, chat: bool, seed: int,
                   time_limit: float) -> tuple[dict, list[str]]:
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, size=len(prompts)))
    arrivals = arrivals[arrivals <= time_limit]
    url, body = endpoint(base, model, max_tokens, chat)
    async with httpx.AsyncClient(timeout=httpx.Timeout(time_limit * 4 + 60)) as client:
        t0 = time.perf_counter()
        tasks = [one_request(client, url, body(p), float(a), chat) for p, a in zip(prompts, arrivals, strict=False)]
        res = await asyncio.gather(*tasks)
        wall = max(r["end"] for r in res) - t0 if res else 0.0
    return summarise(res, wall), [r.get("text", "") for r in res]


def endpoint(base: str, model: str, max_tokens: int, chat: bool):
    """The URL and a body maker for one streamed greedy request."""
    key = "messages" if chat else "prompt"
    return base + ("/chat/completions" if chat else "/completions"), lambda p: {
        "model": model, key: p, "max_tokens": max_tokens, "temperature": 0, "stream": True,
        "stream_options": {"include_usage": True}}


async def run_users(base: str, model: str, prompts: list, users: int, max_tokens: int,
                    chat: bool) -> tuple[dict, list[str]]:
    """Closed loop: ``users`` clients at once, each sending its share of ``prompts`` one after another."""
    url, body = endpoint(base, model, max_tokens, chat)
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0)) as client:
        t0 = time.perf_counter()

        async def user(k: int) -> list[dict]:
            return [await one_request(client, url, body(p), 0.0, chat) for p in prompts[k::users]]

        res = [r for rs in await asyncio.gather(*(user(k) for k in range(users))) for r in rs]
        wall = max(r["end"] for r in res) - t0 if res else 0.0
    return summarise(res, wall), [r.get("text", "") for r in res]


def scrape(base: str, name: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    for fam in text_string_to_metric_families(httpx.get(base.replace("/v1", "/metrics")).text):
        for s in fam.samples:
            if s.name == name:
                return float(s.value)
    return float("nan")


MEANS = ("per_user_tok_s_mean", "total_throughput_tok_s", "ttft_s_p50", "itl_s_p50", "itl_s_p99", "tau")


def summarise_repeats(by_mode: dict[str, list[dict]]) -> dict:
    """One load point over its repeats: each mode's metrics averaged over repeats (each repeat kept), and
    DSpark's per-user speed-up and throughput ratio to plain, paired by repeat, with a 95 % t-interval
    over repeats (None with one repeat)."""
    from divelab import stats

    res: dict = {mode: {**{k: float(np.mean([r[k] for r in rs])) for k in MEANS},
                        "completion_tokens": int(sum(r["completion_tokens"] for r in rs)),
                        "ok": int(sum(r["ok"] for r in rs)), "requests": int(sum(r["requests"] for r in rs)),
                        "repeats": rs} for mode, rs in by_mode.items()}
    if "dspark" in by_mode:
        for key, metric in (("per_user_speedup", "per_user_tok_s_mean"), ("throughput_ratio", "total_throughput_tok_s")):
            ratio = np.array([d[metric] / p[metric] for d, p in zip(by_mode["dspark"], by_mode["plain"], strict=True)])
            res[key] = float(ratio.mean())
            res[key + "_ci95"] = list(stats.mean_ci(ratio)) if len(ratio) > 1 else None
            res[key + "_per_repeat"] = ratio.round(4).tolist()
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="small", help="zoo name or HF checkpoint dir")
    ap.add_argument("--drafter", default="auto", help="drafter dir, 'auto' (cached DSpark drafter) or 'none'")
    ap.add_argument("--scheduler", default="dspark")
    ap.add_argument("--rates", default="1,2,4", help="arrival rates, requests/s, comma separated")
    ap.add_argument("--requests", type=int, default=8, help="requests per rate (upper bound)")
    ap.add_argument("--users", default=None,
                    help="closed-loop concurrent users, comma separated (e.g. 1,4,16); replaces --rates")
    ap.add_argument("--requests-per-user", type=int, default=3, help="requests each user sends (with --users)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="sweeps over every load point (ratios get a t-interval over repeats)")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    ap.add_argument("--time-limit", type=float, default=30.0, help="arrival window per rate, seconds")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--chat", action="store_true", help="use /v1/chat/completions with chat prompts")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--engine", default=None, choices=["lean", "hf", "auto"],
                    help="the server's target engine (default: divelab serve's, lean on the CPU)")
    ap.add_argument("--fmt", default="fp32", choices=["fp32", "bf16", "int8"], help="the lean engine's weight format")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/serving_load.json"))
    a = ap.parse_args()
    if a.repeats < 1:
        ap.error(f"--repeats must be >= 1, got {a.repeats}")

    import torch

    from divelab.lm import load_model
    from divelab.serving.dspark import load_drafter
    from divelab.serving.server import BackgroundServer, create_app

    torch.manual_seed(a.seed)
    if a.threads:
        torch.set_num_threads(a.threads)
    target, tok = load_model(a.model)
    target = target.to(a.device).eval()
    if a.drafter == "auto":  # what `divelab serve --model MODEL` uses, else a cached reproduction drafter
        from divelab.serving.server.runner import resolve_drafter

        dpath = resolve_drafter(a.model, None) or auto_drafter(target)
    else:
        dpath = None if a.drafter == "none" else Path(a.drafter)
    modes = {"plain": (None, None)}
    if dpath is not None:
        d, cal = load_drafter(dpath, target)
        modes = {"dspark": (d.to(a.device), cal), "plain": (None, None)}
    rates = [float(r) for r in a.rates.split(",")]
    users = [int(u) for u in a.users.split(",")] if a.users else []
    points = [f"{u} users" for u in users] if users else [str(r) for r in rates]
    prompts = prompts_for(tok, a.chat, max(users) * a.requests_per_user if users else a.requests, a.seed)
    out: dict = {"command": "python benchmarks/serving_load.py " + " ".join(sys.argv[1:]),
                 "load_average_before": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
                 "model": a.model, "drafter": str(dpath) if dpath else None, "scheduler": a.scheduler,
                 "engine": a.engine or "default", "fmt": a.fmt, "repeats": a.repeats,
                 "device": a.device, "host": platform.node(), "max_tokens": a.max_tokens, "max_batch": a.max_batch,
                 "threads": torch.get_num_threads(), "endpoint": "chat" if a.chat else "completions",
                 **({"users": users, "requests_per_user": a.requests_per_user} if users
                    else {"requests_per_rate": a.requests, "rates": rates}), "results": {}}
    texts: dict[str, dict] = {}
    servers = {}
    for mode, (d, cal) in modes.items():  # both servers up at once; the idle one only waits on an event
        app = create_app(target, tok, "m", d, cal, scheduler=a.scheduler, max_batch=a.max_batch, seed=a.seed,
                         engine=a.engine, fmt=a.fmt)
        servers[mode] = BackgroundServer(app).start()
        asyncio.run(run_rate(servers[mode].base_url, "m", prompts[:1], 100.0, 4, a.chat, a.seed, 1.0))  # warm-up
    reps: dict[str, dict[str, list[dict]]] = {}
    try:
        for rep, point in ((r, pt) for r in range(a.repeats) for pt in points):
            # modes interleaved per load point (and whole sweeps repeated), so machine-load drift hits both alike
            for mode, srv in servers.items():
                r0 = scrape(srv.base_url, "divelab_verify_rounds_total")
                c0 = scrape(srv.base_url, "divelab_committed_tokens_total")
                if users:
                    u = int(point.split()[0])
                    summary, tx = asyncio.run(run_users(srv.base_url, "m", prompts[: u * a.requests_per_user], u,
                                                        a.max_tokens, a.chat))
                else:
                    summary, tx = asyncio.run(run_rate(srv.base_url, "m", prompts, float(point), a.max_tokens,
                                                       a.chat, a.seed, a.time_limit))
                r1 = scrape(srv.base_url, "divelab_verify_rounds_total")
                c1 = scrape(srv.base_url, "divelab_committed_tokens_total")
                summary["tau"] = (c1 - c0) / (r1 - r0) if r1 > r0 else float("nan")
                reps.setdefault(point, {}).setdefault(mode, []).append(summary)
                if rep == 0:
                    texts.setdefault(point, {})[mode] = tx
                elif tx != texts[point][mode]:
                    texts[point][mode] = None  # greedy texts that change between repeats: recorded as not identical
                print(f"[repeat {rep + 1}/{a.repeats}] {mode:6s} {point:>9s}: per-user {summary['per_user_tok_s_mean']:7.1f} tok/s, "
                      f"TTFT p50 {summary['ttft_s_p50']:.3f}s, ITL p50/p99 {summary['itl_s_p50'] * 1e3:.1f}/"
                      f"{summary['itl_s_p99'] * 1e3:.1f} ms, total {summary['total_throughput_tok_s']:.1f} tok/s, "
                      f"τ {summary['tau']:.2f}", flush=True)
    finally:
        for srv in servers.values():
            srv.stop()
    out["results"] = {point: summarise_repeats(by_mode) for point, by_mode in reps.items()}
    for rate, res in out["results"].items():
        if "dspark" in res:
            res["identical_outputs"] = (texts[rate]["dspark"] is not None
                                        and texts[rate]["dspark"] == texts[rate]["plain"])
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=2))
    tmp.replace(a.out)  # never a half-written result file
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
