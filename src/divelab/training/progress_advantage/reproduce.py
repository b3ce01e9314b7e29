"""Reproduction of E173, progress advantage (arXiv 2606.26080): the exact tabular check and the
language-model check on the RL engine's TextWorld games (and, at full scale, a key-and-door text game and
public games: TextWorldExpress's coin collector, scored on held-out dev games)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from divelab import verdicts
from divelab.claims import Claim, Figure, Kind, Reproduction, not_checkable
from divelab.rl.presets import TESTBEDS
from divelab.rl.substrate_testbed import SubstrateTestbedConfig
from divelab.rl.testbed import TestbedConfig
from divelab.training.progress_advantage import mdp as M
from divelab.training.progress_advantage.public_check import COIN_PARAMS, PublicPlan
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
    training_runs: int
    """independent trainings of each TextWorld pair (run r: warm start, GRPO and evaluation seeded seed + r); the
    language-model claims' unit: one trained policy is one draw of the recipe."""
    keydoor_runs: int
    """trainings of each key-and-door pair (0: the second test bed is not run; each trains its own pair of tiny
    LMs, minutes of CPU)."""
    real_llm: RealLLMConfig | None
    """SmolLM2-135M-Instruct against a KL-RL LoRA policy over it: its states, fine-tune and evaluation (minutes
    of CPU and the model download); None: not measured at this scale. Its seed is the run's."""
    public: PublicPlan | None
    """the same language-model check on public games, TextWorldExpress's coin collector scored on held-out dev
    games, with an exact oracle from each game's checked state graph (public_check.py); None: not measured at this
    scale (it plays a Java simulator and trains its own pairs)."""


PUBLIC_FULL = PublicPlan(
    testbed=SubstrateTestbedConfig(simulator="twx", game="coin", params=COIN_PARAMS,
                                   train_episodes=TESTBEDS["full"].n_games, eval_episodes=16,
                                   max_steps=TESTBEDS["full"].max_steps, sft_episodes=TESTBEDS["full"].sft_episodes,
                                   sft_steps=TESTBEDS["full"].sft_steps, sft_lr=TESTBEDS["full"].sft_lr),
    iterations=4, group_size=8, evaluation=EvalConfig(reps=20, n=8, mc_steps=300, mc_rollouts=64), training_runs=5,
    max_states=400, check_depth=2)
"""The public section at full: TextWorldExpress's coin collector on its largest map with the full TextWorld test bed's
step cap, warm-start recipe, GRPO iterations and group size, evaluated at the TextWorld deterministic variant's size
(2560 rollouts: 16 held-out games x 20 groups x 8, where TextWorld has 8 games x 40 groups; 300 Monte Carlo steps x
64 rollouts) over as many training runs, so both sides of each public/home-grown pair follow one recipe.

Sizing, from a probe pinned to one core while two other jobs ran on the machine: exploring the 24 games' graphs took
8 s, and the merge check 29 s at depth 1 or 123 s at depth 2 (3,000-4,500 simulator steps per game); one training
run took 36 s of warm start, 1.3 s of GRPO (played from the graphs) and 45 s of evaluation. Five runs and the
depth-2 check: 5 x 82 s + 135 s, about 9-10 minutes of one core (extrapolated; the budget is 15)."""

# the RL engine's test beds at smoke and full (shared with G2PO: their games and warm starts are cached once);
# quick has its own
PLANS = {
    "smoke": Plan(exact=ExactPlan(slips=(0.0, 0.2), random_mdps=20, small_betas=(0.01, 0.001),
                                  small_gammas=(0.9, 0.99), mdps_per_cell=1, pg_steps=300, pg_sampled_steps=100),
                  testbed=TESTBEDS["smoke"],
                  iterations=2, group_size=4, evaluation=EvalConfig(reps=2, n=4, mc_steps=4, mc_rollouts=4),
                  training_runs=2, keydoor_runs=0, real_llm=None, public=None),
    "quick": Plan(exact=ExactPlan(slips=(0.0, 0.05, 0.1, 0.2, 0.3, 0.4), random_mdps=200,
                                  small_betas=(1.0, 0.1, 0.01, 0.001), small_gammas=(0.5, 0.9, 0.99, 0.999),
                                  mdps_per_cell=1, pg_steps=2000, pg_sampled_steps=1000),
                  testbed=TestbedConfig(n_games=4, nb_rooms=3, nb_objects=3, quest_length=2, max_steps=8,
                                        min_random_success=0.1, max_states=120, sft_episodes=32, sft_steps=200,
                                        sft_lr=1e-2),
                  iterations=3, group_size=8, evaluation=EvalConfig(reps=20, n=8, mc_steps=100, mc_rollouts=32),
                  training_runs=5, keydoor_runs=0, real_llm=None, public=None),
    "full": Plan(exact=ExactPlan(slips=tuple(np.linspace(0, 0.6, 13).tolist()), random_mdps=2000,
                                 small_betas=(1.0, 0.1, 0.01, 0.001), small_gammas=(0.5, 0.9, 0.99, 0.999),
                                 mdps_per_cell=5, pg_steps=5000, pg_sampled_steps=3000),
                 testbed=TESTBEDS["full"],
                 iterations=4, group_size=8, evaluation=EvalConfig(reps=40, n=8, mc_steps=300, mc_rollouts=64),
                 training_runs=5, keydoor_runs=3, real_llm=RealLLMConfig(), public=PUBLIC_FULL),
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
def textworld_check(plan: Plan, seed: int) -> dict[str, list[dict[str, Any]]]:
    """The headline LM check: the RL engine's TextWorld games, a GRPO+KL policy and its reference, trained
    ``plan.training_runs`` times (run r: warm start, training and evaluation seeded ``seed + r``)."""
    from divelab.training.progress_advantage.twcheck import TWCheckConfig, run_variant, variants

    out: dict[str, list[dict[str, Any]]] = {}
    for r in range(plan.training_runs):
        s = seed + r
        base = TWCheckConfig(testbed=replace(plan.testbed, seed=s), iterations=plan.iterations,
                             group_size=plan.group_size, seed=s)
        for name, cfg in variants(base, SLIP).items():
            out.setdefault(name, []).append(run_variant(cfg, plan.evaluation, s))
    return out


def keydoor_check(seed: int, runs: int) -> dict[str, list[dict[str, Any]]]:
    """The second, exactly solvable test bed: a key-and-door text game of our own with a tiny LM
    trained by KL-regularised REINFORCE, ``runs`` times (full scale only: it trains its own models)."""
    from divelab.training.progress_advantage.lmcheck import (
        LMCheckConfig,
        all_tasks,
        evaluate_rollouts,
        model_pair,
        sample_tasks,
    )

    out: dict[str, list[dict[str, Any]]] = {}
    for r in range(runs):
        s = seed + r
        base = LMCheckConfig(sft_steps=300, rl_iters=40, seed=s)
        for name, cfg in {"key-door deterministic": base,
                          f"key-door slippery (slip {SLIP})": replace(base, slip=SLIP, slack=2)}.items():
            policy, reference, tok, curves = model_pair(cfg)
            eps = sample_tasks(policy, tok, cfg.spec, all_tasks(cfg.spec) * 5, 8, seed=s + 7)
            res: dict[str, Any] = {"config": cfg.__dict__, "curves": curves}
            res["policy"] = evaluate_rollouts(policy, reference, tok, cfg.spec, cfg.beta, eps, 8, mc_model=policy,
                                              mc_steps=200, mc_rollouts=16, seed=s)
            out.setdefault(name, []).append(res)
    return out


def lm_check(plan: Plan, seed: int) -> dict[str, list[dict[str, Any]]]:
    out = textworld_check(plan, seed)
    if plan.keydoor_runs:
        out.update(keydoor_check(seed, plan.keydoor_runs))
    return out


def run(plan: Plan, seed: int) -> Reproduction:
    """The exact tabular check, then the language-model checks (at full also on public games), then (when planned)
    the real LLM."""
    from divelab.training.progress_advantage.public_check import LABEL, public_check
    from divelab.training.progress_advantage.public_claims import public_claims, public_setup

    rep = Reproduction(system="progress-advantage",
                       title="Neglected Free Lunch from Post-training: Progress Advantage for LLM Agents",
                       scale="", seed=seed)
    ex = exact_check(plan.exact, seed)
    lm = lm_check(plan, seed)
    pub = public_check(plan.public, seed)
    trained = "runs" in pub  # the public section trained its pairs (not unplanned, unavailable or inexact)
    rep.details = {"exact": ex, "lm": {name: [_strip(r) for r in runs] for name, runs in lm.items()},
                   "public": {**pub, "runs": [_strip(r) for r in pub["runs"]]} if trained else pub}
    rep.claims += _exact_claims(ex)
    rep.claims += _lm_claims(lm, seed)
    rep.claims += public_claims(pub, seed)
    rep.figures += _figures(ex, {**lm, LABEL: pub["runs"]} if trained else lm)
    rep.setup = _setup(ex, lm, plan) + public_setup(pub)
    if plan.real_llm is not None:  # SmolLM2-135M-Instruct and a KL-RL LoRA policy over it
        from divelab.training.progress_advantage import real_llm

        real_llm.add_to(rep, plan.real_llm, seed)
    return rep


def _setup(ex: dict[str, Any], lm: dict[str, list[dict[str, Any]]], plan: Plan) -> str:
    tw = next(iter(lm.values()))[0]["config"]
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
        "(DeepConf-style), negative entropy, self-certainty, and mean command log-prob; trivial baselines: a random "
        "pick, the first rollout, the starting model's own mean token log-prob, a random scorer. Every number is "
        f"measured on {plan.training_runs} independent training runs of each pair (warm start, GRPO and rollouts "
        "reseeded), the unit of every language-model claim's interval. Negative control: the same statistics with "
        "each step's log-ratio moved to a random other step of the run. Labels: the game's whole "
        "state graph gives the optimal discounted value (gamma 0.9, with slip), so the first wrong step of a failed "
        "episode is its first step off every optimal path; the policy's true advantage P(win|h,a) - P(win|h) is "
        f"estimated by {tw['eval']['mc_rollouts']} Monte Carlo rollouts each from replayed prefixes at "
        f"{tw['eval']['mc_steps']} random steps. Stand-ins: tiny LMs for Gemma4/Qwen3.5, TextWorld for "
        "BFCL/WebShop/tau2-bench, the graph oracle's first wrong step for Who&When annotations."
        + (" At full scale the key-and-door game of lmcheck.py (a tiny LM fine-tuned on a noisy expert, then "
           f"KL-regularised REINFORCE, beta 0.1; {plan.keydoor_runs} training runs) is a second test bed."
           if plan.keydoor_runs else "")
    )


def _strip(res: dict[str, Any]) -> dict[str, Any]:
    """One run's result without its raw per-rollout arrays (keys starting with "_")."""
    r = dict(res)
    for src in ("policy", "reference", "command_level"):
        if src in res:
            r[src] = {k: v for k, v in res[src].items() if not k.startswith("_")}
    return r


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


# how each test bed's policies were trained, for the claims' falsifiers
TRAINED = {"TextWorld": "trained by the RL engine's GRPO on generated TextWorld games",
           "key-door": "trained by KL-regularised REINFORCE on the key-and-door game"}


def _lm_claims(lm: dict[str, list[dict[str, Any]]], seed: int) -> list[Claim]:
    """Per test bed, over its training runs: best-of-n, AUROC, failure localisation, step correlation, dependence
    on the aggregation (:mod:`divelab.training.progress_advantage.lm_claims`)."""
    from divelab.training.progress_advantage.lm_claims import variant_claims

    claims: list[Claim] = []
    for env_name, runs in lm.items():
        claims += variant_claims(env_name, runs, TRAINED[env_name.split()[0]], seed)
    claims.append(not_checkable(
        "best-of-8 and AUROC on BFCLv4 / WebShop / AgentDojo / tau2-bench / Who&When with Gemma4-4B, "
        "Qwen3.5-9B, Qwen3-14B, Olmo-3-7B pairs, and the Claude-as-judge baseline",
        "38.8% / 62.1% best-of-8; AUROC 0.87 vs 0.62",
        "no pretrained weights, benchmarks or API models are reachable from this machine; the TextWorld games and "
        "tiny LMs above stand in", source=SOURCE))
    return claims


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
    for env_name, runs in lm.items():
        pol = runs[0]["policy"]  # the first training run
        keys = list(pol["progress"])
        fig, ax = plt.subplots(figsize=(11, 3.6))
        ax.bar(range(len(keys)), [100 * pol["progress"][k]["best_of_n"] for k in keys], color="tab:blue")
        for name, b in pol["baselines"].items():
            ax.axhline(100 * b["best_of_n"], ls="--", lw=1, label=name, color={"mean token log-prob": "tab:red",
                       "negative entropy": "tab:gray", "self-certainty": "tab:green"}.get(name, "tab:orange"))
        ax.axhline(100 * pol["mean_success"], ls=":", color="k", label="random pick")
        ax.set_xticks(range(len(keys)), keys, rotation=90, fontsize=7)
        ax.set_ylabel(f"best-of-{pol['n']} success (%)")
        ax.set_title(f"every token/step aggregation, {env_name} game, policy rollouts (first training run)")
        ax.legend(fontsize=7)
        slug = "".join(ch if ch.isalnum() else "-" for ch in env_name.lower()).strip("-")
        figs.append(Figure.from_matplotlib(fig, f"aggregations-{slug}",
                                           f"Best-of-{pol['n']} success for each aggregation ({env_name})."))
    return figs
