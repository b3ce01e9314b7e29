"""Tests for the SmolLM2 world model of divelab.training.world_model (E167): row formats, the prediction memo,
and the model plugged into fidelity, the simulator and lockstep GRPO (on a scripted generator, no LLM)."""

from __future__ import annotations

import numpy as np
import pytest

from divelab.envs.toy import CorridorEnv
from divelab.lm.models import build_model
from divelab.rl.grpo import GRPOConfig, GRPOTrainer
from divelab.rl.policy import LMPolicy, PolicyConfig, train_word_tokenizer
from divelab.rl.rollout import IndependentSampler
from divelab.threads import torch_threads
from divelab.training.world_model import (
    collect_transitions,
    evaluate_fidelity,
    parse_prediction,
    unique_transitions,
)
from divelab.training.world_model.llm_model import (
    LLMPlan,
    LLMWorldModel,
    cpt_rows,
    cut_at_end,
    sft_rows,
)
from divelab.training.world_model.model import prompt_text
from divelab.training.world_model.simulator import SimulatedEnv, prefetch, simulated_env_factory


def corridor(game_id: str = "c4") -> CorridorEnv:
    return CorridorEnv(n_rooms=4, goal=3, max_steps=8, game_id=game_id)


def log():
    return unique_transitions(collect_transitions(lambda g: corridor(g), ["c4"], 60, 8, seed=0))


class Scripted:
    """A generator that writes the true next state of every logged (state, action) (the SFT completion, as a
    model would decode it) and counts its calls."""

    def __init__(self, transitions) -> None:
        self.answer = {r["prompt"]: r["completion"] for r in sft_rows(transitions)}
        self.calls: list[int] = []

    def __call__(self, prompts: list[str]) -> list[str]:
        self.calls.append(len(prompts))
        return [self.answer.get(p, "garbage") for p in prompts]


def test_rows_round_trip_to_the_next_state() -> None:
    ts = log()
    for t, cpt, sft in zip(ts, cpt_rows(ts), sft_rows(ts), strict=True):
        prompt = prompt_text(t.state, t.action)
        assert cpt["prompt"] == "" and cpt["completion"].startswith(prompt + " ")  # CPT: the whole text
        assert "[WHY]" not in cpt["completion"] and sft["completion"].startswith(" [WHY]")
        assert sft["prompt"] == prompt
        for text in (cpt["completion"][len(prompt):], sft["completion"]):
            p = parse_prediction(cut_at_end(text + " trailing words"), t.state)
            assert p.well_formed and p.state == t.next_state and p.reward == float(t.reward > 0)
    assert cut_at_end("no end here") == "no end here"


def test_memo_returns_identical_predictions_and_the_cache_resumes(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path))
    ts = log()
    gen = Scripted(ts)
    wm = LLMWorldModel(gen, key="k1", batch_size=4)
    q = [(t.state, t.action) for t in ts]
    first = wm.predict(q)
    assert wm.generated == len(ts) and all(c <= 4 for c in gen.calls) and max(gen.calls) > 1
    assert wm.predict(q) == first and wm.generated == len(ts)  # memo: nothing generated again
    again = LLMWorldModel(Scripted(ts), key="k1")  # a resumed run reads every prediction from the cache
    assert again.predict(q) == first and again.generated == 0 and again.from_cache == len(ts)
    other = LLMWorldModel(gen, key="k2")  # other weights: nothing shared
    other.predict(q[:2])
    assert other.generated == 2
    with pytest.raises(RuntimeError, match="returned 0 texts"):
        LLMWorldModel(lambda p: [], key=None).predict(q[:1])
    with pytest.raises(ValueError):
        LLMWorldModel(gen, batch_size=0)


def test_llm_world_model_plugs_into_fidelity_and_the_simulator() -> None:
    ts = log()
    wm = LLMWorldModel(Scripted(ts))
    assert evaluate_fidelity(wm, ts)["overall"]["exact"] == 1.0
    broken = evaluate_fidelity(LLMWorldModel(lambda ps: ["garbage"] * len(ps)), ts)["overall"]
    assert broken["well_formed"] == 0.0 and broken["exact"] == 0.0
    real = corridor()
    sim = SimulatedEnv(wm, real.reset(0), real.admissible_actions(), "c4", max_steps=8)
    sim.reset(0)
    a = sim.admissible_actions()[0]
    prefetch([(sim, a), (real, "anything")])  # the real env is skipped; the simulated step is predicted
    n = wm.generated
    sim.step(a)
    assert wm.generated == n  # the step read the prefetched prediction


def test_lockstep_prefetch_batches_and_draws_the_same_rollouts() -> None:
    ts = log()
    runs = {}
    for batched in (False, True):
        gen = Scripted(ts)
        wm = LLMWorldModel(gen)
        make = simulated_env_factory(wm, lambda g: corridor(g), ["c4"], max_steps=8, explore=False)
        tok = train_word_tokenizer([t.state.observation() for t in ts] + [t.action for t in ts])
        pol = LMPolicy(build_model("tiny-100k", tok.get_vocab_size(), seed=0, hidden_size=32, num_hidden_layers=1),
                       tok, PolicyConfig(history=0, head_tokens=0, tail_tokens=32))
        sampler = IndependentSampler(max_steps=8, prefetch=prefetch if batched else None)
        with torch_threads(1):
            trainer = GRPOTrainer(pol, make, ["c4"], GRPOConfig(iterations=2, group_size=6, max_steps=8, seed=0),
                                  sampler=sampler)
            trainer.train()
        runs[batched] = ([[s.action for s in tr.steps] for g in trainer.last_groups for tr in g], gen.calls)
    assert runs[True][0] == runs[False][0]  # the hook changes when predictions are made, not what is drawn
    assert max(runs[False][1]) == 1 and max(runs[True][1]) > 1  # one prompt a call vs lockstep batches
    assert len(runs[True][1]) < len(runs[False][1])


def test_llm_plan_adapts_the_top_layers() -> None:
    plan = LLMPlan(cpt_steps=3, sft_steps=4, top_layers=2)
    mods = plan.lora_modules()
    assert len(mods) == 14 and "layers.29.self_attn.q_proj" in mods and "layers.28.mlp.down_proj" in mods
    assert not any(m.startswith("layers.27.") for m in mods)
    cfg = plan.adapt_config(plan.sft_steps, seed=3)
    assert cfg.steps == 4 and cfg.seed == 3 and cfg.method == "sft" and not cfg.activation_checkpointing
    assert np.isclose(cfg.lr, plan.lr)
