"""Tree vs independent rollouts in the RL engine's GRPO loop, at equal environment steps.

InfoTree (arXiv 2605.05262) claims that tree rollouts train better than independent (flat GRPO)
ones under the same budget. This module runs that comparison on any ``TextEnv`` family: each arm
trains a fresh copy of the same starting policy with :class:`divelab.rl.grpo.GRPOTrainer`, changing
only ``sampler=``. Every arm keeps training until it has spent the same number of environment
steps. A step is a transition the agent actually played. Restoring a prefix to branch from it is
a replay behind a cache, so it is not counted, like a snapshot restore in the paper's setting.
Success is then measured the same way for every arm: independent sampled episodes of the trained
policy, never the tree's own leaves, whose win rate is biased by where the tree chose to branch. By
default it is scored on the games it trained on; ``held_out=(make_env, game_ids)`` scores it on other
games instead (a public simulator's dev split, say), the same ones for every arm.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from divelab.envs.base import EnvFactory
from divelab.rl.grpo import GRPOConfig, GRPOTrainer, evaluate
from divelab.rl.policy import LMPolicy
from divelab.threads import torch_threads
from divelab.training.infotree.engine import SAMPLER_NAMES, TreeSampler, make_sampler


@dataclass
class ArenaConfig:
    env_steps: int = 2000  # training budget per run, in environment steps
    group_size: int = 8  # rollouts' worth of steps per game per iteration (tree: via mean length)
    max_steps: int = 8
    lr: float = 1e-2
    kl_coef: float = 0.02
    ppo_epochs: int = 2
    eval_episodes: int = 32  # independent sampled episodes per game after training
    max_iterations: int = 200  # safety stop, whatever the env-step count
    samplers: tuple[str, ...] = ("independent", "tree")
    estimator: str = "grpo"  # the same registered advantage estimator for every arm
    estimator_options: dict[str, Any] = field(default_factory=dict)
    sampler_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("env_steps", "group_size", "max_steps", "ppo_epochs", "eval_episodes", "max_iterations"):
            if getattr(self, name) < 1:
                raise ValueError(f"ArenaConfig.{name} must be >= 1, got {getattr(self, name)}")
        bad = [s for s in self.samplers if s not in SAMPLER_NAMES]
        if bad:
            raise ValueError(f"unknown samplers {bad}; allowed: {', '.join(SAMPLER_NAMES)}")


@dataclass
class ArenaRun:
    sampler: str
    seed: int
    env_steps: list[int]  # cumulative, after each iteration
    train_success: list[float]  # the trainer's per-iteration rollout success (tree: leaf win rate)
    mixed_group_frac: list[float]
    start_success: float  # independent evaluation before training
    final_success: float  # independent evaluation after training


def _iteration_env_steps(sampler: Any, groups: list) -> int:
    if isinstance(sampler, TreeSampler):
        return int(sampler.stats()["env_steps"])
    return int(sum(len(t) for g in groups for t in g))


HeldOut = tuple[EnvFactory, Sequence[str]]
"""``(make_env, game_ids)`` of the games an arm is scored on, when they are not the games it trains on."""


def run_arm(new_policy: Callable[[], LMPolicy], make_env: EnvFactory, game_ids: Sequence[str], sampler: str,
            cfg: ArenaConfig, seed: int, start_success: float | None = None,
            held_out: HeldOut | None = None) -> ArenaRun:
    """Train one arm until it has used ``cfg.env_steps`` environment steps; evaluate independently (on
    ``held_out`` games when given)."""
    policy = new_policy()
    eval_seed = 10_000 + seed  # same evaluation episodes for every arm of a seed
    eval_env, eval_ids = held_out or (make_env, game_ids)
    if start_success is None:
        start_success = evaluate(policy, eval_env, eval_ids, cfg.eval_episodes, cfg.max_steps, seed=eval_seed)
    smp = make_sampler(sampler, max_steps=cfg.max_steps, **cfg.sampler_options)
    trainer = GRPOTrainer(policy, make_env, game_ids,
                          GRPOConfig(iterations=cfg.max_iterations, group_size=cfg.group_size, max_steps=cfg.max_steps,
                                     lr=cfg.lr, kl_coef=cfg.kl_coef, ppo_epochs=cfg.ppo_epochs, seed=seed,
                                     estimator=cfg.estimator, estimator_options=dict(cfg.estimator_options),
                                     description=f"infotree arena {sampler}/s{seed}"),
                          sampler=smp)
    used, steps, succ, mixed = 0, [], [], []
    while used < cfg.env_steps and len(steps) < cfg.max_iterations:
        log = trainer.iteration()
        used += _iteration_env_steps(smp, trainer.last_groups)
        steps.append(used)
        succ.append(log.success)
        mixed.append(log.mixed_group_frac)
    final = evaluate(policy, eval_env, eval_ids, cfg.eval_episodes, cfg.max_steps, seed=eval_seed)
    return ArenaRun(sampler, seed, steps, succ, mixed, float(start_success), float(final))


def run_arena(new_policy: Callable[[], LMPolicy], make_env: EnvFactory, game_ids: Sequence[str], cfg: ArenaConfig,
              seeds: Sequence[int], progress: Callable[[Any, str], Any] | None = None,
              held_out: HeldOut | None = None) -> list[ArenaRun]:
    """Every sampler of ``cfg`` on every seed, one thread (tiny models: faster than two contended); scored on
    ``held_out`` games when given."""
    eval_env, eval_ids = held_out or (make_env, game_ids)
    with torch_threads(1):
        jobs = [(s, name) for s in seeds for name in cfg.samplers]
        it = progress(jobs, "infotree: tree vs independent") if progress else jobs
        runs, start = [], {}
        for s, name in it:
            if s not in start:
                pol = new_policy()
                start[s] = evaluate(pol, eval_env, eval_ids, cfg.eval_episodes, cfg.max_steps, seed=10_000 + s)
            runs.append(run_arm(new_policy, make_env, game_ids, name, cfg, s, start_success=start[s],
                                held_out=held_out))
        return runs


@dataclass
class StartMixed:
    """One sampler's rollouts with the starting policy, before any training: per (batch, game) unit."""

    mixed: np.ndarray  # 1.0 where the game's rollouts (a tree's leaves) hold both a win and a loss
    games: list[str]  # the game of each unit (units of one game are correlated: cluster by it)
    env_steps_per_game: float  # mean env steps one game's group used (the budget actually spent)


def start_mixed(new_policy: Callable[[], LMPolicy], make_env: EnvFactory, game_ids: Sequence[str],
                cfg: ArenaConfig, batches: int, seed: int, samplers: Sequence[str] | None = None
                ) -> dict[str, StartMixed]:
    """Before any training: for each sampler (default: the arena's), whether each game's group is mixed in
    each of ``batches`` batches at the arena's group budget, and the env steps it used (InfoTree's own claim,
    measured on the engine's envs with the starting policy). Every sampler starts from the same generator
    seed and the same policy."""
    policy = new_policy()
    out = {}
    for name in samplers or cfg.samplers:
        smp = make_sampler(name, max_steps=cfg.max_steps, **cfg.sampler_options)
        rng = np.random.default_rng(seed)
        mixed, games, steps = [], [], []
        for _ in range(batches):
            groups = smp.collect(policy, make_env, game_ids, cfg.group_size, rng)
            mixed += [float(len({t.won for t in g}) > 1) for g in groups]
            games += list(game_ids)
            steps.append(_iteration_env_steps(smp, groups) / len(game_ids))
        out[name] = StartMixed(np.array(mixed), games, float(np.mean(steps)))
    return out


def start_mixed_ratio(new_policy: Callable[[], LMPolicy], make_env: EnvFactory, game_ids: Sequence[str],
                      cfg: ArenaConfig, batches: int, seed: int) -> dict[str, tuple[float, float]]:
    """Before any training: (share of games whose rollouts disagree, env steps per game) for each
    sampler, over ``batches`` batches at the arena's group budget."""
    return {k: (float(v.mixed.mean()), v.env_steps_per_game)
            for k, v in start_mixed(new_policy, make_env, game_ids, cfg, batches, seed).items()}


def random_success(make_env: EnvFactory, game_ids: Sequence[str], episodes: int, max_steps: int, seed: int) -> float:
    """Win rate of a uniform random player (how hard the family is before any learning): the warm start's own
    uniform exploration, so the two draw the same episodes."""
    from divelab.rl.warmstart import exploration_traces

    return float(np.mean([t.won for t in exploration_traces(make_env, game_ids, episodes, max_steps, seed)]))
