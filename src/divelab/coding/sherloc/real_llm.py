"""E169 on a real LLM: the SHERLOC loop driven by SmolLM2-135M-Instruct on a slice of the benchmark.

The same loop, tools, case-file schema and self-recovery layer as the reproduction
(:class:`divelab.coding.sherloc.agent.SherlocLocalizer`), with the reasoning model running in
process (:class:`divelab.chat.hf_local.HFChatModel`, greedy decoding, tools described in the system
message, short generations, a small turn cap). A 135M instruct model without reasoning rarely
writes a valid case file: that is measured, not repaired. What the loop returns (a model-written
case file, or the lexical fallback when the model never produced one) is scored with the same
acc@1 as every other localizer, on the same tasks, beside BM25, Ochiai SBFL and the programmatic
diagnostician.

>>> from divelab.coding.sherloc.real_llm import RealConfig, run_slice        # doctest: +SKIP
>>> claims, details = run_slice(RealConfig(per_repo=2), seed=0)
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from divelab import stats, verdicts
from divelab.chat.types import ChatModel
from divelab.claims import Claim, Kind
from divelab.coding.sherloc.agent import SherlocLocalizer
from divelab.coding.sherloc.baselines import bm25_localize, ochiai_localize
from divelab.coding.sherloc.benchmark import Repo, Task
from divelab.coding.sherloc.finding import Location
from divelab.coding.sherloc.policy import HeuristicDiagnostician
from divelab.coding.sherloc.scoring import GRANS, hit
from divelab.coding.sherloc.tools import RepoTools
from divelab.comparisons import against_strongest
from divelab.progress import track
from divelab.stages import stage

MODEL_LABEL = "SmolLM2-135M-Instruct"
SRC = "arXiv 2606.24820; week-in-review E169"
RECOVERY_PATHS = ("reask", "tool_error", "forced_finalise", "fallback")


@dataclass(frozen=True)
class RealConfig:
    """SmolLM2 driving the SHERLOC loop: the slice of tasks and the loop's budget per task."""

    per_repo: int = 1
    """tasks per repository in the slice (the first ones, in benchmark order)"""
    max_turns: int = 3
    """the loop's turn cap (then one forced-finalise turn)"""
    max_retries: int = 1
    """re-asks in a row after an invalid case file"""
    max_new_tokens: int = 96
    """tokens the model may write per turn"""
    max_context: int = 2048
    """prompt tokens the model reads (left-truncated, system prompt kept)"""


def slice_indices(tasks: list[Task], per_repo: int) -> list[int]:
    """The first ``per_repo`` tasks of each repository, in benchmark order (deterministic)."""
    if per_repo < 1:
        raise ValueError(f"per_repo must be >= 1, got {per_repo}")
    seen: Counter = Counter()
    out = []
    for i, t in enumerate(tasks):
        if seen[t.repo] < per_repo:
            seen[t.repo] += 1
            out.append(i)
    return out


def measure(chat: ChatModel, tasks: list[Task], repos: dict[str, Repo], cfg: RealConfig, seed: int = 0,
            others: dict[str, list[list[Location]]] | None = None) -> tuple[list[Claim], dict[str, Any]]:
    """Run the loop with ``chat`` on ``tasks``; claims + details (acc@1 per localizer, recovery counts).

    ``others`` maps a localizer name to its predictions for the same ``tasks``; when None, BM25,
    Ochiai and the programmatic diagnostician are run here.
    """

    if not tasks:
        raise ValueError("measure() needs at least one task")
    t0 = time.time()
    preds: dict[str, list[list[Location]]] = {"smollm2": []}
    compute_others = others is None
    if compute_others:
        others = {"bm25": [], "ochiai": [], "heuristic": []}
    rec: Counter = Counter()
    per_task = []
    for task in track(tasks, f"SHERLOC: {MODEL_LABEL} localizing"):
        repo = repos[task.repo]
        files = repo.with_task(task)
        res = SherlocLocalizer(chat, max_turns=cfg.max_turns, max_retries=cfg.max_retries,
                               max_tokens=cfg.max_new_tokens).localize(
            RepoTools(repo.root, {task.file: task.mutated}), task.issue)
        preds["smollm2"].append(res.locations)
        rec.update(res.recoveries)
        per_task.append({"task": task.id, "turns": res.turns, "tool_calls": res.tool_calls, "tokens": res.tokens,
                         "recoveries": dict(res.recoveries), "fallback": res.fallback,
                         "top": [res.locations[0].file, res.locations[0].symbol,
                                 list(res.locations[0].span or [])] if res.locations else None,
                         "gold": [task.file, task.function, list(task.span)]})
        if compute_others:
            others["bm25"].append(bm25_localize(files, task.issue))
            others["ochiai"].append(ochiai_localize(files, task.spectrum, len(task.failing_tests)))
            h = SherlocLocalizer(HeuristicDiagnostician()).localize(RepoTools(repo.root, {task.file: task.mutated}),
                                                                   task.issue)
            others["heuristic"].append(h.locations)
    preds.update(others)
    n = len(tasks)
    hits = {name: {g: np.array([hit(p, t, g, 1) for p, t in zip(pl, tasks, strict=True)], float) for g in GRANS}
            for name, pl in preds.items()}
    table = {name: {g: float(h[g].mean()) for g in GRANS} for name, h in hits.items()}
    n_fallback = sum(1 for r in per_task if r["fallback"])
    runs_fired = {p: sum(1 for r in per_task if r["recoveries"].get(p)) for p in RECOVERY_PATHS}
    model_only = {g: float(np.mean([hits["smollm2"][g][i] for i, r in enumerate(per_task) if not r["fallback"]]))
                  if n_fallback < n else 0.0 for g in GRANS}
    details = {"model": MODEL_LABEL, "config": asdict(cfg), "n_tasks": n, "tasks_per_repo": dict(Counter(t.repo for t in tasks)),
               "acc@1": table, "acc@1_model_written_only": model_only, "n_valid_case_files": n - n_fallback,
               "recoveries": dict(rec), "runs_where_path_fired": runs_fired,
               "mean_turns": float(np.mean([r["turns"] for r in per_task])),
               "mean_tool_calls": float(np.mean([r["tool_calls"] for r in per_task])),
               "tokens": int(sum(r["tokens"] for r in per_task)), "per_task": per_task,
               "wall_s": round(time.time() - t0, 1)}
    cfgs = (f"{n} tasks ({', '.join(f'{k}: {v}' for k, v in details['tasks_per_repo'].items())}), greedy, "
            f"{cfg.max_new_tokens} new tokens/turn, max_turns {cfg.max_turns} (+1 forced), "
            f"{cfg.max_retries} re-ask(s), context {cfg.max_context} tokens")

    claims: list[Claim] = []
    frac = n_fallback / n
    lo, hi = stats.proportion_ci(n_fallback, n)
    claims.append(Claim(
        statement=f"{MODEL_LABEL} (no reasoning) driving the SHERLOC loop mostly ends without a valid case file",
        paper_value="thinking off: 87% of runs without valid output", measured=frac, ci=(lo, hi),
        kind=Kind.EMPIRICAL, source=SRC, unit="fraction of runs ending in the lexical fallback",
        ruling=verdicts.value(frac, paper=0.87, tol=0.15, tol_kind="abs", ci=(lo, hi)),
        note=f"{n_fallback}/{n} runs fell back; recovery paths fired (runs): {runs_fired}; events: {dict(rec)}; "
             f"{cfgs}"))
    for g in ("file", "function"):
        cmp = against_strongest(hits["smollm2"][g], {b: hits[b][g] for b in others}, better="higher", seed=seed)
        best, eff, (elo, ehi) = cmp.strongest, cmp.effect, cmp.ci
        claims.append(Claim(
            statement=f"{MODEL_LABEL} driving the loop localizes worse ({g}-level acc@1) than the strongest "
                      "non-LLM localizer on the same slice",
            paper_value="thinking off: recall@1 74% -> 10%", measured=table["smollm2"][g],
            ci=stats.proportion_ci(int(hits["smollm2"][g].sum()), n), kind=Kind.EMPIRICAL, source=SRC,
            unit="acc@1", baseline=f"{best}: {table[best][g]:.3f}", **cmp.claim_fields(),
            ruling=verdicts.direction(eff, (elo, ehi), expected_sign=-1,
                                      why="the paper compares thinking on vs off, not LLM vs non-LLM"),
            note=f"paired difference vs {best}: {eff:+.3f} [{elo:+.3f}, {ehi:+.3f}]; all: "
                 + ", ".join(f"{k} {v[g]:.2f}" for k, v in table.items()) + f"; {cfgs}"))
    claims.append(Claim(
        statement=f"with {MODEL_LABEL} the self-recovery layer still ends every run with a non-empty case file",
        paper_value="a lightweight self-recovery layer handles invalid outputs and tool errors",
        measured=float(sum(rec.values())), kind=Kind.CHECK, source=SRC, unit="recovery events",
        ruling=verdicts.outcome(all(len(p) > 0 for p in preds["smollm2"]),
                                test="every SmolLM2-driven localization returned a non-empty case file"),
        note=f"events: {dict(rec)}"))
    return claims, details


def load_chat(cfg: RealConfig) -> ChatModel:
    from divelab.chat.hf_local import HFChatModel
    from divelab.lm import load_model

    model, tok = load_model("smollm2-135m-instruct")
    return HFChatModel(model, tok, max_new_tokens=cfg.max_new_tokens, max_context=cfg.max_context)


def run_slice(cfg: RealConfig, seed: int = 0, repos: tuple[str, ...] | None = None, n_per_repo: int = 4,
              chat: ChatModel | None = None) -> tuple[list[Claim], dict[str, Any]]:
    """Stand-alone: ``n_per_repo`` planted bugs in each of ``repos`` (default: every package; cached), sliced, with SmolLM2 (or ``chat``)."""
    from divelab.coding.sherloc.benchmark import build_benchmark, open_repo
    from divelab.coding.sherloc.repos import ALL_REPOS
    from divelab.threads import torch_threads

    names = list(repos or ALL_REPOS)
    tasks = build_benchmark(names, n_per_repo, seed=seed)
    idx = slice_indices(tasks, cfg.per_repo)
    opened = {name: open_repo(name) for name in names}
    with torch_threads(1):
        chat = chat or load_chat(cfg)
        return measure(chat, [tasks[i] for i in idx], opened, cfg, seed)


def add_to(rep: Any, cfg: RealConfig, seed: int, tasks: list[Task], repos: dict[str, Repo],
           preds: dict[str, list[list[Location]]], weight: float = 1.0) -> None:
    """Add the SmolLM2 claims sized by ``cfg`` (the plan's ``real_llm``; see
    :func:`divelab.lm.real.add_claims_at_full`), as one stage of the run (:mod:`divelab.stages`) of the given
    weight.

    ``preds`` are the reproduction's own localizers' predictions over ``tasks`` (the slice reuses them).
    """
    from divelab.lm import real
    from divelab.threads import torch_threads

    def run() -> tuple[list[Any], dict[str, Any]]:
        idx = slice_indices(tasks, cfg.per_repo)
        # the reproduction's loop reads the spectrum; its rule-based diagnostician without it is "heuristic"
        names = {"sherloc": "spectrum", "sherloc-heuristic": "heuristic"}
        others = {names.get(k, k): [v[i] for i in idx] for k, v in preds.items()}
        with torch_threads(1):
            return measure(load_chat(cfg), [tasks[i] for i in idx], repos, cfg, seed, others)

    real.add_claims_at_full(rep, True, lambda: stage(f"{MODEL_LABEL} on a slice", run, weight=weight),
                            statement=f"{MODEL_LABEL} driving the SHERLOC loop on a slice",
                            paper_value="thinking off: recall@1 74% -> 10%, 87% of runs without valid output",
                            source=SRC)
