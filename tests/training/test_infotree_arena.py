"""InfoTree's tree-vs-independent arena: the E163 maze adapter and equal-env-step training runs."""

from __future__ import annotations

import pytest

from divelab.envs.base import InvalidAction, TextEnv
from divelab.envs.maze import MazeSpec
from divelab.training.infotree.arena import (
    ArenaConfig,
    random_success,
    run_arena,
    start_mixed,
    start_mixed_ratio,
)
from divelab.training.infotree.engine import TreeSampler
from divelab.training.infotree.maze_env import MazeGames, maze_policy_factory

GAMES = MazeGames(MazeSpec(K=2, L=2, W=1), n_mazes=2, seed=3)


def test_maze_env_follows_the_text_env_protocol():
    make_env = GAMES.factory()
    maze = GAMES.mazes()[0]
    env = make_env(GAMES.game_ids[0])
    assert isinstance(env, TextEnv)
    assert env.reset(5) == "maze 0 S"
    assert env.admissible_actions() == ["E0", "E1"]
    wrong = f"E{1 - maze.correct[0]}"
    assert env.step(wrong)[0] == "maze 0 D"  # W=1: a wrong exit is a dead end at once
    assert env.admissible_actions() == ["B", "R"]
    with pytest.raises(InvalidAction, match="allowed"):
        env.step("F")
    twin = env.clone()
    twin.step("R")
    assert env.actions_taken == [wrong] and twin.actions_taken == [wrong, "R"]
    # the golden path wins, with reward 1 on the last step only
    out = [env.restore([])] + [env.step(a) for a in maze.golden_actions()]
    assert out[-1][1:3] == (1.0, True) and out[-1][3]["won"] and all(r[1] == 0.0 for r in out[1:-1])
    assert env.admissible_actions() == []
    # restore(prefix) reaches the state replaying reaches
    prefix = maze.golden_actions()[:2]
    assert env.restore(prefix) == "maze 0 J" and env.actions_taken == prefix
    with pytest.raises(ValueError, match="unknown maze game"):
        make_env("maze-nope")
    with pytest.raises(ValueError, match="n_mazes"):
        MazeGames(MazeSpec(2, 2, 1), n_mazes=0)


def test_maze_family_is_seeded_and_hard_for_a_random_player():
    assert MazeGames(MazeSpec(3, 2, 1), 4, seed=1).mazes() == MazeGames(MazeSpec(3, 2, 1), 4, seed=1).mazes()
    g = MazeGames(MazeSpec(3, 2, 1), 4, seed=0)
    r = random_success(g.factory(), g.game_ids, 100, 10, seed=0)
    assert 0.005 < r < 0.15  # success needs K correct decisions: rare for a uniform player


def test_arena_arms_spend_equal_env_steps_and_are_seeded():
    cfg = ArenaConfig(env_steps=120, group_size=4, max_steps=6, eval_episodes=4)
    new_policy = maze_policy_factory(GAMES, seed=0)
    runs = run_arena(new_policy, GAMES.factory(), GAMES.game_ids, cfg, seeds=[0])
    again = run_arena(new_policy, GAMES.factory(), GAMES.game_ids, cfg, seeds=[0])
    assert [r.sampler for r in runs] == ["independent", "tree"]
    per_iter = cfg.group_size * cfg.max_steps * len(GAMES.game_ids)  # at most one iteration's overshoot
    for r in runs:
        assert cfg.env_steps <= r.env_steps[-1] <= cfg.env_steps + 1.5 * per_iter
        assert r.env_steps == sorted(r.env_steps) and 0.0 <= r.final_success <= 1.0
    assert runs[0].start_success == runs[1].start_success  # same start, same evaluation episodes
    assert [(r.env_steps, r.final_success) for r in runs] == [(r.env_steps, r.final_success) for r in again]


def test_arena_config_rejects_bad_values():
    with pytest.raises(ValueError, match="env_steps"):
        ArenaConfig(env_steps=0)
    with pytest.raises(ValueError, match="allowed: independent, tree"):
        ArenaConfig(samplers=("independent", "beam"))
    assert isinstance(TreeSampler(), TreeSampler)


def test_start_mixed_records_every_batch_and_game_and_is_seeded():
    cfg = ArenaConfig(group_size=3, max_steps=5)
    new_policy = maze_policy_factory(GAMES, seed=0)
    arms = ("independent", "tree", "tree (random node)", "tree (root only)")
    sm = start_mixed(new_policy, GAMES.factory(), GAMES.game_ids, cfg, 2, seed=1, samplers=arms)
    again = start_mixed(new_policy, GAMES.factory(), GAMES.game_ids, cfg, 2, seed=1, samplers=arms[1:2])
    assert list(sm) == list(arms)
    for v in sm.values():
        assert v.mixed.shape == (2 * len(GAMES.game_ids),) and set(v.mixed.tolist()) <= {0.0, 1.0}
        assert v.games == list(GAMES.game_ids) * 2  # clustered by game in the claim
        assert v.env_steps_per_game > 0
    # every sampler starts from the same generator seed, whichever others run beside it
    assert sm["tree"].mixed.tolist() == again["tree"].mixed.tolist()
    # the old summary is the mean of the per-unit flags
    summary = start_mixed_ratio(new_policy, GAMES.factory(), GAMES.game_ids, cfg, 2, seed=1)
    assert summary["tree"] == (float(sm["tree"].mixed.mean()), sm["tree"].env_steps_per_game)
