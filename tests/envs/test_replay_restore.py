"""``ReplayRestore`` gives an env restore, clone and actions_taken from its seed, its moves and ``_fresh()``."""

from __future__ import annotations

import numpy as np
import pytest

from divelab.envs.base import ReplayRestore
from divelab.envs.maze import MazeSpec
from divelab.envs.toy import CorridorEnv
from divelab.training.infotree.maze_env import MazeGames


def _walk(env, moves: list[str]) -> None:
    for a in moves:
        env.step(a)


@pytest.mark.parametrize("make", [lambda: CorridorEnv(max_steps=20),
                                  lambda: MazeGames(MazeSpec(K=2, L=2, W=1), n_mazes=1).factory()("maze-2-2-1-0-0")])
def test_a_clone_is_independent_and_at_the_same_state(make) -> None:
    env = make()
    env.reset(3)
    rng = np.random.default_rng(0)
    moves = []
    for _ in range(3):
        moves.append(env.admissible_actions()[int(rng.integers(len(env.admissible_actions())))])
        env.step(moves[-1])
    twin = env.clone()
    assert twin is not env and twin.actions_taken == env.actions_taken == moves
    assert twin._seed == 3 and twin.admissible_actions() == env.admissible_actions()
    a = twin.admissible_actions()[0]
    assert twin.step(a) == env.step(a)  # same state, so the same next step
    twin.step(twin.admissible_actions()[0])
    assert len(env.actions_taken) == 4 and len(twin.actions_taken) == 5  # independent from here on
    taken = env.actions_taken
    taken.append("x")
    assert len(env.actions_taken) == 4  # a copy, not the env's own list


def test_an_env_without_fresh_says_what_to_define() -> None:
    class Bare(ReplayRestore):
        def __init__(self) -> None:
            self._seed, self._actions = 0, []

    with pytest.raises(NotImplementedError, match="Bare must define _fresh"):
        Bare().clone()
