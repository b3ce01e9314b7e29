"""`divelab serve` now against an earlier version of its code: per-user speed and throughput at 1, 4
and 16 concurrent users, rounds interleaved (now, then, now, then, …) so drift in the machine's
state hits both sides alike.

The earlier code is taken from git (``--rev``) into a temporary folder and run with the same
benchmark client (`benchmarks/serving_load.py --users`), so only the server differs. Writes one
JSON with every round, the median of each figure, the ratio now/then with a bootstrap interval over
rounds, and the machine's state (CPUs, load average before and after).

    python benchmarks/serving_before_after.py --rev 7981c87 --rounds 5 --out benchmarks/serving_before_after.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import numpy as np

from divelab import stats

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ("per_user_tok_s_mean", "total_throughput_tok_s", "ttft_s_p50")


def _old_tree(rev: str, into: Path) -> Path:
    data = subprocess.run(["git", "archive", rev, "src"], cwd=ROOT, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def _round(src: Path | None, users: str, args: argparse.Namespace, out: Path) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    cmd = [sys.executable, str(ROOT / "benchmarks" / "serving_load.py"), "--model", args.model, "--drafter", "none",
           "--users", users, "--requests-per-user", str(args.requests_per_user), "--max-tokens", str(args.max_tokens),
           "--max-batch", "16", "--threads", str(args.threads), "--seed", str(args.seed), "--out", str(out)]
    subprocess.run(cmd, check=True, env=env, capture_output=True, text=True)
    return json.loads(out.read_text())["results"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", default="7981c87", help="the earlier version to compare with (a git revision)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--users", default="1,4,16")
    ap.add_argument("--model", default="small")
    ap.add_argument("--requests-per-user", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "serving_before_after.json"))
    args = ap.parse_args()
    if args.rounds < 2:
        ap.error(f"--rounds must be at least 2 (an interval needs repeats), got {args.rounds}")
    load_before = os.getloadavg()
    rounds: dict[str, list[dict]] = {"now": [], "then": []}
    with tempfile.TemporaryDirectory() as tmp:
        old = _old_tree(args.rev, Path(tmp) / "old")
        for r in range(args.rounds):
            for side, src in (("now", None), ("then", old)):
                rounds[side].append(_round(src, args.users, args, Path(tmp) / f"{side}{r}.json"))
                print(f"round {r + 1}/{args.rounds}: {side} done", flush=True)
    summary = {}
    for level in rounds["now"][0]:
        summary[level] = {}
        for fig in FIGURES:
            now = np.array([x[level]["plain"][fig] for x in rounds["now"]])
            then = np.array([x[level]["plain"][fig] for x in rounds["then"]])
            ratio = now / then
            lo, hi = stats.bootstrap_ci(ratio, np.median, seed=args.seed, method="percentile")
            summary[level][fig] = {"now_median": float(np.median(now)), "then_median": float(np.median(then)),
                                   "ratio_median": float(np.median(ratio)), "ratio_ci": [lo, hi]}
    result = {"command": " ".join(["python", *sys.argv]), "rev_then": args.rev, "rounds": args.rounds,
              "machine": {"cpus": os.cpu_count(), "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
                          "threads": args.threads, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
              "summary": summary, "rounds_detail": rounds}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for level, figs in summary.items():
        print(level, {k: f"{v['ratio_median']:.2f} [{v['ratio_ci'][0]:.2f}, {v['ratio_ci'][1]:.2f}]"
                      for k, v in figs.items()})


if __name__ == "__main__":
    main()
