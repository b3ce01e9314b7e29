"""E173 on a KL-RL LoRA pair (real_llm.py), exercised on the tiny zoo model (SmolLM2 only at full scale)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from divelab.training.progress_advantage import real_llm as R
from divelab.training.progress_advantage.textgame import GameSpec, State, optimal_success


@pytest.fixture(scope="module")
def lora_pair():
    from peft import LoraConfig, get_peft_model

    from divelab.lm import pretrained

    model, tok = pretrained("smoke")
    torch.manual_seed(0)
    # init_lora_weights=False: a random (non-zero) adapter, so policy != reference
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    return get_peft_model(model, cfg).eval(), tok


def test_commands_parse_and_exactly_one_makes_progress() -> None:
    assert R.parse_command(" Go East.") == "go east"
    assert R.parse_command("I will open door, then go west") == "open door"
    assert R.parse_command("step east") is None
    states = R.game_states((4, 5))
    assert len(states) == 16 + 25  # n*(n-1) key positions + n rooms holding the key
    for n, s in states:
        assert optimal_success(GameSpec(n_rooms=n, slack=0), s) == 1.0  # budget = shortest solution
        rewards = [R.step_reward(n, s, c) for c in R.COMMANDS]
        assert sorted(rewards) == [0.0, 0.0, 0.0, 1.0], (n, s, rewards)
        assert R.step_reward(n, s, "hello") == 0.0
    train, test = R.split_states(R.RealLLMConfig(rooms=(4, 5), held_out=0.25))
    assert len(test) == 10 and not set(test) & set(train) and len(train) + len(test) == len(states)


def test_candidate_scores_are_beta_log_ratio_with_adapter_off_as_reference(lora_pair) -> None:
    policy, tok = lora_pair
    states = [(4, State(1, 2, False, 4)), (5, State(4, 0, True, 1)), (4, State(2, 2, False, 3))]
    beta = 0.2
    cand = R.score_candidates(policy, R.AdapterOff(policy), tok, states, beta, batch_size=5)
    sc = cand["scores"]
    assert cand["labels"].reshape(-1, 4).sum(1).tolist() == [1.0, 1.0, 1.0]
    # against a manual forward pass: policy with the adapter, reference with it disabled
    prompts = [tok(R.prompt_text(tok, n, s), add_special_tokens=False)["input_ids"] for n, s in states
               for _ in R.COMMANDS]
    comps = [tok(c + R._end_text(tok), add_special_tokens=False)["input_ids"] for _ in states for c in R.COMMANDS]
    lp = R._completion_logprob(policy, prompts, comps)
    with policy.disable_adapter():
        lr = R._completion_logprob(policy, prompts, comps)
    assert np.abs(lp - lr).max() > 1e-3  # the random adapter moves the policy
    np.testing.assert_allclose(sc[R.PROGRESS], beta * (lp - lr), atol=1e-4)
    np.testing.assert_allclose(sc["policy log-prob (sum)"], lp, atol=1e-4)
    np.testing.assert_allclose(sc["reference log-prob (sum)"], lr, atol=1e-4)
    assert np.all(sc["policy min token prob"] <= 1) and np.all(sc["policy min token prob"] > 0)


def test_summary_and_claims_from_scored_candidates(lora_pair) -> None:
    policy, tok = lora_pair
    cfg = R.RealLLMConfig(rooms=(4,), eval_states=6, sample_states=3, samples_per_state=2)
    ev = R.evaluate(policy, tok, cfg)
    assert ev["candidates"]["labels"].shape == (24,)
    assert ev["after"]["rewards"].shape == (6,) and np.all(np.isfinite(ev["after"]["log_ratio"]))
    record = {"log": [{"reward": 0.1, "kl": 0.0}, {"reward": 0.3, "kl": 0.02}], "train_s": 1.0,
              "n_train_states": 10}
    res = R.summarise(ev, record, cfg)
    res.update(_scores={k: v.tolist() for k, v in ev["candidates"]["scores"].items()},
               _labels=ev["candidates"]["labels"].tolist(), n_sample_states=3, config=cfg.record())
    t = res["table"]
    # best-of-4 with the summed policy log-prob = how often the policy's own favourite command is right
    y = ev["candidates"]["labels"].reshape(-1, 4)
    fav = ev["candidates"]["scores"]["policy log-prob (sum)"].reshape(-1, 4).argmax(1)
    assert t["policy log-prob (sum)"]["best_of_k"] == pytest.approx(y[np.arange(6), fav].mean())
    claims = R.claims(res)
    assert len(claims) == 3 and all(c.verdict is not None for c in claims)
    # the trivial baselines (random and first pick, the instruct model itself, a random scorer) are judged too
    names = [{b["name"] for b in c.baselines} for c in claims[:2]]
    assert names[0] == {*R.BASELINES, R.REFERENCE, "random pick", "first candidate"}
    assert names[1] == {*R.BASELINES, R.REFERENCE, R.RANDOM_SCORER}
    assert all(c.compared_with and c.falsifier and c.replication["unit"] == "held-out states" for c in claims[:2])
    # the same statistics on permuted scores, and one fine-tune cannot separate a method from its run
    assert all(c.rule["args"]["control"]["name"] == R.SHAM and c.rule["args"]["training_runs"] == 1
               for c in claims[:2])
    assert all(c.verdict.value not in ("reproduced", "direction holds") for c in claims[:2])
    strongest = max(claims[0].baselines, key=lambda b: b["value"])
    assert claims[0].compared_with == strongest["name"]
    assert claims[2].kind.value == "check"  # the fine-tune improving on its reference is the method's premise
    pub = R.public(res)
    assert "_scores" not in pub and "_picks" not in pub["table"][R.PROGRESS]


@pytest.mark.slow
def test_trl_grpo_trains_and_caches_the_adapter(tmp_path, monkeypatch) -> None:
    import copy

    from divelab.lm import pretrained

    model, tok = pretrained("smoke")
    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path))  # the adapter cache only
    calls = []

    def loader():
        calls.append(1)
        return copy.deepcopy(model), tok

    cfg = R.RealLLMConfig(rooms=(4,), adapt=replace(R.ADAPTER, steps=1, batch_size=4, num_generations=2))
    assert (cfg.prompts_per_step, cfg.record()["group"], cfg.record()["max_completion"]) == (2, 2, 3)
    policy, tok, record = R.load_pair(cfg, loader)
    assert len(calls) == 2  # trained, then reloaded from the cached adapter
    assert any("reward" in h for h in record["log"]) and record["n_train_states"] == 10
    R.load_pair(cfg, loader)
    assert len(calls) == 3  # cached: no second training run
    assert hasattr(policy, "disable_adapter")


def test_the_plan_decides_where_the_real_llm_runs(monkeypatch) -> None:
    import divelab.lm.real
    from divelab.claims import Reproduction
    from divelab.training.progress_advantage.reproduce import PLANS

    called = []
    monkeypatch.setattr(R, "measure", lambda seed=0, cfg=None: called.append((seed, cfg)) or ([], {}))
    monkeypatch.setattr(divelab.lm.real, "is_available", lambda name="": True)
    rep = Reproduction(system="progress-advantage", title="t", scale="quick", seed=0)
    for scale in ("smoke", "quick"):
        assert PLANS[scale].real_llm is None
        R.add_to(rep, PLANS[scale].real_llm, 3)
    assert called == [] and not rep.claims
    R.add_to(rep, PLANS["full"].real_llm, 3)
    assert called == [(3, PLANS["full"].real_llm)]


def test_the_sub_plan_is_the_former_full_scale_setting_and_overridable() -> None:
    from divelab import plans
    from divelab.training.progress_advantage.reproduce import PLANS

    cfg = PLANS["full"].real_llm.with_seed(4)
    # the settings the full scale always ran (RealLLMConfig(seed=seed) before they were a sub-plan)
    assert cfg.record() == {"model": "smollm2-135m-instruct", "rooms": (4, 5, 6, 7, 8, 9), "held_out": 0.4,
                            "eval_states": 40, "beta": 0.1, "steps": 12, "prompts_per_step": 2, "group": 4,
                            "max_completion": 3, "lr": 2e-3, "lora_r": 8, "lora_alpha": 16, "sample_states": 16,
                            "samples_per_state": 2, "seed": 4}
    key = R.adapter_key(cfg)
    assert not {"lora_dropout", "target_modules", "temperature"} & set(key)  # cached adapters keep their keys
    assert "temperature" in R.adapter_key(replace(cfg, adapt=replace(cfg.adapt, temperature=0.7)))
    got = plans.apply_overrides(PLANS["full"], {"real_llm.adapt.steps": "3", "real_llm.eval_states": "8"})
    assert (got.real_llm.adapt.steps, got.real_llm.eval_states) == (3, 8)
    assert plans.to_dict(got)["real_llm"]["adapt"]["lora"]["r"] == 8  # results.json records the sub-plan
    with pytest.raises(ValueError, match="adapt.method must be 'grpo'"):
        R.RealLLMConfig(adapt=replace(R.ADAPTER, method="sft"))
