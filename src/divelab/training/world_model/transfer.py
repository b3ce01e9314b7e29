"""Unified use on public data: does world-modeling training make an agent better at function calling on a
benchmark whose data it never saw (BFCL v4)?

The paper trains an agent on next-observation prediction (tool and other agentic domains) and reports about
+9 points on an unseen function-calling benchmark. Here, with SmolLM2-135M-Instruct:

1. **The agent.** As it comes, SmolLM2-135M-Instruct calls no function on BFCL's questions (a floor that
   could not speak), so it is first given the tool-call format with a LoRA adapter on synthetic tasks of ours
   (:mod:`divelab.envs.tool_tasks`: thirty executable families, several names each; :func:`divelab.lm.tool_rows.call_rows`).
   Nothing of BFCL is in that data.
2. **World modeling.** On top of the agent (its adapter merged), a fresh adapter learns to predict what a call
   returns (:func:`divelab.lm.tool_rows.result_rows`: the conversation up to the tool's turn, then the tool's
   JSON result, on tasks apart from the agent's). Fitted ``runs`` times with different seeds and data.
3. **The sham** (negative control): the same fit on the same rows with the results shuffled among them (same
   texts, same format, no dynamics to learn), once per run.
4. **Measured**: every model on a seeded BFCL v4 sample through the chat protocol (:mod:`divelab.envs.bfcl_run`,
   BFCL's AST rules), and, as the positive control that world modeling was learned at all, each world-model and
   sham adapter's prediction of held-out tool results (the share of each result's fields written exactly).

The claim is world model minus the strongest of the agent and the sham, per run (the replication unit), with
the sham-minus-agent difference as the negative control.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from divelab import stats, verdicts
from divelab.claims import Claim, Kind, not_checkable

STATEMENT = ("world-modeling training transfers to an unseen function-calling benchmark: BFCL v4 accuracy of the "
             "SmolLM2 agent after tool-result prediction vs the strongest of the agent and a shuffled-result sham")
PAPER = "about +9 points on a function-calling benchmark never seen in training"
SOURCE = "arXiv 2606.24597 (second-hand); BFCL v4 (bfcl-eval 2026.3.23)"
CHECK_STATEMENT = ("positive control: the world-model adapter predicts held-out tool results better than the "
                   "shuffled-result sham (result fields written exactly)")


@dataclass(frozen=True)
class TransferPlan:
    """Sizes of the transfer experiment (the full plan's by default). Sized by CPU before any transfer result: a
    LoRA step of 8 rows (about 200 tokens each) takes 10-25 s on one thread, a batch of 8 BFCL answers a few
    seconds, so the whole experiment takes about as long as the SmolLM2 world model it runs beside. A trial of the
    agent alone (40 format steps) answered some BFCL simple questions right: above the floor, so the claim can speak."""

    format_tasks: int = 480
    """synthetic tasks whose calls teach the agent the tool-call format (one pass at most)"""
    format_steps: int = 40
    """LoRA steps of the agent's format adapter"""
    world_tasks: int = 320
    """synthetic tasks whose results the world-model adapter learns to predict (each run its own)"""
    world_steps: int = 20
    """LoRA steps of each world-model and sham adapter"""
    world_tools: int = 2
    """most tools offered in a world-model row (the result is the call's; fewer distractors keep rows short)"""
    runs: int = 3
    """world-model and sham fits (seeds): the replication unit"""
    batch_size: int = 8
    """rows per LoRA step"""
    lr: float = 5e-4
    """peak learning rate of every adapter (set before any run; not tuned)"""
    top_layers: int = 8
    """LoRA rank 16 on the attention and MLP projections of the top this-many layers"""
    bfcl: tuple[tuple[str, int], ...] = (("simple", 70), ("multiple", 20), ("irrelevance", 10))
    """public questions asked of every model (category, count; a seeded sample)"""
    held_out: int = 48
    """synthetic held-out tasks for the agent's own competence and the result-prediction control"""
    max_new_tokens: int = 64
    """longest reply"""
    gen_batch: int = 8
    """questions decoded together"""

    def adapt_config(self, steps: int, seed: int) -> Any:
        from divelab.lm.adapt import AdaptConfig, LoraSpec, top_layer_modules

        return AdaptConfig(method="sft", steps=steps, lr=self.lr, batch_size=self.batch_size, max_length=384,
                           seed=seed, lora=LoraSpec(r=16, alpha=32, target_modules=top_layer_modules(self.top_layers)),
                           save_every=20, activation_checkpointing=False)


SMOKE = TransferPlan(format_tasks=4, format_steps=1, world_tasks=4, world_steps=1, runs=1, batch_size=2, top_layers=1,
                     bfcl=(("simple", 2), ("irrelevance", 1)), held_out=3, max_new_tokens=12, gen_batch=4)

# data seeds: the agent's format tasks, each run's world tasks and the held-out tasks never overlap
_FORMAT_SEED, _WORLD_SEED, _HELD_OUT_SEED = 0, 100, 900
SALT = 167  # this experiment's own draw of BFCL questions, apart from other experiments' with the same seed


def _tokenizer() -> Any:
    from transformers import AutoTokenizer

    from divelab.lm import real

    return AutoTokenizer.from_pretrained(real.ensure_converted(), local_files_only=True)


def fit_agent(tp: TransferPlan, seed: int, tok: Any) -> Any:
    """The agent's format adapter on SmolLM2 (fitted once, then read from the content cache)."""
    from divelab.envs.tool_tasks import tasks
    from divelab.lm.adapt import adapt
    from divelab.lm.real import SMOLLM2
    from divelab.lm.tool_rows import call_rows

    rows = call_rows(tasks(tp.format_tasks, seed * 1000 + _FORMAT_SEED), tok)
    return adapt(SMOLLM2, rows, tp.adapt_config(tp.format_steps, seed), name="world model transfer: agent format")


def fit_world(agent: Any, tok: Any, tp: TransferPlan, seed: int, run: int, sham: bool) -> Any:
    """A world-model (or, with ``sham``, a shuffled-result) adapter fitted on top of the merged agent."""
    from divelab.envs.tool_tasks import tasks
    from divelab.lm.adapt import adapt
    from divelab.lm.real import SMOLLM2, load_real
    from divelab.lm.tool_rows import result_rows

    data = tasks(tp.world_tasks, seed * 1000 + _WORLD_SEED + run, max_tools=tp.world_tools)
    rows = result_rows(data, tok, shuffle_seed=run if sham else None)
    return adapt(f"{SMOLLM2}+agent:{agent.key}", rows, tp.adapt_config(tp.world_steps, seed * 100 + run),
                 name=f"world model transfer: {'sham' if sham else 'world model'} run {run + 1}",
                 base_loader=lambda: agent.load(merge=True, base_loader=load_real))


def _chat(model: Any, tok: Any, tp: TransferPlan) -> Any:
    from divelab.chat.hf_local import HFChatModel

    return HFChatModel(model, tok, max_new_tokens=tp.max_new_tokens)


def _own_competence(chat: Any, items: Sequence[Any], tp: TransferPlan) -> list[int]:
    """1 per held-out synthetic task answered right: the expected call (name and arguments), or no call where
    none fits."""
    from divelab.chat.types import Message

    out: list[int] = []
    for i in range(0, len(items), tp.gen_batch):
        part = items[i:i + tp.gen_batch]
        replies = chat.complete_many([[Message("user", t.question)] for t in part],
                                     tools_each=[list(t.tools) for t in part])
        for t, r in zip(part, replies, strict=True):
            calls = r.message.tool_calls
            out.append(int(not calls) if t.call is None else
                       int(len(calls) == 1 and calls[0].name == t.call.name and calls[0].arguments == t.call.arguments))
    return out


def _fields_right(text: str, want: dict[str, Any]) -> float:
    """Share of the true result's fields the predicted JSON has with the same value (0 when it does not parse)."""
    try:
        got = json.loads(text.strip())
    except json.JSONDecodeError:
        return 0.0
    if not isinstance(got, dict) or not want:
        return 0.0
    return sum(k in got and got[k] == v for k, v in want.items()) / len(want)


def _result_match(model: Any, tok: Any, items: Sequence[Any], tp: TransferPlan) -> list[float]:
    """Per held-out task with a call: the share of its result's fields the model writes exactly (the structure of
    the next observation and its values; a shuffled-result sham learns neither for a given call)."""
    from divelab.lm.tool_rows import result_rows
    from divelab.training.world_model.llm_model import hf_generator

    rows = result_rows(items, tok)
    generate = hf_generator(model, tok, tp.max_new_tokens)
    out: list[float] = []
    for i in range(0, len(rows), tp.gen_batch):
        part = rows[i:i + tp.gen_batch]
        out += [_fields_right(text, json.loads(r["completion"]))
                for text, r in zip(generate([r["prompt"] for r in part]), part, strict=True)]
    return out


def _bfcl(model: Any, tok: Any, records: Sequence[Any], tp: TransferPlan, name: str) -> dict[str, Any]:
    from divelab.envs.bfcl_run import ask

    run = ask(_chat(model, tok, tp), records, batch_size=tp.gen_batch, label=f"BFCL questions: {name}")
    return {"correct": [int(c) for c in run.correct], "called": round(run.called(), 4),
            "by_category": {k: round(v, 4) for k, v in run.by_category().items()}, "seconds": round(run.seconds, 1)}


@dataclass(frozen=True)
class Setup:
    """What every arm shares, built once: the BFCL sample, the held-out synthetic tasks, the tokenizer and the
    fitted agent."""

    records: list[Any]
    held_out: list[Any]
    tok: Any
    agent: Any
    fit_s: float


def setup(tp: TransferPlan, seed: int) -> Setup:
    """The shared pieces (the agent fitted, or read back from the content cache)."""
    from divelab.envs import bfcl
    from divelab.envs.tool_tasks import tasks

    t0 = time.time()
    tok = _tokenizer()
    records = bfcl.sample(tp.bfcl, seed, SALT)
    held = tasks(tp.held_out, seed * 1000 + _HELD_OUT_SEED)
    agent = fit_agent(tp, seed, tok)
    return Setup(records, held, tok, agent, round(time.time() - t0, 1))


def measure_agent(tp: TransferPlan, su: Setup) -> dict[str, Any]:
    """The untuned model and the format-adapted agent on the BFCL sample and the held-out synthetic tasks."""
    from divelab.lm.real import load_real

    t0 = time.time()
    out: dict[str, Any] = {"ids": [r.id for r in su.records], "categories": [r.category for r in su.records],
                           "agent_key": su.agent.key, "agent_train_s": su.agent.record.get("train_s")}
    for name, load in (("untuned", load_real), ("agent", lambda: su.agent.load(merge=True, base_loader=load_real))):
        model, tok = load()
        out[name] = {"bfcl": _bfcl(model, tok, su.records, tp, name),
                     "own": _own_competence(_chat(model, tok, tp), su.held_out, tp)}
    out["seconds"] = {"fit": su.fit_s, "total": round(su.fit_s + time.time() - t0, 1)}
    return out


def measure_run(tp: TransferPlan, su: Setup, seed: int, run: int) -> dict[str, Any]:
    """One run: the world-model and the sham adapter, each on the BFCL sample and on held-out tool results."""
    from divelab.lm.real import load_real

    t0 = time.time()
    out: dict[str, Any] = {}
    for arm, sham in (("world", False), ("sham", True)):
        ad = fit_world(su.agent, su.tok, tp, seed, run, sham)
        model, tok = ad.load(merge=True, base_loader=lambda: su.agent.load(merge=True, base_loader=load_real))
        out[arm] = {"bfcl": _bfcl(model, tok, su.records, tp, f"{arm} run {run + 1}"),
                    "results": _result_match(model, tok, su.held_out, tp),
                    "key": ad.key, "train_s": ad.record.get("train_s")}
    out["seconds"] = round(time.time() - t0, 1)
    return out


def _answerable(d: dict[str, Any]) -> list[int]:
    return [i for i, c in enumerate(d["categories"]) if c != "irrelevance"]


def _acc(correct: Sequence[int], keep: Sequence[int]) -> float:
    return float(np.mean([correct[i] for i in keep])) if keep else float("nan")


def claims(agent: dict[str, Any], runs: Sequence[dict[str, Any]], seed: int) -> list[Claim]:
    """The transfer claim and its positive control (see the module docstring)."""
    keep = _answerable(agent)
    n_q, n_runs = len(keep), len(runs)
    acc = {"untuned": _acc(agent["untuned"]["bfcl"]["correct"], keep),
           "agent": _acc(agent["agent"]["bfcl"]["correct"], keep)}
    world = np.array([_acc(r["world"]["bfcl"]["correct"], keep) for r in runs])
    sham = np.array([_acc(r["sham"]["bfcl"]["correct"], keep) for r in runs])
    own = float(np.mean(agent["agent"]["own"]))
    k_agent = int(round(acc["agent"] * n_q))
    lo_a, hi_a = stats.proportion_ci(k_agent, n_q)
    competence = (f"competence: the agent answers {k_agent}/{n_q} answerable BFCL questions ({acc['agent']:.3f} "
                  f"[{lo_a:.3f}, {hi_a:.3f}]), the untuned model {acc['untuned']:.3f}; on held-out tasks of ours the "
                  f"agent is right on {own:.2f}")
    # the positive control: held-out tool results predicted exactly, world model minus sham, per run
    res_w = np.array([np.mean(r["world"]["results"]) for r in runs])
    res_s = np.array([np.mean(r["sham"]["results"]) for r in runs])
    dr, lo_r, hi_r = stats.paired_diff_ci(res_w, res_s) if n_runs > 1 else (float(res_w[0] - res_s[0]),) * 3
    learned = lo_r > 0
    check = Claim(CHECK_STATEMENT, "(a precondition of the transfer claim, not a paper number)", dr,
                  ci=(lo_r, hi_r), unit="share of result fields", kind=Kind.CHECK, source=SOURCE,
                  ruling=verdicts.direction(dr, (lo_r, hi_r), expected_sign=1, training_runs=n_runs,
                                            why="a precondition of ours"),
                  baseline=f"sham {res_s.mean():.3f}; world model {res_w.mean():.3f}",
                  falsifier="held-out results predicted no better than by the sham would show world modeling was "
                            "not learned, and the transfer claim could not speak",
                  replication={"unit": "training runs", "n": n_runs, "clustered_by": ""},
                  note=f"{len(runs[0]['world']['results'])} held-out synthetic tool calls per run; per call, the share of "
                       "its JSON result's fields predicted with the right value (0 when the prediction does not parse); "
                       "paired by run (t-interval).")
    # the claim: world model minus the strongest of the agent (one model) and the sham (per run)
    top = "sham" if round(float(sham.mean()), 4) > round(acc["agent"], 4) else "agent"  # ties go to the agent
    base = sham if top == "sham" else np.full(n_runs, acc["agent"])
    d, lo, hi = stats.paired_diff_ci(world, base) if n_runs > 1 else (float(world[0] - base[0]),) * 3
    c_d, c_lo, c_hi = stats.paired_diff_ci(sham, np.full(n_runs, acc["agent"])) if n_runs > 1 else (
        float(sham[0] - acc["agent"]),) * 3
    floor = max(world.max(), sham.max(), acc["agent"]) == 0
    why_not = ("every model is at the 0 floor on the answerable questions" if floor else
               "" if learned else "the positive control is silent: the world-model adapter predicts held-out tool "
                                  "results no better than the sham, so world modeling was not learned")
    per_q = np.array([[r["world"]["bfcl"]["correct"][i] for i in keep] for r in runs], dtype=float).mean(axis=0)
    mde = stats.mde_two_sample(float(np.std(world - base, ddof=1)), n_runs) if n_runs > 1 else None
    ruling = (verdicts.uninformative(why_not) if why_not else
              verdicts.direction(d, (lo, hi), expected_sign=1, paper=0.09, tol=0.5, training_runs=n_runs,
                                 why="+9 points is a 35B model on another function-calling benchmark",
                                 control=(verdicts.control("the shuffled-result sham, minus the agent", c_d,
                                                           (c_lo, c_hi)) if top == "agent" else
                                          {"none": "the shuffled-result sham is itself the strongest baseline: the "
                                                   "claim is measured against the arm with the dynamics removed"})))
    claim = Claim(STATEMENT, PAPER, d, ci=(lo, hi), unit="share of questions", kind=Kind.EMPIRICAL, source=SOURCE,
                  ruling=ruling, compared_with=top, better="higher",
                  baselines=[{"name": "agent", "value": round(acc["agent"], 4)},
                             {"name": "sham", "value": round(float(sham.mean()), 4)},
                             {"name": "untuned", "value": round(acc["untuned"], 4)}],
                  baseline=f"agent {acc['agent']:.3f}, sham {sham.mean():.3f} (runs {', '.join(f'{x:.3f}' for x in sham)}), "
                           f"untuned {acc['untuned']:.3f}; world model {world.mean():.3f} (runs "
                           f"{', '.join(f'{x:.3f}' for x in world)})",
                  mde=mde,
                  falsifier="BFCL accuracy after world-modeling training no higher than the stronger of the agent before "
                            "it and the shuffled-result sham would refute it; the questions and their scoring are "
                            "BFCL's, the answers the model's",
                  replication={"unit": "training runs", "n": n_runs, "clustered_by": ""},
                  note=f"{n_q} answerable BFCL v4 questions (a seeded sample of simple and multiple), the same for every "
                       f"model, scored by BFCL's AST rules; per run, the world model minus the {top}; t-interval over "
                       f"runs. A question right in every run: {int((per_q == 1).sum())}, in none: "
                       f"{int((per_q == 0).sum())}. {competence}.")
    return [claim, check]


def not_measured(why: str) -> list[Claim]:
    return [not_checkable(STATEMENT, PAPER, why, source=SOURCE),
            not_checkable(CHECK_STATEMENT, "(a precondition of the transfer claim, not a paper number)", why,
                          source=SOURCE, kind=Kind.CHECK)]


def measure(tp: TransferPlan, seed: int) -> dict[str, Any]:
    """The whole experiment in one process: the agent, then each run (adapters and answers are cached by content,
    so a killed run refits nothing it finished)."""
    su = setup(tp, seed)
    return {"agent": measure_agent(tp, su), "runs": [measure_run(tp, su, seed, r) for r in range(tp.runs)]}


def summary(agent: dict[str, Any], runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What the saved run records beside the claims: accuracy per category and model, how often each model's
    replies were read as calls, competence on our own tasks, the positive control per run, times; and the agent's
    competence on the answerable BFCL questions with its Wilson interval (the report's competence column)."""
    keep = _answerable(agent)
    right = sum(agent["agent"]["bfcl"]["correct"][i] for i in keep)
    return {"agent": {k: agent[k] for k in ("agent_key", "agent_train_s", "seconds")},
            "agent_competence": {"accuracy": round(right / len(keep), 4) if keep else None, "n": len(keep),
                                 "ci": [round(x, 4) for x in stats.proportion_ci(right, len(keep))] if keep else None},
            "accuracy": {"untuned": agent["untuned"]["bfcl"]["by_category"],
                         "agent": agent["agent"]["bfcl"]["by_category"],
                         "world": [r["world"]["bfcl"]["by_category"] for r in runs],
                         "sham": [r["sham"]["bfcl"]["by_category"] for r in runs]},
            "called": {"untuned": agent["untuned"]["bfcl"]["called"], "agent": agent["agent"]["bfcl"]["called"],
                       "world": [r["world"]["bfcl"]["called"] for r in runs],
                       "sham": [r["sham"]["bfcl"]["called"] for r in runs]},
            "own_competence": {k: float(np.mean(agent[k]["own"])) for k in ("untuned", "agent")},
            "result_match": {"world": [float(np.mean(r["world"]["results"])) for r in runs],
                             "sham": [float(np.mean(r["sham"]["results"])) for r in runs]},
            "run_seconds": [r["seconds"] for r in runs], "n_questions": len(agent["ids"])}
