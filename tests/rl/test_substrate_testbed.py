"""The public-simulator test bed (divelab.rl.substrate_testbed): pinned episodes, held-out dev games and a cached
warm start, on TextWorldExpress's jar."""

from __future__ import annotations

import importlib.util
import shutil

import numpy as np
import pytest

from divelab.envs.substrate import PinnedEpisode, Simulator, pinned_ids, view
from divelab.envs.twx import TWXEnv, TWXSpec, twx_env_factory
from divelab.rl.substrate_testbed import SubstrateTestbedConfig, build_substrate_testbed

needs_twx = pytest.mark.skipif(importlib.util.find_spec("textworld_express") is None or shutil.which("java") is None,
                               reason="TextWorldExpress is optional and runs on Java: pip install "
                                      "textworld-express==1.1.0, and install Java 11+")
SMALL = "numLocations=3,numDistractorItems=0,includeDoors=0,limitInventorySize=0"


def test_config_says_what_is_allowed():
    with pytest.raises(ValueError, match="unknown simulator 'zork'; allowed: twx, scienceworld"):
        SubstrateTestbedConfig(simulator="zork")
    with pytest.raises(ValueError, match="train_episodes must be >= 1, got 0"):
        SubstrateTestbedConfig(train_episodes=0)
    assert SubstrateTestbedConfig().label == "TextWorldExpress coin"


def test_the_view_keeps_feedback_room_and_inventory():
    obs = "You move east. | You are in the pantry. To the West you see the kitchen. | Inventory: empty."
    assert view(obs) == "You move east. [pantry] Inventory: empty."
    assert view("no separators") == "no separators"


@needs_twx
def test_a_pinned_episode_is_one_game_whatever_the_seed():
    sim = Simulator()
    try:
        spec = TWXSpec("coin", "train", SMALL)
        env = PinnedEpisode(TWXEnv(spec, simulator=sim), 2)
        assert env.game_id == f"{spec.game_id}@2" and pinned_ids([spec], [2]) == [env.game_id]
        plain = TWXEnv(spec, simulator=sim)
        assert env.reset(0) == env.reset(12345) == plain.reset(2) != plain.reset(0)
        # the factory's pinned games share one cache per game: the second pass costs no simulator step
        make_env = twx_env_factory([spec], max_steps=4, reward="win", simulator=sim, episodes=[0, 1])
        ids = pinned_ids([spec], [0, 1])
        rng = np.random.default_rng(0)
        for _ in range(2):
            env = make_env(ids[1])
            env.reset(int(rng.integers(1000)))
            before = sim.real_steps
            for a in ("look around", "inventory"):
                env.step(a)
        assert sim.real_steps == before  # the second pass's steps all came from the cache
        with pytest.raises(ValueError, match="unknown game id"):
            make_env(f"{spec.game_id}@7")
    finally:
        sim.close()


@needs_twx
def test_the_test_bed_trains_on_train_games_scores_on_dev_games_and_caches_its_warm_start(tmp_path, monkeypatch):
    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path))
    cfg = SubstrateTestbedConfig(params=SMALL, train_episodes=2, eval_episodes=3, max_steps=4, sft_episodes=2,
                                 sft_steps=3)
    tb = build_substrate_testbed(cfg)
    assert len(tb.game_ids) == 2 and all(":train:" in g for g in tb.game_ids)
    assert len(tb.eval_game_ids) == 3 and all(":dev:" in g for g in tb.eval_game_ids)
    assert len(tb.sft_losses) == 3
    env = tb.make_eval_env(tb.eval_game_ids[0])
    obs = env.reset(0)
    pol = tb.new_policy()
    probs = pol.action_probs(pol.context([obs], []), env.admissible_actions())
    assert np.isclose(np.sum(probs), 1.0)
    again = build_substrate_testbed(cfg)  # from the cache: the same tokenizer and weights file
    assert again.weights == tb.weights and again.tokenizer.get_vocab() == tb.tokenizer.get_vocab()
