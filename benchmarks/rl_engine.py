"""Agentic-RL engine speed: env steps/s, rollouts/s, update time and peak memory per estimator.

    python benchmarks/rl_engine.py [--iterations 3] [--out rl_engine.json]

Runs the same GRPO iterations (the G2PO quick-scale test bed, same seed and rollouts) with grpo,
gigpo and g2po side by side in one process; also random-play env steps/s of raw TextWorld (a live
game process) beside the same game served from its explored, cached transition graph.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
import tracemalloc

import numpy as np
import torch

from divelab.envs.textworld import TextWorldEnv, generate_game, textworld_env_factory
from divelab.rl.grpo import GRPOConfig, GRPOTrainer
from divelab.rl.presets import GROUP_SIZE, LR, TESTBEDS
from divelab.rl.testbed import build_testbed


def env_steps_per_s(env, steps: int = 200) -> float:
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
    tb_cfg = TESTBEDS["quick"]  # warm start seed 0
    tb = build_testbed(tb_cfg)
    spec = tb_cfg.specs()[0]
    result = {"testbed": tb.game_ids, "group_size": GROUP_SIZE["quick"], "iterations": args.iterations,
              "raw_textworld_steps_per_s": env_steps_per_s(TextWorldEnv(generate_game(spec), max_steps=15)),
              "cached_graph_steps_per_s": env_steps_per_s(
                  textworld_env_factory([spec], max_steps=15, precompute=True,
                                        max_states=tb_cfg.max_states)(spec.game_id), 5000),
              "estimators": {}}
    for name in ("grpo", "gigpo", "g2po"):
        trainer = GRPOTrainer(tb.new_policy(), tb.make_env, tb.game_ids,
                              GRPOConfig(iterations=args.iterations, estimator=name, seed=0,
                                         group_size=GROUP_SIZE["quick"], max_steps=tb_cfg.max_steps, lr=LR))
        logs = trainer.train()  # timed without tracemalloc, which slows Python code several-fold
        tracemalloc.start()
        trainer.iteration()  # one more iteration, traced, for the peak Python allocation
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
            "bookkeeping_share_of_iteration": float(sum(lg.time_bookkeeping for lg in logs) / sum(
                lg.time_rollout + lg.time_bookkeeping + lg.time_update for lg in logs)),
            "peak_python_alloc_mb_per_iteration": peak / 2**20,
        }
    result["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    text = json.dumps(result, indent=2)
    print(text)
    with open(args.out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
