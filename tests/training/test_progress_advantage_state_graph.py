"""State graphs merged by what the player sees (progress_advantage.state_graph): the merge check catches a game
whose text hides part of its state, the exact oracle on an explored graph gives hand-worked values, and a real
TextWorldExpress coin game explores completely, passes the check and is won optimally within the step cap."""

from __future__ import annotations

import importlib.util
import shutil
from types import SimpleNamespace

import numpy as np
import pytest

from divelab.envs.base import ReplayRestore, check_action
from divelab.training.progress_advantage.state_graph import SeenState, check_merges, explore
from divelab.training.progress_advantage.twcheck import Oracle

needs_twx = pytest.mark.skipif(importlib.util.find_spec("textworld_express") is None or shutil.which("java") is None,
                               reason="TextWorldExpress is optional and runs on Java: pip install "
                                      "textworld-express==1.1.0, and install Java 11+")


class LeverRooms(ReplayRestore):
    """A hall and a vault; the coin lies in ``coin_room``. With ``stuck`` the coin can only be taken once the hall's
    lever is pulled, and nothing in the text ever shows the lever: the look + inventory then hides a difference."""

    seed_invariant = True
    game_id = "lever-rooms"

    def __init__(self, coin_room: str = "vault", stuck: bool = False) -> None:
        self.coin_room, self.stuck = coin_room, stuck
        self._seed, self._actions = None, []

    def reset(self, seed: int | None = None) -> str:
        self._seed, self._actions = seed, []
        self.room, self.lever, self.done = "hall", False, False
        return self._obs("You wake up.")

    def _obs(self, feedback: str) -> str:
        return f"{feedback} | You are in the {self.room}. | Inventory: empty"

    def admissible_actions(self) -> list[str]:
        if self.done:
            return []
        moves = {"hall": ["go east", "pull lever"], "vault": ["go west"]}[self.room]
        return moves + (["take coin"] if self.room == self.coin_room else [])

    def step(self, action: str):
        check_action(action, self.admissible_actions())
        self._actions.append(action)
        if action == "pull lever":
            self.lever, feedback = True, "You pull the lever."
        elif action.startswith("go "):
            self.room, feedback = ("vault" if action == "go east" else "hall"), f"You {action}."
        elif self.lever or not self.stuck:
            self.done = True
            return self._obs("You take the coin."), 1.0, True, {"won": True}
        else:
            feedback = "The coin is stuck."
        return self._obs(feedback), 0.0, False, {"won": False}

    def state_key(self, observation: str) -> str:
        return observation.split(" | ", 1)[1]  # look + inventory, as the simulators' envs do

    def clone(self):
        twin = LeverRooms(self.coin_room, self.stuck)
        twin.reset(self._seed)
        for a in self._actions:
            twin.step(a)
        return twin


def _steps(actions: list[str]):
    return SimpleNamespace(steps=[SimpleNamespace(action=a, info={}) for a in actions])


def test_a_game_whose_text_hides_a_state_difference_fails_the_merge_check() -> None:
    # the coin in the hall: after the lever (same text) "take coin" wins, before it the coin is stuck
    _, graph = explore(LeverRooms("hall", stuck=True), max_states=10)
    assert graph["complete"]
    res = check_merges(graph, lambda: LeverRooms("hall", stuck=True))
    assert not res["consistent"] and res["n_mismatches"] >= 1
    bad = res["mismatches"][0]
    assert bad["what"] == "outcome" and bad["path"][-1] == "take coin" and "pull lever" in bad["path"]
    # the same map without the hidden lever passes
    _, fair = explore(LeverRooms("hall"), max_states=10)
    ok = check_merges(fair, lambda: LeverRooms("hall"))
    assert ok["consistent"] and ok["n_mismatches"] == 0 and ok["merged_states"] >= 1 and ok["paths_checked"] >= 2


def test_a_difference_two_commands_away_needs_depth_two() -> None:
    # the coin in the vault: the lever's effect shows only after "go east", one command past the merged hall
    _, graph = explore(LeverRooms("vault", stuck=True), max_states=10)
    make = lambda: LeverRooms("vault", stuck=True)  # noqa: E731
    assert check_merges(graph, make, depth=1)["consistent"]
    deep = check_merges(graph, make, depth=2)
    assert not deep["consistent"] and deep["mismatches"][0]["path"][-2:] == ["go east", "take coin"]
    assert check_merges(explore(LeverRooms("vault"), 10)[1], LeverRooms, depth=3)["consistent"]
    with pytest.raises(ValueError, match="depth"):
        check_merges(graph, make, depth=0)
    with pytest.raises(ValueError, match="max_states"):
        explore(LeverRooms(), max_states=0)


def test_the_oracle_on_an_explored_graph_gives_hand_worked_values() -> None:
    cache, graph = explore(LeverRooms("vault"), max_states=10)
    assert graph["complete"] and sum(not n["done"] for n in graph["nodes"]) == 2  # hall and vault, lever merged
    assert cache.real_steps == graph["real_steps"] > 0
    o = Oracle(graph, max_steps=3, slip=0.0, gamma=0.9)
    hall = o.root
    assert o.value(hall, 3) == pytest.approx(0.9)  # go east, take coin: the win is one step away after the move
    assert o.q(hall, "pull lever", 3) == pytest.approx(0.81)  # a detour costs one discount
    assert o.q(hall, "pull lever", 2) == 0.0  # and within two steps it loses the win
    adv, wrong = o.label(_steps(["pull lever", "go east", "take coin"]))
    np.testing.assert_allclose(adv, [-0.09, 0.0, 0.0])
    assert wrong == 0
    adv, wrong = o.label(_steps(["go east", "go west", "go east"]))
    np.testing.assert_allclose(adv, [0.0, -1.0, 0.0])
    assert wrong == 1
    win = Oracle(graph, max_steps=2, slip=0.0, gamma=1.0)
    assert win.value(win.root, 2) == 1.0 and win.value(win.root, 1) == 0.0
    # the explored cache plays the game from its graph: no step of the game itself
    before, env = cache.real_steps, cache.clone()
    env.reset(5)
    for a in ("pull lever", "go east", "go west", "pull lever", "go east"):
        env.step(a)
    assert env.step("take coin")[1:3] == (1.0, True) and cache.real_steps == before


def test_seen_state_is_the_state_key_of_the_last_observation() -> None:
    env = SeenState(LeverRooms())
    with pytest.raises(RuntimeError, match="reset"):
        env.canonical_state()
    env.reset(0)
    start = env.canonical_state()
    env.step("pull lever")
    assert env.canonical_state() == start == frozenset({"You are in the hall. | Inventory: empty"})
    env.step("go east")
    assert env.canonical_state() != start and env.clone().canonical_state() == env.canonical_state()


@pytest.mark.slow
@needs_twx
def test_a_real_coin_game_explores_completely_passes_the_check_and_is_won_within_the_cap() -> None:
    from divelab.envs.substrate import PinnedEpisode, Simulator
    from divelab.envs.twx import TWXEnv, TWXSpec
    from divelab.training.progress_advantage.public_check import COIN_PARAMS

    sim = Simulator()
    spec = TWXSpec("coin", "dev", COIN_PARAMS)
    try:
        def make():
            return PinnedEpisode(TWXEnv(spec, 10**9, "win", sim), 3)

        _, graph = explore(make(), max_states=400)
        check = check_merges(graph, make)
    finally:
        sim.close()
    assert graph["complete"]
    # one state per room of the 11-location map: the look + inventory neither splits nor merges rooms
    assert sum(not n["done"] for n in graph["nodes"]) == 11
    assert check["consistent"] and check["merged_states"] > 0 and check["env_steps"] > 0
    o = Oracle(graph, max_steps=12, slip=0.0, gamma=1.0)
    assert o.value(o.root, 12) == 1.0
