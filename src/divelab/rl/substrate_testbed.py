"""A test bed on a public simulator: TextWorldExpress or ScienceWorld games plus a warm-started tiny-LM policy.

The home-grown test bed (:mod:`divelab.rl.testbed`) trains on TextWorld games that divelab generates and
selects. This one trains on a public simulator's own games, which no one here wrote: the policy trains on the
first ``train_episodes`` episodes of the simulator's train split and is scored on ``eval_episodes`` episodes
of its dev split, which it never trained on. Each episode is a fixed game
(:class:`~divelab.envs.substrate.PinnedEpisode`), so the RL samplers' groups compare rollouts of one game,
as they do on TextWorld, and every transition is simulated once (the factory caches it).

The warm start is the same recipe as the home-grown test bed's: uniform-random exploration of the training
episodes, a word-level tokenizer on their text, a tiny divelab Llama behaviour-cloned on them. It is cached
under ``$DIVELAB_CACHE/rl-substrate-testbed/<hash of the config>``.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from divelab.cache import entry_path, stable_hash
from divelab.envs.base import EnvFactory
from divelab.envs.substrate import Simulator, pinned_ids, view
from divelab.rl.policy import LMPolicy
from divelab.rl.testbed import WarmStartConfig, cached_warm_start, policy_from

SIMULATORS = ("twx", "scienceworld")
# Part of the cache key: bump it whenever the code that builds the warm start changes what it produces.
RECIPE = 1


@dataclass(frozen=True)
class SubstrateTestbedConfig(WarmStartConfig):
    """Which public games a test bed plays and how its warm-started policy is built (part of the cache key; the
    warm start's settings are :class:`~divelab.rl.testbed.WarmStartConfig`'s)."""

    simulator: str = "twx"
    """"twx" (TextWorldExpress) or "scienceworld\""""
    game: str = "coin"
    """the simulator's game or task name (e.g. "coin", "cookingworld", "twc"; a ScienceWorld task name)"""
    params: str = ""
    """TextWorldExpress's ``key=value,...`` settings ("" = divelab.envs.twx.DEFAULT_PARAMS); unused for
    ScienceWorld"""
    train_episodes: int = 8
    """episodes of the train split the policy trains on (the split's first ones)"""
    eval_episodes: int = 16
    """episodes of the dev split it is scored on (never trained on)"""
    max_steps: int = 8
    """step cap of an episode"""
    reward: str = "win"
    """"win" (1 on a win, as the TextWorld games give) or "score" (the simulator's score change per step)"""

    __test__ = False  # not a pytest class

    def __post_init__(self) -> None:
        if self.simulator not in SIMULATORS:
            raise ValueError(f"unknown simulator {self.simulator!r}; allowed: {', '.join(SIMULATORS)}")
        for name in ("train_episodes", "eval_episodes", "max_steps", "sft_episodes", "sft_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"SubstrateTestbedConfig.{name} must be >= 1, got {getattr(self, name)}")

    def specs(self, split: str) -> list[Any]:
        if self.simulator == "twx":
            from divelab.envs.twx import TWXSpec

            return [TWXSpec(self.game, split, self.params)]
        from divelab.envs.scienceworld import ScienceWorldSpec

        return [ScienceWorldSpec(self.game, split)]

    def factory(self, split: str, episodes: list[int], simulator: Simulator) -> EnvFactory:
        if self.simulator == "twx":
            from divelab.envs.twx import twx_env_factory as make
        else:
            from divelab.envs.scienceworld import scienceworld_env_factory as make
        return make(self.specs(split), max_steps=self.max_steps, reward=self.reward, simulator=simulator,
                    episodes=episodes)

    @property
    def label(self) -> str:
        name = {"twx": "TextWorldExpress", "scienceworld": "ScienceWorld"}[self.simulator]
        return f"{name} {self.game}"


@dataclass
class SubstrateTestbed:
    config: SubstrateTestbedConfig
    game_ids: list[str]  # the training episodes (train split)
    make_env: EnvFactory
    eval_game_ids: list[str]  # the held-out episodes (dev split)
    make_eval_env: EnvFactory  # same simulator process as make_env
    tokenizer: Tokenizer
    weights: Path  # safetensors of the warm-started model
    sft_losses: list[float]
    simulator: Simulator  # the one process every env of the test bed plays on (started on first use)
    make_control_env: EnvFactory  # the training games, every observation tagged so states almost never repeat

    __test__ = False

    def new_policy(self) -> LMPolicy:
        return policy_from(self.config, self.tokenizer, self.weights, view)

    def close(self) -> None:
        """Stop the simulator process; the next reset starts a new one. Call it before forking workers: a
        py4j connection cannot be shared across processes."""
        self.simulator.close()

def _control_factory(make_env: EnvFactory, salt: int) -> EnvFactory:
    """The training game with every observation tagged by a session id and step counter, so states almost never
    repeat (the TextWorld test bed's control, divelab.envs.textworld.NonceControl)."""
    from divelab.envs.textworld import NonceControl

    episodes = itertools.count()  # one counter for the factory, so no two episodes share a session id
    return lambda game_id: NonceControl(make_env(game_id), salt, episodes)


def build_substrate_testbed(cfg: SubstrateTestbedConfig | None = None) -> SubstrateTestbed:
    """The games (train and dev episodes on one simulator process) and the cached warm-started policy."""
    cfg = cfg or SubstrateTestbedConfig()
    sim = Simulator()
    train_eps, eval_eps = list(range(cfg.train_episodes)), list(range(cfg.eval_episodes))
    make_env = cfg.factory("train", train_eps, sim)
    make_eval = cfg.factory("dev", eval_eps, sim)
    ids, eval_ids = pinned_ids(cfg.specs("train"), train_eps), pinned_ids(cfg.specs("dev"), eval_eps)
    final = entry_path("rl-substrate-testbed", stable_hash({**asdict(cfg), "recipe": RECIPE}))
    tok, losses = cached_warm_start(final, cfg, make_env, ids, view)
    tb = SubstrateTestbed(cfg, ids, make_env, eval_ids, make_eval, tok, final / "model.safetensors", losses, sim,
                          _control_factory(make_env, cfg.seed))
    tb.close()  # no simulator left running (see close): a forked worker starts its own on its first reset
    return tb
