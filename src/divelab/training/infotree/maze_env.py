"""The E163 maze family (:mod:`divelab.envs.maze`) as an RL-engine ``TextEnv``.

InfoTree (arXiv 2605.05262) is compared with independent sampling "on the TextWorld games and the
maze family from the E163 work". The backtracking package has its own walker and policy; the
engine's trainer and :class:`~divelab.training.infotree.engine.TreeSampler` talk to
:class:`divelab.envs.base.TextEnv`. This adapter wraps :class:`MazeWalker` unchanged: same
K/L/W layout, moves (``E0..``, ``F``, ``B``, ``R``) and local observations (``S J C D G``).
``restore(actions)`` replays a prefix from a fresh walker, because a walker is a deterministic
function of its maze and its moves.

One addition, ours: an observation is ``"maze <i> <obs>"``, so it names the maze instance.
E163 samples a fresh maze per episode, and its policy can only learn a strategy (backtracking).
Here a fixed set of mazes plays the role of the fixed set of TextWorld games, so a small policy can
learn the correct exits of each, as it learns each game's quest. Success then needs K correct
decisions, the collapse setting (notes §1).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

from divelab.envs.base import EnvFactory, ReplayRestore, StepResult, check_action
from divelab.envs.maze import (
    MAX_BRANCHING,
    MOVE_TOKENS,
    OBS_TOKENS,
    Maze,
    MazeSpec,
    MazeWalker,
    exit_token,
)
from divelab.rl.policy import LMPolicy


class MazeTextEnv(ReplayRestore):
    """One maze instance behind the ``TextEnv`` protocol (reward 1 on reaching the goal)."""

    def __init__(self, maze: Maze, name: str) -> None:
        self.maze, self.name = maze, name
        self._walker = MazeWalker(maze)
        self._seed: int | None = None

    def _text(self, obs: str) -> str:
        return f"{self.name} {obs}"

    def reset(self, seed: int | None = None) -> str:
        # the maze is fixed per game; the seed is kept only so restore() honours the protocol
        self._seed = seed
        self._walker = MazeWalker(self.maze)
        return self._text(self._walker.observation())

    def step(self, action: str) -> StepResult:
        if self._walker.done:
            raise RuntimeError("step() after the goal was reached; call reset() first")
        check_action(action, self._walker.legal_actions())
        obs = self._walker.step(action)
        won = self._walker.done
        return self._text(obs), float(won), won, {"won": won, "lost": False}

    def admissible_actions(self) -> list[str]:
        return [] if self._walker.done else self._walker.legal_actions()

    def state_key(self, observation: str) -> Hashable:
        # a pure function of the text, as the protocol asks (samplers call it after stepping on)
        return observation

    def _fresh(self) -> MazeTextEnv:
        return MazeTextEnv(self.maze, self.name)

    @property
    def actions_taken(self) -> list[str]:
        return list(self._walker.history)  # the walker keeps the moves


@dataclass(frozen=True)
class MazeGames:
    """A fixed set of maze instances of one spec, named ``maze-<K>-<L>-<W>-<seed>-<i>``."""

    spec: MazeSpec
    n_mazes: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n_mazes < 1:
            raise ValueError(f"n_mazes must be >= 1, got {self.n_mazes}")

    @property
    def game_ids(self) -> list[str]:
        s = self.spec
        return [f"maze-{s.K}-{s.L}-{s.W}-{self.seed}-{i}" for i in range(self.n_mazes)]

    def mazes(self) -> list[Maze]:
        rng = np.random.default_rng(self.seed)
        return [Maze.sample(self.spec, rng) for _ in range(self.n_mazes)]

    def factory(self) -> EnvFactory:
        table = dict(zip(self.game_ids, self.mazes(), strict=True))

        def make_env(game_id: str) -> MazeTextEnv:
            if game_id not in table:
                raise ValueError(f"unknown maze game {game_id!r}; allowed: {', '.join(table)}")
            return MazeTextEnv(table[game_id], f"maze {game_id.rsplit('-', 1)[1]}")

        return make_env

    def texts(self) -> list[str]:
        """Every word a context can hold (to train a word tokenizer on)."""
        names = [f"maze {i}" for i in range(self.n_mazes)]
        return [*names, " ".join(OBS_TOKENS), " ".join(MOVE_TOKENS), " ".join(exit_token(i) for i in range(MAX_BRANCHING)),
                ">"]


def maze_policy_factory(games: MazeGames, history: int = 2, seed: int = 0) -> Callable[[], LMPolicy]:
    """``new_policy()`` for the maze games: a tiny divelab Llama (the RL test bed's size) behind the
    engine's :class:`~divelab.rl.policy.LMPolicy`, with a word tokenizer over the maze's words.
    Every call returns the same freshly initialised weights (seeded); no warm start is needed,
    every command is one token, so the untrained LM is close to uniform over the legal moves."""
    from divelab.lm.models import build_model
    from divelab.rl.policy import PolicyConfig, train_word_tokenizer
    from divelab.rl.testbed import SMALL_LM

    tok = train_word_tokenizer(games.texts())

    def new_policy() -> LMPolicy:
        model = build_model("tiny-100k", tok.get_vocab_size(), seed=seed, **SMALL_LM)
        return LMPolicy(model, tok, PolicyConfig(history=history, head_tokens=0, tail_tokens=48))

    return new_policy
