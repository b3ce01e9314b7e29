"""E172 on an adapted SmolLM2-135M-Instruct: cliffs in its worked solutions, and Cliff-DPO against full-sequence DPO.

1. **Subject.** Untuned, the 135M model rarely solves a two-step word problem in a checkable form, so it is
   adapted (LoRA SFT with :func:`divelab.lm.adapt.adapt`) on worked traces of problems from the *training*
   wordings of :mod:`~divelab.interp.cliff_tokens.word_problems`. Every problem used below comes from the
   *evaluation* wordings, so none can appear in the adaptation data. The adapted model's sampled accuracy on
   the held-out problems is its task competence; outside 20–80 % every later claim is uninformative.
2. **Detection.** Responses to detection problems are sampled; potentials come from N continuations every
   ``every`` tokens, and every cliff span is then localised to one token (:func:`detector.refine`).
   Cliff-del and cliff-keep at each first cliff.
3. **Cliff-DPO vs full-sequence DPO.** Cliff-DPO's pairs are the authors' single-token pairs at the detected
   cliffs (:func:`dpo.cliff_pairs`); full-sequence DPO's are (right, wrong) whole responses to the same
   detection problems; both arms get the same number of pairs and the same trainer (TRL's DPO through
   :func:`divelab.lm.adapt.adapt`, a fresh LoRA on the merged SFT model, which is also the reference). Each arm
   is trained ``dpo_runs`` times (seeds); every run and the SFT start are scored on the same held-out problems
   with the run's sampling seed, and the runs are the units of the interval.

Everything expensive is cached by content (adapters by :mod:`divelab.lm.adapt`, evaluations and detection
here), so a killed or repeated run reuses it.

>>> from divelab.interp.cliff_tokens.adapted import AdaptedConfig, measure   # doctest: +SKIP
>>> claims, details = measure(AdaptedConfig(), seed=0)
"""

from __future__ import annotations

import json
import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from divelab import stats, verdicts
from divelab.cache import atomic_write_bytes, atomic_write_text, entry_path, lock, stable_hash
from divelab.claims import Claim, Kind
from divelab.comparisons import against_strongest
from divelab.interp.cliff_tokens import dpo, dpo_rows
from divelab.interp.cliff_tokens.detector import Detection, cliffs_of, detect, refine
from divelab.interp.cliff_tokens.interventions import cliff_del_keep
from divelab.interp.cliff_tokens.potential import RolloutConfig, Rollouts, sample_traces
from divelab.interp.cliff_tokens.real_llm import MODEL_LABEL, SRC, RealConfig, claims_from
from divelab.interp.cliff_tokens.task import Problem
from divelab.interp.cliff_tokens.word_problems import problem_sets
from divelab.lm.adapt import AdaptConfig, LoraSpec

BASE = "smollm2-135m-instruct"
WINDOW = (0.2, 0.8)
"""Task competence (sampled accuracy on held-out problems) inside which the downstream claims can speak."""
CACHE_KIND = "cliff-tokens-adapted"
DETECT_CHUNK = 4  # detection problems per cached chunk
_VERSION = 1  # bump when what a cached evaluation or detection holds changes


@dataclass(frozen=True)
class AdaptedConfig:
    """The adapted-SmolLM2 study: adaptation, detection and DPO budgets (all single-threaded CPU)."""

    sft_problems: int = 320
    """training-wording problems whose worked traces adapt the model"""
    sft: AdaptConfig = AdaptConfig(method="sft", steps=40, batch_size=8, lr=3e-4, max_length=256, seed=0,
                                   save_every=10, lora=LoraSpec(r=16, alpha=32))
    """the LoRA SFT run that adapts the model (its seed is the run's)"""
    eval_problems: int = 100
    """held-out evaluation-wording problems: competence and every DPO run's accuracy"""
    detect_problems: int = 8
    """evaluation-wording problems (disjoint from the held-out ones) whose responses are searched for cliffs and
    give both DPO arms their pairs"""
    per_problem: int = 2
    """responses sampled per detection problem"""
    seq_samples: int = 6
    """extra responses per detection problem for full-sequence DPO's (right, wrong) pairs (sampling only)"""
    n: int = 16
    """continuations per computed prefix (the paper: 64)"""
    every: int = 3
    """potentials every k response tokens; cliff spans are then localised to one token"""
    top_k: int = 5
    """candidate chosen tokens per cliff (the paper: 10), each kept if its own potential holds"""
    max_new_tokens: int = 48
    """responses and continuations"""
    temperature: float = 0.7
    """sampling temperature of responses, continuations and evaluation"""
    batch_rows: int = 128
    """continuations decoded together (memory, not results)"""
    zero_patience: int = 2
    """stop a trace's rollouts after this many computed prefixes with potential 0"""
    dpo_runs: int = 3
    """DPO runs per arm (seeds): the units of the comparison"""
    dpo: AdaptConfig = AdaptConfig(method="dpo", steps=10, batch_size=4, lr=5e-5, beta=0.1, max_length=256, seed=0,
                                   lora=LoraSpec(r=16, alpha=32))
    """each DPO run, both arms (LoRA; ``batch_size`` pairs a step, ``beta`` the preference temperature); its seed
    is the run's"""


SMOKE = AdaptedConfig(sft_problems=16, sft=replace(AdaptedConfig.sft, steps=2, batch_size=4), eval_problems=6,
                      detect_problems=3, per_problem=2, seq_samples=2, n=4, every=2, top_k=2, max_new_tokens=8,
                      batch_rows=64, dpo_runs=2, dpo=replace(AdaptedConfig.dpo, steps=2, batch_size=2))
"""A seconds-long configuration for tests (on a tiny model double): exercises every path, measures nothing."""


# --- the subject ------------------------------------------------------------------------------------------------


def render(tok: Any, problem: Problem) -> str:
    """The prompt exactly as detection encodes it (the chat template, one user turn, the assistant opened)."""
    return tok.apply_chat_template([{"role": "user", "content": problem.prompt}], tokenize=False,
                                   add_generation_prompt=True)


def sft_rows(tok: Any, cfg: AdaptedConfig, seed: int) -> list[dict[str, str]]:
    """``{prompt, completion}`` rows: training-wording problems, their worked trace and the end-of-turn token."""
    (train,) = problem_sets("train", [cfg.sft_problems], seed=seed + 11)
    return [{"prompt": render(tok, p), "completion": trace + tok.eos_token} for p, trace in train]


def eval_sets(cfg: AdaptedConfig, seed: int) -> tuple[list[Problem], list[Problem]]:
    """``(held_out, detection)``: disjoint evaluation-wording problem sets from one seeded stream."""
    held, det = problem_sets("eval", [cfg.eval_problems, cfg.detect_problems], seed=seed + 12)
    return [p for p, _ in held], [p for p, _ in det]


def in_window(acc: float) -> bool:
    return WINDOW[0] <= acc <= WINDOW[1]


def _cached(key_obj: dict[str, Any], fn: Callable[[], Any], *, binary: bool = False) -> Any:
    """``fn()``'s value stored under a hash of ``key_obj`` (JSON, or pickle when ``binary``)."""
    key = stable_hash({"v": _VERSION, **key_obj})
    path = entry_path(CACHE_KIND, key) / ("value.pkl" if binary else "value.json")
    with lock(path.parent):
        if path.exists():
            return pickle.loads(path.read_bytes()) if binary else json.loads(path.read_text())
        value = fn()
        if binary:
            atomic_write_bytes(path, pickle.dumps(value))
        else:
            atomic_write_text(path, json.dumps(value))
    return value


def evaluate(model: Any, tok: Any, problems: Sequence[Problem], cfg: AdaptedConfig, *, model_key: str,
             seed: int) -> np.ndarray:
    """Per-problem correctness (0/1) of one sampled response each, cached under the model's key."""
    def run() -> dict[str, Any]:
        roll = Rollouts(model, tok, "last-number", RolloutConfig(n=1, temperature=cfg.temperature,
                                                                  max_new_tokens=cfg.max_new_tokens,
                                                                  batch_rows=cfg.batch_rows, seed=seed))
        t0 = time.perf_counter()
        traces = sample_traces(roll, problems, 1, chat=True, seed=seed)
        return {"correct": [int(t.correct) for t in traces], "seconds": time.perf_counter() - t0,
                "texts": [roll.decode(t.response_ids) for t in traces[:8]]}

    key = {"what": "eval", "model": model_key, "problems": [p.prompt for p in problems], "seed": seed,
           "t": cfg.temperature, "max_new": cfg.max_new_tokens}
    return np.array(_cached(key, run)["correct"], dtype=float)


def _loader(base_loader: Callable[[], tuple[Any, Any]] | None) -> Callable[[], tuple[Any, Any]]:
    if base_loader is not None:
        return base_loader

    def load() -> tuple[Any, Any]:
        from divelab.lm import load_model

        return load_model(BASE)

    return load


# --- detection and pairs -----------------------------------------------------------------------------------------


def _detect_and_pair(model: Any, tok: Any, problems: Sequence[Problem], cfg: AdaptedConfig, seed: int
                     ) -> dict[str, Any]:
    """Detection (sparse scan, spans localised), interventions, Cliff-DPO pairs and full-sequence pairs."""
    t0 = time.perf_counter()
    rc = RolloutConfig(n=cfg.n, temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens,
                       batch_rows=cfg.batch_rows, seed=seed)
    det = detect(model, tok, problems, checker="last-number", config=rc, per_problem=cfg.per_problem,
                 every=cfg.every, zero_patience=cfg.zero_patience, chat=True)
    det = refine(det)
    detect_s = time.perf_counter() - t0
    ivs = cliff_del_keep(det)
    t1 = time.perf_counter()
    pairs = dpo.cliff_pairs(det, top_k=cfg.top_k)
    pair_s = time.perf_counter() - t1
    seq_roll = Rollouts(model, tok, "last-number", RolloutConfig(n=1, temperature=cfg.temperature,
                                                                  max_new_tokens=cfg.max_new_tokens,
                                                                  batch_rows=cfg.batch_rows, seed=seed))
    extra = sample_traces(seq_roll, problems, cfg.seq_samples, chat=True, seed=seed + 3)
    seq = dpo.sequence_pairs(list(det.traces) + extra, int(det.rollouts.eos[0]), seed=seed)
    return {"traces": det.traces, "ivs": ivs, "pairs": pairs, "seq_pairs": seq, "cost": vars(det.rollouts.cost),
            "detect_s": detect_s, "pair_s": pair_s, "extra_correct": [t.correct for t in extra]}


DETECTION_FIELDS = ("per_problem", "seq_samples", "n", "every", "top_k", "max_new_tokens", "temperature",
                    "batch_rows", "zero_patience")


def detection_fields(cfg: AdaptedConfig) -> dict[str, Any]:
    """What decides a detection chunk (besides its problems, model and seed): other budgets leave it valid."""
    return {k: getattr(cfg, k) for k in DETECTION_FIELDS}


def _merge(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Detection chunks as one: lists concatenated (interventions re-indexed to the merged traces), costs summed."""
    out: dict[str, Any] = {"traces": [], "ivs": [], "pairs": [], "seq_pairs": [], "extra_correct": [],
                           "cost": {}, "detect_s": 0.0, "pair_s": 0.0}
    for part in parts:
        offset = len(out["traces"])
        out["ivs"] += [replace(iv, trace=iv.trace + offset) for iv in part["ivs"]]
        for k in ("traces", "pairs", "seq_pairs", "extra_correct"):
            out[k] += list(part[k])
        for k, v in part["cost"].items():
            out["cost"][k] = out["cost"].get(k, 0) + v
        out["detect_s"] += part["detect_s"]
        out["pair_s"] += part["pair_s"]
    return out


def _detection(found: dict[str, Any], model: Any, tok: Any, cfg: AdaptedConfig, seed: int) -> Detection:
    """The cached detection as a :class:`Detection` (its rollouts engine rebuilt on ``model``)."""
    roll = Rollouts(model, tok, "last-number", RolloutConfig(n=cfg.n, temperature=cfg.temperature,
                                                              max_new_tokens=cfg.max_new_tokens,
                                                              batch_rows=cfg.batch_rows, seed=seed))
    for k, v in found["cost"].items():
        setattr(roll.cost, k, v)
    return Detection(found["traces"], cliffs_of(roll, found["traces"]), roll)


# --- the claims --------------------------------------------------------------------------------------------------


def competence_text(label: str, acc: float, ci: tuple[float, float], n: int) -> str:
    return (f"competence of {label}: {acc:.2f} [{ci[0]:.2f}, {ci[1]:.2f}] sampled accuracy on {n} held-out "
            f"problems (informative window {WINDOW[0]:.0%}-{WINDOW[1]:.0%})")


def competence_claim(label: str, acc: float, ci: tuple[float, float], n: int, untuned: float | None) -> Claim:
    """The set-up check every other claim rests on: the adapted model solves part, not none or all."""
    return Claim(statement=f"{label}: competence on held-out word problems is inside "
                           f"{WINDOW[0]:.0%}-{WINDOW[1]:.0%} (set-up check)",
                 paper_value="a model that solves part of the problems", measured=acc, ci=ci, kind=Kind.CHECK,
                 source=SRC, baseline="untuned: " + ("not measured" if untuned is None else f"{untuned:.2f}"),
                 ruling=verdicts.outcome(in_window(acc), test=f"sampled accuracy in [{WINDOW[0]}, {WINDOW[1]}]"),
                 note=competence_text(label, acc, ci, n))


def gated(statement: str, paper_value: str, reason: str) -> Claim:
    """A downstream claim that cannot speak (competence outside the window, or too few pairs)."""
    return Claim(statement=statement, paper_value=paper_value, measured=None, kind=Kind.EMPIRICAL, source=SRC,
                 ruling=verdicts.uninformative(reason), note=reason)


DETECTION_STATEMENTS = (("cliffs occur more often in incorrect traces (share with >= 1 cliff, wrong - right)",
                         "more often in incorrect traces"),
                        ("cliff-del beats cliff-keep (pass@N, paired by first cliff)", "pass@64: 1.0 vs 0.71–1.00"),
                        ("the taxonomy: all three cliff types (deterministic / uncertain / sampled-off) occur",
                         "three types"))
DPO_STATEMENT = "Cliff-DPO raises held-out accuracy over the strongest of full-sequence DPO and the SFT start"
DPO_PAPER = "up to +6.6 points over the starting model; trains far fewer positions than full-sequence DPO"


def dpo_claim(label: str, acc: dict[str, np.ndarray], n_pairs: int, cfg: AdaptedConfig, competence: str,
              seed: int) -> Claim:
    """Cliff-DPO against the strongest of full-sequence DPO and the SFT start: t-interval over runs, paired."""
    pts = {k: 100.0 * np.asarray(v, dtype=float) for k, v in acc.items()}
    runs = len(pts["Cliff-DPO"])
    stmt = f"{label}: {DPO_STATEMENT}"
    every = np.concatenate(list(pts.values()))
    if np.all(every == every[0]):
        return gated(stmt, DPO_PAPER, f"every arm and run scored {every[0]:.1f} points: a floor or ceiling. "
                                      f"{competence}")
    cmp = against_strongest(pts["Cliff-DPO"], {k: pts[k] for k in ("full-sequence DPO", "SFT start")},
                            better="higher", interval="t", seed=seed)
    d, lo, hi = stats.paired_diff_ci(pts["Cliff-DPO"], pts["full-sequence DPO"], method="t")
    runs_text = "; ".join(f"{k} " + ", ".join(f"{x:.1f}" for x in v) for k, v in pts.items())
    return Claim(statement=stmt, paper_value=DPO_PAPER, measured=cmp.effect, ci=cmp.ci, unit="points",
                 kind=Kind.EMPIRICAL, source=SRC,
                 baseline=f"Cliff-DPO - full-sequence DPO {d:+.1f} [{lo:+.1f}, {hi:+.1f}] points",
                 ruling=verdicts.direction(cmp.effect, cmp.ci, training_runs=runs,
                                           why="the paper compares with the starting model; ours is judged "
                                               "against the strongest arm"),
                 note=(f"{runs} DPO runs per arm ({n_pairs} pairs each, {cfg.dpo.steps} steps x {cfg.dpo.batch_size}, "
                       f"lr {cfg.dpo.lr}, beta {cfg.dpo.beta}, LoRA r {cfg.dpo.lora.r}); accuracy per run (points): "
                       f"{runs_text}; 95% t-interval over runs, paired by run; {runs} runs detect "
                       f"{cmp.mde:.1f} points with 80% power. {competence}"),
                 **cmp.claim_fields())


# --- the study ---------------------------------------------------------------------------------------------------


def measure(cfg: AdaptedConfig | None = None, *, seed: int = 0, base: str = BASE,
            base_loader: Callable[[], tuple[Any, Any]] | None = None, label: str = MODEL_LABEL,
            tiny: dict[str, Any] | None = None) -> tuple[list[Claim], dict[str, Any]]:
    """The whole study: untuned accuracy, SFT (if needed), competence, detection, the DPO comparison."""
    from divelab.lm.adapt import adapt

    cfg = cfg or AdaptedConfig()
    load_base = _loader(base_loader)
    t_start = time.perf_counter()
    timing: dict[str, float] = {}
    held, det_problems = eval_sets(cfg, seed)
    run_seeds = [seed * 1000 + r for r in range(cfg.dpo_runs)]

    # 1. the untuned model, and the adaptation it needs
    t0 = time.perf_counter()
    model, tok = load_base()
    untuned = float(evaluate(model, tok, held, cfg, model_key=f"{base}:untuned", seed=run_seeds[0]).mean())
    timing["untuned_eval"] = time.perf_counter() - t0
    sft_record: dict[str, Any] = {"used": not in_window(untuned)}
    if sft_record["used"]:
        t0 = time.perf_counter()
        rows = sft_rows(tok, cfg, seed)
        sft_cfg = replace(cfg.sft, seed=seed)
        adapter = adapt(base, rows, sft_cfg, name="cliff-tokens: SFT", base_loader=lambda: (model, tok))
        losses = [h["loss"] for h in adapter.record["log"] if "loss" in h]
        sft_record |= {"adapter": adapter.key, "rows": len(rows), "train_s": adapter.record["train_s"],
                       "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None,
                       "config": asdict(sft_cfg)}
        subject_key = f"{base}+sft:{adapter.key}"

        def load_subject() -> tuple[Any, Any]:
            return adapter.load(merge=True, base_loader=load_base)

        subject_label = f"{label} + SFT adapter {adapter.key[:8]}"
        timing["sft"] = time.perf_counter() - t0
    else:
        subject_key, load_subject, subject_label = f"{base}:untuned", load_base, f"{label} (untuned)"
    model, tok = load_subject()

    # 2. task competence, before anything else
    t0 = time.perf_counter()
    sft_acc = {r: evaluate(model, tok, held, cfg, model_key=subject_key, seed=s) for r, s in enumerate(run_seeds[:1])}
    acc0 = float(sft_acc[0].mean())
    ci0 = stats.proportion_ci(int(sft_acc[0].sum()), sft_acc[0].size)
    timing["competence_eval"] = time.perf_counter() - t0
    competence = competence_text(subject_label, acc0, ci0, len(held))
    claims = [competence_claim(subject_label, acc0, ci0, len(held), untuned)]
    details: dict[str, Any] = {"model": label, "subject": subject_label, "config": asdict(cfg), "sft": sft_record,
                               "untuned_accuracy": untuned, "competence": {"accuracy": acc0, "ci": list(ci0),
                                                                           "problems": len(held)},
                               "tiny": tiny, "timing_s": timing}
    if not in_window(acc0):
        why = f"uninformative: {competence} is outside the window, so cliffs and DPO gains cannot show"
        claims += [gated(f"{subject_label}: {s}", p, why) for s, p in DETECTION_STATEMENTS]
        claims.append(gated(f"{subject_label}: {DPO_STATEMENT}", DPO_PAPER, why))
        timing["total"] = time.perf_counter() - t_start
        return claims, details

    # 3. detection on problems disjoint from the held-out ones
    t0 = time.perf_counter()
    # in chunks of a few problems, each cached, so an interrupted run keeps what it finished
    chunks = [det_problems[i:i + DETECT_CHUNK] for i in range(0, len(det_problems), DETECT_CHUNK)]
    found = _merge([_cached({"what": "detect", "model": subject_key, "problems": [p.prompt for p in chunk],
                             "cfg": detection_fields(cfg), "seed": seed, "chunk": j},
                            lambda chunk=chunk, j=j: _detect_and_pair(model, tok, chunk, cfg, seed * 1000 + j),
                            binary=True) for j, chunk in enumerate(chunks)])
    timing["detection"] = time.perf_counter() - t0
    det = _detection(found, model, tok, cfg, seed)
    real_cfg = RealConfig(problems=len(det_problems), per_problem=cfg.per_problem, n=cfg.n, every=cfg.every,
                          max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, batch_rows=cfg.batch_rows,
                          zero_patience=cfg.zero_patience)
    det_claims, det_details = claims_from(det, found["ivs"], real_cfg, label=subject_label, tiny=tiny, seed=seed)
    for c in det_claims:  # every cliff span was localised to one token (refine), so no span's last token is meant
        note = c.note.replace(f"; with every = {cfg.every} the classified token is the last of its span", "")
        c.note = f"{note}; cliff spans localised to one token; {competence}"
    claims += det_claims
    details["detection"] = {k: v for k, v in det_details.items() if k not in ("model", "tiny")}
    details["detection"] |= {"detect_s": found["detect_s"], "pair_s": found["pair_s"]}

    # 4. the pairs, cut to one budget, and the DPO runs
    cliff_rows, dropped = dpo_rows.cliff_rows(found["pairs"], tok)
    seq_rows = dpo_rows.sequence_rows(found["seq_pairs"], tok, det.rollouts.eos)
    cliff_rows, seq_rows = dpo_rows.equal_budget(cliff_rows, seq_rows, seed=seed)
    details["pairs"] = {"cliff_found": len(found["pairs"]), "cliff_dropped_retokenisation": dropped,
                        "sequence_found": len(found["seq_pairs"]), "per_arm": len(cliff_rows),
                        "positions": {"Cliff-DPO": 2 * len(cliff_rows),
                                      "full-sequence DPO": sum(len(tok(r["chosen"])["input_ids"])
                                                               + len(tok(r["rejected"])["input_ids"]) + 2
                                                               for r in seq_rows)}}
    stmt = f"{subject_label}: {DPO_STATEMENT}"
    if len(cliff_rows) < 2:
        claims.append(gated(stmt, DPO_PAPER, f"failed set-up: {len(cliff_rows)} pairs per arm ({len(found['pairs'])} "
                                             f"at cliffs, {len(found['seq_pairs'])} whole-response); need >= 2. "
                                             f"{competence}"))
        timing["total"] = time.perf_counter() - t_start
        return claims, details
    t0 = time.perf_counter()
    acc: dict[str, list[float]] = {"Cliff-DPO": [], "full-sequence DPO": [], "SFT start": []}
    runs: list[dict[str, Any]] = []
    for r, s in enumerate(run_seeds):
        start = sft_acc[r] if r in sft_acc else evaluate(model, tok, held, cfg, model_key=subject_key, seed=s)
        acc["SFT start"].append(float(start.mean()))
        for arm, rows in (("Cliff-DPO", cliff_rows), ("full-sequence DPO", seq_rows)):
            dcfg = replace(cfg.dpo, seed=s)
            ad = adapt(subject_key, rows, dcfg, name=f"cliff-tokens: {arm} run {r + 1}", base_loader=load_subject)
            tuned, _ = ad.load(merge=True, base_loader=load_subject)
            a = evaluate(tuned, tok, held, cfg, model_key=f"{subject_key}+dpo:{ad.key}", seed=s)
            acc[arm].append(float(a.mean()))
            runs.append({"arm": arm, "run": r, "adapter": ad.key, "accuracy": float(a.mean()),
                         "train_s": ad.record["train_s"]})
            del tuned
    timing["dpo"] = time.perf_counter() - t0
    details["dpo_runs"] = runs
    claims.append(dpo_claim(subject_label, {k: np.array(v) for k, v in acc.items()}, len(cliff_rows), cfg,
                            competence, seed))
    timing["total"] = time.perf_counter() - t_start
    return claims, details


def add_to(rep: Any, cfg: AdaptedConfig, seed: int = 0, tiny: dict[str, Any] | None = None) -> None:
    """Add the adapted-SmolLM2 claims of the run ``cfg`` sizes (:func:`divelab.lm.real.add_claims_at_full`), as one
    resumable stage; its adapters, evaluations and detection are cached by content besides."""
    from divelab.lm import real
    from divelab.stages import stage

    real.add_claims_at_full(rep, True, lambda: stage(f"{MODEL_LABEL} adapted: SFT, cliffs, Cliff-DPO",
                                                     lambda: measure(cfg, seed=seed, tiny=tiny), weight=3.0),
                            statement=f"{MODEL_LABEL} (adapted): cliffs and Cliff-DPO on multi-step word problems",
                            paper_value="see the paper's claims", source=SRC, details_key="smollm2_adapted")
