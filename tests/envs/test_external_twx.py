"""TextWorldExpress behind the TextEnv protocol (divelab.envs.twx), on the jar bundled in its wheel; one
simulator process serves the whole module."""

from __future__ import annotations

import external_checks as checks
import pytest

from divelab.envs.twx import GAMES, INSTALL, TWXEnv, TWXSpec, twx_env_factory

pytestmark = checks.requirements("textworld_express", "TextWorldExpress", INSTALL)
sim = pytest.fixture(scope="module")(checks.simulator)


def test_protocol_and_gold_play_on_each_game(sim) -> None:
    for game in GAMES:
        env = TWXEnv(TWXSpec(game), max_steps=40, simulator=sim)
        checks.check_protocol(env)
        checks.check_gold_play(env, seed=3)


def test_clones_and_other_games_share_one_simulator_by_replay(sim) -> None:
    cooking = TWXEnv(TWXSpec("cookingworld"), simulator=sim)
    twc = TWXEnv(TWXSpec("twc", "train"), simulator=sim)
    checks.check_replay_and_clone(cooking, twc, seed=1)
    assert sim.real_steps > 0


def test_splits_seeds_and_the_step_cap(sim) -> None:
    checks.check_splits(lambda split: TWXEnv(TWXSpec("coin", split), simulator=sim))
    env = TWXEnv(TWXSpec("cookingworld"), max_steps=2, simulator=sim)
    env.reset(0)
    env.step("look around")
    _, _, done, info = env.step("inventory")
    assert done and info["truncated"] and not info["won"] and env.admissible_actions() == []


def test_the_rl_sampler_plays_it(sim) -> None:
    specs = [TWXSpec("coin"), TWXSpec("cookingworld")]
    make_env = twx_env_factory(specs, max_steps=4, simulator=sim)
    checks.check_sampler(make_env, [s.game_id for s in specs], max_steps=4)
    with pytest.raises(ValueError, match="unknown game id 'twx:nope:dev'; this factory has: twx:coin:dev:"):
        make_env("twx:nope:dev")


def test_ids_and_bad_inputs_say_what_is_allowed(monkeypatch, sim) -> None:
    spec = TWXSpec("twc", "test")
    assert TWXSpec.from_id(spec.game_id) == spec and TWXSpec.from_id("twx:coin:dev") == TWXSpec("coin")
    with pytest.raises(ValueError, match="unknown TextWorldExpress game 'zork'; allowed: cookingworld, twc, coin"):
        TWXSpec("zork")
    with pytest.raises(ValueError, match="expected e.g."):
        TWXSpec.from_id("coin")
    with pytest.raises(ValueError, match="unknown reward 'dense'; allowed: score, win"):
        TWXEnv(spec, reward="dense")
    with pytest.raises(ValueError, match="refused params.*less than or equal to 11"):
        TWXEnv(TWXSpec("coin", params="numLocations=99"), simulator=sim).reset(0)
    checks.check_missing_requirements(monkeypatch, lambda: TWXEnv(TWXSpec("coin")).reset(0), INSTALL)
