"""Reproduce G2PO's claims on generated TextWorld games: grpo vs gigpo vs g2po at equal rollouts.

The experiment runs over several *set-ups* (a game set x a warm start). Within a set-up, for each
training seed, method and condition (states repeat / control where they almost never do) we train a
fresh copy of the same warm-started tiny-LM policy with the same GRPO loop, the same rollouts per
iteration and the same number of updates; only the advantage estimator differs. Gains are averaged
over seeds within a set-up, and intervals are t-intervals over set-up means, so they cover the
rollout seeds, the warm start and the choice of games together.
"""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from typing import Any

import numpy as np

from divelab import stats, verdicts
from divelab.claims import Claim, Figure, Kind, Reproduction, not_checkable
from divelab.envs.textworld import game_graph, uniform_success
from divelab.progress import track
from divelab.rl.advantages import StepBatch, get_advantage
from divelab.rl.grpo import GRPOConfig, GRPOTrainer
from divelab.rl.testbed import TestbedConfig, build_testbed
from divelab.scale import check_scale, pick
from divelab.threads import torch_threads
from divelab.training.g2po.setup import CONDITIONS, ESTIMATORS, METHODS, experiment_config

# a timing claim gets a verdict only from at least this many repeated measurements (here: g2po runs)
MIN_TIMED_RUNS = 5
NOTES = "training-rl.md §3 (E165)"


# estimators scored on every batch for the variance claim: same data, different credit
CREDIT_ESTIMATORS: dict[str, tuple[str, dict[str, Any]]] = {
    "grpo": ("grpo", {}), "gigpo": ("gigpo", {}), "g2po": ("g2po", {}),
    "g2po-edge-only": ("g2po", {"episode_weight": 0.0}),
}


def _decision_cells(groups: list) -> list[np.ndarray]:
    """Row indices (in StepBatch order) of each decision — same group, state key and action —
    taken more than once in the batch."""
    cells: dict[tuple, list[int]] = defaultdict(list)
    i = 0
    for gi, g in enumerate(groups):
        for tr in g:
            for st in tr.steps:
                cells[(gi, st.state_key, st.action)].append(i)
                i += 1
    return [np.array(v) for v in cells.values() if len(v) > 1]


def _within_decision_share(adv: np.ndarray, cells: list[np.ndarray]) -> float:
    """Share of the advantage variance that lies *within* decisions: the (pooled) variance of the
    credit one (state, action) gets across its occurrences, over the batch's total advantage
    variance. 0 = every occurrence of a decision gets the same credit; scale-free, so estimators
    that add two standardised terms are comparable with ones that use one."""
    total = float(np.var(adv))
    if not cells or total < 1e-12:
        return float("nan")
    within = sum(float(np.var(adv[c])) * len(c) for c in cells) / sum(len(c) for c in cells)
    return within / total


def _credit_shares(groups: list) -> dict[str, float]:
    batch = StepBatch.from_groups(groups)
    cells = _decision_cells(groups)
    return {name: _within_decision_share(np.asarray(get_advantage(est)(batch, **opts)), cells)
            for name, (est, opts) in CREDIT_ESTIMATORS.items()}


@dataclasses.dataclass(frozen=True)
class Setup:
    """A game set (generator seeds scanned from ``game_seed0``) x a warm start (``warm_seed``)."""

    name: str
    testbed: TestbedConfig
    preregistered: bool  # chosen before any of its results were seen


# game sets: the games TextWorld's generator makes from these seeds on (filtered by the test bed's
# rule); 0 is the set the quick configuration was tuned on, the others were fixed before any run
GAME_SETS = (0, 100, 200)


def setups(scale: str, seed: int) -> list[Setup]:
    """Every (game set x warm start) of a scale. The first is the primary set-up (game set 0, warm
    start ``seed``): the configuration was chosen on it after a first, 2-step set-up failed to
    separate the methods. Every other set-up (game sets 100 and 200, warm starts ``seed + 1``, ...)
    was fixed before any of its results were seen and is reported on its own too."""
    base, _ = experiment_config(scale, seed)
    n_sets, n_warm = pick(scale, smoke=(1, 2), quick=(2, 2), full=(3, 3))
    out = []
    for g in GAME_SETS[:n_sets]:
        for w in range(n_warm):
            cfg = dataclasses.replace(base, game_seed0=g, seed=seed + w)
            out.append(Setup(name=f"games@{g}/warm{seed + w}", testbed=cfg, preregistered=(g, w) != (0, 0)))
    return out


def _plan(train: dict[str, Any], primary: bool) -> list[tuple[int, str, str]]:
    """(training seed, condition, method) of the runs of one set-up."""
    out = []
    for i, s in enumerate(train["seeds"]):
        for cond in CONDITIONS:
            if cond == "control" and train["control_setups"] == "primary" and not primary:
                continue
            for m in train["methods"][cond]:
                limit = train["seeds_for"].get(f"{cond}/{m}", train["seeds_for"].get(cond))
                if limit is None or i < limit:
                    out.append((s, cond, m))
    return out


def run_experiment(scale: str, seed: int) -> dict[str, Any]:
    _, train = experiment_config(scale, seed)
    iterations, group_size, seeds = train["iterations"], train["group_size"], train["seeds"]
    sups = setups(scale, seed)
    out: dict[str, Any] = {"runs": [], "iterations": iterations, "group_size": group_size, "seeds": seeds,
                           "train": train, "setups": {}}
    todo = []
    for k, sup in enumerate(sups):
        tb = build_testbed(sup.testbed)
        cfg = sup.testbed
        out["setups"][sup.name] = {
            "testbed": dict(cfg.__dict__), "games": tb.game_ids, "preregistered": sup.preregistered,
            "random_success": {g: uniform_success(game_graph(sp, cfg.max_states), cfg.max_steps)
                               for g, sp in zip(tb.game_ids, cfg.specs(), strict=True)}}
        todo += [(sup, tb, s, c, m) for s, c, m in _plan(train, primary=k == 0)]
    for sup, tb, s, cond, method in track(todo, "G2PO reproduction"):
        policy = tb.new_policy()
        make_env = tb.make_env if cond == "repeat" else tb.make_control_env
        cfg = GRPOConfig(iterations=iterations, group_size=group_size, max_steps=sup.testbed.max_steps,
                         estimator=ESTIMATORS[method][0], estimator_options=ESTIMATORS[method][1],
                         lr=train["lr"], kl_coef=train["kl_coef"], ppo_epochs=train["ppo_epochs"],
                         seed=s, description=f"{sup.name}/{method}/{cond}/s{s}")
        trainer = GRPOTrainer(policy, make_env, tb.game_ids, cfg)
        shares: dict[str, list[float]] = defaultdict(list)
        score_credit = cond == "repeat" and method == "grpo"  # every estimator scored on grpo's batches
        for _ in range(iterations):
            trainer.iteration()
            if score_credit:
                for name, v in _credit_shares(trainer.last_groups).items():
                    shares[name].append(v)
        logs = trainer.logs
        total = [lg.time_rollout + lg.time_bookkeeping + lg.time_update for lg in logs]
        out["runs"].append({
            "setup": sup.name, "seed": s, "condition": cond, "method": method,
            "success": [lg.success for lg in logs],
            "adv_var": [lg.adv_std ** 2 for lg in logs],
            "zero_adv_frac": [lg.zero_adv_frac for lg in logs],
            "within_decision_share": dict(shares),
            "mixed_group_frac": [lg.mixed_group_frac for lg in logs],
            "bookkeeping_share": float(sum(lg.time_bookkeeping for lg in logs) / sum(total)),
            "distinct_states": [lg.distinct_states for lg in logs], "n_steps": [lg.n_steps for lg in logs],
            "kl": [lg.kl for lg in logs],
        })
    return out


def _final(run: dict[str, Any]) -> float:
    """Success over the second half of training (a window, to average out per-iteration noise)."""
    s = run["success"]
    return float(np.mean(s[len(s) // 2:]))


def _across(by_setup: dict[str, list[float]]) -> tuple[float, tuple[float, float], list[float]]:
    """Mean of per-set-up means with a 95% t-interval over set-ups (covers seeds, warm starts and
    game sets together); with a single set-up, the t-interval over its seeds."""
    means = [float(np.mean(v)) for v in by_setup.values() if v]
    if not means:
        raise ValueError("no runs to compare")
    if len(means) == 1:
        only = next(v for v in by_setup.values() if v)
        return means[0], stats.mean_ci(only), means
    return float(np.mean(means)), stats.mean_ci(means), means


def reproduce(scale: str = "quick", seed: int = 0) -> Reproduction:
    check_scale(scale)
    t0 = time.perf_counter()
    with torch_threads(1):  # tiny models: one thread is faster than two contended ones
        data = run_experiment(scale, seed)
    rep = Reproduction(system="g2po", title="G2PO: group-graph policy optimization", scale=scale, seed=seed)
    runs = data["runs"]
    names = list(data["setups"])
    pre = [n for n in names if data["setups"][n]["preregistered"]]

    def get(setup: str, cond: str, method: str) -> dict[int, dict[str, Any]]:
        return {r["seed"]: r for r in runs
                if r["setup"] == setup and r["condition"] == cond and r["method"] == method}

    def gains(cond: str, a: str, b: str, only: list[str] | None = None) -> dict[str, list[float]]:
        """Per set-up, per seed: 100 x (final success of a - final success of b), paired by seed."""
        out = {}
        for n in only or names:
            ra, rb = get(n, cond, a), get(n, cond, b)
            out[n] = [100 * (_final(ra[s]) - _final(rb[s])) for s in sorted(ra) if s in rb]
        return out

    def per_setup_text(g: dict[str, list[float]]) -> str:
        return ", ".join(f"{n} {np.mean(v):+.1f}" for n, v in g.items() if v)

    def final_of(cond: str, m: str, only: list[str] | None = None) -> float:
        vals = [_final(r) for n in (only or names) for r in get(n, cond, m).values()]
        return float(np.mean(vals)) if vals else float("nan")

    how = (f"{len(names)} set-ups (game sets x warm starts: {', '.join(names)}), training seeds "
           f"{data['seeds']} within each; success over the second half of training; per set-up the mean over "
           "its seeds of the paired-by-seed difference; 95% t-interval over the set-up means, so it covers "
           "rollout seeds, warm starts and game sets together.")

    # prerequisite: training must improve success, or the comparisons below say nothing
    impr = {n: [float(np.mean([100 * (_final(get(n, "repeat", m)[s]) - get(n, "repeat", m)[s]["success"][0])
                               for m in METHODS if s in get(n, "repeat", m)]))
                for s in data["seeds"] if s in get(n, "repeat", "grpo")] for n in names}
    mi, ci_i, _ = _across(impr)
    # a prerequisite of the set-up, not evidence about the paper: a check that the comparisons can speak
    rep.add(Claim(statement="Setup check: GRPO-style training improves success over its start (all methods)",
                  paper_value="(prerequisite, not a paper number)", measured=mi, unit="points", ci=ci_i,
                  kind=Kind.CHECK, source=NOTES,
                  ruling=verdicts.direction(mi, ci_i, why="a prerequisite of this set-up; the paper has no number"),
                  note=("success over the second half of training minus the first iteration's, averaged over "
                        "the methods run on the repeating games. " + how + " Per set-up: " + per_setup_text(impr))))

    # the headline: G2PO against the strongest baseline measured where states repeat (GRPO is the
    # paper's baseline, GiGPO the strongest simple one); one claim, every baseline recorded
    fin = {m: final_of("repeat", m) for m in METHODS}
    base_names = [m for m in ("grpo", "gigpo") if any(get(n, "repeat", m) for n in names)]
    baselines = []
    for m in base_names:
        mv, mci, _ = _across({n: [100 * _final(r) for r in get(n, "repeat", m).values()] for n in names})
        baselines.append({"name": m, "value": mv, "ci": list(mci)})
    strongest = max(baselines, key=lambda b: b["value"])["name"]
    g_main = gains("repeat", "g2po", strongest)
    m_main, ci_main, _ = _across(g_main)
    n_runs = min(sum(len(get(n, "repeat", m)) for n in names) for m in ("g2po", strongest))
    g_grpo = gains("repeat", "g2po", "grpo")
    m_grpo, ci_grpo, _ = _across(g_grpo)
    # the paper's +14..+22 is over GRPO: a size to compare only when GRPO is the strongest baseline here
    size = (dict(paper=(14.0, 22.0), tol=0.5, tol_kind="rel") if strongest == "grpo" else
            dict(why="the paper's +14..+22 is over GRPO; it states no G2PO-vs-GiGPO gap for these tasks"))
    pre_text = ""
    if pre:
        m_pre, ci_pre, _ = _across(gains("repeat", "g2po", strongest, only=pre))
        pre_text = (f" Only the set-ups fixed before seeing results ({', '.join(pre)}): {m_pre:+.1f} points "
                    f"[{ci_pre[0]:+.1f}, {ci_pre[1]:+.1f}].")
    rep.add(Claim(statement="G2PO beats the strongest baseline where states repeat (TextWorld games, over warm "
                            "starts x game sets)",
                  paper_value="+22 points ALFWorld, ~+14 WebShop (over GRPO)", measured=m_main, unit="points",
                  ci=ci_main, kind=Kind.EMPIRICAL, source=NOTES,
                  baselines=baselines, better="higher", compared_with=strongest,
                  baseline=("final success (%): " + ", ".join(f"{b['name']} {b['value']:.1f}" for b in baselines)
                            + f"; g2po {100 * fin['g2po']:.1f}"),
                  ruling=verdicts.direction(m_main, ci_main, training_runs=n_runs, **size),
                  note=(f"g2po minus {strongest} (the strongest baseline by final success), paired by seed on the "
                        f"seeds where both ran ({train_seeds_text(data, 'repeat', strongest)}); {n_runs} training "
                        "runs of the smaller arm. " + how + " Per set-up: " + per_setup_text(g_main)
                        + f". Against GRPO, the paper's baseline: {m_grpo:+.1f} points [{ci_grpo[0]:+.1f}, "
                        f"{ci_grpo[1]:+.1f}] (" + per_setup_text(g_grpo) + "). Size (when GRPO is the strongest): "
                        "the paper's +14..+22 widened by 50% (other environments and a 20k-parameter policy). The "
                        f"primary set-up ({names[0]}) is the one the configuration was tuned on." + pre_text)))

    g_gg = gains("repeat", "g2po", "gigpo")
    if any(g_gg.values()):
        g_gr = gains("repeat", "gigpo", "grpo")
        m_gr, ci_gr, _ = _across(g_gr)
        rep.add(Claim(statement="GiGPO vs GRPO where states repeat (context for G2PO)",
                      paper_value="GiGPO paper: >12 points ALFWorld", measured=m_gr, unit="points", ci=ci_gr,
                      kind=Kind.EMPIRICAL, source=NOTES, baseline=f"grpo final success {fin['grpo']:.2f}",
                      ruling=verdicts.direction(m_gr, ci_gr, paper=12.0, tol=0.5, tol_kind="rel",
                                                training_runs=min(sum(len(get(n, "repeat", m)) for n in names)
                                                                  for m in ("gigpo", "grpo"))),
                      note=("gigpo minus grpo, paired by seed. Per set-up: " + per_setup_text(g_gr)
                            + ". Size: the GiGPO paper's >12 points, ±50%.")))

    # control: with V(s) = mean discounted return, no repeated state means no edge signal: identical runs
    ctl_names = [n for n in names if get(n, "control", "g2po")]
    g_ctl = gains("control", "g2po", "grpo", only=ctl_names)
    ctl_all = [x for v in g_ctl.values() for x in v]
    identical = all(get(n, "control", "g2po")[s]["success"] == get(n, "control", "grpo")[s]["success"]
                    for n in ctl_names for s in get(n, "control", "g2po") if s in get(n, "control", "grpo"))
    worst = float(max(abs(x) for x in ctl_all))
    ablation = ""
    g_out = gains("control", "g2po-outcome", "grpo", only=ctl_names)
    if any(g_out.values()):
        mo, (lo, hi), _ = _across(g_out)
        ablation = (f" Ablation, the literal reading (V = mean undiscounted outcome, gamma 0.95): {mo:+.1f} points "
                    f"[{lo:+.1f}, {hi:+.1f}] vs grpo on the control: every step of a winning chain gets TD error "
                    "-(1 - gamma), and standardisation over the graph makes that a full negative unit.")
    rep.add(Claim(statement="G2PO's gain over GRPO when states almost never repeat (control games)",
                  paper_value="under 3 points (AppWorld)", measured=float(np.mean(ctl_all)), unit="points",
                  kind=Kind.BY_CONSTRUCTION, source=NOTES,
                  # exact: the runs are seeded and, with no repeated state, identical step by step
                  ruling=verdicts.bound(worst, 3.0, sense="<=", exact=True),
                  note=("same games, every observation tagged with a session id and step counter so state keys "
                        f"never repeat; g2po minus grpo, paired by seed, on {', '.join(ctl_names)} "
                        f"({len(ctl_all)} pair(s)); largest |gain| {worst:.1f} points (rule: <= 3). By "
                        "construction: with V(s) the mean discounted return from s, a transition seen in one "
                        "trajectory has TD error 0, so G2PO's edge term vanishes and it trains exactly like GRPO "
                        f"(runs identical: {identical})." + ablation)))

    # advantage variance: how much of the credit varies between occurrences of one decision,
    # every estimator scored on the same batches (those of the grpo runs on repeating games)
    def share_of(run: dict[str, Any], name: str) -> float:
        return float(np.nanmean(run["within_decision_share"][name]))

    ratio = {n: [share_of(r, "g2po") / max(share_of(r, "grpo"), 1e-12) for r in get(n, "repeat", "grpo").values()]
             for n in names}
    m_r, ci_r, _ = _across(ratio)
    grpo_runs = [r for n in names for r in get(n, "repeat", "grpo").values()]
    per_method_share = {name: float(np.mean([share_of(r, name) for r in grpo_runs])) for name in CREDIT_ESTIMATORS}
    per_method_var = {m: float(np.mean([np.mean(r["adv_var"]) for n in names
                                        for r in get(n, "repeat", m).values()])) for m in METHODS}
    rep.add(Claim(statement="G2PO lowers the variance of the credit one decision gets (vs GRPO, same batches)",
                  paper_value="lower variance (group-aggregated V(s); TD differences cancel noise)",
                  measured=m_r, unit="x GRPO", ci=ci_r, kind=Kind.BY_CONSTRUCTION, source=NOTES,
                  baseline=f"grpo's within-decision share {per_method_share['grpo']:.2f} (ratio 1)",
                  ruling=verdicts.direction(1.0 - m_r, (1.0 - ci_r[1], 1.0 - ci_r[0]),
                                            why="the paper gives no variance ratio"),
                  note=("within-decision share of advantage variance: the variance of the advantages one "
                        "(state, action) gets across its occurrences in a group, pooled, over the batch's total "
                        "advantage variance; all estimators scored on the same batches (every iteration of the "
                        "grpo runs on repeating games); g2po's share over grpo's; t-interval over set-up means. "
                        "Shares: " + ", ".join(f"{k} {v:.2f}" for k, v in per_method_share.items())
                        + "; raw advantage variance per method (own runs): "
                        + ", ".join(f"{k} {v:.2f}" for k, v in per_method_var.items())
                        + ". By construction, mostly: the edge term is the same for every occurrence of a "
                        "deterministic transition, so only the episode term (GRPO's) varies within a decision, "
                        "while the edge term adds between-decision variance; the ratio is below 1 whenever any "
                        "state repeats with different outcomes.")))
    share = {n: [100 * r["bookkeeping_share"] for r in get(n, "repeat", "g2po").values()] for n in names}
    n_timed = sum(len(v) for v in share.values())
    share_stmt = "Graph bookkeeping (StepBatch + graph + TD + standardisation) as a share of step time"
    share_how = ("wall time of the advantage step over rollout + advantage + update time, g2po runs on the "
                 "repeating games; within a run the three phases alternate every iteration, so the timings are "
                 "interleaved. Our steps are far cheaper than a 1.5B model's, which makes the share larger here, "
                 "not smaller.")
    if n_timed >= MIN_TIMED_RUNS:
        m_s, ci_s, _ = _across(share)
        rep.add(Claim(statement=share_stmt, paper_value="under 0.5% of compute", measured=m_s, unit="%", ci=ci_s,
                      kind=Kind.EMPIRICAL, source=NOTES, ruling=verdicts.bound(m_s, 0.5, sense="<=", ci=ci_s),
                      note=share_how + f" {n_timed} timed runs; t-interval over set-up means; the far end decides."))
    else:
        rep.add(not_checkable(share_stmt, "under 0.5% of compute",
                              f"only {n_timed} timed run(s) at this scale; a timing verdict needs at least "
                              f"{MIN_TIMED_RUNS} repeated, interleaved measurements", source=NOTES))
    rep.add(not_checkable("ALFWorld / WebShop / AppWorld success rates with Qwen2.5-1.5B", "+22 / +14 / <3 points",
                          "no pretrained weights or benchmark environments on this machine; generated "
                          "TextWorld games (ALFWorld's engine) and a ~20k-parameter policy stand in",
                          source=NOTES))

    rep.details = {"runs": runs, "setups": data["setups"],
                   "gains_points": {"repeat/g2po-grpo": g_grpo, "repeat/g2po-gigpo": g_gg, "control/g2po-grpo": g_ctl},
                   "within_decision_share_by_estimator": per_method_share, "adv_var_by_method": per_method_var,
                   "improvement_points": impr, "final_success": fin, "train": data["train"],
                   "iterations": data["iterations"], "group_size": data["group_size"], "seeds": data["seeds"]}
    rep.figures.append(_curves(runs, names))
    tr = data["train"]
    first = data["setups"][names[0]]
    tb = first["testbed"]
    rand = "; ".join(f"{n}: " + ", ".join(f"{g.rsplit('-', 1)[-1]} {100 * p:.0f}%" for g, p in
                                          data["setups"][n]["random_success"].items())
                     for n in names if n.endswith(f"warm{seed}"))
    rep.setup = (
        f"Set-ups: {', '.join(names)} (a game set x a warm start; {', '.join(pre) or 'none'} fixed before seeing "
        f"any of their results, {names[0]} the set-up the configuration was tuned on). Each game set is "
        f"{tb['n_games']} TextWorld games generated offline with TextWorld's own generator ({tb['nb_rooms']} rooms, "
        f"{tb['nb_objects']} objects, quest length {tb['quest_length']}; step cap {tb['max_steps']}; reward 1 on a "
        "win), standing in for ALFWorld: "
        + (f"the first {tb['n_games']} generator seeds from the set's start "
           f"({', '.join(sorted({str(v['testbed']['game_seed0']) for v in data['setups'].values()}))}) whose "
           f"whole state graph has <= {tb['max_states']} states and that a uniform random player wins within the "
           f"cap with probability >= {tb['min_random_success']:.2f} (exact, from the explored graph: {rand}). "
           if tb["min_random_success"] > 0 else f"games {', '.join(first['games'])}. ")
        + "Each game's reachable transition graph is explored once with TextWorld and cached, so rollouts are "
        "look-ups. The control tags every observation with a session id and step counter so states almost "
        "never repeat (standing in for AppWorld). The policy is a ~20k-parameter divelab Llama (hidden 32, "
        "1 layer) with a word-level tokenizer trained on the games' text, reading the current observation "
        "(feedback, room name, inventory) and scoring each admissible command by log-prob; warm-started "
        "(single-threaded, seeded by the set-up's warm seed) by behaviour cloning a uniform random explorer "
        f"({tb['sft_episodes']} episodes per game, {tb['sft_steps']} steps). Each run: {data['iterations']} GRPO "
        f"iterations x {data['group_size']} rollouts per game, clipped PG (eps 0.2, {tr['ppo_epochs']} epochs), "
        f"k3 KL to the frozen start ({tr['kl_coef']}), Adam {tr['lr']:g}; from the same start on training seeds "
        f"{data['seeds']} (the first iteration's rollouts are identical across methods): "
        + "; ".join(f"{c}: {', '.join(ms)}" for c, ms in tr["methods"].items())
        + (f" (limits: {tr['seeds_for']} of the seeds; control on {tr['control_setups']} set-up(s))"
           if tr["seeds_for"] else "")
        + " (gigpo: w=1, gamma 0.95; g2po: gamma 0.95, V = mean discounted return from the state, episode "
        "advantage + standardised edge TD, weights 1 and 1; g2po-outcome: V = mean undiscounted outcome). Success "
        "is the on-policy training success; the final value averages the second half of training."
    )
    rep.runtime_s = time.perf_counter() - t0
    return rep


def train_seeds_text(data: dict[str, Any], cond: str, method: str) -> str:
    seeds = sorted({r["seed"] for r in data["runs"] if r["condition"] == cond and r["method"] == method})
    return "seeds " + ", ".join(map(str, seeds))


def _curves(runs: list[dict[str, Any]], setups_: list[str]) -> Figure:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, cond in zip(axes, CONDITIONS, strict=True):
        for m in ESTIMATORS:
            curves = np.array([r["success"] for r in runs if r["condition"] == cond and r["method"] == m])
            if not len(curves):
                continue
            mean = curves.mean(0)
            x = np.arange(len(mean))
            ax.plot(x, mean, label=m, linestyle="--" if m == "g2po-outcome" else "-")
            if len(curves) > 1:
                se = curves.std(0, ddof=1) / np.sqrt(len(curves))
                ax.fill_between(x, mean - se, mean + se, alpha=0.2)
        ax.set_title("states repeat" if cond == "repeat" else "control: states almost never repeat")
        ax.set_xlabel("iteration")
    axes[0].set_ylabel("training success rate")
    axes[0].legend()
    axes[1].legend()
    return Figure.from_matplotlib(fig, "g2po-curves",
                                  f"Success vs GRPO iterations, mean ± s.e. over the runs of "
                                  f"{len(setups_)} set-up(s) x seeds.")
