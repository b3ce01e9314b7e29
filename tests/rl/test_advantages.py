"""Each estimator on a hand-worked graph, and the verl/SkyRL adapter against the native functions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from divelab.rl.advantages import StepBatch, available_advantages, get_advantage, register_advantage
from divelab.rl.verl import make_verl_estimator, to_verl_tensors

R = np.sqrt(0.5)


def two_paths() -> StepBatch:
    # T0: s0 -> s1 -> terminal, wins (reward 1 on the last step)
    # T1: s0 -> s2 -> s2 (truncated at the cap), reward 0
    return StepBatch(traj_index=np.array([0, 0, 1, 1]), group_index=np.zeros(4, dtype=int),
                     step_id=np.array([0, 1, 0, 1]), rewards=np.array([0.0, 1.0, 0.0, 0.0]),
                     dones=np.array([False, True, False, False]),
                     state_keys=["s0", "s1", "s0", "s2"], next_state_keys=["s1", None, "s2", "s2"])


def test_registry_lists_builtins_and_rejects_unknown() -> None:
    assert {"grpo", "gigpo", "g2po"} <= set(available_advantages())
    with pytest.raises(ValueError, match="registered: .*g2po"):
        get_advantage("nope")
    with pytest.raises(ValueError, match="already registered"):
        register_advantage("grpo")(lambda batch: np.zeros(len(batch)))


def test_grpo_by_hand() -> None:
    adv = get_advantage("grpo")(two_paths(), epsilon=0.0)
    np.testing.assert_allclose(adv, [R, R, -R, -R], atol=1e-9)


def test_gigpo_by_hand() -> None:
    adv = get_advantage("gigpo")(two_paths(), epsilon=0.0, gamma=1.0)
    # anchor s0 holds both first steps (returns-to-go 1 and 0): +-R; s1 and s2 are singletons: 0
    np.testing.assert_allclose(adv, [2 * R, R, -2 * R, -R], atol=1e-9)


def test_g2po_by_hand() -> None:
    # V(s0) = 0.5, V(s1) = 1, V(s2) = 0; TD (gamma 1): s0->s1 +0.5, s1->end 0, s0->s2 -0.5, s2->s2 0
    # standardised over the 4 distinct edges (mean 0, std sqrt(0.125))
    adv = get_advantage("g2po")(two_paths(), epsilon=0.0, gamma=1.0, episode_weight=0.0)
    np.testing.assert_allclose(adv, [np.sqrt(2), 0.0, -np.sqrt(2), 0.0], atol=1e-9)
    both = get_advantage("g2po")(two_paths(), epsilon=0.0, gamma=1.0)
    np.testing.assert_allclose(both, adv + [R, R, -R, -R], atol=1e-9)


def test_g2po_merges_states_across_rollouts_and_discounts() -> None:
    # three rollouts through a shared middle state m: V(m) = 2/3 credits the move into m
    b = StepBatch(traj_index=np.array([0, 0, 1, 1, 2]), group_index=np.zeros(5, dtype=int),
                  step_id=np.array([0, 1, 0, 1, 0]), rewards=np.array([0, 1, 0, 0, 0.0]),
                  dones=np.array([False, True, False, True, True]),
                  state_keys=["a", "m", "a", "m", "a"], next_state_keys=["m", None, "m", None, None])
    from divelab.rl.advantages import build_group_graph

    g = build_group_graph(b, np.arange(5), b.returns(), gamma=0.9)
    assert g.values == pytest.approx({"a": 1 / 3, "m": 0.5})
    assert g.visits == {"a": 3, "m": 2}
    assert g.edges[("a", "m", 0.0)] == pytest.approx(0.9 * 0.5 - 1 / 3)
    assert g.edges[("m", None, 1.0)] == pytest.approx(0.5)
    assert g.edges[("m", None, 0.0)] == pytest.approx(-0.5)
    # identical edges get identical edge advantages
    adv = get_advantage("g2po")(b, episode_weight=0.0)
    assert adv[0] == pytest.approx(adv[2])
    steps_std = get_advantage("g2po")(b, episode_weight=0.0, standardize_over="steps")
    assert np.mean(steps_std) == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError, match="standardize_over"):
        get_advantage("g2po")(b, standardize_over="nodes")


def test_g2po_return_values_by_hand_and_chains_fall_back_to_grpo() -> None:
    b = StepBatch(traj_index=np.array([0, 0, 1, 1, 2]), group_index=np.zeros(5, dtype=int),
                  step_id=np.array([0, 1, 0, 1, 0]), rewards=np.array([0, 1, 0, 0, 0.0]),
                  dones=np.array([False, True, False, True, True]),
                  state_keys=["a", "m", "a", "m", "a"], next_state_keys=["m", None, "m", None, None])
    from divelab.rl.advantages import build_group_graph

    # first-visit discounted returns (gamma 0.9): from a: 0.9, 0, 0 -> V(a) = 0.3; from m: 1, 0 -> 0.5
    g = build_group_graph(b, np.arange(5), b.returns(), gamma=0.9, returns_to_go=b.return_to_go(0.9))
    assert g.values == pytest.approx({"a": 0.3, "m": 0.5})
    assert g.edges[("a", "m", 0.0)] == pytest.approx(0.9 * 0.5 - 0.3)
    assert g.edges[("m", None, 1.0)] == pytest.approx(0.5) and g.edges[("a", None, 0.0)] == pytest.approx(-0.3)
    # no shared states (the control): every TD error is 0, so g2po is exactly grpo
    chain = StepBatch(traj_index=np.array([0, 0, 0, 1, 1]), group_index=np.zeros(5, dtype=int),
                      step_id=np.array([0, 1, 2, 0, 1]), rewards=np.array([0, 0, 1, 0, 0.0]),
                      dones=np.array([False, False, True, False, False]),
                      state_keys=["x0", "x1", "x2", "y0", "y1"], next_state_keys=["x1", "x2", None, "y1", "y2"])
    np.testing.assert_allclose(get_advantage("g2po")(chain), get_advantage("grpo")(chain), atol=1e-12)
    # the literal undiscounted-outcome value instead penalises every step of the winning chain
    lit = get_advantage("g2po")(chain, value="outcome", episode_weight=0.0)
    assert (lit[:2] < 0).all() and lit[2] == pytest.approx(lit[3])
    with pytest.raises(ValueError, match="value must be"):
        get_advantage("g2po")(chain, value="mean")


def test_groups_are_independent() -> None:
    a = two_paths()
    b = StepBatch(np.concatenate([a.traj_index, a.traj_index + 2]), np.array([0] * 4 + [1] * 4),
                  np.tile(a.step_id, 2), np.tile(a.rewards, 2), np.tile(a.dones, 2),
                  a.state_keys * 2, a.next_state_keys * 2)
    for name in ("grpo", "gigpo", "g2po"):
        np.testing.assert_allclose(get_advantage(name)(b), np.tile(get_advantage(name)(a), 2), atol=1e-9)


def random_batch(seed: int) -> StepBatch:
    rng = np.random.default_rng(seed)
    ti, gi, si, rw, dn, sk, nk = [], [], [], [], [], [], []
    t = 0
    for g in range(3):
        for _ in range(4):
            n = int(rng.integers(1, 6))
            keys = [f"g{g}s{int(k)}" for k in rng.integers(0, 4, size=n + 1)]
            won = rng.random() < 0.4
            for j in range(n):
                ti.append(t)
                gi.append(g)
                si.append(j)
                dn.append(j == n - 1)
                rw.append(1.0 if (won and j == n - 1) else 0.0)
                sk.append(keys[j])
                nk.append(None if j == n - 1 else keys[j + 1])
            t += 1
    return StepBatch(np.array(ti), np.array(gi), np.array(si), np.array(rw), np.array(dn), sk, nk)


@pytest.mark.parametrize("name", ["grpo", "gigpo", "g2po"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_verl_adapter_matches_native(name: str, seed: int) -> None:
    batch = random_batch(seed)
    native = get_advantage(name)(batch, gamma=0.9) if name != "grpo" else get_advantage(name)(batch)
    t = to_verl_tensors(batch, resp_len=5, seed=seed)
    opts = {"gamma": 0.9} if name != "grpo" else {}
    fn = make_verl_estimator(name, **opts)
    # rows shuffled, as a trainer's batch may be: the adapter must not rely on row order
    perm = np.random.default_rng(seed).permutation(len(batch))
    adv, ret = fn(t["token_level_rewards"][perm], t["response_mask"][perm], t["index"][perm],
                  traj_index=t["traj_index"][perm], step_ids=t["step_ids"][perm],
                  state_keys=[t["state_keys"][i] for i in perm])
    assert adv.shape == t["token_level_rewards"].shape and torch.equal(adv, ret)
    mask = t["response_mask"][perm]
    assert torch.all(adv[mask == 0] == 0)
    per_row = adv.sum(-1) / mask.sum(-1)
    np.testing.assert_allclose(per_row.numpy(), native[perm], atol=1e-5)


def test_verl_adapter_checks_shapes() -> None:
    fn = make_verl_estimator("grpo")
    with pytest.raises(ValueError, match="index has 1 entries for 2 rows"):
        fn(torch.zeros(2, 3), torch.ones(2, 3), np.array(["a"]))
    with pytest.raises(ValueError, match="response_mask shape"):
        fn(torch.zeros(2, 3), torch.ones(2, 4), np.array(["a", "a"]))
