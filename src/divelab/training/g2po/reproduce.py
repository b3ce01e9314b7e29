"""Reproduce G2PO's claims on generated TextWorld games: grpo vs gigpo vs g2po at equal rollouts.

For each seed, method and condition (states repeat / control where they almost never do) we train
a fresh copy of the same warm-started tiny-LM policy with the same GRPO loop, the same rollouts
per iteration and the same number of updates; only the advantage estimator differs.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import numpy as np
import torch
from scipy import stats

from divelab.claims import Claim, Figure, Reproduction, Verdict, verdict_from_direction
from divelab.progress import track
from divelab.rl.grpo import GRPOConfig, GRPOTrainer
from divelab.rl.testbed import TestbedConfig, build_testbed
from divelab.scale import check_scale, pick

METHODS = ("grpo", "gigpo", "g2po")
CONDITIONS = ("repeat", "control")
NOTES = "training-rl.md §3 (E165)"


def _ci(x: list[float], level: float = 0.95) -> tuple[float, float]:
    a = np.asarray(x, dtype=float)
    if len(a) < 2 or np.allclose(a, a[0]):
        return float(a.mean()), float(a.mean())
    h = stats.t.ppf(0.5 + level / 2, len(a) - 1) * a.std(ddof=1) / np.sqrt(len(a))
    return float(a.mean() - h), float(a.mean() + h)


def _credit_consistency(groups: list, adv: np.ndarray) -> float:
    """Mean variance of the advantages given to the *same decision* (same group, state key and
    action) within one batch: how noisy the credit of one decision is."""
    cells: dict[tuple, list[float]] = defaultdict(list)
    i = 0
    for gi, g in enumerate(groups):
        for tr in g:
            for s in tr.steps:
                cells[(gi, s.state_key, s.action)].append(float(adv[i]))
                i += 1
    var = [np.var(v) for v in cells.values() if len(v) > 1]
    return float(np.mean(var)) if var else 0.0


def run_experiment(scale: str, seed: int) -> dict[str, Any]:
    tb_cfg = pick(scale,
                  smoke=TestbedConfig(n_games=2, max_steps=8, sft_steps=20, seed=seed),
                  quick=TestbedConfig(n_games=4, max_steps=10, seed=seed),
                  full=TestbedConfig(n_games=8, nb_rooms=4, quest_length=3, max_steps=15, seed=seed))
    iterations = pick(scale, smoke=2, quick=8, full=40)
    group_size = pick(scale, smoke=4, quick=8, full=8)
    seeds = pick(scale, smoke=[seed], quick=[seed, seed + 1, seed + 2], full=[seed + i for i in range(5)])
    tb = build_testbed(tb_cfg)
    runs = [(s, c, m) for s in seeds for c in CONDITIONS for m in METHODS]
    out: dict[str, Any] = {"runs": [], "iterations": iterations, "group_size": group_size, "seeds": seeds,
                           "testbed": tb_cfg.__dict__, "games": tb.game_ids}
    for s, cond, method in track(runs, "G2PO reproduction"):
        policy = tb.new_policy()
        make_env = tb.make_env if cond == "repeat" else tb.make_control_env
        cfg = GRPOConfig(iterations=iterations, group_size=group_size, max_steps=tb_cfg.max_steps,
                         estimator=method, lr=3e-3, kl_coef=0.02, seed=s, description=f"{method}/{cond}/s{s}")
        trainer = GRPOTrainer(policy, make_env, tb.game_ids, cfg)
        consistency = []
        for _ in range(iterations):
            trainer.iteration()
            consistency.append(_credit_consistency(trainer.last_groups, trainer.last_advantages))
        logs = trainer.logs
        total = [lg.time_rollout + lg.time_bookkeeping + lg.time_update for lg in logs]
        out["runs"].append({
            "seed": s, "condition": cond, "method": method,
            "success": [lg.success for lg in logs],
            "adv_var": [lg.adv_std ** 2 for lg in logs],
            "zero_adv_frac": [lg.zero_adv_frac for lg in logs],
            "same_decision_var": consistency,
            "bookkeeping_share": float(sum(lg.time_bookkeeping for lg in logs) / sum(total)),
            "distinct_states": [lg.distinct_states for lg in logs], "n_steps": [lg.n_steps for lg in logs],
            "kl": [lg.kl for lg in logs],
        })
    return out


def _final(run: dict[str, Any]) -> float:
    """Success over the second half of training (a window, to average out per-iteration noise)."""
    s = run["success"]
    return float(np.mean(s[len(s) // 2:]))


def reproduce(scale: str = "quick", seed: int = 0) -> Reproduction:
    check_scale(scale)
    t0 = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: one thread is faster than two contended ones
    try:
        data = run_experiment(scale, seed)
    finally:
        torch.set_num_threads(threads)
    rep = Reproduction(system="g2po", title="G2PO: group-graph policy optimization", scale=scale, seed=seed)
    runs = data["runs"]

    def get(cond: str, method: str) -> dict[int, dict[str, Any]]:
        return {r["seed"]: r for r in runs if r["condition"] == cond and r["method"] == method}

    seeds = data["seeds"]
    gains: dict[tuple[str, str], list[float]] = {}
    for cond in CONDITIONS:
        base = get(cond, "grpo")
        for m in ("gigpo", "g2po"):
            other = get(cond, m)
            gains[(cond, m)] = [100 * (_final(other[s]) - _final(base[s])) for s in seeds]

    def gain_claim(cond: str, m: str, statement: str, paper: str) -> Claim:
        g = gains[(cond, m)]
        ci = _ci(g)
        return Claim(statement=statement, paper_value=paper, measured=float(np.mean(g)), unit="points", ci=ci,
                     verdict=verdict_from_direction(float(np.mean(g)), ci if len(g) > 1 else None),
                     source=NOTES,
                     note=(f"success over the second half of training, {m} minus grpo, paired by seed "
                           f"({len(g)} seeds, 95% t-interval). Reproduced only if the interval excludes 0 "
                           "in the paper's direction; partly if the point estimate has the right sign."))

    rep.add(gain_claim("repeat", "g2po", "G2PO beats GRPO where states repeat (TextWorld games)",
                       "+22 points ALFWorld, ~+14 WebShop"))
    rep.add(gain_claim("repeat", "gigpo", "GiGPO vs GRPO where states repeat (context for G2PO)",
                       "GiGPO paper: >12 points ALFWorld (G2PO paper reports G2PO above it)"))
    # control: the gain should shrink below 3 points
    gc = gains[("control", "g2po")]
    ci_c = _ci(gc)
    gr = float(np.mean(gains[("repeat", "g2po")]))
    small = float(np.mean(gc)) < 3.0
    shrinks = float(np.mean(gc)) < gr
    verdict = (Verdict.REPRODUCED if small and shrinks and ci_c[1] < 3.0 + abs(gr)
               else Verdict.PARTLY if small else Verdict.NOT_REPRODUCED)
    rep.add(Claim(statement="G2PO's gain over GRPO when states almost never repeat (control games)",
                  paper_value="under 3 points (AppWorld)", measured=float(np.mean(gc)), unit="points", ci=ci_c,
                  verdict=verdict, source=NOTES,
                  note=("same games, every observation tagged with a session id and step counter so state "
                        "keys never repeat. Reproduced if the mean gain is under 3 points and below the "
                        "repeating-state gain; partly if only under 3 points. With no repeats the graph "
                        "is a set of chains, so G2PO is close to GRPO plus a per-step TD term.")))
    # advantage variance: credit given to the same decision
    g2 = get("repeat", "g2po")
    g0 = get("repeat", "grpo")
    ratio = [float(np.mean(g2[s]["same_decision_var"]) / max(np.mean(g0[s]["same_decision_var"]), 1e-12))
             for s in seeds]
    ci_r = _ci(ratio)
    rep.add(Claim(statement="G2PO lowers the variance of the credit given to one decision (vs GRPO)",
                  paper_value="lower variance (group-aggregated V(s); TD differences cancel noise)",
                  measured=float(np.mean(ratio)), unit="x GRPO", ci=ci_r,
                  verdict=verdict_from_direction(1.0 - float(np.mean(ratio)),
                                                 (1 - ci_r[1], 1 - ci_r[0]) if len(ratio) > 1 else None),
                  source=NOTES,
                  note=("variance of the advantages that one batch gives the same (state, action) within a "
                        "group, averaged over decisions taken more than once, as a ratio to GRPO's "
                        "(every method's advantages are standardised, so the raw variance is ~1 for all). "
                        "Reproduced if the ratio's interval is below 1.")))
    per_method_var = {m: float(np.mean([np.mean(r["same_decision_var"]) for r in get("repeat", m).values()]))
                      for m in METHODS}
    share = [100 * g2[s]["bookkeeping_share"] for s in seeds]
    ci_s = _ci(share)
    rep.add(Claim(statement="Graph bookkeeping (StepBatch + graph + TD + standardisation) as a share of step time",
                  paper_value="under 0.5% of compute", measured=float(np.mean(share)), unit="%", ci=ci_s,
                  verdict=(Verdict.REPRODUCED if ci_s[1] < 0.5 else Verdict.PARTLY if np.mean(share) < 1.0
                           else Verdict.NOT_REPRODUCED),
                  source=NOTES,
                  note=("wall time of the advantage step over rollout + advantage + update time, g2po runs "
                        "on the repeating games. Our steps are far cheaper than a 1.5B model's, which makes "
                        "the share larger here, not smaller. Reproduced if the interval is under 0.5%.")))
    from divelab.claims import not_checkable

    rep.add(not_checkable("ALFWorld / WebShop / AppWorld success rates with Qwen2.5-1.5B", "+22 / +14 / <3 points",
                          "no pretrained weights or benchmark environments on this machine; generated "
                          "TextWorld games (ALFWorld's engine) and a ~20k-parameter policy stand in",
                          source=NOTES))

    rep.details = {"runs": runs, "gains_points": {f"{c}/{m}": v for (c, m), v in gains.items()},
                   "same_decision_var_by_method": per_method_var, "games": data["games"],
                   "iterations": data["iterations"], "group_size": data["group_size"], "seeds": seeds}
    rep.figures.append(_curves(runs, seeds))
    tb = data["testbed"]
    rep.setup = (
        f"{len(data['games'])} TextWorld games generated offline with TextWorld's own generator "
        f"({tb['nb_rooms']} rooms, {tb['nb_objects']} objects, quest length {tb['quest_length']}, seeds "
        f"{tb['game_seed0']}..{tb['game_seed0'] + tb['n_games'] - 1}; step cap {tb['max_steps']}; reward 1 on a win) stand "
        "in for ALFWorld; the control tags every observation with a session id and step counter so states "
        "almost never repeat (standing in for AppWorld). The policy is a ~20k-parameter divelab Llama "
        "(hidden 32, 1 layer) with a word-level tokenizer trained on the games' text, reading the current "
        "observation (feedback, room name, inventory) and scoring each admissible command by log-prob; "
        "warm-started by behaviour cloning a uniform random explorer. Each run: "
        f"{data['iterations']} GRPO iterations x {data['group_size']} rollouts per game, clipped PG (eps 0.2, "
        "2 epochs), k3 KL to the frozen start (0.02), Adam 3e-3; grpo, gigpo (w=1, gamma 0.95) and g2po "
        f"(gamma 0.95, episode advantage + standardised edge TD, weights 1 and 1) on seeds {seeds}. "
        "Success is the on-policy training success; the final value averages the second half of training."
    )
    rep.runtime_s = time.perf_counter() - t0
    return rep


def _curves(runs: list[dict[str, Any]], seeds: list[int]) -> Figure:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, cond in zip(axes, CONDITIONS, strict=True):
        for m in METHODS:
            curves = np.array([r["success"] for r in runs if r["condition"] == cond and r["method"] == m])
            mean = curves.mean(0)
            x = np.arange(len(mean))
            ax.plot(x, mean, label=m)
            if len(curves) > 1:
                se = curves.std(0, ddof=1) / np.sqrt(len(curves))
                ax.fill_between(x, mean - se, mean + se, alpha=0.2)
        ax.set_title("states repeat" if cond == "repeat" else "control: states almost never repeat")
        ax.set_xlabel("iteration")
    axes[0].set_ylabel("training success rate")
    axes[0].legend()
    return Figure.from_matplotlib(fig, "g2po-curves",
                                  f"Success vs GRPO iterations, mean ± s.e. over {len(seeds)} seed(s).")
