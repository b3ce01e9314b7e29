"""The shared small test bed: a set of generated TextWorld games plus a warm-started tiny-LM policy.

``build_testbed(TestbedConfig(...))`` generates the games (cached), collects uniform-random
exploration traces, trains a word-level tokenizer on their text, builds a tiny divelab Llama and
SFTs it on the traces (candidate-level behaviour cloning of the uniform explorer, see
:mod:`divelab.rl.warmstart`). The tokenizer and warm-started weights are cached under
``$DIVELAB_CACHE/rl-testbed/<hash of the config>`` so every training run starts from the same
policy without paying for it again. ``testbed.new_policy()`` returns a fresh copy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from safetensors.torch import load_model, save_model
from tokenizers import Tokenizer

from divelab.cache import atomic_dir, entry_path, stable_hash
from divelab.envs.base import EnvFactory
from divelab.envs.textworld import (
    TextWorldGameSpec,
    compact_view,
    game_graph,
    textworld_env_factory,
    uniform_success,
)
from divelab.lm.models import build_model
from divelab.rl.policy import LMPolicy, PolicyConfig, train_word_tokenizer
from divelab.rl.warmstart import exploration_traces, sft_warm_start, trace_texts
from divelab.threads import torch_threads

# a deliberately tiny Llama (about 20k parameters): this machine has 2 shared CPU cores
SMALL_LM = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64,
            "max_position_embeddings": 256}


@dataclass(frozen=True)
class WarmStartConfig:
    """How a test bed's warm-started policy is built, on whatever games (part of the cache key): the policy's
    architecture and context, and the behaviour cloning of uniform-random exploration of its training games."""

    model: str = "tiny-100k"
    """the policy's divelab zoo architecture (see divelab.lm.models)"""
    model_overrides: dict[str, Any] = field(default_factory=lambda: dict(SMALL_LM))
    """config values that replace the architecture's (default: SMALL_LM, a ~20k-parameter Llama)"""
    history: int = 0
    """earlier (command, observation) pairs the policy reads before the current observation"""
    tail_tokens: int = 48
    """tokens kept from the end of a long context (the policy keeps no head tokens)"""
    sft_episodes: int = 8
    """uniform-random exploration episodes per training game that the warm start clones"""
    sft_steps: int = 80
    """optimiser steps of the warm start (behaviour cloning)"""
    sft_lr: float = 5e-3
    """learning rate of the warm start"""
    seed: int = 0
    """seed of the warm start (its exploration, initialisation and steps) and of the control games' session ids"""


@dataclass(frozen=True)
class TestbedConfig(WarmStartConfig):
    """Which games a test bed generates and how its warm-started policy is built (part of the cache key)."""

    n_games: int = 4
    """games in the set"""
    game_seed0: int = 0
    """first TextWorld generator seed: games use seeds game_seed0, game_seed0 + 1, ... (scanned from here when
    min_random_success > 0)"""
    nb_rooms: int = 3
    """rooms per generated game"""
    nb_objects: int = 3
    """objects per generated game"""
    quest_length: int = 2
    """commands of each game's quest (its shortest winning walkthrough)"""
    max_steps: int = 10
    """step cap of an episode"""
    min_random_success: float = 0.0
    """game selection: above 0, scan generator seeds from game_seed0 and keep the first n_games whose whole graph
    has at most max_states states and that a uniform random player wins within max_steps with at least this
    probability (games a small policy can learn within a short budget; the rule, not a hand pick, decides)"""
    max_states: int = 400
    """largest explored state graph of a game (its reachable states, merged by world facts)"""
    seed_scan: int = 40
    """generator seeds scanned for games that pass min_random_success before giving up"""

    __test__ = False  # not a pytest class

    def specs(self) -> list[TextWorldGameSpec]:
        def spec(seed: int) -> TextWorldGameSpec:
            return TextWorldGameSpec(seed=seed, nb_rooms=self.nb_rooms, nb_objects=self.nb_objects,
                                     quest_length=self.quest_length)

        if self.min_random_success <= 0:
            return [spec(self.game_seed0 + i) for i in range(self.n_games)]
        kept: list[TextWorldGameSpec] = []
        for seed in range(self.game_seed0, self.game_seed0 + self.seed_scan):
            graph = game_graph(spec(seed), self.max_states)
            if graph["complete"] and uniform_success(graph, self.max_steps) >= self.min_random_success:
                kept.append(spec(seed))
                if len(kept) == self.n_games:
                    return kept
        raise ValueError(f"only {len(kept)} of {self.seed_scan} generated games pass min_random_success="
                         f"{self.min_random_success} with max_steps={self.max_steps}, max_states={self.max_states}; "
                         "lower the threshold, raise max_steps or seed_scan")


@dataclass
class Testbed:
    config: TestbedConfig
    game_ids: list[str]
    make_env: EnvFactory  # states repeat
    make_control_env: EnvFactory  # same games, states almost never repeat
    tokenizer: Tokenizer
    weights: Path  # safetensors of the warm-started model
    sft_losses: list[float]

    __test__ = False

    def new_policy(self) -> LMPolicy:
        return policy_from(self.config, self.tokenizer, self.weights, compact_view)


def policy_from(cfg: Any, tokenizer: Tokenizer, weights: Path | None, view: Callable[[str], str]) -> LMPolicy:
    """The test bed's policy: ``cfg``'s architecture (any config with TestbedConfig's model, model_overrides,
    history, tail_tokens and seed), loaded from ``weights`` (None: freshly initialised)."""
    model = build_model(cfg.model, tokenizer.get_vocab_size(), seed=cfg.seed, **cfg.model_overrides)
    if weights is not None:
        load_model(model, str(weights))
    return LMPolicy(model, tokenizer, PolicyConfig(history=cfg.history, head_tokens=0, tail_tokens=cfg.tail_tokens),
                    view=view)


def cached_warm_start(final: Path, cfg: Any, make_env: EnvFactory, ids: list[str],
                      view: Callable[[str], str]) -> tuple[Tokenizer, list[float]]:
    """``(tokenizer, losses)`` of the warm start cached in ``final``, built there first if missing: uniform
    random exploration of ``ids`` (``cfg.sft_episodes`` each, capped at ``cfg.max_steps``), a word-level
    tokenizer on its text, and behaviour cloning of it into :func:`policy_from`'s model."""
    if not (final / "model.safetensors").exists():
        # one thread, whatever the caller set: the warm start is cached and shared by several
        # reproductions, so it must not depend on which of them built it (see divelab.threads)
        with torch_threads(1):
            traces = exploration_traces(make_env, ids, cfg.sft_episodes, cfg.max_steps, seed=cfg.seed)
            tok = train_word_tokenizer(trace_texts(traces))
            policy = policy_from(cfg, tok, None, view)
            losses = sft_warm_start(policy, traces, steps=cfg.sft_steps, lr=cfg.sft_lr, seed=cfg.seed)
        with atomic_dir(final) as tmp:
            tok.save(str(tmp / "tokenizer.json"))
            save_model(policy.model, str(tmp / "model.safetensors"))
            (tmp / "sft_losses.txt").write_text("\n".join(f"{x:.5f}" for x in losses))
    tok = Tokenizer.from_file(str(final / "tokenizer.json"))
    return tok, [float(x) for x in (final / "sft_losses.txt").read_text().split()]


# Part of the cache key: bump it whenever the code that builds a test bed (exploration traces,
# tokenizer, warm start) changes what it produces, so no stale warm start is ever reused.
TESTBED_RECIPE = 3


def build_testbed(cfg: TestbedConfig | None = None) -> Testbed:
    cfg = cfg or TestbedConfig()
    specs = cfg.specs()
    make_env = textworld_env_factory(specs, max_steps=cfg.max_steps, precompute=True, max_states=cfg.max_states)
    make_control = textworld_env_factory(specs, max_steps=cfg.max_steps, control=True, salt=cfg.seed,
                                         precompute=True, max_states=cfg.max_states)
    ids = [s.game_id for s in specs]
    final = entry_path("rl-testbed", stable_hash({**asdict(cfg), "recipe": TESTBED_RECIPE}))
    tok, losses = cached_warm_start(final, cfg, make_env, ids, compact_view)
    return Testbed(cfg, ids, make_env, make_control, tok, final / "model.safetensors", losses)
