"""Re-run reproductions under another CPU kernel ISA or on another machine and compare them, claim by claim,
with the saved record.

PyTorch dispatches its CPU kernels by instruction set (AVX-512, AVX2, or the portable default), and
``ATEN_CPU_CAPABILITY`` forces a lower one. A second ISA is a second machine's rounding on this one: the
numbers may differ, a verdict must not. For each system the tool runs ``divelab reproduce`` in a fresh
process with that variable set and an empty cache of its own (a stage cached under one ISA would hide the
other's numbers), and reports per claim whether the value is identical, whether it lies in the saved
claim's interval, and whether the verdict held. Run on another CPU than the saved run's (its ``cpu_model``),
``--isa avx512`` (or whatever the CPU runs natively) is the other-machine check: same kernels by name, another
chip's libraries and rounding underneath.

    .venv/bin/python tools/cross_isa.py metis kernelpro --scale quick --isa avx2
    .venv/bin/python tools/cross_isa.py --scale quick --isa avx2 --save    # every system; -> docs/results/stability.json
    .venv/bin/python tools/cross_isa.py backtrack --isa avx512 --save      # on another machine: its native kernels
    .venv/bin/python tools/cross_isa.py progress-advantage --keep /tmp/reruns  # and keep the re-run's whole result

Exit status 1 when any verdict moved, 2 on bad input.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from readme_results import FULL, RESULTS, ROOT, STABILITY, result_files, where

from divelab.report import load_results

ISAS = ("avx512", "avx2", "default")


def compare_claims(saved, rerun) -> list[dict]:
    """One row per claim of the saved reproduction, matched by statement to the re-run's."""
    again = {c.statement: c for c in rerun.claims}
    rows = []
    for c in saved.claims:
        r = again.get(c.statement)
        row = {"statement": c.statement, "kind": c.kind.value, "saved_verdict": c.verdict.value,
               "saved_measured": c.measured, "saved_ci": list(c.ci) if c.ci else None}
        if r is None:
            row.update(verdict=None, measured=None, same_value=False, within_interval=None, same_verdict=False)
        else:
            row.update(verdict=r.verdict.value, measured=r.measured, same_value=r.measured == c.measured,
                       within_interval=_within(r.measured, c.ci), same_verdict=r.verdict == c.verdict)
        rows.append(row)
    return rows


def _within(value, ci) -> bool | None:
    """Whether a re-run's value lies in the saved interval (None where either is not a finite number)."""
    if ci is None or not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    lo, hi = ci
    if not all(math.isfinite(x) for x in (value, lo, hi)):
        return None
    return lo <= value <= hi


def run_under(system: str, scale: str, seed: int, isa: str, out: Path, cache: Path):
    env = {**os.environ, "ATEN_CPU_CAPABILITY": isa, "DIVELAB_CACHE": str(cache)}
    divelab = Path(sys.executable).with_name("divelab")
    cmd = [str(divelab), "reproduce", system, "--scale", scale, "--seed", str(seed), "--out", str(out)]
    done = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` under ATEN_CPU_CAPABILITY={isa} exited {done.returncode}:\n"
                           + done.stderr[-2000:])
    return load_results(out)[0]


def entry(system: str, scale: str, seed: int, isa: str, saved, rerun) -> dict:
    ran_isa = rerun.environment.get("torch_cpu_capability", "unrecorded")
    if ran_isa.lower() != isa.lower():
        raise RuntimeError(f"asked for ISA {isa} but the run used {ran_isa}: this CPU cannot run it")
    rows = compare_claims(saved, rerun)
    return {"system": system, "scale": scale, "seed": seed, "isa": ran_isa,
            "saved_isa": saved.environment.get("torch_cpu_capability", "unrecorded"),
            "saved_commit": saved.environment.get("commit"), "run_commit": rerun.environment.get("commit"),
            "cpu_model": rerun.environment.get("cpu_model"),
            "saved_cpu_model": saved.environment.get("cpu_model"),
            # two CPUs can report the same model name (two AMD EPYC generations): OpenBLAS's detected core tells
            # them apart, so a check is named by machine even then
            "numpy_blas": rerun.environment.get("numpy_blas"),
            "saved_numpy_blas": saved.environment.get("numpy_blas"),
            "torch_threads": rerun.environment.get("torch_threads"),
            "saved_torch_threads": saved.environment.get("torch_threads"),
            "summary": {"claims": len(rows), "same_verdict": sum(r["same_verdict"] for r in rows),
                        "same_value": sum(r["same_value"] for r in rows)},
            "claims": rows}


def merge(path: Path, entries: list[dict]) -> None:
    """Replace the entries of the same (system, scale, isa, CPU) in the saved report; write it whole or not at all.

    Checks of different systems may run side by side: the read-modify-write holds a lock file beside the report
    so that one check's merge cannot drop another's entries."""
    with open(path.with_suffix(".json.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        old = json.loads(path.read_text())["runs"] if path.exists() else []
        keys = {_key(e) for e in entries}
        runs = [e for e in old if _key(e) not in keys] + entries
        runs.sort(key=lambda e: tuple(str(x) for x in _key(e)))
        tmp = path.with_suffix(f".json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"version": 1, "runs": runs}, indent=1, default=str) + "\n")
        tmp.replace(path)


def _key(e: dict) -> tuple:
    """What makes two checks the same check: a re-run on another CPU is another machine's, kept beside it."""
    return e["system"], e["scale"], e["isa"], e.get("cpu_model")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("systems", nargs="*", help="system keys (default: every system with a saved result)")
    ap.add_argument("--scale", default="quick", choices=["smoke", "quick", "full"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--isa", action="append", choices=ISAS, help="repeatable (default: avx2)")
    ap.add_argument("--save", action="store_true", help=f"merge the comparison into {STABILITY.relative_to(ROOT)}")
    ap.add_argument("--keep", type=Path, metavar="DIR",
                    help="keep each re-run's whole result in DIR/SYSTEM-SCALE-ISA (its per-run details, for working "
                         "out why a verdict moved)")
    args = ap.parse_args(argv)
    folder = FULL if args.scale == "full" else RESULTS
    systems = args.systems or [p.stem for p in result_files(folder)]
    missing = [s for s in systems if not (folder / f"{s}.json").exists()]
    if missing:
        print(f"error: no saved {args.scale} result for {', '.join(missing)} in {folder}", file=sys.stderr)
        return 2
    entries, moved = [], 0
    for system in systems:
        saved = load_results(folder / f"{system}.json")[0]
        for isa in args.isa or ["avx2"]:
            with tempfile.TemporaryDirectory(prefix=f"cross-isa-{isa}-") as tmp:
                rerun = run_under(system, args.scale, args.seed, isa, Path(tmp) / "out", Path(tmp) / "cache")
                if args.keep:
                    kept = args.keep / f"{system}-{args.scale}-{isa}"
                    shutil.rmtree(kept, ignore_errors=True)
                    shutil.copytree(Path(tmp) / "out", kept)
            e = entry(system, args.scale, args.seed, isa, saved, rerun)
            entries.append(e)
            flips = [r for r in e["claims"] if not r["same_verdict"]]
            moved += len(flips)
            s = e["summary"]
            print(f"{system} ({args.scale}, {where(e)} vs saved {e['saved_isa']}): {s['same_verdict']}/{s['claims']} "
                  f"verdicts held, {s['same_value']} values identical", flush=True)
            for r in flips:
                print(f"  moved: {r['statement']}: {r['saved_verdict']} -> {r['verdict']}", flush=True)
    if args.save:
        merge(STABILITY, entries)
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
