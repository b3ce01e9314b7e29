"""Reproduction of E173, progress advantage (arXiv 2606.26080): the exact tabular check and the
language-model check on the RL engine's TextWorld games (and, at full scale, a key-and-door text game)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from divelab import stats, verdicts
from divelab.claims import Claim, Figure, Kind, Reproduction, not_checkable, strongest
from divelab.comparisons import baseline_records
from divelab.rl.presets import TESTBEDS
from divelab.rl.testbed import TestbedConfig
from divelab.training.progress_advantage import mdp as M
from divelab.training.progress_advantage.real_llm import RealLLMConfig
from divelab.training.progress_advantage.twcheck import EvalConfig

SOURCE = "arXiv 2606.26080; week-in-review E173"
SLIP = 0.2  # the stochastic variants' slip probability


@dataclass(frozen=True)
class ExactPlan:
    slips: tuple[float, ...]
    """slip probabilities of the 6-state chain MDP at which the identity and reward recovery are checked."""
    random_mdps: int
    """random stochastic MDPs (random sizes, references, beta, gamma) on which the identity is re-checked."""
    small_betas: tuple[float, ...]
    """KL weights beta of the RLHF-typical grid (small beta: optimal probabilities underflow float64)."""
    small_gammas: tuple[float, ...]
    """discount factors of that grid (long horizons)."""
    mdps_per_cell: int
    """random MDPs per (beta, gamma) cell of that grid."""
    pg_steps: int
    """steps of exact-gradient KL-regularised policy gradient on the slippery chain."""
    pg_sampled_steps: int
    """steps of sampled REINFORCE (64 episodes each) on the same chain."""


@dataclass(frozen=True)
class Plan:
    exact: ExactPlan
    """the exact tabular check of the identity (no model, exact MDPs)."""
    testbed: TestbedConfig
    """the TextWorld games and the warm-started reference LM (the RL engine's test bed, divelab.rl.presets, at smoke
    and full; its seed is the run's seed)."""
    iterations: int
    """GRPO iterations that turn the reference into the (imperfect) RL policy."""
    group_size: int
    """rollouts per game in one GRPO group."""
    evaluation: EvalConfig
    """scoring of the policy's rollouts: groups per game, rollouts per group (best-of-n), Monte Carlo
    steps and rollouts for the true advantage."""
    keydoor: bool
    """also run the key-and-door text game, which trains its own pair of tiny LMs (minutes of CPU)."""
    bootstrap: int
    """bootstrap resamples for the intervals of the AUROC and step-correlation claims."""
    real_llm: RealLLMConfig | None
    """SmolLM2-135M-Instruct against a KL-RL LoRA policy over it: its states, fine-tune and evaluation (minutes
    of CPU and the model download); None: not measured at this scale. Its seed is the run's."""


# the RL engine's test beds at smoke and full (shared with G2PO: their games and warm starts are cached once);
# quick has its own
PLANS = {
    "smoke": Plan(exact=ExactPlan(slips=(0.0, 0.2), random_mdps=20, small_betas=(0.01, 0.001),
                                  small_gammas=(0.9, 0.99), mdps_per_cell=1, pg_steps=300, pg_sampled_steps=100),
                  testbed=TESTBEDS["smoke"],
                  iterations=2, group_size=4, evaluation=EvalConfig(reps=2, n=4, mc_steps=4, mc_rollouts=4),
                  keydoor=False, bootstrap=50, real_llm=None),
    "quick": Plan(exact=ExactPlan(slips=(0.0, 0.05, 0.1, 0.2, 0.3, 0.4), random_mdps=200,
                                  small_betas=(1.0, 0.1, 0.01, 0.001), small_gammas=(0.5, 0.9, 0.99, 0.999),
                                  mdps_per_cell=1, pg_steps=2000, pg_sampled_steps=1000),
                  testbed=TestbedConfig(n_games=4, nb_rooms=3, nb_objects=3, quest_length=2, max_steps=8,
                                        min_random_success=0.1, max_states=120, sft_episodes=32, sft_steps=200,
                                        sft_lr=1e-2),
                  iterations=3, group_size=8, evaluation=EvalConfig(reps=20, n=8, mc_steps=100, mc_rollouts=32),
                  keydoor=False, bootstrap=400, real_llm=None),
    "full": Plan(exact=ExactPlan(slips=tuple(np.linspace(0, 0.6, 13).tolist()), random_mdps=2000,
                                 small_betas=(1.0, 0.1, 0.01, 0.001), small_gammas=(0.5, 0.9, 0.99, 0.999),
                                 mdps_per_cell=5, pg_steps=5000, pg_sampled_steps=3000),
                 testbed=TESTBEDS["full"],
                 iterations=4, group_size=8, evaluation=EvalConfig(reps=40, n=8, mc_steps=300, mc_rollouts=64),
                 keydoor=True, bootstrap=2000, real_llm=RealLLMConfig()),
}


# -- the exact check ---------------------------------------------------------------------------------
def exact_check(plan: ExactPlan, seed: int) -> dict[str, Any]:
    beta = 0.5
    rows = []
    for slip in plan.slips:
        mdp = M.slip_chain(6, float(slip))
        ref = np.full((6, 3), 1 / 3)
        Q, V = M.soft_value_iteration(mdp, ref, beta)
        pi = M.soft_policy_iteration(mdp, ref, beta)
        rows.append({"slip": float(slip), "identity_error": M.identity_error(pi, ref, beta, Q, V),
                     "reward_gap_mean": M.reward_recovery_gap(mdp, pi, ref, beta, V),
                     "reward_gap_max": M.reward_recovery_max_gap(mdp, pi, ref, beta, V)})
    rng = np.random.default_rng(seed)
    n_random = plan.random_mdps
    rand_err = 0.0
    for _ in range(n_random):
        S, A = int(rng.integers(2, 8)), int(rng.integers(2, 5))
        mdp = M.random_mdp(rng, S, A, gamma=float(rng.uniform(0.5, 0.95)))
        ref = rng.dirichlet(np.ones(A), size=S)
        b = float(rng.uniform(0.1, 2.0))
        Q, V = M.soft_value_iteration(mdp, ref, b)
        rand_err = max(rand_err, M.identity_error(M.soft_policy_iteration(mdp, ref, b), ref, b, Q, V))
    # RLHF-typical settings: small beta, long horizons; optimal probabilities fall below float64's range,
    # so the solver and the identity run on log-policies
    grid = []
    for b in plan.small_betas:
        for g in plan.small_gammas:
            for _ in range(plan.mdps_per_cell):
                S, A = int(rng.integers(2, 8)), int(rng.integers(2, 5))
                mdp = M.random_mdp(rng, S, A, gamma=g)
                log_ref = np.log(rng.dirichlet(np.ones(A), size=S))
                Q, V = M.soft_value_iteration(mdp, log_ref, b, log=True)
                log_pi = M.soft_policy_iteration(mdp, log_ref, b, log=True)
                err = M.identity_error(log_pi, log_ref, b, Q, V, log=True)
                grid.append({"beta": b, "gamma": g, "identity_error": err,
                             "relative_error": err / max(1.0, float(np.abs(V).max())),
                             "min_log_pi": float(log_pi.min()), "underflows_float64": bool(log_pi.min() < -745)})
    # the mean reward-recovery gap can look like success where values are flat near the start
    long_chain = M.slip_chain(20, SLIP, gamma=0.5)
    ref20 = np.full((20, 3), 1 / 3)
    _, V20 = M.soft_value_iteration(long_chain, ref20, beta)
    pi20 = M.soft_policy_iteration(long_chain, ref20, beta)
    long_row = {"n_states": 20, "slip": SLIP, "gamma": 0.5,
                "reward_gap_mean": M.reward_recovery_gap(long_chain, pi20, ref20, beta, V20),
                "reward_gap_max": M.reward_recovery_max_gap(long_chain, pi20, ref20, beta, V20)}
    # KL-regularised policy gradient on the slippery chain (slip 0.2)
    mdp = M.slip_chain(6, 0.2)
    ref = np.full((6, 3), 1 / 3)
    Q, V = M.soft_value_iteration(mdp, ref, beta)
    steps = plan.pg_steps
    exact = M.kl_policy_gradient(mdp, ref, beta, Q, V, steps=steps, lr=1.0, log_every=max(1, steps // 100))
    sampled = M.kl_policy_gradient(mdp, ref, beta, Q, V, steps=plan.pg_sampled_steps,
                                   lr=0.5, sampled=True, seed=seed, log_every=10)
    return {"beta": beta, "slips": rows, "n_random_mdps": n_random, "random_identity_error": rand_err,
            "small_beta_grid": grid, "long_chain_gamma05": long_row,
            "pg_exact": exact.__dict__, "pg_sampled": sampled.__dict__}


# -- the language-model checks -----------------------------------------------------------------------
def textworld_check(plan: Plan, seed: int) -> dict[str, Any]:
    """The headline LM check: the RL engine's TextWorld games, a GRPO+KL policy and its reference."""
    from divelab.training.progress_advantage.twcheck import TWCheckConfig, run_variant, variants

    base = TWCheckConfig(testbed=replace(plan.testbed, seed=seed), iterations=plan.iterations,
                         group_size=plan.group_size, seed=seed)
    ev = plan.evaluation
    return {name: run_variant(cfg, ev, seed) for name, cfg in variants(base, SLIP).items()}


def keydoor_check(seed: int) -> dict[str, Any]:
    """The second, exactly solvable test bed: a key-and-door text game of our own with a tiny LM
    trained by KL-regularised REINFORCE (full scale only: it trains its own models)."""
    from divelab.training.progress_advantage.lmcheck import (
        LMCheckConfig,
        all_tasks,
        evaluate_rollouts,
        model_pair,
        sample_tasks,
    )

    base = LMCheckConfig(sft_steps=300, rl_iters=40, seed=seed)
    out: dict[str, Any] = {}
    for name, cfg in {"key-door deterministic": base,
                      f"key-door slippery (slip {SLIP})": replace(base, slip=SLIP, slack=2)}.items():
        policy, reference, tok, curves = model_pair(cfg)
        eps = sample_tasks(policy, tok, cfg.spec, all_tasks(cfg.spec) * 5, 8, seed=seed + 7)
        res: dict[str, Any] = {"config": cfg.__dict__, "curves": curves}
        res["policy"] = evaluate_rollouts(policy, reference, tok, cfg.spec, cfg.beta, eps, 8, mc_model=policy,
                                          mc_steps=200, mc_rollouts=16, seed=seed)
        out[name] = res
    return out


def lm_check(plan: Plan, seed: int) -> dict[str, Any]:
    out = textworld_check(plan, seed)
    if plan.keydoor:
        out.update(keydoor_check(seed))
    return out


def cross_fitted(per_task: dict[str, np.ndarray]) -> dict[str, Any]:
    """Choose the aggregation on the even tasks and evaluate it on the odd ones, and the other way round
    (the paper tunes it per task; this keeps the choice honest). Result order: odd tasks, then even."""
    n_tasks = len(next(iter(per_task.values())))
    halves = [np.arange(n_tasks) % 2 == 0, np.arange(n_tasks) % 2 == 1]
    picked, bo = [], []
    for fit, ev in (halves, halves[::-1]):
        best = max(per_task, key=lambda k: per_task[k][fit].mean())
        picked.append(best)
        bo.append(per_task[best][ev])
    return {"picked": picked, "per_task": np.concatenate(bo)}


def run(plan: Plan, seed: int) -> Reproduction:
    """The exact tabular check, then the language-model checks, then (when planned) the real LLM."""
    rep = Reproduction(system="progress-advantage",
                       title="Neglected Free Lunch from Post-training: Progress Advantage for LLM Agents",
                       scale="", seed=seed)
    ex = exact_check(plan.exact, seed)
    lm = lm_check(plan, seed)
    rep.details = {"exact": ex, "lm": _strip(lm)}
    rep.claims += _exact_claims(ex)
    rep.claims += _lm_claims(lm, seed, plan.bootstrap)
    rep.figures += _figures(ex, lm)
    rep.setup = _setup(ex, lm, plan)
    if plan.real_llm is not None:  # SmolLM2-135M-Instruct and a KL-RL LoRA policy over it
        from divelab.training.progress_advantage import real_llm

        real_llm.add_to(rep, plan.real_llm, seed)
    return rep


def _setup(ex: dict[str, Any], lm: dict[str, Any], plan: Plan) -> str:
    tw = next(iter(lm.values()))["config"]
    return (
        "Exact check: a 6-state chain MDP (left/stay/right, slip probability p replaces the move by another at "
        "random, gamma 0.9, beta 0.5, uniform reference policy). Soft value iteration gives Q*, V*; the optimal "
        "policy is found independently by soft policy iteration with exact evaluation, and by KL-regularised "
        f"policy gradient (exact gradient, and sampled REINFORCE); {ex['n_random_mdps']} random stochastic MDPs "
        "with random references repeat the identity check. Language-model check (headline): the RL engine's "
        f"generated TextWorld games ({tw['testbed']['n_games']} games, {tw['testbed']['nb_rooms']} rooms, quest "
        f"length {tw['testbed']['quest_length']}, step cap {tw['testbed']['max_steps']}; the G2PO test bed) and a "
        f"stochastic variant where each command slips to a random admissible one with probability {SLIP}. The "
        "reference is the engine's warm-started tiny Llama (behaviour cloning of a uniform explorer); the policy "
        f"is that reference trained by the engine's GRPO trainer for {tw['iterations']} iterations with a k3 "
        f"KL(pi||pi_ref) penalty, kl_coef = beta = {tw['beta']} (on the slippery games for the stochastic "
        f"variant), so it is an imperfect RL policy. Rollouts: {tw['eval']['n']} per group, "
        f"{tw['eval']['reps']} groups per game, from the policy, scored with ProgressAdvantage on the exact token "
        "sequences the policy reads (context [SEP] command [EOS]); the engine's policy is a softmax over "
        "admissible commands, so the same log-ratio at the command level (the distribution the KL term "
        "regularised) is reported beside it. Confidence baselines: the policy's mean token log-prob "
        "(DeepConf-style), negative entropy, self-certainty, and mean command log-prob. Labels: the game's whole "
        "state graph gives the optimal discounted value (gamma 0.9, with slip), so the first wrong step of a failed "
        "episode is its first step off every optimal path; the policy's true advantage P(win|h,a) - P(win|h) is "
        f"estimated by {tw['eval']['mc_rollouts']} Monte Carlo rollouts each from replayed prefixes at "
        f"{tw['eval']['mc_steps']} random steps. Stand-ins: tiny LMs for Gemma4/Qwen3.5, TextWorld for "
        "BFCL/WebShop/tau2-bench, the graph oracle's first wrong step for Who&When annotations."
        + (" At full scale the key-and-door game of lmcheck.py (a tiny LM fine-tuned on a noisy expert, then "
           "KL-regularised REINFORCE, beta 0.1) is a second test bed." if plan.keydoor else "")
    )


def _strip(lm: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, res in lm.items():
        r = dict(res)
        for src in ("policy", "reference", "command_level"):
            if src in res:
                r[src] = {k: v for k, v in res[src].items() if not k.startswith("_")}
        out[name] = r
    return out


def _exact_claims(ex: dict[str, Any]) -> list[Claim]:
    """The identity on exact MDPs, the reward-recovery seam (mean and worst case), PG towards the identity."""
    claims: list[Claim] = []
    err = max(max(r["identity_error"] for r in ex["slips"]), ex["random_identity_error"])
    claims.append(Claim(
        statement="beta*log pi*/pi_ref equals Q* - V* in a stochastic MDP (max abs error, slippery chain at every "
                  f"slip and {ex['n_random_mdps']} random stochastic MDPs)",
        paper_value="exact (Proposition 1)", measured=err, unit="", kind=Kind.CHECK,
        ruling=verdicts.bound(err, 1e-8, sense="<=", exact=True), source=SOURCE,  # exact MDPs: no sample
        note="A check of the mathematics on exact MDPs: the largest error must be below 1e-8 (float64 precision "
             "after convergence). The optimal policy comes from soft policy iteration, independent of the value "
             "iteration giving Q*, V*."))
    det = [r for r in ex["slips"] if r["slip"] == 0.0][0]
    sto = [r for r in ex["slips"] if r["slip"] > 0]
    worst = max(sto, key=lambda r: r["reward_gap_mean"])
    at02 = min(sto, key=lambda r: abs(r["slip"] - 0.2))
    ok = det["reward_gap_mean"] < 1e-8 and all(r["reward_gap_mean"] > 1e-3 for r in sto)
    claims.append(Claim(
        statement="the 'reward recovery' reading r = beta*log pi/pi_ref + V(s) - gamma*V(s') fails once transitions "
                  "are stochastic (mean |r_hat - r| over the optimal policy's occupancy, slip 0.2)",
        paper_value="holds only for deterministic transitions", measured=at02["reward_gap_mean"], kind=Kind.CHECK,
        ruling=verdicts.outcome(ok, test="gap < 1e-8 without slip and > 1e-3 at every slip > 0 (exact MDPs)"),
        source=SOURCE,
        note=f"Gap {det['reward_gap_mean']:.1e} at slip 0; {at02['reward_gap_mean']:.3f} (worst triple "
             f"{at02['reward_gap_max']:.2f}) at slip 0.2; up to {worst['reward_gap_mean']:.3f} at slip "
             f"{worst['slip']:.2f}, against rewards of size 1. A check of the mathematics (exact values)."))
    pe, ps = ex["pg_exact"], ex["pg_sampled"]
    claims.append(Claim(
        statement="a policy trained by KL-regularised policy gradient approaches the identity (max |beta log "
                  "pi/pi_ref - A*| at the end of training; exact gradient)",
        paper_value="exact only for an optimal RL policy", measured=pe["identity_error"][-1], kind=Kind.CHECK,
        ruling=verdicts.bound(pe["identity_error"][-1], 1e-6, sense="<=", exact=True), source=SOURCE,
        note=f"Exact-gradient PG: {pe['identity_error'][0]:.2f} at start -> {pe['identity_error'][-1]:.1e} after "
             f"{pe['steps'][-1]} steps; the rule fails if it has not fallen below 1e-6. Sampled REINFORCE (64 "
             f"episodes per step) stalls at max error {ps['identity_error'][-1]:.3f} (occupancy-weighted mean "
             f"{ps['mean_error'][-1]:.3f}) after {ps['steps'][-1]} steps: a real RL run gives the advantage only up "
             "to its optimisation noise."))
    lc = ex["long_chain_gamma05"]
    ok_max = det["reward_gap_max"] < 1e-8 and all(r["reward_gap_max"] > 1e-2 for r in sto) \
        and lc["reward_gap_max"] > 1e-2
    claims.append(Claim(
        statement="the same seam by its worst case: max |r_hat - r| over (s, a, s') reachable under the optimal "
                  "policy, which the occupancy-weighted mean can hide (slip 0.2)",
        paper_value="holds only for deterministic transitions", measured=at02["reward_gap_max"], kind=Kind.CHECK,
        ruling=verdicts.outcome(ok_max, test="worst-case gap < 1e-8 without slip, > 1e-2 at every slip > 0 and on "
                                             "a 20-state chain at gamma 0.5 (exact MDPs)"),
        source=SOURCE,
        note=f"Worst case {det['reward_gap_max']:.1e} at slip 0, "
             + ", ".join(f"{r['reward_gap_max']:.2f} (mean {r['reward_gap_mean']:.3f}) at slip {r['slip']:.2f}"
                         for r in sto)
             + f". On a {lc['n_states']}-state chain (slip {lc['slip']}, gamma {lc['gamma']}) the occupancy mean is "
             f"{lc['reward_gap_mean']:.1e}, which would suggest recovery works, while the worst reachable triple is "
             f"off by {lc['reward_gap_max']:.2f}: values are flat near the start, where the occupancy sits."))
    grid = ex["small_beta_grid"]
    if grid:
        rel = max(r["relative_error"] for r in grid)
        n_under = sum(r["underflows_float64"] for r in grid)
        betas = sorted({r["beta"] for r in grid})
        gammas = sorted({r["gamma"] for r in grid})
        claims.append(Claim(
            statement=f"the identity at RLHF-typical settings: beta {betas[0]:g}..{betas[-1]:g}, gamma up to "
                      f"{gammas[-1]:g} ({len(grid)} random stochastic MDPs, log-space solver; max error relative to "
                      "the value scale)",
            paper_value="exact (Proposition 1)", measured=rel, kind=Kind.CHECK,
            ruling=verdicts.bound(rel, 1e-8, sense="<=", exact=True), source=SOURCE,
            note=f"{n_under}/{len(grid)} optimal policies have probabilities below float64's range (min log pi "
                 f"{min(r['min_log_pi'] for r in grid):.0f}), so they exist only as log-policies; the solver and "
                 "the identity run in log space and raise instead of returning NaN. Largest absolute error "
                 f"{max(r['identity_error'] for r in grid):.1e} (values reach {1 / (1 - gammas[-1]):.0f}x the "
                 "reward scale at the longest horizon)."))
    return claims


def _boot(n: int, fn, seed: int, n_resamples: int) -> tuple[float, float]:
    """Percentile 95% interval of ``fn(task indices)``, resampling tasks (:func:`divelab.stats.bootstrap_ci`)."""
    return stats.bootstrap_ci(np.arange(n), lambda i: float(fn(i.astype(int))), n_resamples=n_resamples, seed=seed,
                              method="percentile")


def _lm_claims(lm: dict[str, Any], seed: int, n_boot: int) -> list[Claim]:
    """Per test bed: best-of-n, AUROC, failure localisation, step correlation, dependence on the aggregation."""
    from divelab.training.progress_advantage.lmcheck import best_of_n_per_task

    claims: list[Claim] = []
    for env_name, res in lm.items():
        pol = res["policy"]
        n = pol["n"]
        sc = pol["_scores"]
        success = np.array(sc["success"], dtype=bool)
        fit = cross_fitted(pol["_per_task"])
        prog_tasks = fit["per_task"]
        base_tasks = {k: best_of_n_per_task(np.array(sc[k]), success, n) for k in pol["baselines"]}
        order = np.concatenate([np.flatnonzero(np.arange(len(prog_tasks)) % 2 == 1),
                                np.flatnonzero(np.arange(len(prog_tasks)) % 2 == 0)])
        # every confidence baseline, in the same task order as the progress score; the verdict is on the best
        records = baseline_records({k: 100 * v[order] for k, v in base_tasks.items()}, seed=seed)
        best_base = strongest(records, "higher")["name"]
        diff = 100 * (prog_tasks - base_tasks[best_base][order])
        ci = stats.bootstrap_ci(diff, seed=seed, method="percentile")
        default = pol["progress"]["sum/sum"]["best_of_n"]
        measured = float(prog_tasks.mean())
        cmd = res.get("command_level")
        cmd_bo = (f" Command level (the log-ratio of the engine's command softmax, the distribution the KL "
                  f"regularised): cross-fitted {100 * cross_fitted(cmd['_per_task'])['per_task'].mean():.1f}%, "
                  f"sum/sum {100 * cmd['progress']['sum/sum']['best_of_n']:.1f}%.") if cmd else ""
        claims.append(Claim(
            statement=f"best-of-{n} success with the progress score beats the best confidence baseline ({env_name}, "
                      "policy rollouts; aggregation chosen on the other half of the groups)",
            paper_value="38.8% vs 29.0% (Self-Certainty) / 27.4% (DeepConf), Gemma4-4B; 62.1% vs 51-55%, "
                        "Qwen3.5-9B: +7 to +11 points",
            measured=float(diff.mean()), unit="points over the best baseline", ci=ci, kind=Kind.EMPIRICAL,
            baseline=f"{best_base}: best-of-{n} {100 * base_tasks[best_base].mean():.1f}% (progress "
                     f"{100 * measured:.1f}%)",
            ruling=verdicts.direction(float(diff.mean()), ci, paper=(7.1, 11.4), tol=0.5, tol_kind="rel"),
            baselines=records, better="higher", compared_with=best_base,
            source=SOURCE + " (second-hand: the aiweekly review)",
            note=f"Random pick {100 * pol['mean_success']:.1f}%, any-of-{n} {100 * pol['oracle_best_of_n']:.1f}%; "
                 + ", ".join(f"{k} {100 * v['best_of_n']:.1f}%" for k, v in pol["baselines"].items())
                 + f"; progress with the theory's default sum/sum {100 * default:.1f}%; cross-fitted picks "
                 f"{fit['picked']}. The best baseline is picked on the same tasks (which favours it). Rule: the 95% "
                 "bootstrap CI over tasks of (progress - best baseline) lies above 0; size within ±50% of the "
                 "paper's +7..+11 points." + cmd_bo))
        pa = pol["progress"]
        if pol["baselines"]["mean token log-prob"]["auroc"] is not None:
            au_fit, au_ci = _crossfit_auroc_ci(pol, seed, n_boot)
            aus = [{"name": k, "value": float(v["auroc"]), "ci": None} for k, v in pol["baselines"].items()]
            best_k = strongest(aus, "higher")["name"]
            best_au = pol["baselines"][best_k]["auroc"]
            claims.append(Claim(
                statement=f"AUROC of the progress score for trajectory success, above the best confidence baseline "
                          f"({env_name}, policy rollouts; aggregation chosen on the other half of the groups)",
                paper_value="0.87 (vs 0.62 for Claude as judge), tau2-bench airline", measured=au_fit, ci=au_ci,
                kind=Kind.EMPIRICAL, baseline=f"{best_k}: AUROC {best_au:.3f}",
                ruling=verdicts.value(au_fit, paper=0.87, tol=0.05, tol_kind="abs", ci=au_ci, chance=best_au),
                baselines=aus, better="higher", compared_with=best_k,
                source=SOURCE,
                note="Confidence baselines: " + ", ".join(f"{k} {v['auroc']:.3f}" for k, v in pol["baselines"].items())
                     + f"; progress sum/sum {pa['sum/sum']['auroc']:.3f}, min/last {pa['min/last']['auroc']:.3f}"
                     + (f"; command level cross-fitted {_crossfit_auroc(cmd):.3f}" if cmd else "")
                     + ". Rule: direction = the bootstrap CI over tasks (aggregation picks fixed) lies above the best "
                       "confidence baseline's AUROC; size = within ±0.05 of 0.87. No LLM judge here."))
        loc = pol["localisation"]
        if pol["n_localised"] > 0:
            acc, k_loc = loc["progress (sum)"], pol["n_localised"]
            rnd, lc = loc["random step"], loc["least-confident step"]
            ci_l = stats.proportion_ci(int(round(acc * k_loc)), k_loc)
            locs = [{"name": "random step", "value": 100 * rnd, "ci": None},
                    {"name": "least-confident step", "value": 100 * lc, "ci": None}]
            claims.append(Claim(
                statement=f"failure localisation: argmin of the running sum of step advantages = the known first "
                          f"wrong step ({env_name}, {k_loc} failed policy rollouts)",
                paper_value="used for failure attribution (Who&When); no accuracy in the notes",
                measured=100 * acc, unit="%", ci=(100 * ci_l[0], 100 * ci_l[1]), kind=Kind.EMPIRICAL,
                baseline=f"least-confident step {100 * lc:.1f}%, random step {100 * rnd:.1f}%",
                ruling=verdicts.value(100 * acc, ci=(100 * ci_l[0], 100 * ci_l[1]), chance=100 * max(rnd, lc),
                                      why="the notes give no localisation accuracy"),
                baselines=locs,
                better="higher", compared_with=strongest(locs, "higher")["name"],
                source=SOURCE,
                note="Per token aggregation: "
                     + ", ".join(f"{k[10:-1]} {100 * v:.1f}%" for k, v in loc.items() if k.startswith("progress"))
                     + (f"; command level {100 * cmd['localisation']['progress (sum)']:.1f}%" if cmd else "")
                     + ". Rule: the Wilson 95% CI lies above the stronger of the two baselines."))
        mc = pol.get("step_corr_mc")
        raw_mc = pol.get("_mc")
        if mc and raw_mc and mc["progress"] is not None:
            from divelab.training.progress_advantage.lmcheck import _spearman

            xs, lps, ys = (np.asarray(raw_mc[k]) for k in ("progress", "policy log-prob", "mc"))

            def rho(i: np.ndarray, x: np.ndarray = xs, y: np.ndarray = ys) -> float:
                r = _spearman(x[i], y[i])
                return 0.0 if r is None else r

            rho_p = float(mc["progress"])
            ci_r = _boot(len(ys), rho, seed, n_boot)
            rho_lp = mc["policy log-prob"]
            claims.append(Claim(
                statement=f"step scores track the policy's true advantage (Spearman rho with Monte Carlo "
                          f"P(win|h,a) - P(win|h), {mc['n_steps']} steps, {env_name})",
                paper_value="beta*log pi/pi_ref = A* at the optimum", measured=rho_p, ci=ci_r, kind=Kind.EMPIRICAL,
                baseline=f"policy log-prob of the action: rho {_r(rho_lp)}",
                ruling=verdicts.value(rho_p, ci=ci_r, chance=max(0.0, rho_lp or 0.0),
                                      why="the paper states an identity at the optimum, not a correlation for a "
                                          "trained policy"),
                **({"baselines": [{"name": "policy log-prob", "value": float(rho_lp), "ci": None}],
                    "better": "higher", "compared_with": "policy log-prob"} if rho_lp is not None else {}),
                source=SOURCE,
                note=(f"Command-level progress rho {_r(mc['progress (command level)'])}; "
                      if "progress (command level)" in mc else "")
                     + f"against the oracle's optimal advantage Q*-V* (all labelled steps): progress "
                     f"{_r(pol['step_corr_oracle']['progress'])}, policy log-prob "
                     f"{_r(pol['step_corr_oracle']['policy log-prob'])}. {mc['rollouts_per_estimate']} rollouts per "
                     "estimate, so MC noise caps rho. Rule: the bootstrap CI over steps lies above both 0 and the "
                     "policy log-prob's rho."))
        # dependence on the aggregation: does tuning it (on the other half) beat the theory's default sum/sum?
        dflt = pol["_per_task"]["sum/sum"][order]
        gain = 100 * (prog_tasks - dflt)
        ci_g = stats.bootstrap_ci(gain, seed=seed + 1, method="percentile")
        vals = [v["best_of_n"] for v in pa.values()]
        n_beat = sum(v > max(b["best_of_n"] for b in pol["baselines"].values()) for v in vals)
        claims.append(Claim(
            statement=f"dependence on the aggregation: the token/step aggregation chosen on the other half of the "
                      f"groups beats the theory's default sum/sum (best-of-{n}, {env_name})",
            paper_value="aggregation tuned per backbone/task (max/min for Gemma4-4B, min/last for Qwen3.5-9B); an "
                        "admitted soft spot", measured=float(gain.mean()), unit="points", ci=ci_g, kind=Kind.EMPIRICAL,
            baseline=f"sum/sum: best-of-{n} {100 * default:.1f}%",
            ruling=verdicts.direction(float(gain.mean()), ci_g, why="the paper reports the tuned choices, not the "
                                      "gain of tuning"),
            source=SOURCE,
            note=f"Spread over all 5 token x 6 step aggregations {100 * min(vals):.0f}%..{100 * max(vals):.0f}% "
                 f"(in-sample), {n_beat}/{len(vals)} above the best baseline; cross-fitted picks {fit['picked']}. "
                 "Rule: the 95% bootstrap CI over tasks of (tuned - sum/sum) lies above 0; if it covers 0 the "
                 "dependence is not separated from noise. Full tables in details."))
    claims.append(not_checkable(
        "best-of-8 and AUROC on BFCLv4 / WebShop / AgentDojo / tau2-bench / Who&When with Gemma4-4B, "
        "Qwen3.5-9B, Qwen3-14B, Olmo-3-7B pairs, and the Claude-as-judge baseline",
        "38.8% / 62.1% best-of-8; AUROC 0.87 vs 0.62",
        "no pretrained weights, benchmarks or API models are reachable from this machine; the TextWorld games and "
        "tiny LMs above stand in", source=SOURCE))
    return claims


def _r(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _crossfit_picks(pol: dict[str, Any]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The aggregation picked on each half of the groups (by AUROC), the labels and each rollout's group."""
    from divelab.training.progress_advantage.aggregate import auroc

    raw = pol["_raw"]
    y = np.array(pol["_scores"]["success"], dtype=bool)
    task = np.arange(len(y)) // pol["n"]
    picks = []
    for fit in (task % 2 == 0, task % 2 == 1):
        def au(k: str, m: np.ndarray = fit) -> float:
            yy = y[m]
            return auroc(np.array(raw[k])[m], yy) if 0 < yy.sum() < len(yy) else 0.5
        picks.append(max(raw, key=au))
    return picks, y, task


def _crossfit_eval(pol: dict[str, Any], picks: list[str], y: np.ndarray, task: np.ndarray,
                   tasks: np.ndarray | None = None) -> float:
    """Mean over the two halves of the AUROC of the other half's pick, on ``tasks`` (all by default;
    a bootstrap resample of group indices, with repeats)."""
    from divelab.training.progress_advantage.aggregate import auroc

    raw = pol["_raw"]
    n_tasks = int(task.max()) + 1
    tasks = np.arange(n_tasks) if tasks is None else tasks
    members = [np.flatnonzero(task == t) for t in range(n_tasks)]
    vals = []
    for h, chosen in enumerate(picks):  # picked on half h, evaluated on the other half
        rows = np.concatenate([members[t] for t in tasks if t % 2 != h] or [np.array([], dtype=int)])
        yy = y[rows]
        vals.append(auroc(np.array(raw[chosen])[rows], yy) if 0 < yy.sum() < len(yy) else 0.5)
    return float(np.mean(vals))


def _crossfit_auroc(pol: dict[str, Any]) -> float:
    picks, y, task = _crossfit_picks(pol)
    return _crossfit_eval(pol, picks, y, task)


def _crossfit_auroc_ci(pol: dict[str, Any], seed: int, n_resamples: int) -> tuple[float, tuple[float, float]]:
    """The cross-fitted AUROC and a percentile bootstrap interval over groups, with the picks fixed."""
    picks, y, task = _crossfit_picks(pol)
    point = _crossfit_eval(pol, picks, y, task)
    ci = _boot(int(task.max()) + 1, lambda i: _crossfit_eval(pol, picks, y, task, i), seed, n_resamples)
    return point, ci


def _figures(ex: dict[str, Any], lm: dict[str, Any]) -> list[Figure]:
    import matplotlib.pyplot as plt

    figs = []
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
    s = [r["slip"] for r in ex["slips"]]
    ax[0].semilogy(s, [max(r["identity_error"], 1e-17) for r in ex["slips"]], "o-", label="advantage identity")
    ax[0].semilogy(s, [max(r["reward_gap_mean"], 1e-17) for r in ex["slips"]], "s-", label="reward recovery (mean)")
    ax[0].set_xlabel("slip probability")
    ax[0].set_ylabel("|error|")
    ax[0].legend()
    ax[0].set_title("beta log pi*/pi_ref vs Q*-V* and vs r")
    pe, ps = ex["pg_exact"], ex["pg_sampled"]
    ax[1].semilogy(pe["steps"], pe["identity_error"], label="exact-gradient PG (max)")
    ax[1].semilogy(ps["steps"], ps["identity_error"], label="REINFORCE (max)")
    ax[1].semilogy(ps["steps"], ps["mean_error"], label="REINFORCE (occupancy mean)")
    ax[1].set_xlabel("policy-gradient step")
    ax[1].set_ylabel("|beta log pi/pi_ref - A*|")
    ax[1].legend()
    ax[1].set_title("KL-regularised PG, slip 0.2")
    figs.append(Figure.from_matplotlib(fig, "identity", "Left: the advantage identity holds at every slip while the "
                                       "reward-recovery reading breaks. Right: a trained tabular policy's log-ratio "
                                       "approaching Q*-V*."))
    for env_name, res in lm.items():
        pol = res["policy"]
        keys = list(pol["progress"])
        fig, ax = plt.subplots(figsize=(11, 3.6))
        ax.bar(range(len(keys)), [100 * pol["progress"][k]["best_of_n"] for k in keys], color="tab:blue")
        for name, b in pol["baselines"].items():
            ax.axhline(100 * b["best_of_n"], ls="--", lw=1, label=name, color={"mean token log-prob": "tab:red",
                       "negative entropy": "tab:gray", "self-certainty": "tab:green"}.get(name, "tab:orange"))
        ax.axhline(100 * pol["mean_success"], ls=":", color="k", label="random pick")
        ax.set_xticks(range(len(keys)), keys, rotation=90, fontsize=7)
        ax.set_ylabel(f"best-of-{pol['n']} success (%)")
        ax.set_title(f"every token/step aggregation, {env_name} game, policy rollouts")
        ax.legend(fontsize=7)
        slug = "".join(ch if ch.isalnum() else "-" for ch in env_name.lower()).strip("-")
        figs.append(Figure.from_matplotlib(fig, f"aggregations-{slug}",
                                           f"Best-of-{pol['n']} success for each aggregation ({env_name})."))
    return figs
