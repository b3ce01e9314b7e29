"""Reproduce Qwen-AgentWorld's claims at small scale on generated TextWorld games.

1. *Fidelity per stage*: a ~100k-parameter Llama world model is trained on transitions logged by
   random play in the *seen* games (CPT → SFT with a "what happens next" prefix → RL with a
   rule-based fidelity reward) and scored on *held-out* games (never seen), next to a copy and a
   lookup/n-gram world model.
2. *Decoupled use*: the simulator's reward and terminal decisions come from class-balanced heads
   (:mod:`.outcome`), scored by precision and recall on held-out games. The RL test bed's
   warm-started policy is trained with GRPO inside the simulator of the seen games (faithful, and
   stingy = ``Steered(mode="partial")``) and inside the real games, at equal iterations, over
   several training seeds, and evaluated in the real games next to the untrained start.
3. *Unified use (warm-up)*: agents whose LM starts from random init, from behaviour cloning (SFT)
   or from next-state-prediction pre-training on the seen games are GRPO-trained on the held-out games.
4. *Seams*: fidelity where hidden state matters (moving into another room) vs not, and how far
   the simulated state stays exact along real action sequences (error compounding).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from divelab import stats, verdicts
from divelab.claims import Claim, Kind, Reproduction, not_checkable, strongest
from divelab.comparisons import against_strongest, baseline_records
from divelab.envs.textworld import TextWorldGameSpec, compact_view, textworld_env_factory
from divelab.progress import track
from divelab.rl.grpo import GRPOConfig, GRPOTrainer, evaluate
from divelab.rl.testbed import TestbedConfig, build_testbed
from divelab.stages import stage as run_stage  # `stage` names the world model's training stages here
from divelab.training.g2po.setup import TESTBEDS
from divelab.training.world_model.baselines import CopyWorldModel, LookupWorldModel
from divelab.training.world_model.fidelity import evaluate as fidelity
from divelab.training.world_model.fidelity import outcome_confusion
from divelab.training.world_model.model import WorldModel, lm_train, rl_train, train_tokenizer
from divelab.training.world_model.outcome import OutcomeModel, game_goals
from divelab.training.world_model.rollout import compounding
from divelab.training.world_model.simulator import simulated_env_factory
from divelab.training.world_model.transitions import collect_transitions, split_by_game, unique_transitions
from divelab.training.world_model.warmup import warmup_runs

SOURCE = "arXiv 2606.24597; week-in-review E167"
# the world model is trained once per reproduction: stage-vs-stage and model-vs-baseline intervals are
# over held-out transitions of that one run
WM_TRAINING_RUNS = 1
# the stingy simulator: half the steps withhold part of the feedback and the inventory
STINGY = {"mode": "partial", "rate": 0.5}
# SFT oversampling of the (rare) winning transitions: 10x was tried at quick and made fidelity worse
# (SFT below CPT) while the simulator still predicted only 1 of 6 seen wins
WIN_WEIGHT = 1.0


@dataclass(frozen=True)
class Plan:
    testbed: TestbedConfig
    """the seen games and the warm-started policy GRPO trains (the RL test bed; its seed is the run's seed)."""
    held_out_seed0: int
    """first generator seed of the held-out games, which neither the world model nor the policy sees."""
    held_out_games: int
    """how many held-out games (generated like the test bed's)."""
    extra_seen_games: int
    """extra seen games (generator seeds 0..n-1, two-step quests) used only as world-model data: more
    games teach copying rather than memorising."""
    episodes: int
    """random-play episodes logged per game: the world model's transitions."""
    cpt_steps: int
    """continued pre-training steps of the world model on logged transitions."""
    sft_steps: int
    """supervised steps of the world model with the "what happens next" prefix."""
    rl_steps: int
    """RL steps of the world model with the rule-based fidelity reward."""
    batch: int
    """transitions per world-model training step (CPT and SFT)."""
    agent_pretrain_steps: int
    """steps of the agent's warm-up before GRPO (behaviour cloning or next-state prediction)."""
    grpo_iterations: int
    """GRPO iterations of each agent trained in the real games or inside a simulator."""
    group_size: int
    """rollouts per game in one GRPO group."""
    n_seeds: int
    """GRPO training runs per arm (seeds seed, seed+1, ...): claims pair arms over them."""
    eval_episodes: int
    """sampled real-game episodes per game when scoring an agent."""
    warmup: bool
    """whether to run the world-modeling-as-warm-up comparison at all."""
    warmup_iterations: int
    """GRPO iterations on the held-out games in the warm-up comparison."""
    stingy: bool
    """whether to train agents in the stingy simulator too (a third arm per seed); without it the
    stingy-vs-faithful claim is not checkable at that scale."""


# G2PO's test beds (their games and warm starts are cached once); full keeps quick's. Training runs,
# not evaluation, fill quick's budget (an evaluation is a fraction of a second): quick fits four training
# seeds of the real and faithful-simulator arms by leaving the stingy arm to full, which trains every
# arm on five seeds.
PLANS = {
    "smoke": Plan(testbed=TESTBEDS["smoke"], held_out_seed0=1, held_out_games=1, extra_seen_games=0, episodes=4,
                  cpt_steps=30, sft_steps=30, rl_steps=2, batch=16, agent_pretrain_steps=10, grpo_iterations=2,
                  group_size=4, n_seeds=1, eval_episodes=4, warmup=False, warmup_iterations=2, stingy=True),
    "quick": Plan(testbed=TESTBEDS["quick"], held_out_seed0=100, held_out_games=4, extra_seen_games=6, episodes=16,
                  cpt_steps=150, sft_steps=400, rl_steps=6, batch=16, agent_pretrain_steps=100, grpo_iterations=10,
                  group_size=8, n_seeds=4, eval_episodes=16, warmup=True, warmup_iterations=6, stingy=False),
    "full": Plan(testbed=TESTBEDS["quick"], held_out_seed0=100, held_out_games=4, extra_seen_games=6, episodes=32,
                 cpt_steps=600, sft_steps=1200, rl_steps=40, batch=32, agent_pretrain_steps=300, grpo_iterations=30,
                 group_size=8, n_seeds=5, eval_episodes=32, warmup=True, warmup_iterations=30, stingy=True),
}


def run(plan: Plan, seed: int) -> Reproduction:
    """Train the world model stage by stage, then use it as a simulator and as an agent's warm-up."""
    rep = Reproduction(system="world-model", title="Qwen-AgentWorld: language world models", scale="", seed=seed)
    clock = {"start": time.time()}
    w = _world(plan, seed)
    clock["data"] = time.time()
    # a stage: the trained model travels with its prediction memo, so what follows sees the same memo
    stages, wm, wm_details = run_stage("train the world model (CPT, SFT, RL)",
                                       lambda: _trained_world_model(w, plan, seed), weight=W_WORLD_MODEL)
    rep.details.update(wm_details)
    outcome = OutcomeModel(w["train_u"], seed=seed)
    rep.claims += _claims_fidelity(stages, w, seed)
    rep.claims += _claims_outcome(wm, outcome, w, rep.details)
    clock["world model"] = time.time()
    rep.claims += _claims_hidden_state(stages, seed)
    rep.claims += _claims_compounding(wm, w, seed, rep.details)
    rep.claims += _claims_grpo_in_simulator(wm, outcome, w, plan, seed, rep.details)
    clock["grpo real vs sim"] = time.time()
    if plan.warmup:
        rep.claims += _claims_warmup(w, plan, seed, rep.details)
    clock["warm-up"] = time.time()
    marks = list(clock.items())
    rep.details["seconds"] = {k: round(t - marks[i - 1][1], 1) for i, (k, t) in enumerate(marks) if i}
    rep.setup = (f"Seen games: {', '.join(s.game_id for s in w['seen_specs'])}; held-out: "
                 f"{', '.join(w['held_ids'])}. {len(w['log'])} logged transitions ({plan.episodes} random episodes "
                 f"per game). World model: {sum(p.numel() for p in wm.model.parameters())}-parameter Llama, "
                 f"word-level tokenizer, CPT {plan.cpt_steps} + SFT {plan.sft_steps} + RL {plan.rl_steps} steps; "
                 "wins and episode ends decided by class-balanced logistic heads on (goal, state, action). "
                 f"GRPO: the RL test bed's warm-started policy, {plan.grpo_iterations} iterations x "
                 f"{plan.group_size} rollouts per game, seeds {_seeds(plan, seed)}. Source: {SOURCE}.")
    _ = compact_view  # the policies read simulated observations through the same compact view
    return rep


# Stage weights (divelab.stages): rough shares of a full run's time (a unit is about 10 s, scaled up from quick's
# timings by the plan's sizes); GRPO's is for three environments (real, faithful and stingy simulator).
W_WORLD_MODEL, W_GRPO, W_WARMUP = 20.0, 30.0, 12.0
STAGE_WEIGHT = W_WORLD_MODEL + W_GRPO + W_WARMUP * PLANS["full"].warmup


def _seeds(plan: Plan, seed: int) -> list[int]:
    return [seed + i for i in range(plan.n_seeds)]


def _fid_row(ev: dict) -> dict[str, float]:
    return {k: round(v, 4) for k, v in ev["overall"].items()}


def _world(plan: Plan, seed: int) -> dict[str, Any]:
    """The games (seen, held out), the real environments, and the transitions logged by random play."""
    tb_cfg = dataclasses.replace(plan.testbed, seed=seed)
    tb = build_testbed(tb_cfg)
    held = dataclasses.replace(tb_cfg, game_seed0=plan.held_out_seed0, n_games=plan.held_out_games)
    held_specs = held.specs()
    extra = [TextWorldGameSpec(seed=s, nb_rooms=3, nb_objects=3, quest_length=2) for s in range(plan.extra_seen_games)]
    seen_specs = tb_cfg.specs() + extra
    max_steps = tb_cfg.max_steps
    make_real = textworld_env_factory(seen_specs + held_specs, max_steps=max_steps, precompute=True,
                                      max_states=tb_cfg.max_states)
    held_ids = [s.game_id for s in held_specs]
    log = collect_transitions(make_real, [s.game_id for s in seen_specs + held_specs], plan.episodes, max_steps,
                              seed=seed)
    train, test = split_by_game(log, held_ids)
    return {"tb_cfg": tb_cfg, "tb": tb, "seen_specs": seen_specs, "held_ids": held_ids, "max_steps": max_steps,
            "make_real": make_real, "log": log, "train": train, "test": test,
            "train_u": unique_transitions(train), "test_u": unique_transitions(test)}


def _trained_world_model(w: dict[str, Any], plan: Plan, seed: int) -> tuple[dict[str, dict], WorldModel, dict]:
    """:func:`_train_world_model` with the details it records returned (a stage's value)."""
    details: dict = {}
    stages, wm = _train_world_model(w, plan, seed, details)
    return stages, wm, details


def _train_world_model(w: dict[str, Any], plan: Plan, seed: int, details: dict) -> tuple[dict[str, dict], WorldModel]:
    """CPT → SFT → RL, scoring held-out fidelity after each stage next to the copy and lookup models."""
    train, train_u, test_u, tb = w["train"], w["train_u"], w["test_u"], w["tb"]
    wm = WorldModel.new(train_tokenizer(w["log"]), seed=seed)
    stages: dict[str, dict] = {"copy": fidelity(CopyWorldModel(), test_u),
                               "lookup": fidelity(LookupWorldModel(train), test_u)}
    losses = {"cpt": lm_train(wm, train_u, "cpt", plan.cpt_steps, batch_size=plan.batch, seed=seed)}
    stages["cpt"] = fidelity(wm, test_u)
    losses["sft"] = lm_train(wm, train_u, "sft", plan.sft_steps, lr=2e-3, batch_size=plan.batch, seed=seed,
                              win_weight=WIN_WEIGHT)
    stages["sft"] = fidelity(wm, test_u)
    rl_rewards = rl_train(wm, train_u, plan.rl_steps, seed=seed)
    stages["rl"] = fidelity(wm, test_u)
    seen_fid = fidelity(wm, unique_transitions([t for t in train if t.game_id in tb.game_ids]))
    details["fidelity_held_out"] = {k: _fid_row(v) for k, v in stages.items()}
    details["fidelity_seen_rl_games"] = _fid_row(seen_fid)
    details["fidelity_per_game_held_out"] = {g: {k: round(v, 3) for k, v in m.items()}
                                             for g, m in stages["rl"]["per_game"].items()}
    details["fidelity_per_depth_held_out"] = {d: round(m["f1"], 3) for d, m in stages["rl"]["per_depth"].items()}
    details["losses"] = {k: [round(v[0], 3), round(v[-1], 3)] for k, v in losses.items()}
    details["rl_stage_reward"] = [round(x, 3) for x in rl_rewards]
    return stages, wm


def _claims_fidelity(stages: dict[str, dict], w: dict[str, Any], seed: int) -> list[Claim]:
    """Held-out fidelity per stage, each stage against the one before, and the model against simple ones."""
    claims = []
    f1 = {k: np.array([r["f1"] for r in v["rows"]]) for k, v in stages.items()}
    ex = {k: np.array([r["exact"] for r in v["rows"]]) for k, v in stages.items()}
    n = len(w["test_u"])
    for stage in ("cpt", "sft", "rl"):
        k = int(ex[stage].sum())
        lo, hi = stats.proportion_ci(k, n)
        claims.append(Claim(statement=f"next-state exact match on held-out games after the {stage.upper()} stage",
                      paper_value="70% → 78% (prediction accuracy, unified agent)", measured=k / n, ci=(lo, hi),
                      kind=Kind.EMPIRICAL, source=SOURCE + " (second-hand)", unit="fraction",
                      ruling=verdicts.value(k / n, paper=(0.70, 0.78), tol=0.1, tol_kind="abs", ci=(lo, hi)),
                      baseline=f"lookup world model {ex['lookup'].mean():.3f}, copy {ex['copy'].mean():.3f}",
                      note=f"{n} distinct held-out transitions from {len(w['held_ids'])} unseen games; field F1 "
                           f"{f1[stage].mean():.3f}. Magnitude only: ours is a 100k-parameter model on unseen "
                           "games, theirs a 35B model scored by a different metric."))
    for a, b in (("cpt", "sft"), ("sft", "rl")):
        d, lo, hi = stats.paired_diff_ci(f1[b], f1[a], method="bootstrap", seed=seed)
        claims.append(Claim(statement=f"the {b.upper()} stage raises held-out next-state field F1 over {a.upper()}",
                      paper_value="CPT injects, SFT activates, RL sharpens (+8 points overall 70 → 78)",
                      measured=d, ci=(lo, hi), kind=Kind.EMPIRICAL, source=SOURCE,
                      # one world-model training run: the interval is over held-out transitions only
                      ruling=verdicts.direction(d, (lo, hi), expected_sign=1, paper=0.08, tol=0.5,
                                                training_runs=WM_TRAINING_RUNS),
                      baseline=f"{a.upper()} F1 {f1[a].mean():.3f}",
                      note=f"paired over held-out transitions (bootstrap), {WM_TRAINING_RUNS} training run of the "
                           "world model: a stage comparison cannot be separated from that run's luck."))
    # against the strongest simple world model measured on the same transitions (copy, lookup)
    cmp_wm = against_strongest(f1["rl"], {"copy": f1["copy"], "lookup": f1["lookup"]}, seed=seed)
    d, (lo, hi), best = cmp_wm.effect, cmp_wm.ci, cmp_wm.strongest
    claims.append(Claim(statement="the trained world model beats the best simple world model on held-out games (F1)",
                  paper_value="LWM training +8.66 AgentWorldBench points over the untrained base", measured=d,
                  ci=(lo, hi), kind=Kind.EMPIRICAL, source=SOURCE, **cmp_wm.claim_fields(),
                  ruling=verdicts.direction(d, (lo, hi), expected_sign=1, training_runs=WM_TRAINING_RUNS,
                                            why="the paper's number is a judge score on another benchmark"),
                  baseline=f"{best} world model F1 {f1[best].mean():.3f}",
                  note="AgentWorldBench's LLM-judge scores are replaced by rule-based field F1 (feedback, room, "
                       "inventory, admissible commands, reward)."))
    claims.append(not_checkable("AgentWorldBench overall scores (58.71 / 56.39)", "58.71 (397B), 56.39 (35B)",
                          "needs the 35B/397B models, the 2,170-sample benchmark and an LLM judge", source=SOURCE))

    return claims


def _claims_hidden_state(stages: dict[str, dict], seed: int) -> list[Claim]:
    """The hidden-state seam: fidelity when a move reveals an unseen room vs when the agent stays."""
    claims: list[Claim] = []
    rows = stages["rl"]["rows"]
    moved = np.array([r["f1"] for r in rows if r["moved"]])
    stayed = np.array([r["f1"] for r in rows if not r["moved"]])
    if len(moved) >= 2 and len(stayed) >= 2:
        d, lo, hi = stats.diff_ci(stayed, moved, seed=seed)
        claims.append(Claim(statement="fidelity is lowest where hidden state matters: moving into another room "
                                "(unseen map) vs staying",
                      paper_value="review: fidelity weakest in state-heavy settings", measured=d, ci=(lo, hi),
                      kind=Kind.BY_CONSTRUCTION, source="week-in-review E167 (its seams)",
                      ruling=verdicts.direction(d, (lo, hi), expected_sign=1,
                                                why="the review states no number"),
                      baseline=f"F1 when moving {moved.mean():.3f} (n={len(moved)}) vs staying "
                               f"{stayed.mean():.3f} (n={len(stayed)})",
                      note="a move reveals a room the model has never seen in an unseen game (hidden state); "
                           "staying only needs the visible state. By construction: the held-out games are unseen, "
                           "so what a move reveals is not in the model's input at all and can only be guessed."))
    return claims


def _claims_compounding(wm: WorldModel, w: dict[str, Any], seed: int, details: dict) -> list[Claim]:
    """Error compounding: open-loop state exact match along real held-out action sequences, by depth."""
    claims: list[Claim] = []
    comp = compounding(wm, w["test"], w["max_steps"])
    details["compounding_exact_by_depth"] = {k: round(v, 3) for k, v in comp["exact_by_depth"].items()}
    one, last = comp["first"], comp["last"]
    if one is not None and last is not None:
        d, lo, hi = stats.diff_ci(one[1], last[1], seed=seed)
        claims.append(Claim(statement=f"simulator error compounds: open-loop state exact match at depth 1 vs depth "
                                f"{last[0]}",
                      paper_value="review: long-horizon fidelity is the open problem", measured=d, ci=(lo, hi),
                      kind=Kind.BY_CONSTRUCTION, source="week-in-review E167 (its seams)",
                      ruling=verdicts.direction(d, (lo, hi), expected_sign=1,
                                                why="the review states no number"),
                      baseline=f"depth 1 {one[1].mean():.3f} vs depth {last[0]} {last[1].mean():.3f}",
                      note="the simulator replays each real held-out episode's actions from the real first state "
                           "on its own predictions; exact = the whole simulated state equals the real one. By "
                           "construction, mostly: an open-loop state is exact at depth k only if the earlier "
                           "predictions were (errors rarely cancel), so any model whose one-step exact match is "
                           "well below 1 shows this decline."))
    return claims


def _mde(diffs: np.ndarray) -> str:
    """The smallest paired effect this many seeds detects (80% power), from the measured spread."""
    if diffs.size < 2 or np.std(diffs, ddof=1) == 0:
        return "no spread over seeds to size power from;"
    return (f"detectable at 80% power with {diffs.size} seeds: "
            f"{stats.mde_two_sample(float(np.std(diffs, ddof=1)), diffs.size):.3f};")


def _rate(num: int, den: int) -> str:
    return f"{num}/{den}" if den else "0/0"


def _claims_outcome(wm: WorldModel, outcome: OutcomeModel, w: dict[str, Any], details: dict) -> list[Claim]:
    """Held-out precision and recall of the simulator's win and episode-end decisions (the heads)."""
    claims: list[Claim] = []
    goals = game_goals(w["log"])  # each game's first observation, which the simulator starts from
    heads = outcome_confusion(wm, outcome, w["test_u"], goals)
    token = outcome_confusion(wm, None, w["test_u"], goals)  # the language model's own [R] token
    rl_games = set(w["tb"].game_ids)
    seen = outcome_confusion(wm, outcome, [t for t in w["train_u"] if t.game_id in rl_games], goals)
    details["outcome_held_out"] = {"heads": heads, "world model reward token": token}
    details["outcome_seen_rl_games"] = seen
    details["outcome_train_positives"] = outcome.positives
    n = len(w["test_u"])
    # in these games an episode ends only by winning or by the step cap (not logged), so the two
    # heads are fitted on the same labels; a game that can be lost would tell them apart
    lost = sum(t.done and t.reward <= 0 for t in w["train_u"] + w["test_u"])
    for k, name in (("reward", "win (reward)"), ("done", "episode-end (terminal)")):
        c, b = heads[k], token[k]
        true_pos, pred_pos = c["tp"] + c["fn"], c["tp"] + c["fp"]
        # chance: a decision that ignores its input, saying "yes" as often as the heads do, has
        # precision = the base rate and recall = the rate of "yes"
        for metric, den, chance, base_den in (("precision", pred_pos, true_pos / n, b["tp"] + b["fp"]),
                                              ("recall", true_pos, pred_pos / n, b["tp"] + b["fn"])):
            statement = f"the simulator's {name} decisions on held-out games: {metric}"
            common = {"statement": statement, "kind": Kind.EMPIRICAL, "unit": "fraction",
                      "paper_value": "not stated (a simulator for agent RL must say when the agent succeeded)",
                      "source": SOURCE,
                      "baseline": f"the world model's own [R] token: {_rate(b['tp'], base_den)}; chance {chance:.3f}",
                      "note": f"{n} distinct held-out transitions from {len(w['held_ids'])} unseen games, "
                              f"{true_pos} of them {'wins' if k == 'reward' else 'episode ends'}; heads fitted on "
                              f"the seen games' transitions ({outcome.positives[k]} positive), class-balanced. "
                              f"Seen test-bed games: tp {seen[k]['tp']}, fp {seen[k]['fp']}, fn {seen[k]['fn']}. Logged episode "
                              f"ends that are not wins: {lost}."}
            if den == 0:
                why = ("the heads never said yes on held-out games" if metric == "precision" else
                       "the held-out transitions hold no positive to recall")
                claims.append(Claim(measured=None, ruling=verdicts.uninformative(why), **common))
                continue
            lo, hi = stats.proportion_ci(c["tp"], den)
            claims.append(Claim(measured=c["tp"] / den, ci=(lo, hi), **common,
                                ruling=verdicts.value(c["tp"] / den, ci=(lo, hi), chance=chance,
                                                      why="the paper reports no reward or terminal precision "
                                                          "or recall")))
    return claims


def _claims_grpo_in_simulator(wm: WorldModel, outcome: OutcomeModel, w: dict[str, Any], plan: Plan, seed: int,
                              details: dict) -> list[Claim]:
    """GRPO inside the simulator (faithful and stingy) vs inside the real games, scored in the real games."""
    claims: list[Claim] = []
    tb, make_real, max_steps = w["tb"], w["make_real"], w["max_steps"]
    # the simulator predicts only the steps the agents take (memoised): expanding every reachable
    # simulated state up front cost more than all the training runs together
    envs = {"real": tb.make_env,
            "sim": simulated_env_factory(wm, make_real, tb.game_ids, max_steps, outcome=outcome, explore=False)}
    if plan.stingy:
        envs["stingy-sim"] = simulated_env_factory(wm, make_real, tb.game_ids, max_steps, steering=STINGY,
                                                   outcome=outcome, explore=False)
    seeds = _seeds(plan, seed)
    # one stage for every run: the simulators share the world model's prediction memo across seeds and arms
    succ, train_succ, generated = run_stage(
        f"GRPO in {len(envs)} environments x {len(seeds)} seeds",
        lambda: _grpo_runs(wm, tb, envs, seeds, plan, max_steps), weight=W_GRPO * len(envs) / 3)
    details["grpo_real_success"] = {k: [round(x, 3) for x in v] for k, v in succ.items()}
    details["grpo_success_inside_training_env"] = train_succ
    details["simulator_generated_predictions"] = generated
    n_runs = len(seeds)
    # a failed set-up, detected from the runs: a simulator that never lets the agent win gives GRPO
    # no reward to learn from, so training inside it cannot speak to the claim
    never_won = {k: max(v) == 0 for k, v in train_succ.items() if k != "real"}
    seen = details["outcome_seen_rl_games"]["reward"]
    silent = (f"GRPO inside the {{}} simulator never succeeded (success inside it 0 in all {n_runs} runs; on the "
              f"seen test-bed games the simulator calls {seen['tp']} of {seen['tp'] + seen['fn']} logged wins "
              "wins): no reward to learn from")
    few = n_runs < 3
    a = np.array(succ["sim"])
    records = baseline_records({k: succ[k] for k in ("real", "start")}, seed=seed)
    top = strongest(records, "higher")["name"]
    d, lo, hi = stats.paired_diff_ci(a, np.array(succ[top]))

    def ruling(effect: float, ci: tuple[float, float], who: str, **kw: Any) -> Any:
        if never_won["sim"]:
            return verdicts.uninformative(silent.format(who))
        if few:
            return verdicts.uninformative(f"{n_runs} training seed(s): an interval over seeds needs at least 3")
        return verdicts.direction(effect, ci, expected_sign=1, training_runs=n_runs, **kw)

    claims.append(Claim(statement="GRPO inside the world-model simulator vs inside the real games (real-game success, "
                            "equal iterations)",
                  paper_value="controllable simulation beats real-environment training on three benchmarks",
                  measured=d, ci=(lo, hi), kind=Kind.EMPIRICAL, source=SOURCE,
                  baselines=records, better="higher", compared_with=top,
                  ruling=ruling(d, (lo, hi), "faithful", why="the paper gives no single number for this comparison"),
                  baseline=f"real-env GRPO {np.mean(succ['real']):.3f}; untrained start {np.mean(succ['start']):.3f}",
                  note=f"against the {top} arm, the stronger of real-game GRPO and the untrained start; paired over "
                       f"{n_runs} training seeds (t-interval), {plan.eval_episodes} real-game episodes per game each; "
                       f"{_mde(a - np.array(succ[top]))} "
                       f"sim-trained success {a.mean():.3f}. The simulator models the games it was trained on "
                       "(seen games), as in the paper's decoupled use."))
    d2, lo2, hi2 = stats.paired_diff_ci(a, np.array(succ["start"]))
    claims.append(Claim(statement="GRPO inside the world-model simulator improves real-game success over the "
                            "untrained start",
                  paper_value="a simulator-trained agent improves in the real environment",
                  measured=d2, ci=(lo2, hi2), kind=Kind.EMPIRICAL, source=SOURCE,
                  ruling=ruling(d2, (lo2, hi2), "faithful", why="the paper gives no single number for this gain"),
                  baseline=f"untrained start {np.mean(succ['start']):.3f}",
                  note=f"paired over {n_runs} training seeds (t-interval); the start is scored on the same "
                       "evaluation episodes as each seed's trained agent."))
    stingy_claim = ("a stingy (partial-answer) simulator trains a better agent than the faithful one",
                    "50.3% vs 45.6% (a single Search comparison, 60 steps)")
    if not plan.stingy:
        claims.append(not_checkable(*stingy_claim, f"this scale's budget holds {n_runs} training seeds of the real "
                                    "and faithful-simulator arms, not a third arm; full measures it",
                                    source=SOURCE + " (second-hand)"))
        return claims
    a2 = np.array(succ["stingy-sim"])
    d, lo, hi = stats.paired_diff_ci(a2, a)
    both_silent = never_won["sim"] and never_won["stingy-sim"]
    claims.append(Claim(statement=stingy_claim[0], paper_value=stingy_claim[1], measured=d, ci=(lo, hi),
                  kind=Kind.EMPIRICAL, source=SOURCE + " (second-hand)",
                  ruling=(verdicts.uninformative(silent.format("faithful or the stingy")) if both_silent else
                          verdicts.uninformative(f"{n_runs} training seed(s): an interval over seeds needs at "
                                                 "least 3") if few else
                          verdicts.direction(d, (lo, hi), expected_sign=1, paper=0.047, tol=0.5,
                                             training_runs=n_runs)),
                  baseline=f"faithful simulator {a.mean():.3f}; stingy {a2.mean():.3f}",
                  note=f"stingy = Steered(mode='partial', rate={STINGY['rate']}): half the steps withhold "
                       "part of the feedback and the inventory. Paired over training seeds."))
    return claims


def _grpo_runs(wm: WorldModel, tb: Any, envs: dict[str, Any], seeds: list[int], plan: Plan,
               max_steps: int) -> tuple[dict[str, list[float]], dict[str, list[float]], int]:
    """GRPO in each environment per seed, scored in the real games: (real-game success per arm and of the
    untrained start, success inside the training env, predictions the world model generated by then)."""
    succ: dict[str, list[float]] = {k: [] for k in [*envs, "start"]}
    train_succ: dict[str, list[float]] = {k: [] for k in envs}  # success inside the env trained in
    for s in track(seeds, "world-model: GRPO real vs simulated"):
        # the untrained start, scored on the same evaluation episodes as this seed's trained agents
        succ["start"].append(evaluate(tb.new_policy(), tb.make_env, tb.game_ids, episodes=plan.eval_episodes,
                                      max_steps=max_steps, seed=10_000 + s))
        for name, mk in envs.items():
            pol = tb.new_policy()
            gcfg = GRPOConfig(iterations=plan.grpo_iterations, group_size=plan.group_size, max_steps=max_steps,
                              lr=1e-2, seed=s, description=f"GRPO in {name}")
            logs = GRPOTrainer(pol, mk, tb.game_ids, gcfg).train()
            train_succ[name].append(round(float(np.mean([x.success for x in logs])), 3))
            succ[name].append(evaluate(pol, tb.make_env, tb.game_ids, episodes=plan.eval_episodes,
                                       max_steps=max_steps, seed=10_000 + s))
    return succ, train_succ, wm.generated


def _warmup_cfg(w: dict[str, Any], plan: Plan, seed: int) -> dict[str, Any]:
    """The settings :func:`warmup_runs` reads."""
    return {"testbed": w["tb_cfg"], "seeds": _seeds(plan, seed), "agent_pretrain_steps": plan.agent_pretrain_steps,
            "warmup_iterations": plan.warmup_iterations, "group_size": plan.group_size}


def _claims_warmup(w: dict[str, Any], plan: Plan, seed: int, details: dict) -> list[Claim]:
    """World-modeling as warm-up: GRPO on unseen games from a next-state-prediction start vs other starts."""
    claims: list[Claim] = []
    wu = run_stage("world modeling as warm-up", lambda: warmup_runs(
        w["make_real"], [s.game_id for s in w["tb_cfg"].specs()], w["held_ids"], w["train"],
        _warmup_cfg(w, plan, seed), seed), weight=W_WARMUP)
    details["warmup"] = wu["table"]
    # one claim against the strongest other start (random init, behaviour cloning), both recorded
    x = np.array(wu["auc"]["world-model"])
    others = {k: np.array(wu["auc"][k]) for k in ("random", "sft")}
    records = baseline_records(others, seed=seed)
    top = strongest(records, "higher")["name"]
    d, lo, hi = stats.paired_diff_ci(x, others[top])
    floor = max(float(v.max()) for v in (x, *others.values())) == 0.0
    claims.append(Claim(statement="next-state-prediction warm-up vs the strongest other start: mean training "
                            "success on unseen games (sample efficiency)",
                  paper_value="about +9 points on an unseen function-calling benchmark", measured=d,
                  ci=(lo, hi), kind=Kind.EMPIRICAL, source=SOURCE + " (second-hand)",
                  baselines=records, better="higher", compared_with=top,
                  ruling=(verdicts.uninformative("no start ever succeeded on the unseen games: every arm is at "
                                                 "the 0 floor") if floor else
                          verdicts.direction(d, (lo, hi), expected_sign=1, training_runs=len(x),
                                             why="+9 points is on a function-calling benchmark")),
                  baseline=", ".join(f"{k} start {v.mean():.3f}" for k, v in others.items())
                           + f"; world-model start {x.mean():.3f}",
                  note=f"against the {top} start, the stronger of random init and behaviour cloning; the agent "
                       "LM is pre-trained on next-state prediction of the seen games, then GRPO'd on the "
                       "held-out games; paired over seeds (one training run each), t-interval."))
    return claims
