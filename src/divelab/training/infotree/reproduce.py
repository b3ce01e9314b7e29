"""Reproduce InfoTree's claims (E162) on the decision chain and random brute-forceable instances."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from divelab import stats, verdicts
from divelab.claims import Claim, Figure, Kind, Reproduction, not_checkable
from divelab.comparisons import against_strongest
from divelab.envs.base import EnvFactory
from divelab.envs.maze import MazeSpec
from divelab.envs.substrate import SubstrateUnavailable
from divelab.progress import track
from divelab.rl.presets import GROUP_SIZE, KL_COEF, LR, PPO_EPOCHS, TESTBEDS
from divelab.rl.substrate_testbed import SubstrateTestbedConfig
from divelab.rl.testbed import TestbedConfig
from divelab.stages import stage
from divelab.training.infotree.allocator import AllocatorConfig, allocate_and_sample
from divelab.training.infotree.arena import (
    ArenaConfig,
    HeldOut,
    StartMixed,
    random_success,
    run_arena,
    start_mixed,
)
from divelab.training.infotree.chain import DecisionChainEnv, TabularPolicy
from divelab.training.infotree.collapse import (
    DifficultyMix,
    collapse_probability,
    mixed_ratio_curve,
    simulate_collapse,
)
from divelab.training.infotree.maze_env import MazeGames, maze_policy_factory
from divelab.training.infotree.objective import (
    brute_force,
    greedy,
    instance_depth,
    random_tree_instance,
)
from divelab.training.infotree.overhead import measure_overhead
from divelab.training.infotree.proxy import pearson_cluster_ci, proxy_true_correlation
from divelab.training.infotree.train import ChainTrainConfig, train_chain
from divelab.training.infotree.tree import SamplerConfig, UUCBConfig, sample_tree

SOURCE = "arXiv 2605.05262; week-in-review E162"
# numbers known only from the review's summary, not from the paper itself
REVIEW = "arXiv 2605.05262 as summarised in week-in-review E162"
A, DMAX, P_REVEAL, Q_POLICY = 4, 16, 0.5, 0.7


def _mixed_at_budget(policy: TabularPolicy, ds: np.ndarray, G: int, seed: int, p_reveal: float = P_REVEAL,
                     allocator: bool = True, arms: tuple[str, ...] | None = None
                     ) -> dict[str, tuple[np.ndarray, float]]:
    """(per-prompt mixed outcome, env steps used / budget) for each sampler on the same prompts."""
    envs = [DecisionChainEnv(d=int(d), n_actions=A, p_reveal=p_reveal) for d in ds]
    budgets = [G * int(d) for d in ds]
    out = {}
    for name, scfg in (("independent", SamplerConfig(init_rollouts=1, uucb=UUCBConfig(selector="independent"))),
                       ("tree", SamplerConfig()),
                       (NO_ENTROPY, SamplerConfig(uucb=UUCBConfig(lam_entropy=0.0)))):
        if arms is not None and name not in arms:
            continue
        rng = np.random.default_rng(seed)
        trees = [sample_tree(e, policy, b, scfg, rng) for e, b in zip(envs, budgets, strict=True)]
        out[name] = (np.array([float(t.prompt_mixed) for t in trees]),
                     sum(t.stats.env_steps for t in trees) / sum(budgets))
    if allocator:
        trees = allocate_and_sample(envs, policy, budgets, AllocatorConfig(), np.random.default_rng(seed))
        out["tree+allocator"] = (np.array([float(t.prompt_mixed) for t in trees]),
                                 sum(t.stats.env_steps for t in trees) / sum(budgets))
    return out


NO_ENTROPY = "tree (λ_entropy=0)"
# the engine's reference trees (divelab.training.infotree.engine): a random unfinished node expanded (the trivial
# selector) and the sham tree (the tree sampler's code path and budget rule with branching removed)
RANDOM_NODE, ROOT_ONLY = "tree (random node)", "tree (root only)"
ARENA_SAMPLERS = ("independent", "tree", ROOT_ONLY)
START_SAMPLERS = ("independent", "tree", RANDOM_NODE, ROOT_ONLY)
TW, TW_GIGPO, MAZES = "TextWorld", "TextWorld, gigpo for both arms", "E163 mazes"
EXTERNAL = "TextWorldExpress coin collector, held-out games"
# the public family's games: TextWorldExpress's coin collector on its largest map (the jar allows at most 11
# locations), divelab's default settings otherwise (no doors, no distractors); a uniform random player wins
# about one game in seven within the TextWorld family's step cap, as hard as the generated TextWorld games
COIN_PARAMS = "numLocations=11,numDistractorItems=0,includeDoors=0,limitInventorySize=0"
# the decision chain's share of revealed errors, re-run at its two extremes on the same prompts: how much of the
# tree's mixed-outcome gain the simulator's constant decides
P_REVEAL_SWEEP = (0.0, 1.0)
# said in the set-up text and in Reproduction.planted
PLANTED = ("What the set-up plants: on the decision chain every outcome is drawn from constants we chose (per-step "
           f"accuracy {Q_POLICY}, a wrong step revealed with probability {P_REVEAL}, d~U{{1..{DMAX}}} decisions, a "
           "tabular policy that shares each step's logits across prompts), and the tree's budget is counted in "
           "those steps. The tree's mixed-outcome gain there, the allocator's and the entropy term's, the proxy's "
           "fit and the tabular training that rides on them are arithmetic of those constants (the same prompts "
           "re-run with every error revealed and with every error silent show how far that constant moves the "
           "gain), so they are listed apart. "
           "The mixed-outcome ratio is also measured on generated TextWorld games with a warm-started language "
           "policy, where no constant of ours sets who wins.")
# interleaved repeats of the bookkeeping-overhead timing (a timing verdict needs at least 5)
OVERHEAD_REPEATS = 5
SAMPLER_ARMS = ("independent", "tree", NO_ENTROPY, "tree+allocator")


@dataclasses.dataclass(frozen=True)
class Plan:
    mc: int
    """simulated GRPO groups per (q, d, G) cell when checking the collapse law against Monte Carlo."""
    prompts: int
    """decision-chain prompts per seed in the mixed-ratio comparison of the samplers."""
    seeds: int
    """seeds (fresh prompt draws) of that comparison."""
    Gs: tuple[int, ...]
    """budgets G (in full-length rollouts' worth of env steps) of that comparison; G=8 carries the claims."""
    inst: int
    """random small tree instances (4-7 nodes) on which greedy is compared with the brute-force optimum."""
    deep_inst: int
    """random deep, chain-like tree instances (16-28 nodes) for the same comparison."""
    proxy_prompts: int
    """decision-chain prompts whose trees score the proxy (UUCB) against the true marginal gain."""
    train_iters: int
    """GRPO iterations of each tabular training run on the decision chain."""
    train_seeds: int
    """training runs per sampler on the decision chain (claims pair samplers by seed)."""
    train_prompts: int
    """prompts per iteration of those runs."""
    oh_prompts: int
    """prompts per timed batch when measuring the bookkeeping overhead."""
    oh_d: int
    """decisions per prompt in that timing."""
    arena_seeds: int
    """training runs per sampler in the engine arena (TextWorld and mazes)."""
    textworld: TestbedConfig
    """the TextWorld games and warm-started policy of the arena (the RL engine's test bed at the same scale,
    divelab.rl.presets, which G2PO also trains on; the warm start's seed is the run's)."""
    textworld_group_size: int
    """group budget, in rollouts' worth per game, of the TextWorld arena (the engine's GRPO group at the same
    scale)."""
    textworld_env_steps: int
    """env steps of training each TextWorld arm gets before it is scored."""
    maze_env_steps: int
    """env steps of training each maze arm gets before it is scored."""
    maze_group_size: int
    """group budget, in rollouts' worth per maze, of the maze arena."""
    eval_episodes: int
    """sampled episodes per game when scoring an arena arm after training."""
    start_batches: int
    """batches, with the starting policy, over which the arena's mixed-group share before training is measured."""
    external: SubstrateTestbedConfig | None
    """the arena's public family: TextWorldExpress's coin collector, trained on its train split and scored on
    held-out games of its dev split (None skips it: it plays a Java simulator for minutes)."""
    external_env_steps: int
    """env steps of training each arm of the public family gets before it is scored."""


PLANS = {
    "smoke": Plan(mc=400, prompts=16, seeds=2, Gs=(8,), inst=30, deep_inst=6, proxy_prompts=6, train_iters=3,
                  train_seeds=2, train_prompts=6, oh_prompts=1, oh_d=5, arena_seeds=2,
                  textworld=TESTBEDS["smoke"], textworld_group_size=GROUP_SIZE["smoke"],
                  textworld_env_steps=60, maze_env_steps=100, maze_group_size=4, eval_episodes=4, start_batches=2,
                  external=None, external_env_steps=0),
    "quick": Plan(mc=4000, prompts=120, seeds=3, Gs=(4, 8, 16), inst=300, deep_inst=100, proxy_prompts=40,
                  train_iters=30, train_seeds=4, train_prompts=16, oh_prompts=4, oh_d=10, arena_seeds=5,
                  textworld=TESTBEDS["quick"], textworld_group_size=GROUP_SIZE["quick"],
                  textworld_env_steps=1000, maze_env_steps=1500, maze_group_size=8, eval_episodes=32,
                  start_batches=8, external=None, external_env_steps=0),
    # G=32 and 64 dropped (a third of the earlier full run): they only drew the planted decision chain's curve,
    # and the time goes to the sham tree trained beside every arena arm
    "full": Plan(mc=40000, prompts=400, seeds=8, Gs=(4, 8, 16), inst=2000, deep_inst=1000,
                 proxy_prompts=200, train_iters=80, train_seeds=10, train_prompts=32, oh_prompts=16, oh_d=12,
                 arena_seeds=10, textworld=TESTBEDS["full"], textworld_group_size=GROUP_SIZE["full"],
                 textworld_env_steps=3000, maze_env_steps=4000, maze_group_size=8, eval_episodes=64,
                 start_batches=16,
                 # the TextWorld family's step cap, warm-start recipe and env-step budget, on public games
                 external=SubstrateTestbedConfig(
                     simulator="twx", game="coin", params=COIN_PARAMS, train_episodes=TESTBEDS["full"].n_games,
                     eval_episodes=2 * TESTBEDS["full"].n_games, max_steps=TESTBEDS["full"].max_steps,
                     sft_episodes=TESTBEDS["full"].sft_episodes, sft_steps=TESTBEDS["full"].sft_steps,
                     sft_lr=TESTBEDS["full"].sft_lr),
                 external_env_steps=3000),
}


# Stage weights (divelab.stages): rough shares of a full run's time (a unit is about 10 s, scaled up from smoke's
# stage times by the plan's sizes). The collapse law, greedy on small trees and the figures are cheap and left
# out (they draw from one shared generator, so they stay unstaged).
W_MIXED_G8 = 1.4  # one seed of the samplers' mixed ratio at G=8 (cost grows with G)
W_DEEP_GREEDY, W_PROXY, W_CHAIN_RUN, W_OVERHEAD, W_SWEEP = 1.0, 2.0, 1.5, 4.0, 0.5
# three training arms per family (independent, tree, the sham tree), the earlier two-arm weights times 1.5
W_ARENA = {TW: 90.0, TW_GIGPO: 90.0, MAZES: 45.0, EXTERNAL: 120.0}
STAGE_WEIGHT = (PLANS["full"].seeds * sum(W_MIXED_G8 * G / 8 for G in PLANS["full"].Gs) + W_DEEP_GREEDY + W_PROXY
                + len(SAMPLER_ARMS) * PLANS["full"].train_seeds * W_CHAIN_RUN + sum(W_ARENA.values()) + W_OVERHEAD
                + W_SWEEP * len(P_REVEAL_SWEEP))


def _paired(a: np.ndarray, b: np.ndarray, seed: int = 0) -> tuple[float, tuple[float, float]]:
    """Mean of a - b over paired units with its 95% interval: a t-interval for a handful of seeds,
    a bootstrap for many units (prompts)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    m, lo, hi = stats.paired_diff_ci(a, b, method="t" if a.size < 30 else "bootstrap", seed=seed)
    return m, (lo, hi)


@dataclasses.dataclass
class ArenaFamily:
    """One env family of the arena: its games, starting policy and settings."""

    name: str
    new_policy: Callable[[], Any]
    make_env: EnvFactory
    game_ids: list[str]
    cfg: ArenaConfig
    games: str  # what the games are and who made them (said in the claims' falsifiers and notes)
    held_out: HeldOut | None = None  # the games it is scored on, when not the ones it trains on
    start_claim: bool = False  # InfoTree's mixed-outcome ratio with the starting policy is claimed on it
    start_from: str | None = None  # a family with the same start, games and budget whose start it shares


TW_GAMES = "generated TextWorld games (who wins one is decided by TextWorld's generator and the warm-started policy)"


def _external_family(plan: Plan, seed: int) -> ArenaFamily:
    """The public family: a TextWorldExpress game trained on its train split, scored on held-out dev games."""
    from divelab.rl.substrate_testbed import build_substrate_testbed

    ext = dataclasses.replace(plan.external, seed=seed)
    tb = build_substrate_testbed(ext)
    # as many scored episodes as the TextWorld family's (its games x eval_episodes), spread over the held-out games
    per_game = max(1, plan.eval_episodes * plan.textworld.n_games // len(tb.eval_game_ids))
    cfg = ArenaConfig(env_steps=plan.external_env_steps, group_size=plan.textworld_group_size, max_steps=ext.max_steps,
                      lr=LR, kl_coef=KL_COEF, ppo_epochs=PPO_EPOCHS, eval_episodes=per_game, samplers=ARENA_SAMPLERS)
    games = (f"TextWorldExpress's own {ext.game} games ({ext.params}), {len(tb.game_ids)} of its train split to train "
             f"on and {len(tb.eval_game_ids)} of its dev split to score on; the simulator and its games are public, "
             "none of them written or selected here")
    return ArenaFamily(EXTERNAL, tb.new_policy, tb.make_env, tb.game_ids, cfg, games,
                       held_out=(tb.make_eval_env, tb.eval_game_ids), start_claim=True)


def _arena_families(plan: Plan, seed: int) -> list[ArenaFamily]:
    """Each env family the arena trains on (the public one only when the plan has it)."""
    # TextWorld: the RL engine's test bed and GRPO settings (divelab.rl.presets: games a small policy
    # measurably learns; the warm start is cached and shared with G2PO's reproduction)
    from divelab.rl.testbed import build_testbed

    tb_cfg = dataclasses.replace(plan.textworld, seed=seed)
    tb = build_testbed(tb_cfg)
    tw_cfg = ArenaConfig(env_steps=plan.textworld_env_steps, group_size=plan.textworld_group_size,
                         max_steps=tb_cfg.max_steps, lr=LR, kl_coef=KL_COEF, ppo_epochs=PPO_EPOCHS,
                         eval_episodes=plan.eval_episodes, samplers=ARENA_SAMPLERS)
    # the E163 maze family: K=3 decisions, L=2 exits, dead ends W=1 deep; 4 fixed instances
    games = MazeGames(MazeSpec(K=3, L=2, W=1), n_mazes=4, seed=seed)
    mz_cfg = ArenaConfig(env_steps=plan.maze_env_steps, group_size=plan.maze_group_size, max_steps=10,
                         lr=1e-2, eval_episodes=plan.eval_episodes, samplers=ARENA_SAMPLERS)
    # the same TextWorld comparison with gigpo for both arms: its anchor groups (same state key)
    # compare a tree's siblings at their branch point, the Tree-GRPO-style credit (grpo compares
    # all leaves of a game, each shared prefix counted once per leaf)
    tw_gigpo = dataclasses.replace(tw_cfg, estimator="gigpo")
    return [ArenaFamily(TW, tb.new_policy, tb.make_env, tb.game_ids, tw_cfg, TW_GAMES, start_claim=True),
            ArenaFamily(TW_GIGPO, tb.new_policy, tb.make_env, tb.game_ids, tw_gigpo, TW_GAMES, start_from=TW),
            ArenaFamily(MAZES, maze_policy_factory(games, seed=seed), games.factory(), games.game_ids, mz_cfg,
                        "E163 mazes (each maze's exits are drawn by the maze generator)")]


def _t_diff(a: np.ndarray, b: np.ndarray) -> tuple[float, tuple[float, float]]:
    """Mean of a - b over training runs (paired by seed) with its 95% Student-t interval."""
    m, lo, hi = stats.paired_diff_ci(np.asarray(a, dtype=float), np.asarray(b, dtype=float), method="t")
    return m, (lo, hi)


def _claim_start_mixed(fam: ArenaFamily, sm: dict[str, StartMixed], n_batches: int, seed: int) -> Claim:
    """InfoTree's own quantity on a family's training games: the share of games whose group holds both a win and a
    loss, with the starting policy, tree against every other sampler at the same group budget (units: batch x game,
    clustered by game)."""
    cfg = fam.cfg
    pts = {k: 100 * v.mixed for k, v in sm.items()}
    games = sm["tree"].games
    cmp = against_strongest(pts["tree"], {k: pts[k] for k in ("independent", RANDOM_NODE)}, clusters=games,
                            seed=seed)
    c_eff, c_lo, c_hi = stats.cluster_diff_ci(pts[ROOT_ONLY], pts[cmp.strongest], games, seed=seed)
    ctl = verdicts.control(f"{ROOT_ONLY}: the tree sampler's code path and budget rule with branching removed, "
                           f"minus {cmp.strongest}", c_eff, (c_lo, c_hi))
    size = (dict(paper=58.1 - 45.0, tol=0.5) if cmp.strongest == "independent" else
            dict(why=f"the paper's +13 points is over independent sampling; the strongest here is {cmp.strongest}"))
    b_eff, b_lo, b_hi = stats.cluster_diff_ci(pts["tree"], pts[ROOT_ONLY], games, seed=seed)
    n_games = len(dict.fromkeys(games))
    steps = ", ".join(f"{k} {v.env_steps_per_game:.0f}" for k, v in sm.items())
    levels = ", ".join(f"{k} {v.mixed.mean():.1%}" for k, v in sm.items())
    return Claim(
        statement=f"Mixed-outcome ratio at an equal group budget with the starting policy ({fam.name}): tree vs "
                  "every other sampler",
        paper_value="~45% (independent, [S]) -> 58.1% (tree): about +13 points", source=SOURCE,
        measured=cmp.effect, ci=cmp.ci, unit="points", kind=Kind.EMPIRICAL, **cmp.claim_fields(),
        baseline=f"{cmp.strongest} {pts[cmp.strongest].mean():.1f}%",
        ruling=verdicts.direction(cmp.effect, cmp.ci, control=ctl, **size),
        falsifier=("Had the tree's leaves on these games agreed (all won or all lost) as often as independent "
                   "rollouts, or as a tree expanding random nodes, at the same group budget, the claim would fail; "
                   f"the games are {fam.games}, and no constant of ours decides who wins."),
        replication={"unit": "(batch, game) groups", "n": int(len(games)), "clustered_by": "game"},
        note=f"{n_games} games ({fam.games}), step cap {cfg.max_steps}, group budget {cfg.group_size} rollouts' worth "
             f"per game, {n_batches} batches, every sampler from the same starting policy and generator seed. Share "
             f"of mixed groups: {levels}. Env steps per game: {steps} (a tree's budget is G times the mean length of "
             "the game's root rollouts in earlier batches, its own first ones in the first batch, so it can spend a "
             f"little more or less than independent sampling; {ROOT_ONLY} has the same budget rule without "
             "branching). Difference per (batch, game), 95% cluster "
             "bootstrap over games (the games are few, so the interval is rough). Negative control: "
             f"{ROOT_ONLY} minus {cmp.strongest}, {c_eff:+.1f} [{c_lo:+.1f}, {c_hi:+.1f}] points. Tree minus "
             f"{ROOT_ONLY} (branching alone, under the same budget rule): {b_eff:+.1f} [{b_lo:+.1f}, {b_hi:+.1f}] "
             "points.")


def _arena_stage(fam: ArenaFamily, plan: Plan, seed: int, seeds: list[int]) -> tuple[float, Any, list]:
    """(uniform random player's success on the scored games, the samplers' start mixed ratios or None, the runs)."""
    score_env, score_ids = fam.held_out or (fam.make_env, fam.game_ids)
    return (random_success(score_env, score_ids, 64, fam.cfg.max_steps, seed),
            None if fam.start_from else start_mixed(fam.new_policy, fam.make_env, fam.game_ids, fam.cfg,
                                                    plan.start_batches, seed, START_SAMPLERS),
            run_arena(fam.new_policy, fam.make_env, fam.game_ids, fam.cfg, seeds, progress=track,
                      held_out=fam.held_out))


def _external_not_run(plan: Plan, seed: int) -> tuple[list[ArenaFamily], list[Claim]]:
    """The public family when the plan has it, or the claim saying why it could not run (no Java, no package)."""
    if plan.external is None:
        return [], []
    try:
        # not a stage: the family holds a running simulator, which cannot be pickled (its warm start is cached)
        return [_external_family(plan, seed)], []
    except SubstrateUnavailable as exc:
        why = f"the public simulator is not installed here: {exc}"
        return [], [not_checkable(f"Success after training at equal env steps, tree vs independent GRPO ({EXTERNAL})",
                                  "tree beats flat GRPO", why, source=SOURCE)]


def _claims_arena(plan: Plan, seed: int, rep: Reproduction) -> list[Claim]:
    """Tree vs independent GRPO at equal env steps on every family (TextWorld, the maze family, and at full a
    public TextWorldExpress game scored on held-out games), one claim each, and the mixed-outcome ratio with the
    starting policy on TextWorld and the public game."""
    seeds = [seed * 100 + s for s in range(plan.arena_seeds)]
    out: dict[str, Any] = {}
    public, claims = _external_not_run(plan, seed)
    families = _arena_families(plan, seed) + public
    starts: dict[str, dict[str, StartMixed]] = {}
    fig, axes = plt.subplots(1, len(families), figsize=(5 * len(families), 3.6))
    for ax, fam in zip(axes, families, strict=True):
        cfg, game_ids = fam.cfg, fam.game_ids
        # the gigpo family samples from the same start, games and budget as TextWorld: its start is TextWorld's
        rnd, mix0, runs = stage(f"arena {fam.name}: {len(cfg.samplers)} samplers x {len(seeds)} seeds",
                                lambda fam=fam: _arena_stage(fam, plan, seed, seeds),
                                weight=W_ARENA.get(fam.name, 1.0))
        mix0 = starts[fam.name] = mix0 if mix0 is not None else starts[fam.start_from or TW]
        if fam.start_claim:
            claims.append(_claim_start_mixed(fam, mix0, plan.start_batches, seed))
        scored = (f"{len(fam.held_out[1])} held-out games, never trained on" if fam.held_out
                  else "the training games")
        by = {(r.sampler, r.seed): r for r in runs}
        final = {k: np.array([by[(k, s)].final_success for s in seeds]) for k in cfg.samplers}
        used = {k: float(np.mean([by[(k, s)].env_steps[-1] for s in seeds])) for k in cfg.samplers}
        start = np.array([by[("independent", s)].start_success for s in seeds])
        # every baseline measured on the same seeds: independent GRPO and the starting policy (no training)
        cmp = against_strongest(final["tree"], {"independent": final["independent"], "starting policy": start},
                                interval="t", seed=seed)
        strongest = final[cmp.strongest] if cmp.strongest in final else start
        c_eff, c_ci = _t_diff(final[ROOT_ONLY], strongest)
        ctl = verdicts.control(f"{ROOT_ONLY} (the tree sampler's code path and budget rule, no branching) trained "
                               f"the same way, minus {cmp.strongest}", c_eff, c_ci)
        m_learn, ci_learn = _t_diff(final["independent"], start)
        m_branch, ci_branch = _t_diff(final["tree"], final[ROOT_ONLY])
        mixed = {k: float(np.nanmean([np.mean(by[(k, s)].mixed_group_frac) for s in seeds])) for k in cfg.samplers}
        claims.append(Claim(
            statement=f"Success after training at equal env steps, tree vs independent GRPO ({fam.name})",
            paper_value="tree beats flat GRPO (numbers for these envs not stated)", source=SOURCE,
            measured=cmp.effect, ci=cmp.ci, unit="success gain", kind=Kind.EMPIRICAL, **cmp.claim_fields(),
            baseline=f"{cmp.strongest} (same start, same env steps): success {strongest.mean():.3f}",
            ruling=verdicts.direction(cmp.effect, cmp.ci, training_runs=len(seeds), control=ctl,
                                      why="the paper's per-benchmark numbers were not retrievable"),
            falsifier=("Had the policy trained on tree rollouts succeeded no more often, on independent sampled "
                       "episodes, than the same start trained on independent rollouts for the same env steps, the "
                       "claim would fail; whether the extra mixed groups turn into learning is up to GRPO on these "
                       f"games, not written by our code. The games: {fam.games}."),
            replication={"unit": "training runs", "n": len(seeds), "clustered_by": ""},
            note=f"{len(game_ids)} training games, step cap {cfg.max_steps}, {cfg.env_steps} env steps of training per run "
                 "(used: " + ", ".join(f"{k} {used[k]:.0f}" for k in cfg.samplers) + "), group budget "
                 f"{cfg.group_size} rollouts' worth per game, {cfg.estimator} estimator for every arm; success = "
                 f"independent sampled episodes ({cfg.eval_episodes}/game) on {scored}, after training. Start "
                 f"{start.mean():.3f} "
                 f"(uniform random player {rnd:.3f}) -> " + ", ".join(f"{k} {final[k].mean():.3f}" for k in
                                                                      cfg.samplers) +
                 f"; {len(seeds)} training runs per arm, paired by seed, 95% t-interval. Negative control: "
                 f"{ROOT_ONLY} minus {cmp.strongest}, {c_eff:+.3f} [{c_ci[0]:+.3f}, {c_ci[1]:+.3f}]; tree minus "
                 f"{ROOT_ONLY} (branching alone, under the same budget rule): {m_branch:+.3f} [{ci_branch[0]:+.3f}, "
                 f"{ci_branch[1]:+.3f}]. Mixed "
                 "(informative) groups during training: " + ", ".join(f"{k} {mixed[k]:.2f}" for k in cfg.samplers)
                 + " of games per batch; with the starting policy, at the same budget: "
                 + ", ".join(f"{k} {v.mixed.mean():.2f}" for k, v in mix0.items()) + ". Training itself helps: "
                 f"independent - start = {m_learn:+.3f} (CI {ci_learn[0]:+.3f}..{ci_learn[1]:+.3f})."))
        out[fam.name] = {"seeds": seeds, "games": fam.games, "random_success": rnd, "start": start.tolist(), "mixed_group_frac": mixed,
                    "start_mixed_ratio": {k: {"mixed": float(v.mixed.mean()), "env_steps_per_game":
                                              v.env_steps_per_game, "per_unit": v.mixed.tolist()}
                                          for k, v in mix0.items()},
                    "start_mixed_games": mix0["tree"].games,
                    "final": {k: v.tolist() for k, v in final.items()}, "env_steps_used": used,
                    "config": {"env_steps": cfg.env_steps, "group_size": cfg.group_size, "max_steps": cfg.max_steps,
                               "estimator": cfg.estimator,
                               "lr": cfg.lr, "eval_episodes": cfg.eval_episodes, "games": list(game_ids),
                               "scored_on": list(fam.held_out[1]) if fam.held_out else list(game_ids)},
                    "curves": {f"{r.sampler}/{r.seed}": {"env_steps": r.env_steps, "train_success": r.train_success,
                                                         "mixed_group_frac": r.mixed_group_frac} for r in runs}}
        for j, k in enumerate(cfg.samplers):
            ax.scatter(np.full(len(seeds), j) + np.linspace(-0.1, 0.1, len(seeds)), final[k], s=14)
            lo, hi = stats.mean_ci(final[k])
            ax.errorbar([j], [final[k].mean()], yerr=[[final[k].mean() - lo], [hi - final[k].mean()]], fmt="o",
                        color="k")
        ax.axhline(start.mean(), color="gray", ls=":", label="start")
        ax.set_xticks(range(len(cfg.samplers)), cfg.samplers, fontsize=7)
        ax.set_ylabel("success after training")
        ax.set_title(f"{fam.name}, {cfg.env_steps} env steps", fontsize=8)
        ax.legend(fontsize=7)
    rep.figures.append(Figure.from_matplotlib(fig, "arena", "Success after GRPO training at equal env steps, "
                                              "tree vs independent rollouts and the sham tree (dots: seeds; bars: "
                                              "95% CI)."))
    rep.details["arena"] = out
    return claims


def run(plan: Plan, seed: int) -> Reproduction:
    """The collapse law, the samplers at equal budget, greedy vs optimum, the proxy, training (tabular and
    on the engine), and the bookkeeping overhead."""
    rep = Reproduction(system="infotree", title="InfoTree: submodular tree rollouts against advantage collapse",
                       scale="", seed=seed)
    rng = np.random.default_rng(seed)  # shared, in this order, by the collapse law, greedy and the proxy
    policy = TabularPolicy.with_accuracy(DMAX, A, Q_POLICY)
    rep.claims += _claims_collapse_law(plan, rng, rep)
    rep.claims += _claims_mixed_ratio(plan, policy, seed, rep)
    rep.claims += _claims_greedy(plan, rng, seed, rep)
    rep.claims += _claims_proxy(plan, policy, rng, seed, rep)
    rep.claims += _claims_training(plan, seed, rep)
    rep.claims += _claims_arena(plan, seed, rep)
    rep.claims += _claims_overhead(plan, seed, rep)
    rep.setup = SETUP + " " + PLANTED
    rep.planted = PLANTED
    return rep


def _claims_collapse_law(plan: Plan, rng: np.random.Generator, rep: Reproduction) -> list[Claim]:
    """The collapse law against Monte Carlo, and what it implies for a difficulty mix as G grows."""
    claims: list[Claim] = []
    grid = [(q, d, G) for q in (0.6, 0.8, 0.95) for d in (1, 4, 8) for G in (2, 8, 32)]
    errs, zs = [], []
    for q, d, G in track(grid, "infotree: collapse law"):
        exact = float(collapse_probability(q**d, G))
        mc = simulate_collapse(q, d, G, plan.mc, rng)
        se = max(np.sqrt(exact * (1 - exact) / plan.mc), 1e-9)
        errs.append(abs(mc - exact))
        zs.append(abs(mc - exact) / se)
    max_err, max_z = float(max(errs)), float(max(zs))
    claims.append(Claim(
        statement="Collapse law: P(GRPO group all-same) = p^G + (1-p)^G with p = q^d, matches Monte Carlo",
        paper_value="impossibility result; the closed form is the notes' reconstruction [R]", measured=max_z,
        unit="max |MC - formula| in standard errors", source=SOURCE, kind=Kind.CHECK,
        # the standard error is already in the statistic: a pre-stated pass/fail test, not a bound to read
        ruling=verdicts.outcome(max_z <= 4.5, test="every cell's |MC - formula| is within 4.5 standard errors"),
        note=f"27 (q, d, G) cells, {plan.mc} simulated groups each; largest absolute deviation {max_err:.4f}. "
             "A check of the formula against a simulation of the same model (rule: every cell within 4.5 SE)."))

    mix = DifficultyMix(d_range=(1, DMAX), q_range=(0.5, 0.95))
    Gs_curve = np.array([2, 4, 8, 16, 32, 64, 128, 256])
    curve = mixed_ratio_curve(mix, Gs_curve)
    gain_4x = float(curve[list(Gs_curve).index(64)] - curve[list(Gs_curve).index(16)])
    per_doubling = gain_4x / 2
    claims.append(Claim(
        statement="Independent sampling: the mixed-group ratio flattens as the budget G grows (difficulty mix)",
        paper_value="flatlines (near 45%): ~0 points per doubling of G", measured=100 * per_doubling,
        unit=f"points per doubling of G from 16 to 64 (level {curve[list(Gs_curve).index(16)]:.1%} at G=16)",
        source=REVIEW, kind=Kind.BY_CONSTRUCTION,
        ruling=verdicts.value(100 * per_doubling, paper=0.0, tol=3.0, tol_kind="abs", exact=True),  # closed form
        note="Exact population curve for prompts with d~U{1..16} decisions, q~U(0.5,0.95) (chosen before "
             "measuring). By construction: the curve is the closed form applied to a difficulty mix we chose, "
             "so it says what the law implies for that mix, not what a model does. Growth is only logarithmic "
             "in the budget (a near-constant gain per doubling: diminishing returns, as the law predicts), but "
             "it is not a flat line, and the level is set by the mix, not a universal 45%. Rule: flat = within "
             "3 points per doubling of 0."))

    fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
    Gx = np.arange(1, 257)
    for d in (1, 2, 4, 8, 16):
        ax[0].plot(Gx, 1 - collapse_probability(0.75**d, Gx), label=f"d={d}")
    ax[0].set_xscale("log")
    ax[0].set_xlabel("group size G")
    ax[0].set_ylabel("P(mixed group)")
    ax[0].set_title("q=0.75 per decision")
    ax[0].legend(fontsize=7)
    ax[1].plot(Gs_curve, curve, "o-", label="closed form")
    ax[1].set_xscale("log")
    ax[1].set_xlabel("group size G")
    ax[1].set_ylabel("mixed-group ratio")
    ax[1].set_title("difficulty mix d~U{1..16}, q~U(.5,.95)")
    rep.figures.append(Figure.from_matplotlib(fig, "collapse_law", "Mixed-group probability vs budget: linear "
                                              "in G at first, exponentially worse in d; the population "
                                              "ratio flattens."))

    rep.details["collapse_curve"] = {"G": Gs_curve.tolist(), "mixed": curve.tolist()}
    return claims


def _claims_mixed_ratio(plan: Plan, policy: TabularPolicy, seed: int, rep: Reproduction) -> list[Claim]:
    """Mixed-outcome ratio at equal env-step budget: independent vs tree vs tree + allocator (and λ_entropy = 0)."""
    claims: list[Claim] = []
    per_G: dict[int, dict[str, list[float]]] = {}
    per_prompt8: dict[str, list[np.ndarray]] = {k: [] for k in SAMPLER_ARMS}
    budget_ratio: dict[str, list[float]] = {k: [] for k in SAMPLER_ARMS}
    for G in plan.Gs:
        per_G[G] = {k: [] for k in SAMPLER_ARMS}
        for s in track(range(plan.seeds), f"infotree: mixed ratio G={G}"):
            ds = np.random.default_rng(seed * 1000 + s).integers(1, DMAX + 1, size=plan.prompts)
            res = stage(f"mixed ratio G={G} seed {s + 1}/{plan.seeds}",
                        lambda G=G, s=s, ds=ds: _mixed_at_budget(policy, ds, G, seed * 1000 + s),
                        weight=W_MIXED_G8 * G / 8)
            for k, (m, b) in res.items():
                per_G[G][k].append(float(m.mean()))
                if G == 8:
                    per_prompt8[k].append(m)
                    budget_ratio[k].append(b)
    m8 = {k: np.concatenate(v) for k, v in per_prompt8.items()}  # prompts of every seed, paired across arms
    # the simulator's constant at its two extremes, on the first seed's prompts: how far it moves the tree's gain
    ds0 = np.random.default_rng(seed * 1000).integers(1, DMAX + 1, size=plan.prompts)
    sweep = {}
    for pr in P_REVEAL_SWEEP:
        res = stage(f"mixed ratio G=8, p_reveal={pr}", lambda pr=pr: _mixed_at_budget(
            policy, ds0, 8, seed * 1000, p_reveal=pr, allocator=False, arms=("independent", "tree")),
            weight=W_SWEEP)
        sweep[pr] = _paired(100 * res["tree"][0], 100 * res["independent"][0], seed)
    sweep[P_REVEAL] = _paired(100 * per_prompt8["tree"][0], 100 * per_prompt8["independent"][0], seed)
    sweep_text = "; ".join(f"p_reveal {pr}: {m:+.1f} [{lo:+.1f}, {hi:+.1f}]"
                           for pr, (m, (lo, hi)) in sorted(sweep.items()))
    d_tree, ci_tree = _paired(m8["tree"], m8["independent"], seed)
    # the allocator is judged against the strongest other arm measured on the same prompts
    cmp_alloc = against_strongest(m8["tree+allocator"], {k: m8[k] for k in SAMPLER_ARMS if k != "tree+allocator"},
                                  seed=seed)
    d_alloc, ci_alloc = cmp_alloc.effect, cmp_alloc.ci
    d_ent, ci_ent = _paired(m8["tree"], m8[NO_ENTROPY], seed)
    extras = 100 * (np.array(budget_ratio["tree+allocator"]) / np.array(budget_ratio["tree"]) - 1)  # per seed
    extra, ci_extra = float(extras.mean()), stats.mean_ci(extras)
    levels = " / ".join(f"{k} {m8[k].mean():.1%}" for k in SAMPLER_ARMS)
    setup8 = (f"Decision chain, d~U{{1..{DMAX}}}, {A} actions, policy right w.p. {Q_POLICY} per step, half the "
              f"errors silent; budget G*d env steps per prompt, G=8; {plan.seeds} seeds x {plan.prompts} prompts, "
              "every arm on the same prompts; difference paired by prompt, 95% bootstrap interval. Levels: "
              + levels + ".")
    claims.append(Claim(
        statement="Mixed-outcome ratio at equal env-step budget (G=8): tree vs independent sampling",
        paper_value="~45% (independent, [S]) -> 58.1% (tree): about +13 points", source=SOURCE,
        measured=100 * d_tree, ci=(100 * ci_tree[0], 100 * ci_tree[1]), unit="points", kind=Kind.PLANTED,
        baseline=f"independent sampling {m8['independent'].mean():.1%}",
        baselines=[{"name": "independent", "value": 100 * float(m8["independent"].mean()),
                    "ci": [100 * v for v in stats.bootstrap_ci(m8["independent"], seed=seed)]}],
        better="higher", compared_with="independent",
        ruling=verdicts.direction(100 * d_tree, (100 * ci_tree[0], 100 * ci_tree[1]), paper=58.1 - 45.0, tol=0.5),
        note=setup8 + " Size: 45 -> 58.1 (two sources: the podcast's 45% and the paper's 58.1%), ±50%. Planted: "
                      "every outcome is drawn from our constants (see the set-up). The tree's gain on the first seed's "
                      f"prompts, tree minus independent in points, with the share of revealed errors changed and "
                      f"nothing else: {sweep_text}."))
    claims.append(Claim(
        statement="Mixed-outcome ratio at equal env-step budget (G=8): tree + allocator vs the strongest other "
                  "sampler",
        paper_value="58.1% -> 76.3% with the allocator (+18.2 points over the tree sampler)", source=SOURCE,
        measured=100 * d_alloc, ci=(100 * ci_alloc[0], 100 * ci_alloc[1]), unit="points", kind=Kind.PLANTED,
        baseline=f"tree sampler alone {m8['tree'].mean():.1%}",
        baselines=[{**b, "value": 100 * b["value"], "ci": [100 * v for v in b["ci"]]} for b in cmp_alloc.baselines],
        better="higher", compared_with=cmp_alloc.strongest,
        ruling=verdicts.direction(100 * d_alloc, (100 * ci_alloc[0], 100 * ci_alloc[1]),
                                  **(dict(paper=76.3 - 58.1, tol=0.5) if cmp_alloc.strongest != "independent" else
                                     dict(why="the paper's +18.2 is over the tree sampler, not independent"))),
        note=setup8 + f" Against {cmp_alloc.strongest}, the strongest of the other arms on the same prompts. Our "
                      "allocator is closed-form (greedy on the union of trees), the paper's ABA is learned."))
    claims.append(Claim(
        statement="Entropy-term ablation: mixed-outcome ratio at G=8, UUCB vs UUCB with λ_entropy = 0",
        paper_value="the entropy bonus arises from the objective (no ablation number retrievable)",
        measured=100 * d_ent, ci=(100 * ci_ent[0], 100 * ci_ent[1]), unit="points", kind=Kind.PLANTED,
        baseline=f"λ_entropy = 0 {m8[NO_ENTROPY].mean():.1%}",
        ruling=verdicts.direction(100 * d_ent, (100 * ci_ent[0], 100 * ci_ent[1]),
                                  why="the notes' plan asks for the ablation; the paper gives no number"),
        note=setup8 + f" Default λ_entropy = {UUCBConfig().lam_entropy}; everything else equal."))
    claims.append(Claim(
        statement="Allocator's extra budget over the plain tree sampler",
        paper_value="under 5%", measured=extra, ci=ci_extra, unit="%", source=SOURCE,
        kind=Kind.BY_CONSTRUCTION, ruling=verdicts.bound(extra, 5.0, sense="<=", ci=ci_extra),
        note="Actual env steps used (tree+allocator / tree) - 1 at G=8, per seed; 95% t-interval over seeds. "
             "By construction: the allocator pools 40% of each prompt's budget plus a configured 4% extra, so "
             "this measures the configuration."))

    fig, ax = plt.subplots(figsize=(5, 3.6))
    for k in SAMPLER_ARMS:
        ax.plot(plan.Gs, [np.mean(per_G[G][k]) for G in plan.Gs], "o-", label=k)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("budget (G full-length rollouts' worth of env steps)")
    ax.set_ylabel("mixed-outcome ratio")
    ax.legend()
    rep.figures.append(Figure.from_matplotlib(fig, "mixed_ratio", "Mixed-outcome (informative) prompt ratio "
                                              "at equal env-step budget on the decision chain."))

    rep.details["mixed_ratio"] = {str(G): {k: list(map(float, v)) for k, v in d.items()} for G, d in per_G.items()}
    rep.details["budget_ratio_G8"] = {k: list(map(float, v)) for k, v in budget_ratio.items()}
    rep.details["p_reveal_sweep_G8"] = {str(pr): {"tree_minus_independent": m, "ci": list(ci)}
                                        for pr, (m, ci) in sorted(sweep.items())}
    return claims


def _claims_greedy(plan: Plan, rng: np.random.Generator, seed: int, rep: Reproduction) -> list[Claim]:
    """Greedy expansion against the brute-force optimum, on small trees and on deep chain-like ones."""
    claims: list[Claim] = []
    ratios = []
    for _ in track(range(plan.inst), "infotree: greedy vs optimum"):
        inst = random_tree_instance(rng, n_nodes=int(rng.integers(4, 8)), root_weight=float(rng.choice([1.0, 4.0])))
        k = int(rng.integers(2, 5))
        g = inst.value(greedy(inst, k))
        _, opt = brute_force(inst, k)
        base = inst.value(np.zeros(inst.n_candidates))
        # the guarantee is about the gain over the empty set (F(empty) may be > 0: already-mixed groups)
        ratios.append(1.0 if opt - base <= 1e-12 else (g - base) / (opt - base))
    ratios_a = np.array(ratios)
    bound = 1 - 1 / np.e
    claims.append(Claim(
        statement="Greedy expansion set reaches at least (1-1/e) of the brute-force optimum (small trees)",
        paper_value=">= 0.632 (Nemhauser-Wolsey-Fisher)", measured=float(ratios_a.min()), unit="worst ratio",
        source=SOURCE, kind=Kind.CHECK,
        # exact: each ratio is computed by brute force over every expansion set, not sampled
        ruling=verdicts.bound(float(ratios_a.min()), bound - 1e-9, sense=">=", exact=True),
        note=f"{len(ratios)} random rollout-tree instances (4-7 nodes, budget 2-4 continuations); ratio of "
             f"gains over F(empty). Mean {ratios_a.mean():.4f}, 5th percentile {np.percentile(ratios_a, 5):.4f}, "
             f"greedy optimal in {np.mean(ratios_a > 1 - 1e-9):.1%} of instances. A check: the bound is a "
             "theorem for monotone submodular functions, so it fails only if the objective or greedy is wrong."))

    # the review's seam: deep, long-horizon trees (chain-like: each node mostly extends the last one); a stage
    # of its own (brute force over deep trees is the costly part), drawing from its own generator only
    deep_ratios, depths = stage(f"greedy vs optimum on {plan.deep_inst} deep trees",
                                lambda: _deep_greedy_ratios(plan, seed), weight=W_DEEP_GREEDY)
    deep_a = np.array(deep_ratios)
    claims.append(Claim(
        statement="Greedy reaches at least (1-1/e) of the optimum on deep trees (depth 10-28)",
        paper_value=">= 0.632; the review: the guarantee 'weakens on deep, long-horizon problems'",
        measured=float(deep_a.min()), unit="worst ratio", source=REVIEW, kind=Kind.CHECK,
        ruling=verdicts.bound(float(deep_a.min()), bound - 1e-9, sense=">=", exact=True),
        note=f"{len(deep_a)} random chain-like tree instances, 16-28 nodes (each node extends the previous one "
             f"w.p. 0.9), depth {min(depths)}-{max(depths)} (median {int(np.median(depths))}), budget 2-4 "
             f"continuations, brute force over every multiset. Mean ratio {deep_a.mean():.4f}, 5th percentile "
             f"{np.percentile(deep_a, 5):.4f}, greedy optimal in {np.mean(deep_a > 1 - 1e-9):.1%}. Depth does "
             "not weaken the bound on the objective itself (a theorem); what depth can weaken is how well the "
             "proxy tracks the objective (next claim)."))
    fig, ax = plt.subplots(figsize=(5, 3.2))
    lo_x = min(0.6, ratios_a.min(), deep_a.min())
    ax.hist([ratios_a, deep_a], bins=30, range=(lo_x, 1.0), label=["4-7 nodes", "deep, 16-28 nodes"])
    ax.axvline(bound, color="r", ls="--", label="1-1/e")
    ax.set_xlabel("greedy / optimal gain")
    ax.legend()
    rep.figures.append(Figure.from_matplotlib(fig, "greedy_ratio", "Greedy vs brute-force optimum on random "
                                              "instances of the submodular objective."))

    rep.details["greedy_ratio_deep"] = {"mean": float(deep_a.mean()), "min": float(deep_a.min()),
                                        "p05": float(np.percentile(deep_a, 5)), "n": len(deep_a), "depths": depths}
    rep.details["greedy_ratio"] = {"mean": float(ratios_a.mean()), "min": float(ratios_a.min()),
                                   "p05": float(np.percentile(ratios_a, 5)), "n": len(ratios)}
    return claims


def _deep_greedy_ratios(plan: Plan, seed: int) -> tuple[list[float], list[int]]:
    """(greedy / optimal gain, depth) of each deep, chain-like random tree instance."""
    deep_rng = np.random.default_rng(seed + 31)
    deep_ratios, depths = [], []
    for _ in track(range(plan.deep_inst), "infotree: greedy vs optimum, deep trees"):
        inst = random_tree_instance(deep_rng, n_nodes=int(deep_rng.integers(16, 29)), chain=0.9,
                                    root_weight=float(deep_rng.choice([1.0, 4.0])))
        k = int(deep_rng.integers(2, 5))
        g = inst.value(greedy(inst, k))
        _, opt = brute_force(inst, k)
        base = inst.value(np.zeros(inst.n_candidates))
        deep_ratios.append(1.0 if opt - base <= 1e-12 else (g - base) / (opt - base))
        depths.append(instance_depth(inst))
    return deep_ratios, depths


def _claims_proxy(plan: Plan, policy: TabularPolicy, rng: np.random.Generator, seed: int,
                  rep: Reproduction) -> list[Claim]:
    """How well the proxy score greedy maximises (UUCB) tracks the true marginal gain."""
    claims: list[Claim] = []
    ds = rng.integers(1, DMAX + 1, size=plan.proxy_prompts)
    pr, pr_val, pr_rev = stage(f"proxy vs true gain on {plan.proxy_prompts} prompts", lambda: (
        proxy_true_correlation(policy, ds, 8, A, P_REVEAL, np.random.default_rng(seed + 7)),
        proxy_true_correlation(policy, ds, 8, A, P_REVEAL, np.random.default_rng(seed + 7),
                               cfg=SamplerConfig(uucb=UUCBConfig(selector="value"))),
        proxy_true_correlation(policy, ds, 8, A, 1.0, np.random.default_rng(seed + 7))), weight=W_PROXY)
    ci_pr = pearson_cluster_ci(pr, seed=seed)
    claims.append(Claim(
        statement="Correlation of the proxy score greedy maximises (UUCB) with the true marginal gain",
        paper_value="0.82", measured=pr.pearson, ci=ci_pr, unit="Pearson r", kind=Kind.PLANTED,
        source=REVIEW + " (unconfirmed)",
        baseline=f"the value term alone: r = {pr_val.pearson:.2f}",
        ruling=verdicts.value(pr.pearson, paper=0.82, tol=0.15, tol_kind="rel", ci=ci_pr, chance=0.0,
                              chance_why="no correlation"),
        note=f"Pooled over {pr.n_points} (candidate, step) pairs on the decision chain; true gain uses the "
             f"exact success probability of each node's state. Spearman {pr.spearman:.2f}. Value term alone: "
             f"r={pr_val.pearson:.2f}; with every error revealed (no hidden dead prefixes): r={pr_rev.pearson:.2f}. "
             "Rule: direction = r above 0 with its CI (percentile bootstrap over prompts: whole trees resampled, "
             "since points of one tree are correlated); size = within 15% of 0.82. Planted: how often a prefix is "
             "silently lost, which the proxy cannot see, is our constant p_reveal, and the r with every error "
             "revealed is measured above on the same prompts."))

    rep.details["proxy"] = {"pearson": pr.pearson, "spearman": pr.spearman, "n": pr.n_points,
                            "value_only_pearson": pr_val.pearson, "all_revealed_pearson": pr_rev.pearson}
    return claims


def _claims_training(plan: Plan, seed: int, rep: Reproduction) -> list[Claim]:
    """Tabular GRPO on the decision chain at equal env steps: tree vs independent, and the entropy ablation."""
    claims: list[Claim] = []
    curves: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {k: [] for k in SAMPLER_ARMS}
    for s in track(range(plan.train_seeds), "infotree: training"):
        for name in curves:
            tree_cfg = SamplerConfig(uucb=UUCBConfig(lam_entropy=0.0)) if name == NO_ENTROPY else SamplerConfig()
            chain_cfg = ChainTrainConfig(sampler="tree" if name == NO_ENTROPY else name,
                                         iterations=plan.train_iters, lr=8.0, tree=tree_cfg,
                                         prompts_per_iter=plan.train_prompts, d_range=(1, 8), seed=seed * 100 + s)
            r = stage(f"train on the decision chain: {name}, seed {s + 1}/{plan.train_seeds}",
                      lambda chain_cfg=chain_cfg: train_chain(chain_cfg), weight=W_CHAIN_RUN)
            curves[name].append((np.array(r.env_steps, dtype=float), np.array(r.success)))
    common = min(c[0][-1] for v in curves.values() for c in v)
    at = {k: np.array([np.interp(common, x, y) for x, y in v]) for k, v in curves.items()}
    m_eff, ci_eff = _paired(at["tree"], at["independent"])
    levels = ", ".join(f"{k} {at[k].mean():.3f}" for k in SAMPLER_ARMS)
    claims.append(Claim(
        statement="Success after training at equal env steps: tree vs independent (decision chain, tabular GRPO)",
        paper_value="tree beats flat GRPO on 9 benchmarks (numbers not retrievable)", source=SOURCE,
        measured=m_eff, ci=ci_eff, unit="success gain", kind=Kind.PLANTED,
        baseline=f"independent GRPO at the same env steps: {at['independent'].mean():.3f}",
        baselines=[{"name": "independent", "value": float(at["independent"].mean()),
                    "ci": list(stats.mean_ci(at["independent"]))}], better="higher", compared_with="independent",
        ruling=verdicts.direction(m_eff, ci_eff, training_runs=plan.train_seeds,
                                  why="the paper's per-benchmark numbers were not retrievable"),
        note=f"Success (exact, mean over d=1..8) at {int(common)} env steps: {levels}; {plan.train_seeds} seeds "
             "paired, 95% t-interval over seeds. Stand-in for the TextWorld/maze runs (see the next claims). "
             "Planted: a tabular policy on the decision chain, so the gain rides on the mixed-outcome gain our "
             "constants write (see the set-up)."))
    m_ent, ci_ent_t = _paired(at["tree"], at[NO_ENTROPY])
    claims.append(Claim(
        statement="Entropy-term ablation: success after training at equal env steps, UUCB vs λ_entropy = 0",
        paper_value="the entropy bonus arises from the objective (no ablation number retrievable)",
        source=SOURCE, measured=m_ent, ci=ci_ent_t, unit="success gain", kind=Kind.PLANTED,
        baseline=f"tree sampler with λ_entropy = 0: {at[NO_ENTROPY].mean():.3f}",
        ruling=verdicts.direction(m_ent, ci_ent_t, training_runs=plan.train_seeds,
                                  why="the notes' plan asks for the ablation; no paper number"),
        note=f"Same decision-chain training as above, tree sampler with the default λ_entropy = "
             f"{UUCBConfig().lam_entropy} against 0, everything else equal; {plan.train_seeds} seeds paired, 95% "
             "t-interval. The tabular policy's entropy is the same at every prompt of a depth, so the term can "
             "only re-weight candidates by depth here; an LM's per-prefix entropy varies more."))
    fig, ax = plt.subplots(figsize=(5, 3.6))
    grid_x = np.linspace(0, common, 50)
    for k, v in curves.items():
        ys = np.array([np.interp(grid_x, x, y) for x, y in v])
        ax.plot(grid_x, ys.mean(0), label=k)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("success (mean over d=1..8)")
    ax.legend()
    rep.figures.append(Figure.from_matplotlib(fig, "training", "GRPO on the decision chain at equal env steps."))

    rep.details["training_at_common_steps"] = {k: v.tolist() for k, v in at.items()}
    rep.details["common_env_steps"] = common
    return claims


def _claims_overhead(plan: Plan, seed: int, rep: Reproduction) -> list[Claim]:
    """Wall-clock overhead of the tree bookkeeping, synchronous against speculative expansion."""
    claims: list[Claim] = []
    # a timing gets a verdict only from repeated, interleaved measurements: both settings are timed
    # OVERHEAD_REPEATS times in alternating order, and the change is read per repeat (paired)
    load0 = os.getloadavg()[0]
    oh = stage("time the tree bookkeeping", lambda: measure_overhead(
        batches=(1, 4), n_prompts=plan.oh_prompts, d=plan.oh_d, seed=seed, repeats=OVERHEAD_REPEATS),
        weight=W_OVERHEAD)
    load1 = os.getloadavg()[0]
    by_rep = {(o.repeat, o.batch): o.overhead for o in oh}
    sync_r = np.array([by_rep[(r, 1)] for r in range(OVERHEAD_REPEATS)])
    spec_r = np.array([by_rep[(r, 4)] for r in range(OVERHEAD_REPEATS)])
    o_sync, o_spec = float(sync_r.mean()), float(spec_r.mean())
    change = spec_r / sync_r - 1  # relative change of the overhead, per repeat
    ci_change = stats.mean_ci(change)
    paper_change = 4.8 / 14.3 - 1
    claims.append(Claim(
        statement="Wall-clock overhead of tree bookkeeping: synchronous -> speculative expansion",
        paper_value="14.3% -> 4.8% (a 66% reduction)", measured=100 * float(change.mean()),
        ci=(100 * ci_change[0], 100 * ci_change[1]), unit="% change of the overhead", source=SOURCE,
        kind=Kind.BY_CONSTRUCTION, baseline=f"synchronous expansion {o_sync:.1%}",
        ruling=verdicts.direction(100 * float(change.mean()), (100 * ci_change[0], 100 * ci_change[1]),
                                  expected_sign=-1, paper=100 * paper_change, tol=0.5),
        note=f"Synchronous {o_sync:.1%} -> speculative {o_spec:.1%} (means of {OVERHEAD_REPEATS} interleaved "
             "repeats; the order of the two settings alternates). Bookkeeping (scoring + node updates) / "
             "generation (tiny-100k Llama forward + env), speculative = 4 expansions per scoring round in "
             "lockstep. Effect: speculative/synchronous - 1 per repeat, 95% t-interval over repeats. Depends on "
             "the policy's cost: a real LLM makes generation far slower, so both fractions would shrink; the "
             f"relative change is what is compared. Size: the paper's {100 * paper_change:.0f}% ± 50%. By "
             "construction: speculative expansion scores once per 4 expansions and batches their policy calls, so "
             "its bookkeeping share falls by design; the size is our implementation's and our tiny model's. Timed "
             f"on a shared machine beside other jobs (1-minute load {load0:.1f} before, {load1:.1f} after), so it "
             "is not the paper's comparison on a dedicated accelerator."))

    rep.details["overhead"] = {f"{o.batch}/{o.repeat}": {
        "overhead": o.overhead, "t_policy": o.stats.t_policy, "t_env": o.stats.t_env, "t_select": o.stats.t_select,
        "t_update": o.stats.t_update, "env_steps": o.stats.env_steps} for o in oh}
    return claims


SETUP = (
    "No LLM and no agent benchmark: a synthetic *decision chain* stands in for a tool-use task. A prompt needs "
    f"d correct decisions among {A} actions; a wrong one ends the episode (revealed, like a tool error) with "
    f"probability {P_REVEAL}, otherwise it is silent and the episode runs on, doomed. A tabular softmax policy "
    "stands in for the LM (for mixed ratios it is fixed at per-step accuracy "
    f"{Q_POLICY}; for training it starts uniform). Budgets are environment steps: G*d per prompt, what G "
    "independent full-length rollouts cost. Tree rollouts restore a prefix's state and branch; siblings "
    "form comparison groups. The objective (expected mixed subtree groups), UUCB's exact terms and the "
    "allocator (closed-form greedy, not the paper's learned ABA) are our reconstruction. Greedy-vs-optimum "
    "uses random small tree instances and deep chain-like ones (depth 10-28); the entropy-term ablation sets λ_entropy = 0 in UUCB, all else equal; the overhead uses an untrained tiny-100k Llama for generation cost. "
    "Tree vs independent training also runs on the RL engine: GRPOTrainer with sampler=independent, "
    "sampler=tree or the sham tree (the tree sampler's code path and budget rule, every continuation from the "
    "root), the same estimator for every arm (grpo; on TextWorld also gigpo), on the RL engine's generated "
    "TextWorld games and warm-started ~20k-parameter Llama policy, and on a fixed set of E163 mazes behind a "
    "TextEnv adapter (observations name the maze instance) with a fresh tiny Llama; every arm trains until it "
    "has played the same number of env steps, then is scored on independent sampled episodes. Before training, "
    "the mixed-outcome ratio of each sampler (also a tree expanding random nodes) is measured on the TextWorld "
    "games with the starting policy at the same group budget. At scale full the same arena (and the same "
    "mixed-outcome ratio) also runs on public games no one here wrote or selected: TextWorldExpress's coin "
    "collector on its largest map, the policy warm-started on the first games of the simulator's train split "
    "and scored on held-out games of its dev split (smoke and quick skip it: it plays a Java simulator for "
    "minutes).")
