"""Agentic-RL engine speed: env steps/s, rollouts/s, update time and peak memory per estimator.

    python benchmarks/rl_engine.py [--iterations 3] [--out rl_engine.json]

Runs the same GRPO iterations (same testbed, seed and rollouts) with grpo, gigpo and g2po side by
side in one process; also raw TextWorld steps/s without the transition cache as the peer.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
import tracemalloc

import numpy as np
import torch

from divelab.envs.textworld import TextWorldEnv, generate_game
from divelab.rl.grpo import GRPOConfig, GRPOTrainer
from divelab.rl.testbed import TestbedConfig, build_testbed


def raw_env_steps_per_s(spec, steps: int = 200) -> float:
    env = TextWorldEnv(generate_game(spec), max_steps=15)
    rng = np.random.default_rng(0)
    t0, n = time.perf_counter(), 0
    while n < steps:
        env.reset(0)
        done = False
        while not done and n < steps:
            acts = env.admissible_actions()
            _, _, done, _ = env.step(acts[int(rng.integers(len(acts)))])
            n += 1
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--out", default="rl_engine.json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tb = build_testbed(TestbedConfig())
    result = {"raw_textworld_steps_per_s": raw_env_steps_per_s(tb.config.specs()[0]), "estimators": {}}
    for name in ("grpo", "gigpo", "g2po"):
        trainer = GRPOTrainer(tb.new_policy(), tb.make_env, tb.game_ids,
                              GRPOConfig(iterations=args.iterations, estimator=name, seed=0))
        tracemalloc.start()
        logs = trainer.train()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        steps = sum(lg.n_steps for lg in logs)
        rollouts = len(logs) * trainer.config.group_size * len(tb.game_ids)
        t_roll = sum(lg.time_rollout for lg in logs)
        result["estimators"][name] = {
            "env_steps_per_s_in_rollouts": steps / t_roll,
            "rollouts_per_s": rollouts / t_roll,
            "update_s_per_iteration": float(np.mean([lg.time_update for lg in logs])),
            "bookkeeping_s_per_iteration": float(np.mean([lg.time_bookkeeping for lg in logs])),
            "peak_python_alloc_mb": peak / 2**20,
        }
    result["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    text = json.dumps(result, indent=2)
    print(text)
    with open(args.out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
