"""Checks that every simulator-backed substrate (ScienceWorld, TextWorldExpress) must pass, shared by
tests/envs/test_external_scienceworld.py and test_external_twx.py."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from divelab.envs.base import EnvFactory, InvalidAction, TextEnv
from divelab.envs.substrate import JAVA_HINT, Simulator, SimulatorEnv
from divelab.rl.rollout import IndependentSampler
from divelab.rl.warmstart import UniformPolicy


def requirements(module: str, name: str, install: str) -> list[pytest.MarkDecorator]:
    """Skip marks for a module of simulator tests: the substrate's package and Java must be installed."""
    return [pytest.mark.skipif(importlib.util.find_spec(module) is None,
                               reason=f"{name} is an optional substrate; install it with: {install}"),
            pytest.mark.skipif(shutil.which("java") is None,
                               reason=f"{name}'s simulator runs on Java; install it with: {JAVA_HINT}")]


def simulator() -> Iterator[Simulator]:
    """One simulator process for a whole test module (starting one costs seconds), stopped at the end."""
    sim = Simulator()
    yield sim
    sim.close()


def safe_actions(env: TextEnv) -> list[str]:
    # ScienceWorld ends the episode on a wrong "focus on"; leave those out where a test needs to keep going
    return [a for a in env.admissible_actions() if not a.startswith("focus on")]


def check_protocol(env: SimulatorEnv) -> None:
    assert isinstance(env, TextEnv)
    with pytest.raises(RuntimeError, match="reset"):
        env._fresh().step("look around")
    obs = env.reset(0)
    assert obs.count(" | ") >= 2 and obs.split(" | ")[0]  # the first feedback is the task description
    acts = env.admissible_actions()
    assert acts and acts == sorted(set(acts))
    with pytest.raises(InvalidAction, match="allowed:"):
        env.step("fly to the moon")
    assert env.state_key(obs) == obs.split(" | ", 1)[1]


def check_gold_play(env: SimulatorEnv, seed: int) -> None:
    """The simulator's own solution wins; rewards add up to the score gained; reward="win" pays 1 once."""
    gold = env.gold_actions(seed)
    assert gold
    env.strict = False  # ScienceWorld's solutions use phrasings its admissible list does not hold
    for mode in ("score", "win"):
        env.reward_mode = mode
        env.reset(seed)
        start, total, info, done = env.score, 0.0, {}, False
        for a in gold:
            if done:
                break
            _, r, done, info = env.step(a)
            total += r
        assert done and info["won"] and not info["lost"] and not info["truncated"], info
        assert env.admissible_actions() == []
        with pytest.raises(RuntimeError, match="ended"):
            env.step(gold[-1])
        assert total == pytest.approx(1.0 if mode == "win" else info["score"] - start)
    env.reward_mode, env.strict = "score", True


def check_replay_and_clone(env: SimulatorEnv, other: SimulatorEnv, seed: int, steps: int = 5) -> None:
    """Envs sharing one simulator keep their own positions: a clone and an env of another game move the
    simulator, and the next step replays the prefix and lands where playing straight through did."""
    rng = np.random.default_rng(seed)
    obs = [env.reset(seed)]
    acts: list[str] = []
    for _ in range(steps):
        cands = safe_actions(env)
        acts.append(cands[int(rng.integers(len(cands)))])
        o, _, done, _ = env.step(acts[-1])
        obs.append(o)
        assert not done, "pick a seed whose random play lasts the test"
    # the same play again, interrupted at every step by the other env moving the shared simulator
    twin = env.clone()
    assert twin.actions_taken == acts
    twin.reset(seed)
    for k, a in enumerate(acts):
        other.reset(seed + 1)
        other.step(safe_actions(other)[0])
        assert twin.step(a)[0] == obs[k + 1], f"step {k} differs after a replay"
    assert env.restore(acts[:2]) == obs[2] and env.actions_taken == acts[:2]
    branch = env.clone()  # no replay yet: the branch catches up on its first step
    assert branch.step(acts[2])[0] == obs[3] and env.step(acts[2])[0] == obs[3]


def check_splits(make: Callable[[str], SimulatorEnv]) -> None:
    dev, train = make("dev"), make("train")
    eps = dev.episodes()
    assert eps and not set(eps) & set(train.episodes())
    dev.reset(len(eps) + 1)
    assert dev.step(dev.admissible_actions()[0])[3]["episode"] == eps[1]  # seeds wrap around the split
    with pytest.raises(ValueError, match="unknown split 'validation'; allowed: train, dev, test"):
        make("validation")


def check_sampler(make_env: EnvFactory, game_ids: list[str], max_steps: int) -> None:
    """The RL engine's sampler plays the substrate: candidates are the admissible actions, the cap holds."""
    groups = IndependentSampler(max_steps=max_steps).collect(UniformPolicy(), make_env, game_ids, 2,
                                                             np.random.default_rng(0))
    assert [g[0].game_id for g in groups] == game_ids
    for group in groups:
        assert group[0].seed == group[1].seed  # one episode per group, as GRPO needs
        for traj in group:
            assert 1 <= len(traj) <= max_steps
            assert traj.steps[0].candidates and traj.steps[-1].done
            assert traj.won or traj.truncated or traj.steps[-1].info["lost"] or traj.steps[-1].info["truncated"]


def check_missing_requirements(monkeypatch, start: Callable[[], object], install: str) -> None:
    real_find = importlib.util.find_spec
    with monkeypatch.context() as m:
        m.setattr(importlib.util, "find_spec", lambda name: None)
        with pytest.raises(ValueError, match=f"install it with: {install}"):
            start()
    with monkeypatch.context() as m:
        m.setattr(importlib.util, "find_spec", real_find)
        m.setattr(shutil, "which", lambda name: None)
        with pytest.raises(ValueError, match="no 'java' is on PATH"):
            start()
