"""The GRPO loop: a smoke run that improves over its start, seeding, checkpoints, samplers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from divelab.envs.base import ReplayCache
from divelab.envs.toy import CorridorEnv
from divelab.lm.models import build_model
from divelab.rl.grpo import GRPOConfig, GRPOTrainer, evaluate
from divelab.rl.policy import LMPolicy, PolicyConfig, train_word_tokenizer
from divelab.rl.rollout import IndependentSampler, RolloutSampler
from divelab.rl.warmstart import exploration_traces, sft_warm_start

SMALL = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)


def setup(seed: int = 0):
    shared = ReplayCache(CorridorEnv(n_rooms=3, goal=1, max_steps=6))

    def make_env(game_id: str):
        if game_id != "corridor":
            raise ValueError(game_id)
        return shared.clone()

    texts = ["room 0 1 2 3 . you see a key nothing .", "look wait go west go east take key"]
    tok = train_word_tokenizer(texts)
    model = build_model("tiny-100k", tok.get_vocab_size(), seed=seed, **SMALL)
    return LMPolicy(model, tok, PolicyConfig(history=0)), make_env


def test_smoke_training_improves_over_start() -> None:
    torch.set_num_threads(1)
    policy, make_env = setup()
    # warm start as the test bed does: clone a uniform explorer, so the start explores (a fresh LM
    # prefers one-token commands and would almost never try "go east")
    sft_warm_start(policy, exploration_traces(make_env, ["corridor"], 16, 6, seed=0), steps=30, lr=1e-2)
    before = evaluate(policy, make_env, ["corridor"], episodes=32, max_steps=6, seed=1)
    cfg = GRPOConfig(iterations=12, group_size=8, max_steps=6, estimator="g2po", lr=1e-2, seed=0)
    trainer = GRPOTrainer(policy, make_env, ["corridor"], cfg)
    logs = trainer.train()
    after = evaluate(policy, make_env, ["corridor"], episodes=32, max_steps=6, seed=1)
    assert after >= before + 0.2, (before, after)
    assert len(logs) == 12 and logs[-1].kl > 0
    assert all(lg.time_rollout > 0 and lg.time_update > 0 for lg in logs)


def test_same_seed_same_numbers_and_checkpoint_resume(tmp_path) -> None:
    torch.set_num_threads(1)
    runs = []
    for _ in range(2):
        policy, make_env = setup()
        t = GRPOTrainer(policy, make_env, ["corridor"], GRPOConfig(iterations=3, group_size=4, estimator="gigpo",
                                                                   seed=5, lr=1e-2))
        runs.append([(lg.success, lg.adv_std, lg.loss) for lg in t.train()])
    assert runs[0] == runs[1]
    policy, make_env = setup()
    cfg = GRPOConfig(iterations=2, group_size=4, seed=5, checkpoint_dir=str(tmp_path), checkpoint_every=1)
    GRPOTrainer(policy, make_env, ["corridor"], cfg).train()
    assert (tmp_path / "checkpoint.pt").exists() and (tmp_path / "log.json").exists()
    policy2, _ = setup()
    resumed = GRPOTrainer(policy2, make_env, ["corridor"], GRPOConfig(**{**cfg.__dict__, "iterations": 3}))
    assert len(resumed.logs) == 2
    assert all(torch.equal(a, b) for a, b in zip(policy.model.state_dict().values(),
                                                 policy2.model.state_dict().values(), strict=True))
    assert len(resumed.train()) == 3


def test_bad_config_and_custom_sampler() -> None:
    with pytest.raises(ValueError, match="registered"):
        GRPOConfig(estimator="nope")
    with pytest.raises(ValueError, match="group_size"):
        GRPOConfig(group_size=0)
    policy, make_env = setup()

    class Counting(IndependentSampler):
        calls = 0

        def collect(self, *a, **k):
            Counting.calls += 1
            return super().collect(*a, **k)

    s = Counting(max_steps=4)
    assert isinstance(s, RolloutSampler)
    GRPOTrainer(policy, make_env, ["corridor"], GRPOConfig(iterations=1, group_size=2), sampler=s).train()
    assert Counting.calls == 1
    groups = IndependentSampler(max_steps=4).collect(policy, make_env, ["corridor"], 3, np.random.default_rng(0))
    assert len(groups) == 1 and len(groups[0]) == 3 and all(len(t) <= 4 for t in groups[0])


def test_batched_scoring_matches_single_and_full_logits(monkeypatch) -> None:
    import divelab.rl.policy as policy_mod

    policy, _ = setup(seed=3)
    ctxs = ["room 0. you see nothing.", "room 1. you see a key. > go east room 1. you see a key."]
    cands = [["look", "wait", "go east"], ["take key", "go west", "look"]]
    batched = policy.batch_action_probs(ctxs, cands)
    policy.invalidate()
    single = [policy.action_probs(c, k) for c, k in zip(ctxs, cands, strict=True)]
    for a, b in zip(batched, single, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5)
        assert a.sum() == pytest.approx(1.0)
    fast = [lp.detach() for lp in policy.candidate_logprobs(ctxs, cands)]
    monkeypatch.setattr(policy_mod, "_PLAIN_HEAD_TYPES", frozenset())  # force the full-logits path
    full = [lp.detach() for lp in policy.candidate_logprobs(ctxs, cands)]
    for a, b in zip(fast, full, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_lockstep_sampler_groups_and_policies_without_batching() -> None:
    from divelab.rl.warmstart import UniformPolicy

    _, make_env = setup()
    groups = IndependentSampler(max_steps=5).collect(UniformPolicy(), make_env, ["corridor", "corridor"], 4,
                                                     np.random.default_rng(2))
    assert [len(g) for g in groups] == [4, 4]
    assert [t.traj_id for g in groups for t in g] == list(range(8))
    for gi, g in enumerate(groups):
        assert len({t.seed for t in g}) == 1 and all(t.group_index == gi for t in g)
        for t in g:
            assert [s.step_id for s in t.steps] == list(range(len(t)))
            assert t.won == any(s.reward > 0 for s in t.steps)
            assert t.truncated == (not t.steps[-1].done) and len(t) <= 5
    again = IndependentSampler(max_steps=5).collect(UniformPolicy(), make_env, ["corridor", "corridor"], 4,
                                                    np.random.default_rng(2))
    assert [[s.action for s in t.steps] for g in again for t in g] == \
        [[s.action for s in t.steps] for g in groups for t in g]
