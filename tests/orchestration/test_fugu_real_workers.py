"""Fugu's real-worker pool without SmolLM2: data builders, measured prices, batched recording, the recorded
pool's resampling and the claim logic, on tiny random Llamas with a character tokenizer."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from divelab.chat import user  # noqa: E402
from divelab.orchestration.fugu import real_pool, real_workers  # noqa: E402
from divelab.orchestration.fugu.matched import CASCADE_MATCHED  # noqa: E402
from divelab.orchestration.fugu.real_data import (  # noqa: E402
    ANSWER_PREFIX,
    chat_renderer,
    content_key,
    eval_pool,
    sft_rows,
    train_tasks,
)
from divelab.orchestration.fugu.tasks import FAMILIES, Task  # noqa: E402


def char_tokenizer():
    """One token per printable character, a pad and an end token, and the tiny workers' chat template."""
    import string

    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = ["<pad>", "<eos>", *dict.fromkeys(string.printable)]
    t = Tokenizer(models.WordLevel({v: i for i, v in enumerate(vocab)}, unk_token="<pad>"))
    t.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    t.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=t, pad_token="<pad>", eos_token="<eos>")
    tok.chat_template = real_workers.TINY_TEMPLATE
    return tok


def tiny_llama(tok, hidden: int = 32, layers: int = 2, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    return LlamaForCausalLM(cfg).eval()


# -- data --------------------------------------------------------------------------------------------

def test_training_queries_never_share_content_with_evaluation_queries():
    ev = eval_pool(12, seed=3)
    assert [t.family for t in ev] == [f for f in FAMILIES for _ in range(12)]
    keys = {content_key(t) for t in ev}
    assert len(keys) == len(ev)  # distinct by content, not only by phrasing
    tr = train_tasks(("reverse", "count"), 40, ev, seed=3)
    assert {t.family for t in tr} == {"reverse", "count"} and len({t.prompt for t in tr}) == 80
    assert not keys & {content_key(t) for t in tr}
    # the same content in another phrasing is the same query
    assert content_key(Task("Reverse the word 'abc'.", "cba", "reverse", 0)) == \
        content_key(Task("Spell 'abc' backwards.", "cba", "reverse", 0))
    assert eval_pool(12, seed=3) == ev and train_tasks(("reverse", "count"), 40, ev, seed=3) == tr
    with pytest.raises(ValueError, match="too few distinct"):
        train_tasks(("reverse",), 10_000, ev)
    with pytest.raises(ValueError, match="unknown task family"):
        train_tasks(("divide",), 3, ev)


def test_sft_rows_put_the_loss_on_the_answer_after_the_chat_prompt():
    tok = char_tokenizer()
    tasks = train_tasks(("add",), 5, [], seed=0)
    rows = sft_rows(tasks, chat_renderer(tok))
    assert len(rows) == 5
    for r in rows:
        assert r["prompt"].startswith("user: ") and r["prompt"].endswith("assistant: ")
        assert r["completion"].startswith(ANSWER_PREFIX)
        t = next(t for t in tasks if t.prompt in r["prompt"])
        assert r["completion"] == ANSWER_PREFIX + t.answer


# -- price and recording -----------------------------------------------------------------------------

def test_price_is_wall_time_per_token_measured_side_by_side_and_cached(tmp_path, monkeypatch):
    from divelab.chat.hf_local import HFChatModel

    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path))
    tok = char_tokenizer()
    small, big = tiny_llama(tok, 16, 1), tiny_llama(tok, 256, 6)
    chats = {"small": HFChatModel(small, tok), "big": HFChatModel(big, tok)}
    cfg = real_workers.PoolConfig(price_rounds=3, price_tokens=6)
    qs = [t.prompt for t in eval_pool(2)[:4]]
    order = []
    real_time = real_workers.time_worker
    monkeypatch.setattr(real_workers, "time_worker", lambda c, *a: order.append(c) or real_time(c, *a))
    prices = real_workers.measure_prices(chats, qs, cfg, cache_key=["two"])
    assert [chats["small"] is c for c in order] == [True, False, False, True, True, False]  # rotated rounds
    assert prices["big"]["price_out"] > prices["small"]["price_out"] > 0 and prices["big"]["price_in"] > 0
    assert len(prices["big"]["rounds"]) == 3
    monkeypatch.setattr(real_workers, "time_worker", lambda *a: pytest.fail("re-timed a cached price"))
    assert real_workers.measure_prices(chats, qs, cfg, cache_key=["two"]) == prices


def test_recording_batches_keeps_query_order_and_is_cached(tmp_path, monkeypatch):
    from divelab.chat.hf_local import HFChatModel

    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path))
    tok = char_tokenizer()
    chat = HFChatModel(tiny_llama(tok), tok)
    tasks = eval_pool(3)
    cfg = real_workers.PoolConfig(max_new_tokens=5, gen_batch=4)
    rec = real_workers.record_worker(chat, tasks, cfg, cache_key=["w"])
    assert len(rec["replies"]) == len(tasks) and all(0 < c <= 5 for c in rec["completion_tokens"])
    # each reply belongs to its own query: the prompt lengths match the query it was recorded for
    assert rec["prompt_tokens"] == [len(chat.prompt_ids([user(t.prompt)])) for t in tasks]
    calls = []
    monkeypatch.setattr(chat, "complete_many", lambda *a, **k: calls.append(1))
    assert real_workers.record_worker(chat, tasks, cfg, cache_key=["w"]) == rec and not calls


def test_assemble_scores_every_reply_and_prices_it_by_its_tokens():
    tasks = [Task("What is 2 + 3?", "5", "add", 0), Task("Reverse the word 'ab'.", "ba", "reverse", 0)]
    recs = {"a": {"replies": ["ANSWER: 5", "ANSWER: ab"], "prompt_tokens": [10, 20], "completion_tokens": [3, 4]},
            "b": {"replies": ["6", "the answer\nba"], "prompt_tokens": [10, 20], "completion_tokens": [30, 40]}}
    prices = {"a": {"price_in": 1.0, "price_out": 10.0}, "b": {"price_in": 2.0, "price_out": 20.0}}
    pool = real_workers.assemble(tasks, ["a", "b"], recs, prices)
    assert pool.reward.tolist() == [[1, 0], [0, 1]]
    assert np.allclose(pool.cost, [[(10 + 30) / 1000, (20 + 600) / 1000], [(20 + 40) / 1000, (40 + 800) / 1000]])
    assert pool.answers[1, 1] == "ba" and pool.accuracy() == {"a": {"add": 1.0, "reverse": 0.0},
                                                              "b": {"add": 0.0, "reverse": 1.0}}


# -- the recorded pool: resampling and claims ----------------------------------------------------------

def planted_pool(skills: dict[str, dict[str, float]], per_family: int = 24, seed: int = 0) -> real_workers.RealPool:
    """A recorded pool whose workers answer each family right with the given probability (seeded)."""
    rng = np.random.default_rng(seed)
    tasks = eval_pool(per_family, seed)
    names = list(skills)
    reward = np.array([[float(rng.random() < skills[n].get(t.family, 0.0)) for n in names] for t in tasks])
    answers = np.where(reward > 0, np.array([[t.answer] * len(names) for t in tasks]), "wrong").astype(str)
    price = np.array([1.0 + i for i in range(len(names))])
    cost = np.tile(price / 100, (len(tasks), 1))
    prices = {n: {"price_in": float(p), "price_out": float(p) * 100} for n, p in zip(names, price, strict=True)}
    info = {"adapters": {n: {"families": ["add"], "base": "smollm2-135m-instruct"} for n in names}}
    return real_workers.RealPool(tasks, names, reward, cost, answers, prices, info)


SPECIALISTS = {"arith": {"add": 0.9, "mul": 0.9}, "lex": {"reverse": 0.9, "count": 0.9}, "sorter": {"sort": 0.9},
               "base": {f: 0.3 for f in FAMILIES}}
KW = {"n_features": 64, "cma_iters": 4, "popsize": 8}


def test_every_split_resamples_the_recorded_pool_and_retrains_every_arm():
    pool = planted_pool(SPECIALISTS)
    splits = real_pool.run_splits(pool, 3, seed=0, **KW)
    n = len(pool.tasks)
    tes = [set(s.te.tolist()) for s in splits]
    assert all(len(t) == n - n // 2 for t in tes) and len({frozenset(t) for t in tes}) == 3
    for s in splits:
        assert len(s.xtr) == n // 2 and {"fugu @ budget", "kNN @ budget", "MF @ budget", "cascade @ budget",
                                         "best affordable single", "best single", "oracle"} <= set(s.arms)
    # routers trained on different splits differ (each split retrains them)
    assert not np.allclose(splits[0].fugu.w, splits[1].fugu.w)
    assert real_pool.run_splits(pool, 2, seed=0, **KW)[1].te.tolist() == splits[1].te.tolist()  # seeded
    with pytest.raises(ValueError, match="train_runs"):
        real_pool.run_splits(pool, 1, seed=0)


def test_router_claims_need_measured_headroom():
    pool = planted_pool(SPECIALISTS)
    assert real_pool.headroom(pool)
    claims, details = real_pool.claims(pool, real_pool.run_splits(pool, 3, seed=0, **KW), seed=0)
    competence, router, at_cascade = claims
    assert competence.measured > 0.2 and competence.verdict != "uninformative"  # specialists beat any single one
    assert "SmolLM2-135M-Instruct" in router.statement and router.verdict != "uninformative"
    assert router.compared_with in real_pool.MATCHED and len(router.baselines) >= 3
    # two calls never fit this pool's one-call budget: the cascade is named, not compared
    assert "not compared: cascade @ budget" in router.baseline
    assert set(details["accuracy"]) == set(pool.names) and "sort" in details["accuracy"]["sorter"]
    # the other direction: the cascade is compared, every arm held to the tuned cascade's own budget
    assert "held to the cascade's own budget" in at_cascade.statement and at_cascade.verdict != "uninformative"
    assert {b["name"] for b in at_cascade.baselines} == set(CASCADE_MATCHED)
    # each worker's measured accuracy per family is in the note of every real-worker claim
    assert all("Per worker, held-out accuracy by family" in c.note for c in claims)

    same = planted_pool({n: {f: 0.5 for f in FAMILIES} for n in ("a", "b", "c")})
    same.reward[:] = same.reward[:, :1]  # every worker answers exactly alike: no worker beats another
    assert real_pool.headroom(same) == []
    _, router0, casc0 = real_pool.claims(same, real_pool.run_splits(same, 3, seed=0, **KW), seed=0)[0]
    assert router0.verdict == "uninformative" and "no headroom" in router0.reason
    assert casc0.verdict == "uninformative" and "no headroom" in casc0.reason

    dead = planted_pool({n: {} for n in ("a", "b")})
    comp, *_ = real_pool.claims(dead, real_pool.run_splits(dead, 2, seed=0, **KW), seed=0)[0]
    assert comp.verdict == "uninformative" and "floor" in comp.reason


def test_a_cascade_that_cannot_be_tuned_makes_the_cascade_budget_claim_uninformative(monkeypatch):
    from divelab.orchestration.fugu import matched

    tune = matched.tune_cascade
    # no configuration fits any budget (as when a worker's costs are missing): only the unbudgeted tuning fails
    monkeypatch.setattr(matched, "tune_cascade", lambda a, r, c, budget: None if budget == np.inf else tune(a, r, c, budget))
    pool = planted_pool(SPECIALISTS)
    splits = real_pool.run_splits(pool, 2, seed=0, **KW)
    assert all(s.cascade_budget is None and "fugu @ cascade budget" not in s.arms for s in splits)
    competence, router, at_cascade = real_pool.claims(pool, splits, seed=0)[0]
    assert router.verdict != "uninformative"  # the existing comparison is unchanged
    assert at_cascade.verdict == "uninformative" and "could not be tuned" in at_cascade.reason


# -- serving: the routed pool end to end -----------------------------------------------------------------

def test_routed_pool_answers_through_divelab_serve_workers(tmp_path):
    """Two tiny workers behind `divelab serve` (its real app, in-process on free ports), the router trained on
    their recorded pool, `divelab fugu serve`'s app in front; an OpenAI client gets a routed answer."""
    pytest.importorskip("uvicorn")
    openai = pytest.importorskip("openai")
    from divelab.orchestration.fugu.serve import create_app, routed_pool
    from divelab.serving.server import BackgroundServer
    from divelab.serving.server.runner import build_app

    tok = char_tokenizer()
    dirs = {}
    for i, name in enumerate(("w-arith", "w-lex")):
        d = tmp_path / name
        tiny_llama(tok, seed=i).save_pretrained(d)
        tok.save_pretrained(d)
        dirs[name] = d
    pool = planted_pool({"w-arith": {"add": 0.95, "mul": 0.95, "sort": 0.9}, "w-lex": {"reverse": 0.95, "count": 0.95}})
    pool.info["config"] = {"specs": [{"name": "w-arith", "system": None}, {"name": "w-lex", "system": "Be brief."}]}
    servers = {n: BackgroundServer(build_app(str(d), drafter="none", max_batch=2)).start() for n, d in dirs.items()}
    try:
        router = routed_pool({n: s.base_url for n, s in servers.items()}, pool, seed=0, n_features=64, cma_iters=4,
                             popsize=8)
        with BackgroundServer(create_app(router, "fugu")) as front:
            client = openai.OpenAI(base_url=front.base_url, api_key="none", max_retries=0)
            got = {}
            for q in ("What is 12 + 30?", "Reverse the word 'sakana'."):
                r = client.chat.completions.create(model="fugu", messages=[{"role": "user", "content": q}],
                                                   max_tokens=4)
                assert isinstance(r.choices[0].message.content, str) and r.usage.completion_tokens > 0
                got[q] = r.model_extra["fugu"]
        assert got["What is 12 + 30?"]["worker"] == "w-arith" and got["Reverse the word 'sakana'."]["worker"] == "w-lex"
        assert all(v["cost"] > 0 for v in got.values())  # priced with the pool's measured prices
    finally:
        for s in servers.values():
            s.stop()
    with pytest.raises(ValueError, match="no URL for worker"):
        routed_pool({"w-arith": "http://127.0.0.1:1/v1"}, pool)


def test_real_workers_run_only_in_the_full_plan():
    from divelab.orchestration.fugu.reproduce import PLANS

    assert PLANS["full"].real_workers == real_workers.PoolConfig()
    assert PLANS["quick"].real_workers is None and PLANS["smoke"].real_workers is None
    assert PLANS["full"].train_runs >= 2


def test_the_specialists_and_the_tiny_worker_share_one_adaptation_but_not_its_targets_or_steps():
    cfg = real_workers.PoolConfig(seed=5)
    smol = real_workers._adapt_config(real_workers.SPECS[0], cfg)
    tiny = real_workers._adapt_config(real_workers.SPECS[-1], cfg)
    assert smol == dataclasses.replace(cfg.adapt, seed=5)
    assert all(int(m.split(".")[1]) in real_workers.SMOL_TOP_LAYERS for m in smol.lora.target_modules)
    assert tiny.steps == cfg.tiny_steps and tiny.lora.target_modules == real_workers.PROJECTIONS
    assert (tiny.lr, tiny.batch_size, tiny.lora.r, tiny.seed) == (smol.lr, smol.batch_size, smol.lora.r, 5)
