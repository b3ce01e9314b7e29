"""Fugu with a real-LM worker: the log-likelihood choice worker (tiny random Llama) and the router's
use of a sixth worker (planted outcomes), without SmolLM2."""

import numpy as np
import pytest

from divelab.chat import user
from divelab.orchestration.fugu import real_llm
from divelab.orchestration.fugu.tasks import solve
from doubles import CharTokenizer


def test_candidates_hold_the_answer_once_and_are_seeded():
    tasks = real_llm.subset(3, seed=1)
    assert len(tasks) == 15 and {t.family for t in tasks} == {"add", "mul", "reverse", "count", "sort"}
    for t in tasks:
        c = real_llm.candidates(t.prompt, 4, seed=0)
        assert len(c) == 4 and len(set(c)) == 4 and c.count(t.answer) == 1
        assert c == real_llm.candidates(t.prompt, 4, seed=0)
    with pytest.raises(ValueError, match="not a task prompt"):
        real_llm.candidates("hello there", 4)


def test_loglik_worker_picks_the_most_likely_candidate_despite_padding():
    torch = pytest.importorskip("torch")
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=4,
                                         max_position_embeddings=1024)).eval()
    tok = CharTokenizer()
    chat = real_llm.LoglikChoiceModel(model, tok, k=4)
    q = "Sort these numbers in ascending order: 5, 3, 41, 7."
    got = chat.complete([user(q)]).message.content.removeprefix("ANSWER: ")
    prompt = tok.apply_chat_template([{"role": "user", "content": q}])
    scores = []
    for c in real_llm.candidates(q, 4):  # one unpadded sequence at a time
        ids = prompt + tok.encode(c)
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([ids])).logits[0], -1)
        scores.append(sum(float(lp[len(prompt) - 1 + j, t]) for j, t in enumerate(tok.encode(c))))
    assert got == real_llm.candidates(q, 4)[int(np.argmax(scores))]
    assert chat.last["candidate_tokens"] > 0 and chat.last["seconds"] > 0
    assert solve(q)[1] in real_llm.candidates(q, 4)


def test_router_sends_queries_to_a_sixth_worker_only_where_it_is_worth_it():
    cfg = real_llm.RealConfig(per_family=16, replicates=3, cma_iters=6, popsize=8, n_generate=0)
    tasks = real_llm.subset(cfg.per_family, seed=0)
    fam = np.array([t.family for t in tasks])
    planted = {"reward": np.isin(fam, ["mul", "count"]).astype(float), "seconds": np.full(len(tasks), 0.1),
               "tokens": np.full(len(tasks), 10.0), "generations": []}
    _, det = real_llm.evaluate(tasks, planted, cfg, seed=0)
    free = det["routing"]["lambda=0"]
    by_fam = free["to_smollm2_by_family"]
    assert by_fam["mul"] + by_fam["count"] >= 8 and by_fam["reverse"] + by_fam["sort"] + by_fam["add"] <= 2
    assert free["success_6"] > free["success_5"]
    assert det["routing"]["lambda=2"]["share_to_smollm2"] < free["share_to_smollm2"]  # the price matters
    useless = {**planted, "reward": np.zeros(len(tasks))}
    _, det0 = real_llm.evaluate(tasks, useless, cfg, seed=0)
    assert det0["routing"]["lambda=0"]["share_to_smollm2"] <= 0.05


def test_the_plan_sizes_the_sixth_worker_and_set_reaches_it():
    from divelab import plans
    from divelab.orchestration.fugu import reproduce

    assert reproduce.PLANS["full"].live_llm == real_llm.RealConfig()
    assert reproduce.PLANS["quick"].live_llm is None and reproduce.PLANS["smoke"].live_llm is None
    plan = plans.apply_overrides(reproduce.PLANS["full"], {"live_llm.per_family": "7", "real_workers.adapt.lr": "2e-3"})
    assert plan.live_llm.per_family == 7 and plan.real_workers.adapt.lr == 2e-3
    recorded = plans.to_dict(plan)
    assert recorded["live_llm"]["per_family"] == 7 and recorded["real_workers"]["adapt"]["lr"] == 2e-3


def test_the_worker_claim_is_judged_against_the_strongest_rule_with_the_question_removed_as_control():
    from divelab.verdicts import Verdict

    cfg = real_llm.RealConfig(per_family=16, replicates=3, cma_iters=6, popsize=8, n_generate=0)
    tasks = real_llm.subset(cfg.per_family, seed=0)
    rules = real_llm.heuristic_correct(tasks, cfg.k, 0)
    right = {"reward": np.ones(len(tasks)), "seconds": np.full(len(tasks), 0.1), "tokens": np.full(len(tasks), 10.0),
             "generations": []}
    blind_like_rule = {**right, "reward": rules["first candidate"]}
    claims, det = real_llm.evaluate(tasks, right, cfg, seed=0, blind=blind_like_rule)
    worker = claims[0]
    assert worker.compared_with in (*rules, "uniform pick (1/4)")
    assert worker.verdict is Verdict.DIRECTION_HOLDS and worker.audit_gaps() == []
    assert det["blind_accuracy"] == pytest.approx(rules["first candidate"].mean())
    # a control that is as good as the model (it did not need the question) sinks the claim
    claims, _ = real_llm.evaluate(tasks, right, cfg, seed=0, blind=right)
    assert claims[0].verdict is Verdict.UNINFORMATIVE
    # the sixth worker adds no query the five miss: the router comparison cannot speak
    assert claims[1].verdict is Verdict.UNINFORMATIVE or det["oracle_gain"] > 0


def test_blind_scoring_ignores_the_question():
    torch = pytest.importorskip("torch")
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=4,
                                         max_position_embeddings=1024)).eval()
    tok = CharTokenizer()
    chat = real_llm.LoglikChoiceModel(model, tok, k=4, blind=True)
    chat.complete([user("What is 12 + 30?")])
    assert chat.last["prompt_tokens"] == len(tok.apply_chat_template(
        [{"role": "user", "content": real_llm.BLIND_PROMPT}], add_generation_prompt=True))
