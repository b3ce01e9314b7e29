"""E166 on a real LLM: SmolLM2-135M-Instruct as a sixth, priced worker beside the programmatic pool.

On this CPU greedy generation runs at ~1-4 tokens/s under load, so the real model is asked in the
cheaper regime the issue allows: **multiple-choice continuation by log-likelihood**. For each query
the worker scores K candidate answers (the exact answer plus K-1 distractors made by the same
corruption the programmatic workers use for their wrong answers, in a seeded order) as the
assistant's reply to the chat-templated question, and answers the most likely one. Chance is 1/K.
The programmatic workers still answer open-ended, so this regime *favours* SmolLM2. A few open
generations (greedy, short) are recorded too, scored by the same exact-match rule.

Its cost is real: measured wall seconds and real tokenizer tokens per query (prompt once, plus the
candidate tokens scored), priced per 1k tokens at the pool's large-model price (``price``), the
same formula as every other worker. Outcomes are cached like the pool's replays; the router
(SFT + sep-CMA-ES, hashing features) is retrained with six workers and compared, paired per query,
with the five-worker router on the same held-out queries, at free cost and under a cost penalty.

>>> from divelab.orchestration.fugu.real_llm import RealConfig, measure     # doctest: +SKIP
>>> claims, details = measure(RealConfig(), seed=0)
"""

from __future__ import annotations

import io
import json
import random
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from divelab import stats, verdicts
from divelab.cache import atomic_write_bytes, entry_path, stable_hash
from divelab.chat import ChatResponse, Message, ToolSpec, assistant, user
from divelab.claims import Claim, Kind
from divelab.comparisons import against_strongest
from divelab.orchestration.fugu.tasks import Task, make_tasks, score, solve
from divelab.orchestration.fugu.workers import _corrupt, default_pool
from divelab.progress import track

MODEL_LABEL = "SmolLM2-135M-Instruct"
SRC = "arXiv 2606.21228; week-in-review E166"


def candidates(task_prompt: str, k: int = 4, seed: int = 0) -> list[str]:
    """The exact answer plus ``k - 1`` distinct distractors, in an order seeded by the prompt."""
    solved = solve(task_prompt)
    if solved is None:
        raise ValueError(f"not a task prompt this pool can score: {task_prompt!r}")
    ans = solved[1]
    rng = random.Random(stable_hash(["fugu-mc", seed, task_prompt]))
    if ans.isdigit() and int(ans) <= 3:  # small counts: distractors on both sides (0 included), so
        # "pick the smallest number" is not a winning rule
        pool = [str(v) for v in range(0, int(ans) + k) if v != int(ans)]
        return _shuffled([ans] + rng.sample(pool, k - 1), rng)
    out, tries = [ans], 0
    while len(out) < k and tries < 200:
        c = _corrupt(ans if rng.random() < 0.7 or len(out) == 1 else out[-1], rng)
        tries += 1
        if c not in out:
            out.append(c)
    return _shuffled(out, rng)


def _shuffled(xs: list[str], rng: random.Random) -> list[str]:
    rng.shuffle(xs)
    return xs


def heuristic_correct(tasks: list[Task], k: int = 4, seed: int = 0) -> dict[str, np.ndarray]:
    """Per query, whether each model-free rule on the same candidates is right (1.0) or wrong (0.0)."""
    out: dict[str, list[float]] = {"first candidate": [], "smallest number": [], "'1' whenever offered": []}
    for t in tasks:
        c = candidates(t.prompt, k, seed)
        nums = [x for x in c if x.lstrip("-").isdigit()]
        out["first candidate"].append(float(c[0] == t.answer))
        out["smallest number"].append(float(bool(nums) and min(nums, key=int) == t.answer))
        out["'1' whenever offered"].append(float("1" in c and t.answer == "1"))
    return {n: np.array(v) for n, v in out.items()}


BLIND_PROMPT = "Pick one answer."
"""The negative control's question: the candidates are scored after this instead of the task."""


def heuristic_accuracy(tasks: list[Task], k: int = 4, seed: int = 0) -> dict[str, float]:
    """Model-free rules on the same candidates: the first, the smallest number, "1" whenever offered."""
    first = smallest = one = 0
    for t in tasks:
        c = candidates(t.prompt, k, seed)
        first += c[0] == t.answer
        nums = [x for x in c if x.lstrip("-").isdigit()]
        smallest += bool(nums) and min(nums, key=int) == t.answer
        one += "1" in c and t.answer == "1"
    return {"first": first / len(tasks), "smallest_number": smallest / len(tasks), "one_if_offered": one / len(tasks)}


@dataclass
class LoglikChoiceModel:
    """A ``ChatModel`` that answers by picking the most likely of the candidate answers.

    ``model``/``tokenizer``: any HF causal LM with a chat template. The score of a candidate is the
    summed log-probability of its tokens as the assistant reply; ties go to the earlier candidate.
    ``last`` keeps the seconds and token counts of the latest call.
    """

    model: Any
    tokenizer: Any
    k: int = 4
    seed: int = 0
    blind: bool = False
    """score the candidates after :data:`BLIND_PROMPT` instead of the question (the negative control)"""

    def __post_init__(self) -> None:
        if self.k < 2:
            raise ValueError(f"k must be >= 2, got {self.k}")
        self.last: dict[str, float] = {}

    def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None, *,
                 temperature: float | None = None, max_tokens: int | None = None) -> ChatResponse:
        import torch

        if not messages:
            raise ValueError("complete() needs at least one message")
        t0 = time.perf_counter()
        question = [m.content for m in messages if m.role == "user"][-1]
        cands = candidates(question, self.k, self.seed)
        tmpl = ([{"role": "user", "content": BLIND_PROMPT}] if self.blind
                else [{"role": m.role, "content": m.content} for m in messages])
        enc = self.tokenizer.apply_chat_template(tmpl, add_generation_prompt=True, tokenize=True)
        prompt = list(enc["input_ids"] if hasattr(enc, "keys") else enc)
        conts = [list(self.tokenizer.encode(c, add_special_tokens=False)) for c in cands]
        width = len(prompt) + max(len(c) for c in conts)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = torch.full((len(cands), width), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, c in enumerate(conts):
            seq = prompt + c
            ids[i, :len(seq)] = torch.tensor(seq)
            mask[i, :len(seq)] = 1
        with torch.no_grad():
            logp = torch.log_softmax(self.model(input_ids=ids, attention_mask=mask).logits.float(), dim=-1)
        scores = []
        for i, c in enumerate(conts):
            pos = torch.arange(len(prompt) - 1, len(prompt) - 1 + len(c))
            scores.append(float(logp[i, pos, torch.tensor(c)].sum()))
        best = int(np.argmax(scores))
        n_cand = sum(len(c) for c in conts)
        self.last = {"seconds": time.perf_counter() - t0, "prompt_tokens": len(prompt), "candidate_tokens": n_cand}
        return ChatResponse(assistant(f"ANSWER: {cands[best]}"), prompt_tokens=len(prompt), completion_tokens=n_cand)


@dataclass(frozen=True)
class RealConfig:
    """SmolLM2 as a sixth worker: its queries and the router retrained with it (the defaults are the full run)."""

    per_family: int = 20
    """queries per task family (5 families)"""
    k: int = 4
    """candidate answers per query (chance is 1/k)"""
    n_generate: int = 5
    """open greedy generations recorded beside (one per family first)"""
    gen_tokens: int = 16
    """longest open generation"""
    price: float = 8.0
    """price per 1k real tokens: the pool's large-model price"""
    replicates: int = 4
    """recorded outcomes per (query, programmatic worker)"""
    n_features: int = 128
    """hashing dimensions of the routers' prompt features"""
    cma_iters: int = 40
    """sep-CMA-ES iterations of each router's second stage"""
    popsize: int = 20
    """sep-CMA-ES population size"""


def subset(per_family: int, seed: int = 0) -> list[Task]:
    """The first ``per_family`` queries of each family from the reproduction's task stream."""
    out: list[Task] = []
    counts: dict[str, int] = {}
    for t in make_tasks(20 * per_family + 200, seed=seed):
        if counts.get(t.family, 0) < per_family:
            counts[t.family] = counts.get(t.family, 0) + 1
            out.append(t)
    return out


def record_real(chat: LoglikChoiceModel, gen_chat: Any, tasks: list[Task], cfg: RealConfig, *,
                cache_key: object = None) -> dict[str, Any]:
    """Reward, seconds and tokens of the real worker on every task (cached when ``cache_key`` is given)."""
    path = None
    if cache_key is not None:
        key = stable_hash([cache_key, [t.prompt for t in tasks], cfg.k, cfg.n_generate, cfg.gen_tokens])
        path = entry_path("fugu-real", f"{key}.npz")
        if path.exists():
            z = np.load(path, allow_pickle=False)
            return {**{k: z[k] for k in ("reward", "seconds", "tokens")}, "generations": json.loads(str(z["gen"]))}
    reward, seconds, tokens = (np.zeros(len(tasks)) for _ in range(3))
    for q, t in enumerate(track(tasks, f"fugu: {MODEL_LABEL} scoring candidates")):
        resp = chat.complete([user(t.prompt)])
        reward[q] = score(t, resp.message.content)
        seconds[q] = chat.last["seconds"]
        tokens[q] = chat.last["prompt_tokens"] + chat.last["candidate_tokens"]
    gens = []
    if gen_chat is not None:
        picked = {t.family: t for t in reversed(tasks)}
        for t in list(picked.values())[: cfg.n_generate]:
            t0 = time.perf_counter()
            r = gen_chat.complete([user(t.prompt)], max_tokens=cfg.gen_tokens)
            gens.append({"family": t.family, "prompt": t.prompt, "answer": t.answer, "reply": r.message.content,
                         "correct": score(t, r.message.content), "seconds": time.perf_counter() - t0,
                         "tokens": (r.prompt_tokens or 0) + (r.completion_tokens or 0)})
    out = {"reward": reward, "seconds": seconds, "tokens": tokens, "generations": gens}
    if path is not None:
        buf = io.BytesIO()
        np.savez(buf, reward=reward, seconds=seconds, tokens=tokens, gen=json.dumps(gens))
        atomic_write_bytes(path, buf.getvalue())
    return out


def evaluate(tasks: list[Task], real: dict[str, Any], cfg: RealConfig, seed: int = 0,
             blind: dict[str, Any] | None = None) -> tuple[list[Claim], dict]:
    """Retrain the router with the real worker in the pool and compare with the five-worker router."""
    from threadpoolctl import threadpool_limits

    from divelab.orchestration.fugu.features import HashingFeatures
    from divelab.orchestration.fugu.replay import record
    from divelab.orchestration.fugu.router import LinearRouter, best_single

    pool = default_pool(seed)
    prog = record(tasks, pool, cfg.replicates, cache_key=["fugu-e166-real-subset", seed])
    n, r = len(tasks), cfg.replicates
    smol_cost = cfg.price * real["tokens"] / 1000.0
    reward = np.concatenate([prog.reward, np.repeat(real["reward"][:, None, None], r, axis=2)], axis=1)
    cost = np.concatenate([prog.cost, np.repeat(smol_cost[:, None, None], r, axis=2)], axis=1)
    names = prog.workers + ["smollm2-135m"]
    s = len(names) - 1
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    tr, te = np.sort(perm[: n // 2]), np.sort(perm[n // 2:])
    x = HashingFeatures(cfg.n_features)([[user(t.prompt)] for t in tasks])
    rbar, y, c = reward[:, :, 1:].mean(axis=2), reward[:, :, 0], cost[:, :, 0]
    idx = np.arange(len(te))
    mean_cost = c[tr].mean(axis=0)
    cnorm = mean_cost / mean_cost.max()
    with threadpool_limits(1):
        def train(cols: list[int]) -> LinearRouter:
            sft = LinearRouter([names[i] for i in cols], x.shape[1]).fit_sft(x[tr], rbar[tr][:, cols])
            return sft.fit_cma(x[tr], rbar[tr][:, cols], w_div=0.15, iters=cfg.cma_iters, popsize=cfg.popsize,
                               seed=seed)
        five, six = train(list(range(s))), train(list(range(s + 1)))
    rows: dict[str, Any] = {}
    for lam in (0.0, 0.5, 2.0):
        ch5 = five.route(x[te], cnorm[:s], lam)
        ch6 = six.route(x[te], cnorm, lam)
        r5, r6 = y[te][idx, ch5], y[te][idx, ch6]
        rows[f"lambda={lam:g}"] = {
            "success_5": float(r5.mean()), "success_6": float(r6.mean()),
            "cost_5": float(c[te][idx, ch5].mean()), "cost_6": float(c[te][idx, ch6].mean()),
            "share_to_smollm2": float((ch6 == s).mean()),
            "to_smollm2_by_family": {f: int(((ch6 == s) & (np.array([tasks[q].family for q in te]) == f)).sum())
                                     for f in sorted({t.family for t in tasks})},
            "diff": stats.paired_diff_ci(r6, r5)}
    fams = sorted({t.family for t in tasks})
    fam_of = np.array([t.family for t in tasks])
    per_family = {f: float(real["reward"][fam_of == f].mean()) for f in fams}
    heur = {f: heuristic_accuracy([t for t in tasks if t.family == f], cfg.k, seed) for f in fams}
    k_ok, n_all = int(real["reward"].sum()), n
    acc = k_ok / n_all
    lo, hi = stats.proportion_ci(k_ok, n_all)
    b = best_single(rbar[tr])
    oracle_gain = float((y[te].max(axis=1) - y[te][:, :s].max(axis=1)).mean())
    free = rows["lambda=0"]
    d, dlo, dhi = free["diff"]
    sec = real["seconds"]
    cfg_txt = (f"{n} queries ({cfg.per_family} per family x {len(fams)}), {cfg.k} candidates each, "
               f"split {len(tr)}/{len(te)} train/test; {cfg.replicates} replicates of the programmatic workers, the "
               f"greedy real worker repeated across replicates")
    # the model against the strongest model-free rule on the same candidates, paired per query, clustered by family
    rules = {**heuristic_correct(tasks, cfg.k, seed), f"uniform pick (1/{cfg.k})": np.full(n, 1 / cfg.k)}
    cmp = against_strongest(real["reward"], rules, clusters=fam_of, seed=seed)
    ctl = None
    if blind is not None:
        cd, clo, chi = stats.cluster_diff_ci(blind["reward"], rules[cmp.strongest], fam_of, seed=seed)
        ctl = verdicts.control(f"the same scoring with the question replaced by {BLIND_PROMPT!r}, minus "
                               f"{cmp.strongest}", cd, (clo, chi))
    claims = [
        Claim(statement=f"{MODEL_LABEL} as a worker: {cfg.k}-way multiple-choice accuracy by log-likelihood on the "
                        f"pool's tasks, against the strongest model-free rule on the same candidates",
              paper_value="(no paper number: the paper's workers are frontier models)", measured=cmp.effect,
              ci=cmp.ci, unit="accuracy", kind=Kind.EMPIRICAL, source=SRC, **cmp.claim_fields(),
              baseline=f"accuracy {acc:.3f} [{lo:.3f}, {hi:.3f}] (Wilson); chance 1/{cfg.k} = {1 / cfg.k:.2f}; "
                       + "; ".join(f"{r}: {v.mean():.3f}" for r, v in rules.items())
                       + f"; best programmatic worker {names[b]} {y[:, b].mean():.3f} open-ended"
                       + (f"; question removed (control): {blind['reward'].mean():.3f}" if blind is not None else ""),
              ruling=verdicts.direction(cmp.effect, cmp.ci, expected_sign=1, control=ctl,
                                        why="the paper has no small-model worker"),
              falsifier="accuracy no higher than the best rule that never reads the question would refute it: the "
                        "candidates and rules are ours, which candidate the model finds likeliest is not",
              replication={"unit": "queries", "n": n, "clustered_by": "task family"},
              note=f"against {cmp.strongest}; cluster bootstrap over the {len(fams)} task families. {cfg_txt}. Per family: " + ", ".join(f"{f} {v:.2f}" for f, v in per_family.items())
                   + ". Model-free rules on the same candidates (first / smallest number / '1' if offered): "
                   + ", ".join(f"{f} {h['first']:.2f}/{h['smallest_number']:.2f}/{h['one_if_offered']:.2f}" for f, h in heur.items())
                   + f". Cost {sec.mean():.2f} s/query (median {np.median(sec):.2f}, 1 thread, shared 2-core CPU), "
                     f"{real['tokens'].mean():.0f} real tokens/query -> {smol_cost.mean():.3f} units at "
                     f"{cfg.price:g}/1k (general-l {prog.cost[:, 3, 0].mean():.3f}, specialists "
                     f"{prog.cost[:, 0, 0].mean():.3f}). Open greedy generation: "
                     f"{sum(g['correct'] for g in real['generations']):.0f}/{len(real['generations'])} exact."),
        Claim(statement=f"router retrained with {MODEL_LABEL} in the pool vs the five-worker router, held-out "
                        "success at free cost (paired)",
              paper_value="adding a worker helps when it is right where the others are wrong", measured=d,
              ci=(dlo, dhi), unit="success", kind=Kind.EMPIRICAL, source=SRC,
              baseline=f"five-worker router {free['success_5']:.3f} at cost {free['cost_5']:.4f}",
              # each router is trained once: the interval is over test queries of that one run
              ruling=(verdicts.uninformative(f"{MODEL_LABEL} answers no held-out query that all five programmatic "
                                             f"workers miss (oracle headroom {oracle_gain:+.3f}), so adding it cannot "
                                             "raise success; a difference is the retrained router's, not the LLM's")
                      if oracle_gain <= 0 else
                      verdicts.direction(d, (dlo, dhi), expected_sign=1, training_runs=1,
                                         why="no paper number; the paper's pool is frontier models")),
              note=f"six-worker router {free['success_6']:.3f} at cost {free['cost_6']:.4f}; share of test queries "
                   f"sent to {MODEL_LABEL}: " + ", ".join(f"{k} {v['share_to_smollm2']:.2f}" for k, v in rows.items())
                   + f" (cost penalty λ on cost/max cost). Oracle headroom it adds over the five: {oracle_gain:+.3f}."),
    ]
    details = {"config": cfg.__dict__, "per_family_accuracy": per_family, "heuristics_by_family": heur, "accuracy": acc, "ci": [lo, hi],
               "seconds_mean": float(sec.mean()), "seconds_median": float(np.median(sec)),
               "tokens_mean": float(real["tokens"].mean()), "cost_units_mean": float(smol_cost.mean()),
               "routing": {k: {**v, "diff": list(v["diff"])} for k, v in rows.items()},
               "oracle_gain": oracle_gain, "blind_accuracy": None if blind is None else float(blind["reward"].mean()),
               "generations": real["generations"], "n_test": int(len(te))}
    return claims, details


def measure(cfg: RealConfig | None = None, seed: int = 0, *, model: Any = None, tokenizer: Any = None
            ) -> tuple[list[Claim], dict[str, Any]]:
    """Record the real worker (cached) and evaluate the router with it; loads SmolLM2 unless given a model."""
    from divelab.chat.hf_local import HFChatModel
    from divelab.threads import torch_threads

    cfg = cfg or RealConfig()
    label = "smollm2"
    if model is None:
        from divelab.lm import load_model

        model, tokenizer = load_model("smollm2-135m-instruct")
    else:
        label = f"custom-{type(model).__name__}"
    tasks = subset(cfg.per_family, seed)
    chat = LoglikChoiceModel(model, tokenizer, cfg.k, seed)
    gen = HFChatModel(model, tokenizer, max_new_tokens=cfg.gen_tokens) if cfg.n_generate else None
    t0 = time.perf_counter()
    with torch_threads(1):
        real = record_real(chat, gen, tasks, cfg, cache_key=["fugu-real-v3", label, seed])
        blind_chat = LoglikChoiceModel(model, tokenizer, cfg.k, seed, blind=True)
        blind = record_real(blind_chat, None, tasks, replace(cfg, n_generate=0),
                            cache_key=["fugu-real-v3-blind", label, seed])
    claims, details = evaluate(tasks, real, cfg, seed, blind=blind)
    details["wall_s"] = time.perf_counter() - t0
    return claims, details


def add_to(rep: Any, cfg: RealConfig, seed: int = 0) -> None:
    """Add the SmolLM2 claims of the run ``cfg`` sizes (see :func:`divelab.lm.real.add_claims_at_full`)."""
    from divelab.lm import real

    real.add_claims_at_full(rep, True, lambda: measure(cfg, seed),
                            statement=f"{MODEL_LABEL} as a priced worker in the pool",
                            paper_value="(no paper number)", source=SRC)
