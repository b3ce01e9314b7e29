"""Scale-out speed: a multi-seed reproduction and RL rollouts, 1 vs 2 workers, side by side.

    python benchmarks/scaleout.py [--system backtrack --scale smoke --seeds 0-3] [--out scaleout.json]

1. The same (system, seeds) run in process (one after another), on Ray with 1 CPU, and on Ray
   with 2 CPUs; the claims must be identical, the wall times are the point.
2. Rollouts of one GRPO batch (the G2PO quick test bed's TextWorld games and policy) with
   ``ShardedSampler``: in process, and on 1 and 2 Ray actors; interleaved over ``--repeats``.
Ray start-up is timed apart from the work. JSON out.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def reproduction_speedup(system: str, scale: str, seeds: list[int]) -> dict:
    import ray

    from divelab import registry
    from divelab.scaleout import Task, run_tasks

    s = registry.get(system)
    tasks = [Task(s.module, s.key, scale, sd) for sd in seeds]
    run_tasks(tasks[:1], backend="inprocess")  # warm the cache: every arm then starts from it
    out: dict = {"system": s.key, "scale": scale, "seeds": seeds}
    t0 = time.perf_counter()
    here = run_tasks(tasks, backend="inprocess")
    out["inprocess_s"] = time.perf_counter() - t0
    for cpus in (1, 2):
        t0 = time.perf_counter()
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"DIVELAB_CACHE": os.environ.get("DIVELAB_CACHE", "")}}
                 if os.environ.get("DIVELAB_CACHE") else None)
        start = time.perf_counter() - t0
        t0 = time.perf_counter()
        there = run_tasks(tasks, backend="ray")
        out[f"ray_{cpus}cpu_s"] = time.perf_counter() - t0
        out[f"ray_{cpus}cpu_startup_s"] = start
        ray.shutdown()
        same = all(a.ok and b.ok and [c.to_dict() for c in a.reproduction.claims]
                   == [c.to_dict() for c in b.reproduction.claims] for a, b in zip(here, there, strict=True))
        out[f"ray_{cpus}cpu_same_claims"] = same
    out["speedup_2cpu_vs_inprocess"] = out["inprocess_s"] / out["ray_2cpu_s"]
    return out


def rollout_speedup(repeats: int, testbed: str) -> dict:
    import ray

    from divelab.rl.presets import TESTBEDS
    from divelab.rl.ray_rollout import ShardedSampler
    from divelab.rl.testbed import build_testbed

    tb_cfg = TESTBEDS[testbed]  # warm start seed 0
    bed = build_testbed(tb_cfg)
    policy, make_env, games = bed.new_policy(), bed.make_env, bed.game_ids
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    arms = {"inprocess_1": ShardedSampler(workers=1, backend="inprocess", max_steps=10),
            # three actors alive at once on 2 logical CPUs: half a CPU each, or the third never starts
            "ray_1": ShardedSampler(workers=1, backend="ray", max_steps=10, cpus_per_worker=0.5),
            "ray_2": ShardedSampler(workers=2, backend="ray", max_steps=10, cpus_per_worker=0.5)}
    times: dict[str, list[float]] = {k: [] for k in arms}
    steps: dict[str, int] = {}
    for arm in arms.values():  # warm-up: actor creation and the first weight transfer
        arm.collect(policy, make_env, games, 8, np.random.default_rng(0))
    for r in range(repeats):  # interleaved, so drift in machine load hits every arm alike
        for name, arm in arms.items():
            t0 = time.perf_counter()
            groups = arm.collect(policy, make_env, games, 8, np.random.default_rng(r + 1))
            times[name].append(time.perf_counter() - t0)
            steps[name] = sum(len(t) for g in groups for t in g)
    ray.shutdown()
    res = {k: {"median_s": float(np.median(v)), "env_steps_per_s": steps[k] / float(np.median(v))}
           for k, v in times.items()}
    res["speedup_ray2_vs_ray1"] = res["ray_1"]["median_s"] / res["ray_2"]["median_s"]
    res["games"], res["group_size"] = len(games), 8
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--system", default="backtrack")
    ap.add_argument("--scale", default="smoke")
    ap.add_argument("--seeds", default="0-3")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--testbed", default="quick", choices=("smoke", "quick", "full"),
                    help="the RL test bed scale (divelab.rl.presets) for the rollout part")
    ap.add_argument("--out", default="benchmarks/scaleout.json")
    args = ap.parse_args()
    from divelab.scaleout import parse_seeds

    result: dict = {"cpus": os.cpu_count(), "load_average_at_start": os.getloadavg()[0]}
    # written after each part, so a long run keeps what it measured
    for key, part in (("reproduction", lambda: reproduction_speedup(args.system, args.scale, parse_seeds(args.seeds))),
                      ("rollouts", lambda: rollout_speedup(args.repeats, args.testbed))):
        result[key] = part()
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
