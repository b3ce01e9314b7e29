"""The floor on the public substrates: trivial policies on a few dev-split episodes of each.

    python benchmarks/external_substrates.py [--episodes 10] [--sw-episodes 3] [--out external_substrates.json]

Any agent must beat these. Text games (TextWorldExpress's cookingworld/twc/coin, a few ScienceWorld tasks):
``random`` plays a uniformly random admissible action (its own seeded generator per episode), ``first`` plays
the first admissible action (the list is sorted, so it is the same every time in a state); the simulator's
own solution (``gold``, its step cap lifted to its length) is replayed as the ceiling and as a check that wins
are read right. BFCL v4: ``abstain``
answers every question with no call, ``first_function`` calls the first offered function with no arguments,
``reference`` replays the ground truth (its shortfall from 1 is the records no call can pass under BFCL's
rules). Episode ``i`` is ``reset(seed=i)`` on the dev split: the split's i-th variation or game seed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from divelab.envs import bfcl
from divelab.envs.scienceworld import ScienceWorldEnv, ScienceWorldSpec
from divelab.envs.substrate import Simulator, SimulatorEnv
from divelab.envs.twx import GAMES, TWXEnv, TWXSpec
from divelab.stats import mean_ci, proportion_ci

SW_TASKS = ("find-living-thing", "boil", "lifespan-longest-lived", "test-conductivity")
Pick = Callable[[list[str], np.random.Generator], str]
POLICIES: dict[str, Pick] = {
    "random": lambda acts, rng: acts[int(rng.integers(len(acts)))],
    "first": lambda acts, rng: acts[0],
}


def play(env: SimulatorEnv, seed: int, pick: Pick) -> dict:
    rng = np.random.default_rng([seed, 7])
    env.reset(seed)
    start, info, done, steps = env.score, {}, False, 0
    while not done:
        _, _, done, info = env.step(pick(env.admissible_actions(), rng))
        steps += 1
    return {"won": bool(info["won"]), "lost": bool(info["lost"]), "score": float(info["score"]),
            "gain": float(info["score"]) - start, "steps": steps}


def play_gold(env: SimulatorEnv, seed: int) -> dict:
    """The simulator's own solution, with the step cap lifted to its length (``within_cap`` says whether the
    cap the policies play under would have allowed it)."""
    gold = env.gold_actions(seed)
    cap = env.max_steps
    env.strict, env.max_steps = False, max(cap, len(gold))  # ScienceWorld's solutions use phrasings its
    try:                                                      # admissible list does not hold
        env.reset(seed)
        info: dict = {}
        for a in gold:
            _, _, done, info = env.step(a)
            if done:
                break
        steps = len(env.actions_taken)
        return {"won": bool(info.get("won")), "score": float(info.get("score", 0.0)), "steps": steps,
                "within_cap": steps <= cap}
    finally:
        env.strict, env.max_steps = True, cap


def summarise(rows: list[dict]) -> dict:
    wins = sum(r["won"] for r in rows)
    scores = [r["score"] for r in rows]
    return {"episodes": len(rows), "wins": wins, "win_rate": wins / len(rows),
            "win_rate_ci95": list(proportion_ci(wins, len(rows))),
            "mean_final_score": float(np.mean(scores)),
            "mean_final_score_ci95": list(mean_ci(scores)) if len(set(scores)) > 1 else [scores[0], scores[0]],
            "lost": sum(r.get("lost", False) for r in rows), "mean_steps": float(np.mean([r["steps"] for r in rows])),
            **({"within_cap": sum(r["within_cap"] for r in rows)} if "within_cap" in rows[0] else {})}


def games(envs: dict[str, SimulatorEnv], episodes: int) -> dict:
    out = {}
    for name, env in envs.items():
        t0 = time.perf_counter()
        seeds = range(min(episodes, len(env.episodes())))
        res = {p: summarise([play(env, s, pick) for s in seeds]) for p, pick in POLICIES.items()}
        res["gold"] = summarise([play_gold(env, s) for s in seeds])
        res["episode_ids"] = [env.episode_for(s) for s in seeds]
        res["seconds"] = round(time.perf_counter() - t0, 1)
        out[name] = res
        print(name, {p: (res[p]["win_rate"], round(res[p]["mean_final_score"], 3)) for p in (*POLICIES, "gold")},
              flush=True)
    return out


def bfcl_floor() -> dict:
    out = {}
    for category in bfcl.CATEGORIES:
        records = bfcl.load_category(category)
        answers = {
            "abstain": lambda r: [],
            "first_function": lambda r: [{r.functions[0].name: {}}] if r.functions else [],
            "reference": bfcl.reference_calls,
        }
        res: dict = {"records": len(records)}
        for name, answer in answers.items():
            if name == "reference" and "relevance" in category:
                continue  # no reference answer: abstain / first_function already span both outcomes
            k = sum(bfcl.score(r, answer(r)).correct for r in records)
            res[name] = {"correct": k, "accuracy": k / len(records), "accuracy_ci95": list(proportion_ci(k, len(records)))}
        out[category] = res
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=10, help="dev episodes per TextWorldExpress game")
    ap.add_argument("--sw-episodes", type=int, default=3, help="dev episodes per ScienceWorld task")
    ap.add_argument("--twx-max-steps", type=int, default=30)
    ap.add_argument("--sw-max-steps", type=int, default=30)
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".json")))
    args = ap.parse_args()
    t0 = time.perf_counter()
    twx_sim, sw_sim = Simulator(), Simulator()
    twx = {g: TWXEnv(TWXSpec(g, "dev"), max_steps=args.twx_max_steps, simulator=twx_sim) for g in GAMES}
    sw = {t: ScienceWorldEnv(ScienceWorldSpec(t, "dev"), max_steps=args.sw_max_steps, simulator=sw_sim)
          for t in SW_TASKS}
    result = {
        "what": "trivial-policy floors on the dev split (random admissible action, first admissible action), "
                "the simulator's own solution as ceiling; BFCL: abstain, first function with no arguments, reference",
        "settings": {**{k: v for k, v in vars(args).items() if k != "out"}, "twx_params": {g: twx[g].spec.params for g in GAMES},
                     "scienceworld_simplification": "", "reward": "score"},
        "versions": {d: importlib.metadata.version(d) for d in ("scienceworld", "textworld-express", "bfcl-eval")},
        "bfcl": bfcl_floor(),
        "textworld_express": games(twx, args.episodes),
        "scienceworld": games(sw, args.sw_episodes),
    }
    twx_sim.close()
    sw_sim.close()
    result["seconds"] = round(time.perf_counter() - t0, 1)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out} in {result['seconds']} s")


if __name__ == "__main__":
    main()
