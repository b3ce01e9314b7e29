"""The language-model check on the RL engine's TextWorld games (and a slippery variant of them).

Pipeline (the trained policy is cached in the divelab cache, keyed by its config):

1. **Reference**: the engine's shared test bed (:func:`divelab.rl.testbed.build_testbed`): generated
   TextWorld games and a tiny Llama warm-started by behaviour cloning of a uniform explorer.
2. **Policy**: that reference trained briefly with the engine's GRPO trainer, whose loss carries
   ``kl_coef`` times the k3 estimate of ``KL(pi || pi_ref)`` to the frozen reference, so
   ``beta = kl_coef``. A few iterations only: an imperfect policy, as in the paper.
3. **Evaluation**: ``n`` rollouts per group from the policy, scored with :class:`ProgressAdvantage`
   (the public API) on the exact token sequences the engine's policy reads
   (``context [SEP] command [EOS]``), against confidence baselines; the game's whole state graph
   gives an exact oracle (optimal win probability, the first wrong step of a failed episode), and
   Monte Carlo rollouts of the policy from replayed prefixes give its true advantage.

Steps 2 and 3 take any trained pair and games (:func:`grpo_policy`, :func:`evaluate`): the public section runs
them on TextWorldExpress games (:mod:`~divelab.training.progress_advantage.public_check`).

The stochastic variant is :class:`SlipEnv`: with probability ``slip`` the chosen command is replaced
by a uniformly random admissible one (the executed command is in ``info["executed"]``), so the same
intended action can lead to different states, the case where reading the log-ratio as a reward
fails and reading it as an advantage does not.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from divelab.cache import atomic_dir, atomic_write_text, entry_path, stable_hash
from divelab.envs.base import EnvFactory, EnvWrapper, StepResult, TextEnv
from divelab.rl.testbed import TestbedConfig

_VERSION = 1  # bump to invalidate cached policies when the training code changes


# -- the stochastic variant ---------------------------------------------------------------------
class SlipEnv(EnvWrapper):
    """Wraps a :class:`~divelab.envs.base.TextEnv`: with probability ``slip`` a step executes a
    uniformly random admissible command (possibly the chosen one) instead of the chosen one.

    ``restore(actions)`` replays *executed* commands without slipping (the slip draws are not part
    of the state), so a recorded prefix (``info["executed"]`` of each step) is restored exactly.
    Clones share the random stream, so a sampler's run is reproducible from the factory's seed."""

    def __init__(self, env: TextEnv, slip: float, rng: np.random.Generator) -> None:
        if not 0.0 <= slip <= 1.0:
            raise ValueError(f"slip must be a probability in [0, 1], got {slip}")
        super().__init__(env)
        self.slip, self.rng = float(slip), rng

    def step(self, action: str) -> StepResult:
        executed = action
        if self.slip > 0 and self.rng.random() < self.slip:
            adm = self.env.admissible_actions()
            if adm:
                executed = adm[int(self.rng.integers(len(adm)))]
        obs, reward, done, info = self.env.step(executed)
        return obs, reward, done, {**info, "executed": executed, "slipped": executed != action}

    def clone(self) -> SlipEnv:
        return SlipEnv(self.env.clone(), self.slip, self.rng)


def slip_factory(make_env: EnvFactory, slip: float, seed: int) -> EnvFactory:
    """``make_env`` with every env wrapped in :class:`SlipEnv` (one seeded stream per factory)."""
    rng = np.random.default_rng(seed)
    return lambda game_id: SlipEnv(make_env(game_id), slip, rng)


def executed_actions(steps: Sequence[Any]) -> list[str]:
    """The commands the env really ran (differs from ``step.action`` where a :class:`SlipEnv` slipped)."""
    return [s.info.get("executed", s.action) for s in steps]


# -- the trained pair -----------------------------------------------------------------------------
@dataclass(frozen=True)
class TWCheckConfig:
    testbed: TestbedConfig = field(default_factory=TestbedConfig)
    slip: float = 0.0
    beta: float = 0.05  # the GRPO trainer's kl_coef
    iterations: int = 3  # few: the policy stays imperfect
    group_size: int = 8
    lr: float = 1e-2
    ppo_epochs: int = 2
    seed: int = 0


@dataclass
class TrainedPair:
    policy: Any  # divelab.rl.policy.LMPolicy
    reference: Any  # LMPolicy on the frozen warm start
    testbed: Any  # divelab.rl.testbed.Testbed
    make_env: EnvFactory  # training env (slippery when cfg.slip > 0)
    success_curve: list[float]
    kl_curve: list[float]


def env_factory(cfg: TWCheckConfig, testbed: Any, seed: int) -> EnvFactory:
    return slip_factory(testbed.make_env, cfg.slip, seed) if cfg.slip > 0 else testbed.make_env


def trained_pair(cfg: TWCheckConfig) -> TrainedPair:
    """The warm-started reference and the GRPO+KL policy trained from it (cached)."""
    from divelab.rl.grpo import GRPOConfig
    from divelab.rl.testbed import build_testbed

    tb = build_testbed(cfg.testbed)
    reference = tb.new_policy()
    reference.model.eval()
    make_env = env_factory(cfg, tb, cfg.seed + 1000)
    path = entry_path("progress-advantage-tw", stable_hash({**asdict(cfg), "version": _VERSION}))
    gcfg = GRPOConfig(iterations=cfg.iterations, group_size=cfg.group_size, max_steps=cfg.testbed.max_steps,
                      lr=cfg.lr, kl_coef=cfg.beta, ppo_epochs=cfg.ppo_epochs, seed=cfg.seed,
                      description=f"progress-advantage: GRPO+KL policy (slip {cfg.slip})")
    policy, success, kl = grpo_policy(tb.new_policy, make_env, tb.game_ids, gcfg, path)
    return TrainedPair(policy, reference, tb, make_env, success, kl)


def grpo_policy(new_policy: Callable[[], Any], make_env: EnvFactory, game_ids: Sequence[str], gcfg: Any,
                path: Path) -> tuple[Any, list[float], list[float]]:
    """``(policy, success curve, KL curve)``: ``new_policy()`` trained by the engine's GRPO trainer (``gcfg``, whose
    ``kl_coef`` is the check's beta) on ``game_ids``, cached in ``path`` (trained there first when missing)."""
    from safetensors.torch import load_model, save_model

    from divelab.rl.grpo import GRPOTrainer

    if not (path / "policy.safetensors").exists():
        policy = new_policy()
        logs = GRPOTrainer(policy, make_env, list(game_ids), gcfg).train()
        with atomic_dir(path) as tmp:
            save_model(policy.model, str(tmp / "policy.safetensors"))
            atomic_write_text(tmp / "logs.json", json.dumps({"success": [lg.success for lg in logs],
                                                             "kl": [lg.kl for lg in logs]}))
    policy = new_policy()
    load_model(policy.model, str(path / "policy.safetensors"))
    policy.model.eval()
    logs = json.loads((path / "logs.json").read_text())
    return policy, logs["success"], logs["kl"]


def sample_groups(policy: Any, make_env: EnvFactory, game_ids: Sequence[str], reps: int, n: int, max_steps: int,
                  seed: int) -> list[Any]:
    """``n`` rollouts per group, ``reps`` groups per game; returns the engine's trajectories, group by group."""
    from divelab.rl.rollout import IndependentSampler

    policy.invalidate()
    groups = IndependentSampler(max_steps=max_steps).collect(policy, make_env, list(game_ids) * reps, n,
                                                             np.random.default_rng(seed))
    return [t for g in groups for t in g]


# -- scoring the engine's trajectories ------------------------------------------------------------
def step_sequences(policy: Any, trajectory: Any) -> list[Any]:
    """One :class:`TokenizedTrajectory` per step: the ids the engine's policy scored for the chosen
    command (truncated context, ``[SEP]``, command, ``[EOS]``); the action span is command + EOS."""
    from divelab.training.progress_advantage.scorer import TokenizedTrajectory

    out = []
    for s in trajectory.steps:
        ctx = policy._context_ids(s.context) + [policy.sep_id]  # the engine's own truncation
        act = policy._encode(s.action) + [policy.eos_id]
        out.append(TokenizedTrajectory(ctx + act, [(len(ctx), len(ctx) + len(act))]))
    return out


def score_token_level(pa: Any, policy: Any, trajectories: Sequence[Any]) -> list[Any]:
    """Progress-advantage scores through :meth:`ProgressAdvantage.score_tokenized` (every step in
    the context the agent really read), merged back into one :class:`TrajectoryScores` per trajectory."""
    from divelab.training.progress_advantage.scorer import TrajectoryScores

    seqs = [step_sequences(policy, t) for t in trajectories]
    flat = pa.score_tokenized([s for ss in seqs for s in ss])
    out, i = [], 0
    for ss in seqs:
        out.append(TrajectoryScores.concat(flat[i:i + len(ss)]))
        i += len(ss)
    return out


@torch.no_grad()
def score_command_level(policy: Any, reference: Any, trajectories: Sequence[Any], beta: float) -> list[Any]:
    """The same numbers at the level of the engine's policy, a softmax over the admissible commands:
    one "token" per step whose log-prob is ``log pi(command | context)`` (this is the distribution the
    KL term regularised, so the identity's ``pi`` is exactly this one)."""
    from divelab.training.progress_advantage.scorer import TrajectoryScores

    keys = list(dict.fromkeys((s.context, tuple(s.candidates)) for t in trajectories for s in t.steps))
    lp_pol = dict(zip(keys, policy.candidate_logprobs([k[0] for k in keys], [list(k[1]) for k in keys]), strict=True))
    lp_ref = dict(zip(keys, reference.candidate_logprobs([k[0] for k in keys], [list(k[1]) for k in keys]),
                      strict=True))
    out = []
    for t in trajectories:
        lp, lr, ent, sc = [], [], [], []
        for s in t.steps:
            k = (s.context, tuple(s.candidates))
            p = lp_pol[k].double().numpy()
            lp.append(np.array([p[s.action_index]]))
            lr.append(np.array([float(lp_ref[k][s.action_index])]))
            ent.append(np.array([float(-(np.exp(p) * p).sum())]))
            sc.append(np.array([float(-p.mean() - np.log(len(p)))]))
        out.append(TrajectoryScores(lp, lr, ent, sc, beta))
    return out


# -- the exact oracle from the game's state graph ----------------------------------------------------
class Oracle:
    """The optimal value on a game's whole state graph (:func:`divelab.envs.textworld.game_graph`, or
    :func:`~divelab.training.progress_advantage.state_graph.explore` for a simulator's game)
    within the step budget, with the slip of :class:`SlipEnv`: a win ``t`` steps from now is worth
    ``gamma**t``, so a detour (a step off every shortest path) lowers the value even when the
    budget would still allow a win. ``gamma = 1`` gives the optimal win probability."""

    def __init__(self, graph: dict[str, Any], max_steps: int, slip: float, gamma: float = 0.9) -> None:
        self.nodes, self.root = graph["nodes"], graph["roots"]["null"]
        self.max_steps, self.slip, self.gamma = max_steps, slip, gamma
        self._v: dict[tuple[int, int], float] = {}

    def _w(self, i: int, a: str, k: int) -> float:
        _obs, r, done, _info, j = self.nodes[i]["children"][a]  # KeyError: graph incomplete
        if r > 0:
            return 1.0
        return 0.0 if done or k <= 1 else self.gamma * self.value(j, k - 1)

    def q(self, i: int, a: str, k: int) -> float:
        adm = self.nodes[i]["admissible"]
        slipped = float(np.mean([self._w(i, b, k) for b in adm]))
        return (1 - self.slip) * self._w(i, a, k) + self.slip * slipped

    def value(self, i: int, k: int) -> float:
        if (i, k) not in self._v:
            n = self.nodes[i]
            self._v[(i, k)] = 0.0 if n["done"] or not n["admissible"] or k <= 0 else \
                max(self.q(i, a, k) for a in n["admissible"])
        return self._v[(i, k)]

    def label(self, trajectory: Any) -> tuple[np.ndarray, int | None] | None:
        """``(Q* - V* per step, first wrong step or None)``; None if the graph lacks a transition.
        A step is wrong when its action lowers the best achievable (discounted) value: the first
        step off every optimal path."""
        try:
            i, adv = self.root, []
            for t, (s, ex) in enumerate(zip(trajectory.steps, executed_actions(trajectory.steps), strict=True)):
                k = self.max_steps - t
                adv.append(self.q(i, s.action, k) - self.value(i, k))
                i = self.nodes[i]["children"][ex][4]
        except KeyError:
            return None
        adv_a = np.array(adv)
        wrong = np.flatnonzero(adv_a < -1e-9)
        return adv_a, (int(wrong[0]) if wrong.size else None)


# -- Monte Carlo advantages of the policy itself -----------------------------------------------------
def mc_advantage(policy: Any, make_env: EnvFactory, trajectory: Any, t: int, m: int, max_steps: int,
                 rng: np.random.Generator) -> float:
    """``P(win | h_t, a_t) - P(win | h_t)`` under ``policy``, from ``m`` rollouts each, replaying the
    executed prefix with ``env.restore`` (exact: the envs are deterministic given the prefix)."""
    from divelab.rl.rollout import continue_episode

    steps = trajectory.steps
    prefix = executed_actions(steps[:t])
    obs = [s.observation for s in steps[:t + 1]]
    acts = [s.action for s in steps[:t]]
    env = make_env(trajectory.game_id)
    env.reset(trajectory.seed)
    wins_q, wins_v = [], []
    for _ in range(m):
        env.restore(prefix)
        _, won, _ = continue_episode(policy, env, obs, acts, rng, max_steps, steps=list(steps[:t]))
        wins_v.append(won)
        env.restore(prefix)
        nobs, r, done, info = env.step(steps[t].action)
        if done:
            wins_q.append(bool(info.get("won", r > 0)))
        else:
            _, won, _ = continue_episode(policy, env, [*obs, nobs], [*acts, steps[t].action], rng, max_steps,
                                         steps=list(steps[:t + 1]))
            wins_q.append(won)
    return float(np.mean(wins_q) - np.mean(wins_v))


# -- one variant, end to end -------------------------------------------------------------------------
@dataclass(frozen=True)
class EvalConfig:
    """Scoring of the policy's rollouts against the true advantage."""

    reps: int = 10
    """groups per game"""
    n: int = 8
    """rollouts per group (best-of-n)"""
    mc_steps: int = 60
    """steps whose true advantage is estimated by Monte Carlo (0: none)"""
    mc_rollouts: int = 32
    """Monte Carlo rollouts per estimated step"""


def run_variant(cfg: TWCheckConfig, ev: EvalConfig, seed: int) -> dict[str, Any]:
    """Every number of the TextWorld LM check for one variant (deterministic or slippery)."""
    from divelab.envs.textworld import game_graph

    pair = trained_pair(cfg)
    tb = pair.testbed
    make_env = env_factory(cfg, tb, seed + 2000)  # fresh slip stream for evaluation

    def graphs() -> dict[str, dict[str, Any]]:
        return {g: game_graph(sp, cfg.testbed.max_states) for g, sp in zip(tb.game_ids, cfg.testbed.specs(),
                                                                          strict=True)}

    return evaluate(pair.policy, pair.reference, tb.tokenizer, make_env, tb.game_ids, graphs, beta=cfg.beta,
                    slip=cfg.slip, max_steps=cfg.testbed.max_steps, ev=ev, seed=seed,
                    config={**asdict(cfg), "eval": asdict(ev)},
                    curves={"rl_success": pair.success_curve, "kl": pair.kl_curve})


def evaluate(policy: Any, reference: Any, tokenizer: Any, make_env: EnvFactory, game_ids: Sequence[str],
             graphs: Callable[[], dict[str, dict[str, Any]]], *, beta: float, slip: float, max_steps: int,
             ev: EvalConfig, seed: int, config: dict[str, Any], curves: dict[str, list[float]]) -> dict[str, Any]:
    """Every number of the LM check for one trained pair on any games: ``ev.reps`` groups of ``ev.n`` rollouts per
    game of ``game_ids`` (played through ``make_env``), scored at the token and command levels against the
    confidence baselines, labelled by the exact oracle on each game's whole state graph (``graphs()``: game id ->
    graph in :meth:`~divelab.envs.base.ReplayCache.export_graph`'s form, asked for once the rollouts are scored),
    with the permuted-steps sham and, for ``ev.mc_steps`` random steps, the policy's Monte Carlo true advantage.
    ``config`` and ``curves`` are recorded as they are."""
    from divelab.training.progress_advantage.lmcheck import (
        REFERENCE_STEP_BASELINE,
        SHAM_SEED,
        _spearman,
        evaluate_scored,
        mc_pairs,
        permuted_steps,
    )
    from divelab.training.progress_advantage.scorer import ProgressAdvantage

    trajs = sample_groups(policy, make_env, game_ids, ev.reps, ev.n, max_steps, seed + 7)
    pa = ProgressAdvantage(policy.model, reference.model, tokenizer, beta=beta, batch_size=256)
    token = score_token_level(pa, policy, trajs)
    command = score_command_level(policy, reference, trajs, beta)
    by_game = graphs()
    oracles = {g: Oracle(gr, max_steps, slip) for g, gr in by_game.items()}
    win_prob = {g: Oracle(gr, max_steps, slip, gamma=1.0) for g, gr in by_game.items()}
    labels = [oracles[t.game_id].label(t) for t in trajs]
    success = np.array([t.won for t in trajs], dtype=bool)
    res: dict[str, Any] = {"config": config, "games": list(game_ids), "curves": curves,
                           "optimal_success": {g: o.value(o.root, max_steps) for g, o in win_prob.items()}}
    pol = evaluate_scored(token, success, ev.n, labels)
    sham = permuted_steps(token, np.random.default_rng(seed + SHAM_SEED))
    pol["_sham"] = evaluate_scored(sham, success, ev.n, labels)
    cmd = evaluate_scored(command, success, ev.n, labels)
    # the engine policy's own confidence: mean log-prob of the chosen commands
    conf = np.array([x.mean_logprob() for x in command])
    pol["_scores"]["mean command log-prob"] = conf.tolist()
    from divelab.training.progress_advantage.aggregate import auroc
    from divelab.training.progress_advantage.lmcheck import best_of_n_success

    two = 0 < success.sum() < len(success)
    pol["baselines"]["mean command log-prob"] = {"best_of_n": best_of_n_success(conf, success, ev.n),
                                                 "auroc": auroc(conf, success) if two else None}
    if ev.mc_steps > 0:
        rng = np.random.default_rng(seed + 11)
        all_steps = [(i, t) for i, tr in enumerate(trajs) for t in range(len(tr.steps))]
        picks = [all_steps[j] for j in rng.choice(len(all_steps), size=min(ev.mc_steps, len(all_steps)),
                                                 replace=False)]
        mc = [mc_advantage(policy, make_env, trajs[i], t, ev.mc_rollouts, max_steps, rng) for i, t in picks]
        prog_mc = [token[i].step_advantages("sum")[t] for i, t in picks]
        # raw pairs, for the claim's paired comparison; the policy's confidence is its command log-prob
        at_command = mc_pairs(command, sham, picks, mc)
        pol["_mc"] = {**mc_pairs(token, sham, picks, mc), "policy log-prob": at_command["policy log-prob"],
                      REFERENCE_STEP_BASELINE: at_command[REFERENCE_STEP_BASELINE]}
        pol["step_corr_mc"] = {
            "progress": _spearman(prog_mc, mc),
            "progress (command level)": _spearman([command[i].step_advantages("sum")[t] for i, t in picks], mc),
            "policy log-prob": _spearman([command[i].step_logprobs("sum")[t] for i, t in picks], mc),
            "n_steps": len(picks), "rollouts_per_estimate": ev.mc_rollouts}
    res["policy"] = pol
    res["command_level"] = cmd
    return res


def variants(base: TWCheckConfig, slip: float) -> dict[str, TWCheckConfig]:
    return {"TextWorld deterministic": base, f"TextWorld slippery (slip {slip})": replace(base, slip=slip)}
