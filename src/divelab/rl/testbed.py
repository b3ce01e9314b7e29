"""The shared small test bed: a set of generated TextWorld games plus a warm-started tiny-LM policy.

``build_testbed(TestbedConfig(...))`` generates the games (cached), collects uniform-random
exploration traces, trains a word-level tokenizer on their text, builds a tiny divelab Llama and
SFTs it on the traces (candidate-level behaviour cloning of the uniform explorer, see
:mod:`divelab.rl.warmstart`). The tokenizer and warm-started weights are cached under
``$DIVELAB_CACHE/rl-testbed/<hash of the config>`` so every training run starts from the same
policy without paying for it again. ``testbed.new_policy()`` returns a fresh copy.
"""

from __future__ import annotations

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


@dataclass
class TestbedConfig:
    n_games: int = 4
    game_seed0: int = 0  # games use seeds game_seed0 .. game_seed0 + n_games - 1
    nb_rooms: int = 3
    nb_objects: int = 3
    quest_length: int = 2
    max_steps: int = 10
    model: str = "tiny-100k"
    model_overrides: dict[str, Any] = field(default_factory=lambda: dict(SMALL_LM))
    history: int = 0
    tail_tokens: int = 48
    sft_episodes: int = 8  # exploration episodes per game
    sft_steps: int = 80
    sft_lr: float = 5e-3
    seed: int = 0
    # game selection: with min_random_success > 0, scan generator seeds from game_seed0 and keep
    # the first n_games whose whole graph has <= max_states states and that a uniform random
    # player wins within max_steps with at least this probability (games a small policy can
    # learn within a short budget; the rule, not a hand pick, decides)
    min_random_success: float = 0.0
    max_states: int = 400
    seed_scan: int = 40

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
        cfg = self.config
        model = build_model(cfg.model, self.tokenizer.get_vocab_size(), seed=cfg.seed, **cfg.model_overrides)
        load_model(model, str(self.weights))
        return LMPolicy(model, self.tokenizer, PolicyConfig(history=cfg.history, head_tokens=0,
                                                            tail_tokens=cfg.tail_tokens), view=compact_view)


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
    if not (final / "model.safetensors").exists():
        # one thread, whatever the caller set: the warm start is cached and shared by several
        # reproductions, so it must not depend on which of them built it (see divelab.threads)
        with torch_threads(1):
            traces = exploration_traces(make_env, ids, cfg.sft_episodes, cfg.max_steps, seed=cfg.seed)
            tok = train_word_tokenizer(trace_texts(traces))
            model = build_model(cfg.model, tok.get_vocab_size(), seed=cfg.seed, **cfg.model_overrides)
            policy = LMPolicy(model, tok, PolicyConfig(history=cfg.history, head_tokens=0,
                                                       tail_tokens=cfg.tail_tokens), view=compact_view)
            losses = sft_warm_start(policy, traces, steps=cfg.sft_steps, lr=cfg.sft_lr, seed=cfg.seed)
        with atomic_dir(final) as tmp:
            tok.save(str(tmp / "tokenizer.json"))
            save_model(model, str(tmp / "model.safetensors"))
            (tmp / "sft_losses.txt").write_text("\n".join(f"{x:.5f}" for x in losses))
    tok = Tokenizer.from_file(str(final / "tokenizer.json"))
    losses = [float(x) for x in (final / "sft_losses.txt").read_text().split()]
    return Testbed(cfg, ids, make_env, make_control, tok, final / "model.safetensors", losses)
