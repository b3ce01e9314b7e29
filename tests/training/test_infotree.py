"""InfoTree (E162): collapse law, submodular objective, greedy guarantee, tree sampler, engine hook."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from divelab.training.infotree.allocator import AllocatorConfig, allocate_and_sample
from divelab.training.infotree.chain import DecisionChainEnv, TabularPolicy
from divelab.training.infotree.collapse import (
    DifficultyMix,
    budget_for_mixed,
    collapse_probability,
    hard_tail_collapse_bound,
    mixed_upper_bound,
    simulate_collapse,
    simulate_mixed_ratio,
)
from divelab.training.infotree.objective import (
    CoverageInstance,
    brute_force,
    greedy,
    random_instance,
    random_tree_instance,
)
from divelab.training.infotree.tree import (
    RolloutTree,
    SamplerConfig,
    UUCBConfig,
    group_normalized_advantages,
    sample_tree,
)

# ------------------------------------------------------------------ collapse law


@pytest.mark.parametrize("q,d,G", [(0.7, 3, 8), (0.9, 1, 4), (0.5, 6, 32), (0.95, 10, 16)])
def test_collapse_formula_matches_simulation(q, d, G):
    rng = np.random.default_rng(0)
    n = 20000
    exact = float(collapse_probability(q**d, G))
    mc = simulate_collapse(q, d, G, n, rng)
    se = np.sqrt(exact * (1 - exact) / n) + 1e-9
    assert abs(mc - exact) < 4.5 * se + 1e-3


def test_population_mixed_ratio_matches_simulation_and_flattens():
    mix = DifficultyMix()
    exact = mix.mixed_ratio(8)
    mc = simulate_mixed_ratio(mix, 8, 40000, np.random.default_rng(1))
    assert abs(exact - mc) < 0.015
    gains = np.diff([mix.mixed_ratio(G) for G in (8, 16, 32, 64)])
    assert np.all(gains > 0) and np.all(gains < 0.12)  # diminishing, roughly logarithmic growth


def test_collapse_law_shape():
    # linear in G (upper bound), exponential in d, and the hard-tail floor
    p = 0.01
    for G in (1, 5, 20):
        assert 1 - collapse_probability(p, G) <= mixed_upper_bound(p, G) + 1e-12
    assert collapse_probability(0.8**12, 16) > collapse_probability(0.8**4, 16)
    for G in (2, 8, 64):
        assert collapse_probability(1.0 / G, G) >= hard_tail_collapse_bound(G) >= 0.25
    assert budget_for_mixed(0.01, 0.5) == pytest.approx(np.log(0.5) / np.log(0.99), abs=1.5)


def test_collapse_bad_input():
    with pytest.raises(ValueError, match="p must lie in"):
        collapse_probability(1.5, 4)
    with pytest.raises(ValueError, match="positive integer"):
        collapse_probability(0.5, 0)


# ------------------------------------------------------------------ submodular objective


@st.composite
def instance_and_sets(draw):
    seed = draw(st.integers(0, 10_000))
    rng = np.random.default_rng(seed)
    inst = random_tree_instance(rng, n_nodes=int(rng.integers(2, 8))) if draw(st.booleans()) else \
        random_instance(rng, n_candidates=int(rng.integers(1, 6)), n_groups=int(rng.integers(1, 7)))
    K = inst.n_candidates
    small = rng.integers(0, 3, size=K).astype(float)
    big = small + rng.integers(0, 3, size=K)
    i = int(rng.integers(0, K))
    return inst, small, big, i


@settings(max_examples=150, deadline=None)
@given(instance_and_sets())
def test_objective_is_monotone_and_submodular(data):
    inst, small, big, i = data  # small <= big elementwise
    e = np.zeros(inst.n_candidates)
    e[i] = 1
    f = inst.value
    assert f(big) >= f(small) - 1e-12  # monotone
    assert f(small + e) - f(small) >= f(big + e) - f(big) - 1e-12  # diminishing returns


def test_greedy_guarantee_on_brute_forced_instances():
    rng = np.random.default_rng(3)
    ratios = []
    for _ in range(120):
        inst = random_tree_instance(rng, n_nodes=int(rng.integers(3, 8)), root_weight=float(rng.choice([1, 5])))
        k = int(rng.integers(1, 5))
        base = inst.value(np.zeros(inst.n_candidates))
        g = inst.value(greedy(inst, k)) - base
        opt_counts, opt = brute_force(inst, k)
        assert opt_counts.sum() == k
        assert g <= opt - base + 1e-12
        ratios.append(1.0 if opt - base < 1e-12 else g / (opt - base))
    assert min(ratios) >= 1 - 1 / np.e
    assert np.mean(ratios) > 0.95


def test_vectorised_values_match_value_and_deep_trees_are_deep():
    from divelab.training.infotree.objective import instance_depth

    rng = np.random.default_rng(5)
    inst = random_tree_instance(rng, n_nodes=20, chain=0.9)
    counts = rng.integers(0, 3, size=(12, inst.n_candidates)).astype(float)
    assert np.allclose(inst.values(counts), [inst.value(c) for c in counts])
    assert instance_depth(inst) >= 10  # chain-like: far deeper than log2(20)
    shallow = [instance_depth(random_tree_instance(np.random.default_rng(s), n_nodes=20)) for s in range(10)]
    assert np.mean(shallow) < 10
    c, v = brute_force(inst, 3)
    g = inst.value(greedy(inst, 3))
    base = inst.value(np.zeros(inst.n_candidates))
    assert c.sum() == 3 and v >= g - 1e-12 and (g - base) >= (1 - 1 / np.e) * (v - base) - 1e-9
    with pytest.raises(ValueError, match="chain"):
        random_tree_instance(rng, chain=1.5)


def test_greedy_not_always_optimal_on_a_crafted_instance():
    # two overlapping groups: one candidate covers both a little, two others each cover one a lot
    inst = CoverageInstance(v=np.array([0.6, 0.99, 0.99]), group_weight=np.array([1.0, 1.0]),
                            group_state=np.array([1, 1]), members=[np.array([0, 1]), np.array([0, 2])])
    base = inst.value(np.zeros(3))
    g = inst.value(greedy(inst, 2)) - base
    _, opt = brute_force(inst, 2)
    assert g < opt - base - 1e-6
    assert g >= (1 - 1 / np.e) * (opt - base)


def test_instance_validation():
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        CoverageInstance(v=np.array([1.2]), group_weight=np.array([1.0]), group_state=np.array([1]),
                         members=[np.array([0])])
    with pytest.raises(ValueError, match="too big"):
        brute_force(random_instance(np.random.default_rng(0), n_candidates=30), 6)


# ------------------------------------------------------------------ tree sampler


def test_marginal_gain_formula_matches_objective():
    """The tree's closed-form value term equals F(n + e_s) - F(n) of the coverage objective."""
    rng = np.random.default_rng(5)
    policy = TabularPolicy.with_accuracy(6, 3, 0.6)
    env = DecisionChainEnv(d=6, n_actions=3, p_reveal=0.3)
    tree = sample_tree(env, policy, 40, SamplerConfig(), rng)
    cfg = UUCBConfig(selector="value", cost_aware=False)
    cand, score = tree.scores(cfg)
    _, _, vhat = tree.path_terms(cfg)
    n = len(tree)
    groups = list(range(n))
    state = [2 if (tree.succ[u] and tree.fail[u]) else (0 if tree.succ[u] else 1) for u in groups]
    members = []
    for u in groups:
        m = []
        for k, c in enumerate(cand):
            x = int(c)
            while x >= 0 and x != u:
                x = tree.parent[x]
            if x == u:
                m.append(k)
        members.append(np.array(m, dtype=int))
    inst = CoverageInstance(v=vhat[cand], group_weight=np.ones(n), group_state=np.array(state), members=members)
    np.testing.assert_allclose(inst.marginal_gains(np.zeros(len(cand))), score, atol=1e-9)


def test_tree_structure_segments_and_advantages():
    rng = np.random.default_rng(0)
    policy = TabularPolicy.with_accuracy(8, 4, 0.7)
    tree = sample_tree(DecisionChainEnv(d=8), policy, 64, SamplerConfig(), rng)
    assert tree.stats.env_steps >= 64
    assert len(tree) == tree.stats.env_steps + 1  # every env step made exactly one node
    segs = tree.segments()
    # every edge belongs to exactly one segment
    assert sum(len(s.steps) for s in segs) == len(tree) - 1
    assert tree.succ[0] + tree.fail[0] == len(tree.leaves)
    adv = group_normalized_advantages(np.array([s.score for s in segs]), np.array([s.group for s in segs]))
    for g in {s.group for s in segs}:
        m = np.array([s.group == g for s in segs])
        assert abs(adv[m].sum()) < 1e-6  # zero-mean within each sibling group


def test_independent_selector_is_plain_grpo_groups():
    rng = np.random.default_rng(0)
    policy = TabularPolicy.with_accuracy(5, 4, 0.7)
    tree = sample_tree(DecisionChainEnv(d=5, p_reveal=0.0), policy, 40,
                       SamplerConfig(init_rollouts=1, uucb=UUCBConfig(selector="independent")), rng)
    assert tree.branch_points() == [0]
    assert len(tree.leaves) == 8 and all(tree.depth[leaf] == 5 for leaf in tree.leaves)


def test_tree_beats_independent_mixed_ratio_at_equal_budget():
    policy = TabularPolicy.with_accuracy(12, 4, 0.7)
    ds = np.random.default_rng(11).integers(1, 13, size=80)
    res = {}
    for name, cfg in (("independent", SamplerConfig(init_rollouts=1, uucb=UUCBConfig(selector="independent"))),
                      ("tree", SamplerConfig())):
        rng = np.random.default_rng(2)
        trees = [sample_tree(DecisionChainEnv(d=int(d)), policy, 8 * int(d), cfg, rng) for d in ds]
        res[name] = (np.mean([t.prompt_mixed for t in trees]), sum(t.stats.env_steps for t in trees))
    envs = [DecisionChainEnv(d=int(d)) for d in ds]
    trees = allocate_and_sample(envs, policy, [8 * int(d) for d in ds], AllocatorConfig(), np.random.default_rng(2))
    alloc = np.mean([t.prompt_mixed for t in trees])
    budget = 8 * int(ds.sum())
    assert sum(t.stats.env_steps for t in trees) <= 1.05 * budget + 16
    assert res["tree"][1] <= 1.1 * budget
    assert res["tree"][0] > res["independent"][0]
    assert alloc >= res["tree"][0] - 0.05


def test_same_seed_same_tree():
    policy = TabularPolicy.with_accuracy(8, 4, 0.6)
    a = sample_tree(DecisionChainEnv(d=8), policy, 50, SamplerConfig(), np.random.default_rng(9))
    b = sample_tree(DecisionChainEnv(d=8), policy, 50, SamplerConfig(), np.random.default_rng(9))
    assert a.parent == b.parent and a.action == b.action and a.succ == b.succ


def test_config_errors_name_allowed_values():
    with pytest.raises(ValueError, match="allowed: uucb"):
        UUCBConfig(selector="mcts")
    with pytest.raises(ValueError, match="d \\(number of decisions\\)"):
        DecisionChainEnv(d=0)
    with pytest.raises(ValueError, match="terminal"):
        tree = RolloutTree(DecisionChainEnv(d=1))
        tree.expand([0], TabularPolicy(1, 4), np.random.default_rng(0))
        tree.expand([tree.leaves[0]], TabularPolicy(1, 4), np.random.default_rng(0))


def test_proxy_interval_resamples_whole_prompts():
    from divelab.training.infotree.proxy import ProxyResult, pearson_cluster_ci, proxy_true_correlation

    # five prompts, each a block of identical points: 500 points but only five independent units
    rng = np.random.default_rng(0)
    x5, y5 = rng.normal(size=5), rng.normal(size=5)
    res = ProxyResult(float(np.corrcoef(x5, y5)[0, 1]), 0.0, 500, np.repeat(x5, 100) + 1e-3 * rng.normal(size=500),
                      np.repeat(y5, 100), np.repeat(np.arange(5), 100))
    lo, hi = pearson_cluster_ci(res, seed=0)
    assert hi - lo > 0.5  # a bootstrap over the 500 points would be a sliver around r
    # the decision chain's proxy records which prompt each point came from
    pr = proxy_true_correlation(TabularPolicy.with_accuracy(8, 4, 0.7), np.array([3, 5, 8]), 4, 4, 0.5,
                                np.random.default_rng(1))
    assert pr.prompt.shape == pr.proxy.shape and set(pr.prompt.tolist()) <= {0, 1, 2}
    lo, hi = pearson_cluster_ci(pr, seed=0)
    assert lo <= pr.pearson <= hi
