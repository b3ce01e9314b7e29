"""InfoTree inside the RL engine: TreeSampler with every estimator, a GRPO smoke run, adapters, reproduce."""

from __future__ import annotations

import numpy as np
import pytest

from divelab.envs.toy import CorridorEnv
from divelab.rl.advantages import StepBatch, available_advantages, get_advantage
from divelab.rl.warmstart import UniformPolicy
from divelab.training.infotree.adapters import tree_segment_rollout, verl_agent_loop_outputs
from divelab.training.infotree.chain import DecisionChainEnv, TabularPolicy
from divelab.training.infotree.engine import TreeSampler, make_sampler
from divelab.training.infotree.train import ChainTrainConfig, train_chain


def _make_env(gid: str) -> CorridorEnv:
    return CorridorEnv(n_rooms=5, goal=4, max_steps=8, game_id=gid)


@pytest.mark.parametrize("name", ["tree", "tree+allocator"])
def test_tree_sampler_gives_complete_trajectories_for_every_estimator(name):
    sampler = make_sampler(name, max_steps=8)
    groups = sampler.collect(UniformPolicy(), _make_env, ["a", "b", "c"], 6, np.random.default_rng(0))
    assert len(groups) == 3
    for gi, g in enumerate(groups):
        assert len(g) >= 6  # branching buys more leaves than G for the same steps
        ids = [t.traj_id for t in g]
        for t in g:
            assert t.group_index == gi
            assert [s.step_id for s in t.steps] == list(range(len(t.steps)))
            assert t.steps[-1].done or t.truncated
            if t.parent is not None:
                src = next(x for x in g if x.traj_id == t.parent[0])
                k = t.parent[1]
                assert [s.action for s in src.steps[:k]] == [s.action for s in t.steps[:k]]
        assert len(set(ids)) == len(ids)
    batch = StepBatch.from_groups(groups)
    for est in available_advantages():
        if est in ("grpo", "gigpo", "g2po"):
            adv = get_advantage(est)(batch)
            assert adv.shape == (len(batch),) and np.all(np.isfinite(adv))
    st = sampler.stats()
    assert 0.0 <= st["mixed_ratio"] <= 1.0 and st["env_steps"] > 0


def test_make_sampler_rejects_unknown():
    with pytest.raises(ValueError, match="allowed: independent, tree, tree\\+allocator"):
        make_sampler("beam")


def test_reference_trees_random_node_branches_and_root_only_never_does():
    rng = np.random.default_rng(0)
    root_only = make_sampler("tree (root only)", max_steps=8).collect(UniformPolicy(), _make_env, ["a", "b"], 6, rng)
    random_node = make_sampler("tree (random node)", max_steps=8).collect(UniformPolicy(), _make_env, ["a", "b"], 6,
                                                                          np.random.default_rng(0))
    # the sham tree: the tree sampler's budget rule, but every leaf is a fresh rollout from the root
    assert all(t.parent is None for g in root_only for t in g)
    assert all(len(g) >= 5 for g in root_only)
    # random node expansion branches from prefixes (some leaf starts below the root)
    assert any(t.parent is not None for g in random_node for t in g)


def test_grpo_trainer_smoke_with_tree_sampler():
    torch = pytest.importorskip("torch")
    from divelab.lm.models import build_model
    from divelab.rl.grpo import GRPOConfig, GRPOTrainer
    from divelab.rl.policy import LMPolicy, train_word_tokenizer

    env = _make_env("x")
    texts = [env.reset(0), "room 1. you see nothing.", "room 4. you see a key.", "you win.",
             "look wait go west go east take key"]
    tok = train_word_tokenizer(texts, vocab_size=64)
    model = build_model("tiny-100k", vocab_size=tok.get_vocab_size(), seed=0)
    policy = LMPolicy(model, tok)
    cfg = GRPOConfig(iterations=2, group_size=4, max_steps=6, ppo_epochs=1, seed=0)
    trainer = GRPOTrainer(policy, _make_env, ["g0"], cfg, sampler=TreeSampler(max_steps=6))
    logs = trainer.train()
    assert len(logs) == 2 and all(np.isfinite(x.loss) for x in logs)
    assert any(t.parent is not None for g in trainer.last_groups for t in g)
    assert torch.isfinite(next(model.parameters())).all()


def test_chain_training_tree_learns_and_is_seeded():
    cfg = ChainTrainConfig(sampler="tree", iterations=6, prompts_per_iter=6, d_range=(1, 4), lr=8.0, seed=3)
    a = train_chain(cfg)
    b = train_chain(cfg)
    assert a.success == b.success and a.env_steps == b.env_steps
    assert a.success[-1] > a.success[0] + 0.05


def test_adapters_shapes():
    policy = TabularPolicy.with_accuracy(6, 4, 0.7)
    rf = tree_segment_rollout(lambda p: DecisionChainEnv(d=len(p)), policy, budget_per_prompt=30)
    out = rf(["abc", "abcdef"])
    n = len(out["completion_ids"])
    assert n > 2 and all(len(out[k]) == n for k in ("prompt_ids", "group_uid", "tree_advantage"))
    rows = verl_agent_loop_outputs([DecisionChainEnv(d=5)], policy, [40])
    uids = {r["non_tensor_batch"]["uid"] for r in rows}
    assert "0/0" in uids and all(len(r["response_ids"]) == len(r["response_mask"]) for r in rows)


def test_reproduce_smoke_computes_claims():
    from divelab.claims import Kind, Verdict
    from divelab.scaleout import run_reproduction
    from divelab.verdicts import reapply

    rep = run_reproduction("divelab.training.infotree", "smoke", 0)
    assert rep.system == "infotree" and len(rep.claims) >= 12
    for c in rep.claims:
        assert c.kind in Kind and c.measured is not None
        assert reapply(c.rule).verdict is c.verdict  # every verdict follows from its recorded rule
        if c.kind is Kind.EMPIRICAL and c.rule["name"] in ("direction", "value"):
            assert c.baseline or "λ_entropy" in c.statement or c.rule["args"].get("why")
    assert rep.figures and rep.setup
    kinds = {c.statement: c.kind for c in rep.claims}
    assert kinds["Allocator's extra budget over the plain tree sampler"] is Kind.BY_CONSTRUCTION
    for c in rep.claims:
        if "(1-1/e)" in c.statement:  # both greedy claims: small and deep trees
            assert c.kind is Kind.CHECK and c.measured >= 1 - 1 / np.e
    deep = rep.details["greedy_ratio_deep"]
    assert deep["n"] == 6 and min(deep["depths"]) >= 8  # chain-like instances are deep
    # the allocator is judged against the strongest other sampler on the same prompts, all recorded
    alloc = next(c for c in rep.claims if c.statement.startswith("Mixed-outcome ratio at equal env-step budget (G=8): "
                                                                 "tree + allocator"))
    assert {b["name"] for b in alloc.baselines} == {"independent", "tree", "tree (λ_entropy=0)"}
    assert alloc.compared_with == max(alloc.baselines, key=lambda b: b["value"])["name"]
    # a timing verdict comes from repeated, interleaved measurements with an interval
    oh = next(c for c in rep.claims if c.statement.startswith("Wall-clock overhead"))  # timed beside other jobs
    assert oh.rule["name"] == "direction" and oh.ci is not None and oh.ci[0] < oh.ci[1]
    assert len(rep.details["overhead"]) == 2 * 5
    for c in rep.claims:
        if c.rule["name"] == "bound":  # every bound reads an interval, or is an exact computation
            assert c.rule["args"]["ci"] is not None or c.rule["args"]["exact"], c.statement
        if c.statement.startswith("Success after training at equal env steps"):  # replicated training runs
            assert c.rule["args"]["training_runs"] >= 2, c.statement
    ablations = [c for c in rep.claims if c.statement.startswith("Entropy-term ablation")]
    assert len(ablations) == 2 and all(c.rule["name"] == "direction" for c in ablations)
    # tree vs independent on the engine: both env families are run, not skipped, with the sham tree beside them
    for fam in ("TextWorld", "E163 mazes"):
        c = next(c for c in rep.claims if c.statement.endswith(f"({fam})"))
        assert c.verdict is not Verdict.NOT_CHECKABLE and -1.0 <= c.measured <= 1.0
        arena = rep.details["arena"][fam]
        assert len(arena["seeds"]) == 2 and all(len(v) == 2 for v in arena["final"].values())
        assert set(arena["final"]) == {"independent", "tree", "tree (root only)"}
        # judged against the stronger of independent GRPO and the untrained start, with the sham tree as control
        assert {b["name"] for b in c.baselines} == {"independent", "starting policy"}
        assert c.compared_with == max(c.baselines, key=lambda b: b["value"])["name"]
        assert c.rule["args"]["control"]["name"].startswith("tree (root only)")
        assert c.replication == {"unit": "training runs", "n": 2, "clustered_by": ""}
    # what the decision chain's constants decide is planted, said so, and never counted
    planted = [c for c in rep.claims if c.kind is Kind.PLANTED]
    assert {c.statement for c in planted} >= {
        "Mixed-outcome ratio at equal env-step budget (G=8): tree vs independent sampling",
        "Correlation of the proxy score greedy maximises (UUCB) with the true marginal gain",
        "Success after training at equal env steps: tree vs independent (decision chain, tabular GRPO)"}
    assert rep.planted.startswith("What the set-up plants") and "decision chain" in rep.planted
    assert set(rep.details["p_reveal_sweep_G8"]) == {"0.0", "0.5", "1.0"}
    assert oh.kind is Kind.BY_CONSTRUCTION and "load" in oh.note
    # every empirical claim carries its audit trail: falsifier, replication unit and a measured control
    empirical = [c for c in rep.claims if c.kind is Kind.EMPIRICAL]
    assert len(empirical) == 4
    for c in empirical:
        assert c.falsifier and c.replication and c.rule["args"]["control"]["ci"], c.statement
        assert c.compared_with, c.statement
    # the mixed-outcome ratio on TextWorld: tree against independent and a random-node tree, clustered by game
    mixed = next(c for c in empirical if c.statement.startswith("Mixed-outcome ratio at an equal group budget"))
    assert {b["name"] for b in mixed.baselines} == {"independent", "tree (random node)"}
    assert mixed.replication["clustered_by"] == "game"
    start = rep.details["arena"]["TextWorld"]["start_mixed_ratio"]
    assert set(start) == {"independent", "tree", "tree (random node)", "tree (root only)"}
    assert rep.details["arena"]["TextWorld, gigpo for both arms"]["start_mixed_ratio"] == start


def test_tree_budget_comes_from_earlier_batches_not_this_batchs_first_rollout():
    def make_env(gid: str) -> CorridorEnv:  # a near goal: some episodes win in a few steps, others run to the cap
        return CorridorEnv(n_rooms=3, goal=1, max_steps=8, game_id=gid)

    sampler = make_sampler("tree (root only)", max_steps=8)
    rng = np.random.default_rng(0)
    sampler.collect(UniformPolicy(), make_env, ["a"], 4, rng)  # first batch: its own first rollout
    history = list(sampler.root_lengths["a"])
    assert history and all(1 <= n <= 8 for n in history)
    firsts = []
    for _ in range(8):
        past = sampler.root_lengths["a"][-sampler.length_window:]
        groups = sampler.collect(UniformPolicy(), make_env, ["a"], 4, rng)
        used = sampler.stats()["env_steps"]
        first_len = len(groups[0][0].steps)
        budget = round(4 * float(np.mean(past)))
        # the batch stops at the first rollout that reaches the budget set by earlier batches, whatever its own
        # first rollout's length was (a short win used to shrink the budget)
        assert budget <= used < budget + 8 or (first_len >= budget and used == first_len)
        assert len(sampler.root_lengths["a"]) <= sampler.length_window
        firsts.append(first_len)
    assert len(set(firsts)) > 1  # the first rollouts' lengths varied, so the old rule would have moved the budget
