"""The TextWorld adapter on real generated games, the control variant, and ReplayCache."""

from __future__ import annotations

import numpy as np
import pytest

from divelab.envs.base import InvalidAction, ReplayCache, TextEnv
from divelab.envs.textworld import (
    TextWorldGameSpec,
    compact_view,
    game_graph,
    generate_game,
    optimal_length,
    textworld_env_factory,
    uniform_success,
)
from divelab.envs.toy import CorridorEnv

SPEC = TextWorldGameSpec(seed=1, nb_rooms=2, nb_objects=2, quest_length=1)


@pytest.fixture(scope="module")
def make_env():
    return textworld_env_factory([SPEC], max_steps=8)


def play(env: TextEnv, rng: np.random.Generator) -> tuple[list[str], list[str], float, dict]:
    obs = env.reset(0)
    seen, acts, total, info, done = [obs], [], 0.0, {}, False
    while not done:
        a = env.admissible_actions()[int(rng.integers(len(env.admissible_actions())))]
        obs, r, done, info = env.step(a)
        seen.append(obs)
        acts.append(a)
        total += r
    return seen, acts, total, info


def test_game_generation_is_cached_and_deterministic(make_env) -> None:
    path = generate_game(SPEC)
    assert path.exists() and path.suffix == ".z8"
    mtime = path.stat().st_mtime
    assert generate_game(SPEC) == path and path.stat().st_mtime == mtime
    assert TextWorldGameSpec.from_id(SPEC.game_id) == SPEC
    with pytest.raises(ValueError, match="expected e.g."):
        TextWorldGameSpec.from_id("nope")
    with pytest.raises(ValueError, match="unknown game id"):
        make_env("tw-r9-o9-q9-s9")


def test_protocol_rewards_and_wins_on_a_real_game(make_env) -> None:
    env = make_env(SPEC.game_id)
    assert isinstance(env, TextEnv)
    obs = env.reset(0)
    assert " | " in obs and env.admissible_actions()
    with pytest.raises(InvalidAction, match="allowed:"):
        env.step("fly to the moon")
    rng = np.random.default_rng(0)
    wins = 0
    for _ in range(20):
        seen, acts, total, info = play(env, rng)
        assert len(acts) <= 8
        assert total == float(info["won"])  # reward 1 exactly on a win
        assert info["won"] or info["truncated"] or info["lost"]
        wins += info["won"]
    assert 0 < wins < 20  # random play sometimes wins this one-step quest, not always


def test_state_key_ignores_feedback_and_restore_replays(make_env) -> None:
    env = make_env(SPEC.game_id)
    obs0 = env.reset(0)
    exam = [a for a in env.admissible_actions() if a.startswith("examine") or a == "look"]
    obs1, *_ = env.step(exam[0])
    assert env.state_key(obs1) == env.state_key(obs0)  # looking changes nothing
    seen, acts, _, _ = play(env, np.random.default_rng(3))
    k = len(acts) - 1
    assert k >= 1
    assert env.restore(acts[:k]) == seen[k]
    twin = env.clone()
    assert twin.actions_taken == acts[:k] and twin.admissible_actions() == env.admissible_actions()
    assert "[" in compact_view(seen[1])


def test_control_states_never_repeat(make_env) -> None:
    make_control = textworld_env_factory([SPEC], max_steps=8, control=True)
    env = make_control(SPEC.game_id)
    keys, plain = [], []
    rng = np.random.default_rng(0)
    for _ in range(5):
        seen, _, _, _ = play(env, rng)
        keys += [env.state_key(o) for o in seen]
        plain += [make_env(SPEC.game_id).state_key(o.rsplit(" [session", 1)[0]) for o in seen]
    assert len(set(keys)) == len(keys)
    assert len(set(plain)) < len(plain) / 2  # the same trajectories repeat states without the tag
    assert compact_view(seen[0]) == compact_view(seen[0].rsplit(" [session", 1)[0])


def test_replay_cache_reuses_transitions() -> None:
    env = ReplayCache(CorridorEnv(n_rooms=3, goal=2, max_steps=6))
    for _ in range(3):
        env.reset(0)
        for a in ["go east", "look", "go east", "take key"]:
            obs, r, done, info = env.step(a)
    assert done and r == 1.0 and info["won"]
    assert env.real_steps == 4  # later episodes came from the cache
    env.reset(0)
    env.step("go east")
    twin = env.clone()
    assert twin.step("go east")[0] == "room 2. you see a key."
    assert env.actions_taken == ["go east"]


def test_explored_graph_matches_live_play_and_needs_no_game_process() -> None:
    graph = game_graph(SPEC)
    assert graph["complete"] and len(graph["nodes"]) >= 2
    assert optimal_length(graph) == 1  # a one-step quest
    # exact uniform-random success: a one-step quest is won at step 1 with prob 1/|admissible|
    root = graph["nodes"][graph["roots"]["null"]]
    wins = sum(r > 0 for _o, r, _d, _i, _j in root["children"].values())
    assert uniform_success(graph, 1) == pytest.approx(wins / len(root["admissible"]))
    assert uniform_success(graph, 8) > uniform_success(graph, 1)
    # the precomputed factory plays exactly like live TextWorld, without starting the game
    live = textworld_env_factory([SPEC], max_steps=8, precompute=False)(SPEC.game_id)
    cached = textworld_env_factory([SPEC], max_steps=8, precompute=True)(SPEC.game_id)
    for seed in range(3):
        a = play(live, np.random.default_rng(seed))
        b = play(cached, np.random.default_rng(seed))
        assert a == b
    assert cached.env.real_steps == 0 and cached.env.env._env is None


def test_replay_cache_explore_export_load_roundtrip() -> None:
    class Canon(CorridorEnv):  # expose the full state so the cache merges states
        def canonical_state(self):
            return frozenset({f"pos {self._pos}"})

    src = ReplayCache(Canon(n_rooms=3, goal=2, max_steps=100))
    assert src.explore(seed=0)
    data = src.export_graph()
    dst = ReplayCache(Canon(n_rooms=3, goal=2, max_steps=100))
    dst.load_graph(data)
    dst.reset(0)
    for a in ["go east", "look", "go east", "take key"]:
        obs, r, done, info = dst.step(a)
    assert done and r == 1.0 and info["won"] and dst.real_steps == 0


def test_explore_with_state_snapshots_builds_the_same_graph_as_replaying() -> None:
    """ReplayCache.explore jumps between states with TextWorldEnv.save_state/load_state; the graph
    must be exactly the one that resetting and replaying each prefix builds, in fewer real steps."""
    from divelab.envs.textworld import TextWorldEnv

    class NoSnapshots(TextWorldEnv):  # hides save_state, so the cache replays prefixes
        def __getattribute__(self, name):
            if name == "save_state":
                raise AttributeError(name)
            return super().__getattribute__(name)

    spec = TextWorldGameSpec(seed=0, nb_rooms=2, nb_objects=2, quest_length=2)
    graphs, steps = [], []
    for cls in (TextWorldEnv, NoSnapshots):
        env = cls(generate_game(spec), spec.game_id, max_steps=1_000_000)
        cache = ReplayCache(env)
        assert cache.explore(None, max_states=200)
        graphs.append(cache.export_graph())
        steps.append(cache.real_steps)
        assert not cache._shared.snapped  # snapshots are dropped after exploring
        env.close()
    assert graphs[0] == graphs[1] and len(graphs[0]["nodes"]) > 3
    assert steps[0] < steps[1]
