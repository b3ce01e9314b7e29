"""E169 with a real diagnostician: SBFL shortlist + repository evidence + SmolLM2-135M-Instruct picking one
(:mod:`.lm_diagnostician`), untuned and LoRA-adapted on training bugs disjoint from the test bugs, measured
against the strongest non-LLM localizer on the same tasks.

>>> from divelab.coding.sherloc.real_diagnostician import DiagConfig, measure     # doctest: +SKIP
>>> claims, details = measure(tasks, repos, {"ochiai": ochiai_preds, ...}, DiagConfig(), seed=0)
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from divelab import stats, verdicts
from divelab.claims import Claim, Kind
from divelab.coding.sherloc.benchmark import Repo, Task, build_benchmark
from divelab.coding.sherloc.finding import Location
from divelab.coding.sherloc.lm_diagnostician import (
    Candidate,
    gold_index,
    locations,
    pick,
    shortlist,
    training_rows,
    training_tasks,
)
from divelab.coding.sherloc.scoring import GRANS, hit
from divelab.comparisons import against_strongest
from divelab.lm.adapt import LLAMA_PROJECTIONS, AdaptConfig, LoraSpec, top_layer_modules
from divelab.progress import track

MODEL_LABEL = "SmolLM2-135M-Instruct"
SRC = "arXiv 2606.24820; week-in-review E169"


DIAGNOSTICIAN_SFT = AdaptConfig(method="sft", steps=36, lr=3e-4, batch_size=4, max_length=1024,
                                lora=LoraSpec(r=16, alpha=32, target_modules=top_layer_modules(8)), save_every=10,
                                activation_checkpointing=False)
"""The diagnostician's LoRA SFT, sized so both adapters train in about 15 minutes on one CPU core (its ``seed``
is replaced per SFT run)."""


@dataclass(frozen=True)
class DiagConfig:
    """SmolLM2 as the diagnostician: the shortlist, the training bugs and the LoRA SFT runs."""

    k: int = 5
    """functions in the SBFL shortlist the model picks from"""
    n_train_per_repo: int = 30
    """training bugs planted per package (another seed; functions holding a test bug are then left out)"""
    train_seed_offset: int = 1000
    """the training bugs are planted with seed + this (the test bugs with seed)"""
    n_orders: int = 3
    """each training bug becomes this many rows, its candidates listed in different shuffled orders"""
    adapt: AdaptConfig = DIAGNOSTICIAN_SFT
    """each adapter's LoRA SFT (steps, learning rate, batch, adapter shape: the attention and MLP projections of
    the top layers only); its ``seed`` is replaced by ``seed * 100 + s`` for SFT run ``s``"""
    adapt_seeds: tuple[int, ...] = (0, 1)
    """independent SFT runs (the training replication): each adapter picks on every test task"""

    def adapt_config(self, seed: int) -> AdaptConfig:
        """The SFT run with this seed."""
        return replace(self.adapt, seed=seed)

    @property
    def n_top_layers(self) -> int:
        """How many top layers carry adapters."""
        return len(self.adapt.lora.target_modules) // len(LLAMA_PROJECTIONS)


def _picks(model: Any, tok: Any, tasks: list[Task], cands: list[list[Candidate]], seed: int, label: str
           ) -> tuple[list[int], list[list[float]]]:
    from divelab.threads import torch_threads

    chosen, lps = [], []
    with torch_threads(1):
        for t, c in zip(track(tasks, f"SHERLOC: {label} picking"), cands, strict=True):
            i, lp = pick(model, tok, t, c, seed)
            chosen.append(i)
            lps.append(lp)
    return chosen, lps


def collect(tasks: list[Task], repos: dict[str, Repo], cfg: DiagConfig, seed: int) -> dict[str, Any]:
    """Shortlists, training rows, the adapters and every arm's pick per test task (cached adapters)."""
    from divelab.lm import real
    from divelab.lm.adapt import adapt

    t0 = time.perf_counter()
    cands = [shortlist(t, repos[t.repo], cfg.k) for t in track(tasks, "SHERLOC: SBFL shortlists and evidence")]
    planted = build_benchmark(sorted({t.repo for t in tasks}), cfg.n_train_per_repo, seed=seed + cfg.train_seed_offset)
    train = training_tasks(planted, tasks)
    model, tok = real.load_real()
    rows, row_tasks = training_rows(tok, train, repos, cfg.k, cfg.n_orders, seed)
    if not rows:
        raise RuntimeError("no training bug has its buggy function in its SBFL shortlist: nothing to adapt on")
    arms: dict[str, list[int]] = {}
    logprobs: dict[str, list[list[float]]] = {}
    arms["untuned"], logprobs["untuned"] = _picks(model, tok, tasks, cands, seed, f"untuned {MODEL_LABEL}")
    del model
    adapters = []
    for s in cfg.adapt_seeds:
        ad = adapt(real.SMOLLM2, rows, cfg.adapt_config(seed * 100 + s), name=f"SHERLOC diagnostician SFT seed {s}")
        m, tk = ad.load(merge=True, base_loader=real.load_real)
        arms[f"adapted-{s}"], logprobs[f"adapted-{s}"] = _picks(m, tk, tasks, cands, seed, f"adapted {MODEL_LABEL} {s}")
        adapters.append({"seed": s, "key": ad.key, "train_s": ad.record.get("train_s"), "n_rows": ad.record["n_rows"],
                         "final_loss": next((r["loss"] for r in reversed(ad.record.get("log", [])) if "loss" in r),
                                            None)})
    return {"cands": cands, "arms": arms, "logprobs": logprobs, "adapters": adapters,
            "n_train_planted": len(planted), "n_train_kept": len(train), "n_rows": len(rows),
            "train_task_ids": sorted(set(row_tasks)), "collect_s": round(time.perf_counter() - t0, 1)}


def _gate(ceiling: float, first_share: float, gold_first_share: float) -> str:
    """Why the pick comparison cannot speak ("" when it can)."""
    if ceiling == 0:
        return "the buggy function is never in the SBFL shortlist (a ceiling of 0): no pick can find it"
    if gold_first_share == 1:
        return ("whenever the buggy function is shortlisted it is Ochiai's first candidate: the shortlist leaves no "
                "room to beat Ochiai")
    if first_share == 1:
        return "the model picked Ochiai's first candidate on every task (a silent set-up: it only copies Ochiai)"
    return ""


def claims_from(tasks: list[Task], got: dict[str, Any], others: dict[str, list[list[Location]]], cfg: DiagConfig,
                seed: int) -> tuple[list[Claim], dict[str, Any]]:
    """The claims: the adapted model's pick vs the strongest non-LLM localizer at each granularity, and its
    competence on the shortlist against the untuned model and Ochiai's own order."""
    n = len(tasks)
    cands, arms = got["cands"], got["arms"]
    adapted = [a for a in arms if a.startswith("adapted")]
    gidx = [gold_index(t, c) for t, c in zip(tasks, cands, strict=True)]
    inlist = np.array([g is not None for g in gidx])
    ceiling = float(inlist.mean())
    gold_first = float(np.mean([g == 0 for g in gidx if g is not None])) if inlist.any() else 0.0
    first_share = float(np.mean([arms[a][i] == 0 for a in adapted for i in range(n)]))
    clusters = [t.repo for t in tasks]
    why = _gate(ceiling, first_share, gold_first)
    hits = {a: {g: np.array([hit(locations(cands[i], arms[a][i]), t, g, 1) for i, t in enumerate(tasks)], float)
                for g in GRANS} for a in arms}
    ours = {g: np.mean([hits[a][g] for a in adapted], axis=0) for g in GRANS}  # mean over the SFT replicates
    base = {name: {g: np.array([hit(p, t, g, 1) for p, t in zip(pl, tasks, strict=True)], float) for g in GRANS}
            for name, pl in others.items()}
    table = {"adapted (mean over SFT seeds)": {g: float(ours[g].mean()) for g in GRANS},
             **{a: {g: float(hits[a][g].mean()) for g in GRANS} for a in arms},
             **{b: {g: float(v[g].mean()) for g in GRANS} for b, v in base.items()}}
    compared = {b: v for b, v in base.items() if b != "spectrum"}  # spectrum is another diagnostician, not a baseline
    setup = (f"{n} test tasks ({', '.join(f'{k}: {v}' for k, v in Counter(clusters).items())}); shortlist: Ochiai's "
             f"first {cfg.k} functions; LoRA SFT (top {cfg.n_top_layers} layers, {cfg.adapt.steps} steps) on "
             f"{got['n_rows']} rows from {got['n_train_kept']} training bugs (planted with seed "
             f"{seed + cfg.train_seed_offset}, functions holding a test bug left out), {len(adapted)} SFT seed(s); "
             f"the shortlist holds the buggy function on {ceiling:.2f} of tasks; the adapted model picks Ochiai's "
             f"first on {first_share:.2f}")
    out: list[Claim] = []
    for g in GRANS:
        cmp = against_strongest(ours[g], {b: v[g] for b, v in compared.items()}, better="higher",
                                clusters=clusters, seed=seed)
        best, eff, (lo, hi) = cmp.strongest, cmp.effect, cmp.ci
        out.append(Claim(
            statement=f"SHERLOC with a real diagnostician (SBFL shortlist + repository evidence + {MODEL_LABEL}, "
                      f"LoRA-adapted on disjoint training bugs) beats the strongest other localizer at {g}-level "
                      "acc@1",
            paper_value="SHERLOC beats localization baselines (e.g. +18.3 pp over non-fine-tuned 32B)",
            measured=float(ours[g].mean()), ci=stats.proportion_ci(int(round(ours[g].sum())), n),
            kind=Kind.EMPIRICAL, source=SRC, unit="acc@1", baseline=f"{best}: {compared[best][g].mean():.3f}",
            **cmp.claim_fields(),
            ruling=verdicts.uninformative(why) if why else verdicts.direction(eff, (lo, hi), expected_sign=1,
                                                                              paper=0.183),
            note=f"paired difference vs {best}: {eff:+.3f} [{lo:+.3f}, {hi:+.3f}] (tasks clustered by package); "
                 f"smallest effect detected at 80% power {cmp.mde:.3f}; all: "
                 + ", ".join(f"{k} {v[g]:.2f}" for k, v in table.items()) + f"; {setup}"))
    # competence: on tasks whose shortlist holds the buggy function, how often each pick is right
    sub = np.flatnonzero(inlist)
    right = {a: np.array([float(arms[a][i] == gidx[i]) for i in sub]) for a in arms}
    mine = np.mean([right[a] for a in adapted], axis=0) if sub.size else np.array([])
    alts = {"untuned SmolLM2": right["untuned"], "Ochiai's order": np.array([float(gidx[i] == 0) for i in sub]),
            "chance": np.array([1.0 / len(cands[i]) for i in sub])}
    if sub.size:
        cmp = against_strongest(mine, alts, better="higher", clusters=[clusters[i] for i in sub], seed=seed)
        eff, (lo, hi), best = cmp.effect, cmp.ci, cmp.strongest
        fields = cmp.claim_fields()
        ci = stats.proportion_ci(int(round(mine.sum())), int(sub.size))
    else:
        eff, lo, hi, best, fields, ci = 0.0, 0.0, 0.0, "Ochiai's order", {}, None
    out.append(Claim(
        statement=f"the adapted {MODEL_LABEL} picks the buggy function from the SBFL shortlist more often than the "
                  "strongest alternative pick (untuned model, Ochiai's order, chance)",
        paper_value="(competence of the diagnostician; the paper's reasoning LLM has no such figure)",
        measured=float(mine.mean()) if sub.size else 0.0, ci=ci, kind=Kind.EMPIRICAL, source=SRC,
        unit="pick accuracy when shortlisted", baseline=f"{best}: {float(alts[best].mean()) if sub.size else 0:.3f}",
        **fields,
        ruling=verdicts.uninformative(why) if why else verdicts.direction(
            eff, (lo, hi), expected_sign=1, why="the paper reports no shortlist competence"),
        note=f"on {sub.size} of {n} tasks (the shortlist ceiling {ceiling:.2f}); difference vs {best}: {eff:+.3f} "
             f"[{lo:+.3f}, {hi:+.3f}]; per arm: " + ", ".join(f"{a} {float(r.mean()) if r.size else 0:.2f}"
                                                           for a, r in {**{a: right[a] for a in adapted}, **alts}.items())
             + f"; Ochiai's first holds the bug on {gold_first:.2f} of shortlisted tasks"))
    details = {"model": MODEL_LABEL, "config": asdict(cfg), "n_tasks": n, "acc@1": table,
               "shortlist_ceiling": ceiling, "gold_is_ochiai_first_when_shortlisted": gold_first,
               "adapted_picks_ochiai_first": first_share,
               "competence_when_shortlisted": {a: float(r.mean()) if r.size else None for a, r in right.items()},
               "adapters": got["adapters"], "n_train_planted": got["n_train_planted"],
               "n_train_kept": got["n_train_kept"], "n_rows": got["n_rows"], "collect_s": got["collect_s"],
               "per_task": [{"task": t.id, "gold_in_shortlist": gidx[i], **{a: arms[a][i] for a in arms}}
                            for i, t in enumerate(tasks)]}
    return out, details


def measure(tasks: list[Task], repos: dict[str, Repo], others: dict[str, list[list[Location]]], cfg: DiagConfig,
            seed: int = 0) -> tuple[list[Claim], dict[str, Any]]:
    """Collect (shortlists, adaptation, picks) and judge; ``others``: the other localizers' predictions on ``tasks``."""
    if not tasks:
        raise ValueError("measure() needs at least one task")
    return claims_from(tasks, collect(tasks, repos, cfg, seed), others, cfg, seed)


def add_to(rep: Any, cfg: DiagConfig, seed: int, tasks: list[Task], repos: dict[str, Repo],
           preds: dict[str, list[list[Location]]], weight: float = 1.0) -> None:
    """The real-diagnostician claims sized by ``cfg`` (the plan's ``real_diagnostician``), as one cached stage
    (:mod:`divelab.stages`)."""
    from divelab.lm import real
    from divelab.stages import stage

    names = {"sherloc": "spectrum"}
    others = {names.get(k, k): v for k, v in preds.items() if k != "sherloc-heuristic"}
    real.add_claims_at_full(
        rep, True,
        lambda: stage(f"{MODEL_LABEL} diagnostician on SBFL shortlists",
                      lambda: measure(tasks, repos, others, cfg, seed), weight=weight),
        statement=f"SHERLOC with a real diagnostician (SBFL shortlist + repository evidence + {MODEL_LABEL})",
        paper_value="SHERLOC beats localization baselines (e.g. +18.3 pp over non-fine-tuned 32B)", source=SRC,
        details_key="smollm2_diagnostician")
