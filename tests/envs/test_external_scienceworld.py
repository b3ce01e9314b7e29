"""ScienceWorld behind the TextEnv protocol (divelab.envs.scienceworld), on the jar bundled in its wheel; one
simulator process (a JVM, slow to start) serves the whole module."""

from __future__ import annotations

import external_checks as checks
import pytest

from divelab.envs.scienceworld import (
    INSTALL,
    ScienceWorldEnv,
    ScienceWorldSpec,
    scienceworld_env_factory,
    task_names,
)

pytestmark = checks.requirements("scienceworld", "ScienceWorld", INSTALL)
sim = pytest.fixture(scope="module")(checks.simulator)


def test_protocol_and_gold_play(sim) -> None:
    assert len(task_names()) == 30 and "boil" in task_names()
    env = ScienceWorldEnv(ScienceWorldSpec("find-living-thing"), max_steps=20, simulator=sim)
    checks.check_protocol(env)
    checks.check_gold_play(env, seed=2)


def test_a_wrong_focus_ends_the_episode_as_lost(sim) -> None:
    env = ScienceWorldEnv(ScienceWorldSpec("find-living-thing"), simulator=sim)
    env.reset(0)
    _, reward, done, info = env.step("focus on air")  # air is not alive
    assert done and info["lost"] and not info["won"] and reward < 0 and env.score < 0


def test_clones_and_other_tasks_share_one_simulator_by_replay(sim) -> None:
    living = ScienceWorldEnv(ScienceWorldSpec("find-living-thing", simplification="easy"), simulator=sim)
    plant = ScienceWorldEnv(ScienceWorldSpec("find-plant", "train"), simulator=sim)
    checks.check_replay_and_clone(living, plant, seed=4, steps=4)


def test_splits_seeds_and_the_rl_sampler(sim) -> None:
    checks.check_splits(lambda split: ScienceWorldEnv(ScienceWorldSpec("lifespan-longest-lived", split),
                                                      simulator=sim))
    specs = [ScienceWorldSpec("find-living-thing"), ScienceWorldSpec("lifespan-longest-lived")]
    make_env = scienceworld_env_factory(specs, max_steps=2, simulator=sim)
    checks.check_sampler(make_env, [s.game_id for s in specs], max_steps=2)


def test_ids_and_bad_inputs_say_what_is_allowed(monkeypatch) -> None:
    spec = ScienceWorldSpec("boil", "test", "easy")
    assert ScienceWorldSpec.from_id(spec.game_id) == spec
    assert ScienceWorldSpec.from_id("sw:boil:dev") == ScienceWorldSpec("boil")
    with pytest.raises(ValueError, match="unknown ScienceWorld task 'boil-egg'; allowed: boil, "):
        ScienceWorldSpec("boil-egg")
    with pytest.raises(ValueError, match="unknown ScienceWorld simplification 'fast'; allowed: , easy"):
        ScienceWorldSpec("boil", simplification="easy,fast")
    with pytest.raises(ValueError, match="unknown split 'valid'"):
        ScienceWorldSpec("boil", "valid")
    with pytest.raises(ValueError, match="max_steps must be >= 1"):
        ScienceWorldEnv(spec, max_steps=0)
    checks.check_missing_requirements(monkeypatch, lambda: ScienceWorldEnv(spec).reset(0), INSTALL)
