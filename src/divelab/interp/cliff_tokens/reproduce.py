"""Reproduction of E172 (arXiv 2606.25524), cliff tokens, on a tiny chain-of-thought model trained from scratch."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, replace

import numpy as np
import torch

from divelab import stats, verdicts
from divelab.claims import Claim, Figure, Kind, Reproduction, not_checkable
from divelab.comparisons import against_strongest
from divelab.interp.cliff_tokens import detection_claims, dpo
from divelab.interp.cliff_tokens.adapted import AdaptedConfig
from divelab.interp.cliff_tokens.cliff_test import DELTA0, cliff_matrix, is_cliff, required_drop
from divelab.interp.cliff_tokens.detector import Detection, detect
from divelab.interp.cliff_tokens.interventions import Intervention, cliff_del_keep
from divelab.interp.cliff_tokens.model import ChainModelSpec, load_chain_model, sampled_accuracy
from divelab.interp.cliff_tokens.potential import RolloutConfig, Rollouts, sample_traces
from divelab.interp.cliff_tokens.real_llm import summarise
from divelab.interp.cliff_tokens.task import chain_problems
from divelab.interp.cliff_tokens.taxonomy import TYPES

SOURCE = "arXiv 2606.25524; week-in-review E172"
PAPER_DETECTION_RATIO = 4000 * 60 / 8  # ~4,000 GPU-hours of detection vs 8 min of Cliff-DPO training
TIMING_WHY = ("the DPO runs are timed in the reproduction, on a machine shared with other jobs: a timing claim "
              "needs repeated, interleaved measurements on an idle machine, with an interval")


@dataclass(frozen=True)
class Plan:
    model: ChainModelSpec
    """the tiny chain-of-thought model: its training steps, corpus and size."""
    sibling: ChainModelSpec | None
    """a second, smaller model for the claim that deterministic cliffs are shared across sizes (None: skip it)."""
    n: int
    """continuations sampled per prefix to estimate a token's potential (the paper: 64)."""
    problems: int
    """in-distribution problems whose responses are searched for cliffs."""
    per_problem: int
    """responses sampled per problem."""
    lengths: tuple[int, ...]
    """operand counts of the in-distribution (detection and held-out evaluation) problems."""
    beyond: int
    """problems longer than the model was trained on (the seam: wrong without any cliff)."""
    beyond_lengths: tuple[int, ...]
    """operand counts of those longer problems."""
    seq_samples: int
    """responses per problem sampled for full-sequence DPO's preference pairs."""
    eval_problems: int
    """held-out problems on which each DPO arm's accuracy is measured."""
    eval_samples: int
    """samples per held-out problem (at temperature 1)."""
    dpo: dpo.DPOConfig
    """the DPO trainer's settings (beta, learning rate, epochs, LoRA rank), shared by every arm."""
    dpo_runs: int
    """DPO training runs per arm (each its own LoRA initialisation, batch order and held-out problems): the units
    of every DPO comparison's interval."""
    batch_rows: int = 512
    """continuations generated per batch while estimating potentials (memory, not results)."""
    real_llm: AdaptedConfig | None = None
    """the adapted SmolLM2-135M-Instruct study beside the tiny model (SFT, cliffs, Cliff-DPO vs full-sequence DPO),
    or None to skip it (tens of minutes of CPU)."""


TINY_DPO = dpo.DPOConfig(beta=0.1, lr=1e-3, epochs=3, batch_size=8, lora_r=8, lora_alpha=16)

# The DPO runs are the replication units: their spread (a DPO run at this learning rate can move accuracy by
# tens of points) dwarfs the sampling noise of a few hundred held-out problems, so each scale spends its budget on
# runs, not on evaluation (quick: what fits its CPU budget; full: enough runs to detect a few points).
PLANS = {
    "smoke": Plan(model=ChainModelSpec(max_steps=40, target_acc=0.0, check_every=20, check_problems=20, corpus=2000),
                  sibling=ChainModelSpec(max_steps=20, target_acc=0.0, check_every=20, check_problems=20,
                                         corpus=2000, overrides=(("hidden_size", 32), ("intermediate_size", 96))),
                  n=8, problems=3, per_problem=2, lengths=(3, 4), beyond=2, beyond_lengths=(8,),
                  seq_samples=4, eval_problems=20, eval_samples=1, dpo=TINY_DPO, dpo_runs=3, batch_rows=256),
    "quick": Plan(model=ChainModelSpec(), sibling=None, n=32, problems=16, per_problem=2, lengths=(5, 6), beyond=6,
                  beyond_lengths=(9, 10), seq_samples=8, eval_problems=300, eval_samples=2, dpo=TINY_DPO,
                  dpo_runs=12, batch_rows=256),
    "full": Plan(model=ChainModelSpec(), sibling=ChainModelSpec(overrides=(("hidden_size", 32),
                                                                           ("intermediate_size", 96))),
                 n=64, problems=60, per_problem=2, lengths=(4, 5, 6), beyond=30, beyond_lengths=(9, 10),
                 seq_samples=8, eval_problems=500, eval_samples=2, dpo=TINY_DPO, dpo_runs=60, batch_rows=1024,
                 real_llm=AdaptedConfig()),
}


def _acc(model, tok, problems, plan: Plan, seed: int) -> np.ndarray:
    return np.array(sampled_accuracy(model, tok, problems, seed=seed, samples=plan.eval_samples))


def _reached(meta: dict) -> str:
    """The stopping check's accuracy (a model cached before it was recorded has none)."""
    if meta.get("accuracy") is None:
        return ""
    return f": {meta['accuracy']:.2f} on {meta['check_problems']} held-out training-length problems"


def _pts(x: float) -> float:
    return 100.0 * x


def run(plan: Plan, seed: int) -> Reproduction:
    rep = Reproduction(system="cliff-tokens", title="Cliff tokens: where a reasoning solution tips into failure",
                       scale="", seed=seed)
    rep.claims += _claims_the_test(plan.n)
    # the model, and cliffs detected in its own sampled responses
    model, tok, meta = load_chain_model(plan.model)
    cfg = RolloutConfig(n=plan.n, max_new_tokens=72, batch_rows=plan.batch_rows, seed=seed)
    problems = chain_problems(plan.problems, plan.lengths, seed=100 + seed)
    det = detect(model, tok, problems, checker="chain", config=cfg, per_problem=plan.per_problem)
    detect_s = det.rollouts.cost.seconds
    rep.setup = (f"A {meta['params']:,}-parameter Llama-style divelab LM trained from scratch on a running-sum-mod-10 "
                 f"chain of thought ({plan.model.train_lengths} operands), stopped at sampled accuracy "
                 f">= {plan.model.target_acc} (step {meta['steps']}{_reached(meta)}). {len(det.traces)} responses to "
                 f"{plan.problems} "
                 f"problems with {plan.lengths} operands, sampled at T = 1; potentials from N = {plan.n} continuations "
                 f"at every token (paper: N = 64). Cliff-DPO with LoRA r = {plan.dpo.lora_r}, beta = {plan.dpo.beta}, "
                 f"lr = {plan.dpo.lr} (a tiny model needs a far larger lr than the paper's 1e-6).")

    rep.claims += _claims_cliffs_in_wrong_traces(det, seed)
    iv = cliff_del_keep(det)
    rep.claims += _claims_interventions(iv, plan.n)
    rep.claims += _claims_taxonomy(det)
    dpo_claims, dpo_details = _claims_cliff_dpo(model, tok, det, problems, detect_s, plan, seed)
    rep.claims += dpo_claims
    rep.claims += _claims_beyond_the_model(model, tok, cfg, det, plan, seed)
    rep.claims += _claims_scale(det, plan, seed)

    rep.details = {**dpo_details, "cliffs": det.table(), "model_steps": meta["steps"],
                   "cost": vars(det.rollouts.cost), "summary": summarise(det, iv)}
    rep.figures.append(_figure(det))
    if plan.real_llm is not None:  # SmolLM2-135M-Instruct beside the tiny model
        from divelab.interp.cliff_tokens import adapted

        adapted.add_to(rep, plan.real_llm, seed, tiny=rep.details.get("summary"))
    return rep


def _claims_the_test(n: int) -> list[Claim]:
    """The cliff test itself, at the paper's N = 64 and at this run's N."""
    ok = True
    for nn in sorted({64, n}):
        direct = np.array([[is_cliff(a, b, nn) for b in range(nn + 1)] for a in range(nn + 1)])
        ok &= bool((cliff_matrix(nn) == direct).all())
    d50, d90 = required_drop(0.5, 64), required_drop(0.9, 64)
    ok = bool(ok and d50 > d90 > DELTA0)
    return [Claim(statement="the precomputed 65x65 decision matrix equals the z-test formula, and the "
                            "required drop is larger near p = 0.5 than near p = 0.9 (both above delta0 = 0.1)",
                  paper_value="delta0 = 0.1, alpha = 0.05, unpooled SE", measured=f"{d50:.3f} at 0.5, {d90:.3f} at 0.9",
                  kind=Kind.CHECK, source=SOURCE,
                  ruling=verdicts.outcome(ok, test="matrix == formula for all k pairs; drop(0.5) > drop(0.9) > 0.1"))]


def _claims_cliffs_in_wrong_traces(det: Detection, seed: int) -> list[Claim]:
    """Cliffs concentrate in wrong traces."""
    return [detection_claims.wrong_vs_right(det, source=SOURCE, seed=seed)]


def _claims_interventions(iv: list[Intervention], n: int) -> list[Claim]:
    """Cliff-del (drop the first cliff token) and cliff-keep (keep it), both resampled: pass@N."""
    if not iv:
        return [not_checkable("cliff-del vs cliff-keep", "1.0 vs 0.71–1.00", "no cliff was found")]
    pdel = np.array([i.pass_del for i in iv])
    pkeep = np.array([i.pass_keep for i in iv])
    lo, hi = stats.proportion_ci(int(pdel.sum()), pdel.size)
    claims = [Claim(statement=f"cliff-del (drop the first cliff token, resample) recovers pass@{n}",
                    paper_value="pass@64 = 1.0", measured=float(pdel.mean()), ci=(lo, hi),
                    kind=Kind.BY_CONSTRUCTION, source=SOURCE,
                    ruling=verdicts.value(float(pdel.mean()), paper=1.0, tol=0.05, tol_kind="abs", ci=(lo, hi)),
                    note="resampling from the prefix whose potential the test required to be high: with "
                         f"p_(t-1) > 0.1 + 1.645 SE, pass@{n} fails only with probability <= 0.9^{n}")]
    lo, hi = stats.proportion_ci(int(pkeep.sum()), pkeep.size)
    claims.append(Claim(statement=f"cliff-keep (keep the cliff token, resample after it) recovers pass@{n} only partly",
                        paper_value="0.71–1.00", measured=float(pkeep.mean()), ci=(lo, hi), kind=Kind.EMPIRICAL,
                        source=SOURCE, baseline=f"cliff-del {pdel.mean():.2f}",
                        ruling=verdicts.value(float(pkeep.mean()), paper=(0.71, 1.0), tol=0.1, tol_kind="abs",
                                              ci=(lo, hi)),
                        # cliff-del is ~1 by construction, so "del beats keep" would repeat this measurement
                        note=f"{len(iv)} first cliffs, fresh continuations; cliff-del − cliff-keep = "
                             f"{pdel.mean() - pkeep.mean():+.2f} (paper 0–0.29)"))
    return claims


def _claims_taxonomy(det: Detection) -> list[Claim]:
    """The three cliff types (deterministic / uncertain / sampled-off) and their shares: responses and continuations
    are sampled at T = 1 from the distribution the types are read from, so the test cannot speak here."""
    kinds = Counter(c.kind for c in det.cliffs)
    shares = {k: kinds.get(k, 0) / max(1, len(det.cliffs)) for k in TYPES}
    return [detection_claims.taxonomy(det, on_policy=True,
                                      paper_value="three types, by entropy (H_b(0.99) = 0.056 nats) and greedy rank",
                                      measured_text=", ".join(f"{k} {v:.2f}" for k, v in shares.items())
                                      + f" of {len(det.cliffs)}", note="see docs/systems/cliff-tokens.md",
                                      source=SOURCE)]


def _dpo_runs(model, tok, arms: dict[str, list], plan: Plan, seed: int) -> dict:
    """Every DPO arm trained ``plan.dpo_runs`` times from the same start, interleaved run by run.

    Run ``r`` draws its own LoRA initialisation, dropout and batch order (DPO seed) and its own held-out problems
    and samples, shared by every arm of that run and by the starting model: a run is one replicate of the whole
    train-then-evaluate pipeline, so an interval over runs covers the training run and the problems alike."""
    acc: dict[str, list[float]] = {"starting model": [], **{k: [] for k in arms}}
    secs: dict[str, list[float]] = {k: [] for k in arms}
    for r in range(plan.dpo_runs):
        eval_p = chain_problems(plan.eval_problems, plan.lengths, seed=900 + seed + 1000 * r)
        acc["starting model"].append(float(_acc(model, tok, eval_p, plan, seed + 7 + r).mean()))
        for arm, pairs in arms.items():
            res = dpo.train_dpo(model, pairs, replace(plan.dpo, seed=plan.dpo.seed + 1000 * seed + r))
            acc[arm].append(float(_acc(res.model, tok, eval_p, plan, seed + 7 + r).mean()))
            secs[arm].append(res.seconds)
    return {"accuracy": {k: np.array(v) for k, v in acc.items()}, "train_s": secs}


def _dpo_verdicts(acc: dict[str, np.ndarray], n_pairs: dict[str, int], plan: Plan, seed: int) -> list[Claim]:
    """Cliff-DPO against the stronger of the starting model and full-sequence DPO, with equal-count random-token DPO
    (detection removed) as the negative control: t-intervals over the DPO runs, paired by run."""
    runs = len(acc["cliff"])
    pts = {k: _pts(v) for k, v in acc.items()}
    cmp = against_strongest(pts["cliff"], {k: pts[k] for k in ("starting model", "full-sequence")},
                            better="higher", interval="t", seed=seed)
    g0 = float(np.mean(pts["cliff"] - pts["starting model"]))
    gs, gs_lo, gs_hi = stats.paired_diff_ci(pts["cliff"], pts["full-sequence"], method="t")
    cd, clo, chi = stats.paired_diff_ci(pts["random-token"], pts[cmp.strongest], method="t")
    where = (f"{runs} DPO runs per arm, each on its own {plan.eval_problems} held-out problems x {plan.eval_samples} "
             "samples at T = 1; 95% t-interval over runs, paired by run")
    claims = [Claim(statement="Cliff-DPO raises accuracy over the stronger of the starting model and full-sequence DPO",
                    paper_value="up to +6.6 points over the starting model", measured=cmp.effect, ci=cmp.ci,
                    unit="points", kind=Kind.EMPIRICAL, source=SOURCE,
                    baseline=f"over the starting model {g0:+.1f} points; over full-sequence DPO {gs:+.1f} [{gs_lo:+.1f}, {gs_hi:+.1f}] points "
                             f"({n_pairs['full-sequence']} whole-response pairs)",
                    ruling=verdicts.direction(cmp.effect, cmp.ci,
                                              paper=(0.0, 6.6) if cmp.strongest == "starting model" else None,
                                              tol=3.0, tol_kind="abs", training_runs=runs,
                                              why="the paper's +6.6 is over the starting model",
                                              control=verdicts.control(
                                                  "random-token DPO (as many single-token pairs at random positions "
                                                  "of wrong responses: no detection), minus the same baseline",
                                                  cd, (clo, chi))),
                    falsifier="Had Cliff-DPO's held-out accuracy, over the DPO runs, been no higher than both the "
                              "starting model's and full-sequence DPO's on the same problems and samples, the claim "
                              "would fail; the arms differ only in their preference pairs.",
                    replication={"unit": "DPO training runs (each with its own held-out problems)", "n": runs,
                                 "clustered_by": ""},
                    note=f"{n_pairs['cliff']} single-token pairs; accuracy per run: Cliff-DPO "
                         f"{_runs_text(acc['cliff'])}, full-sequence {_runs_text(acc['full-sequence'])}, starting "
                         f"model {_runs_text(acc['starting model'])}, random-token {_runs_text(acc['random-token'])} "
                         f"({n_pairs['random-token']} pairs); {where}. {_power_note(cmp, pts)}",
                    **cmp.claim_fields())]
    return claims


def _runs_text(a: np.ndarray) -> str:
    return f"{a.mean():.3f} (" + ", ".join(f"{x:.3f}" for x in a) + ")"


def _power_note(cmp, pts: dict[str, np.ndarray]) -> str:
    """What this many runs can detect: the comparison's detectable effect, from the per-run differences."""
    return f"{pts['cliff'].size} runs detect a difference of {cmp.mde:.1f} points with 80% power"


def _claims_cliff_dpo(model, tok, det: Detection, problems, detect_s: float, plan: Plan,
                      seed: int) -> tuple[list[Claim], dict]:
    """Cliff-DPO vs the starting model, full-sequence DPO and random-token DPO, each trained ``plan.dpo_runs``
    times; positions and compute spent. Returns the claims and what goes to ``details``."""
    claims: list[Claim] = []
    c0 = det.rollouts.cost.seconds
    pairs = dpo.cliff_pairs(det, top_k=10)
    pair_s = det.rollouts.cost.seconds - c0
    details: dict = {"pairs": dict(Counter(p.kind for p in pairs))}
    # full-sequence DPO pairs from more responses to the same problems (sampling only, no potentials)
    seq_roll = Rollouts(model, tok, "chain", RolloutConfig(n=1, max_new_tokens=72, batch_rows=1024, seed=seed))
    t_s = time.perf_counter()
    seq_traces = sample_traces(seq_roll, problems, plan.seq_samples, seed=seed + 3)
    seq_sample_s = time.perf_counter() - t_s
    details["setup_timing_s"] = {"detection": detect_s, "chosen_potentials": pair_s,
                                 "sequence_sampling": seq_sample_s}
    seq_pairs = dpo.sequence_pairs(seq_traces, tok.eos_token_id, seed=seed)
    rand_pairs = dpo.random_token_pairs(model, det.traces, max(1, len(pairs)), seed=seed)
    if len(pairs) < 2 or not seq_pairs:
        return [not_checkable("Cliff-DPO vs full-sequence DPO", "up to +6.6 points",
                              f"too few preference pairs ({len(pairs)} at cliffs, {len(seq_pairs)} whole-response)")
                ], details
    arms = {"cliff": pairs, "full-sequence": seq_pairs, "random-token": rand_pairs}
    # which cliff types help: two more arms, trained in the same runs, when both groups have enough pairs
    det_pairs = [p for p in pairs if p.kind == "deterministic"]
    other_pairs = [p for p in pairs if p.kind in ("uncertain", "sampled-off")]
    by_type = len(det_pairs) >= 4 and len(other_pairs) >= 4
    if by_type:
        arms |= {"deterministic-only": det_pairs, "uncertain + sampled-off": other_pairs}
    out = _dpo_runs(model, tok, arms, plan, seed)
    acc, secs = out["accuracy"], out["train_s"]
    details["base_accuracy"] = acc["starting model"].tolist()
    details["dpo"] = {k: {"accuracy": acc[k].tolist(), "pairs": len(v), "positions": dpo.positions_trained(v),
                          "train_s": secs[k]} for k, v in arms.items()}
    claims += _dpo_verdicts(acc, {k: len(v) for k, v in arms.items()}, plan, seed)
    pos = {k: dpo.positions_trained(v) for k, v in arms.items()}
    ratio = pos["full-sequence"] / max(1, pos["cliff"])
    claims.append(Claim(statement="positions trained: full-sequence DPO / Cliff-DPO",
                        paper_value="~5.8M / ~33k = 176x", measured=ratio, unit="x", kind=Kind.BY_CONSTRUCTION,
                        source=SOURCE,
                        ruling=verdicts.value(ratio, paper=5.8e6 / 33e3, tol=0.5, exact=True),  # a count, not a sample
                        note=f"{pos['full-sequence']} vs {pos['cliff']} positions; our "
                             "responses are ~25 tokens, GSM8K's are hundreds, so the ratio scales with length"))
    t_seq, t_cliff = float(np.mean(secs["full-sequence"])), float(np.mean(secs["cliff"]))
    claims.append(not_checkable("training wall-clock: full-sequence DPO / Cliff-DPO", "112 / 8 min = 14x",
                                f"{TIMING_WHY} (this run: mean of {len(secs['cliff'])} runs {t_seq:.2f} s vs "
                                f"{t_cliff:.2f} s, {t_seq / max(1e-9, t_cliff):.2f}x)", source=SOURCE))
    total = detect_s + pair_s + t_cliff
    ratio_dt = (detect_s + pair_s) / max(1e-9, t_cliff)
    claims.append(not_checkable(
        "the cost the headline hides: Cliff-DPO's detection compute / its training compute",
        "~4,000 GPU-h / 8 min = 30,000x",
        f"{TIMING_WHY} (this run: detection {detect_s:.1f} s + chosen-token potentials {pair_s:.1f} s vs "
        f"training {t_cliff:.2f} s, {ratio_dt:.0f}x; detection is {(detect_s + pair_s) / total:.1%} "
        f"of Cliff-DPO's compute; full-sequence DPO total {seq_sample_s + t_seq:.1f} s). "
        "Detection grows as N x T^2 and our responses are ~25 tokens, GSM8K's hundreds",
        source=SOURCE))
    if by_type:
        a_det, a_oth = _pts(acc["deterministic-only"]), _pts(acc["uncertain + sampled-off"])
        g3, lo3, hi3 = stats.paired_diff_ci(a_oth, a_det, method="t")
        claims.append(Claim(statement="Cliff-DPO on uncertain + sampled-off cliffs helps more than on deterministic",
                            paper_value="uncertain / sampled-off help, deterministic does not", measured=g3,
                            ci=(lo3, hi3), unit="points", kind=Kind.EMPIRICAL, source=SOURCE,
                            baseline=f"deterministic-only {acc['deterministic-only'].mean():.3f}",
                            ruling=verdicts.direction(g3, (lo3, hi3), training_runs=len(a_det),
                                                      why="the paper gives the direction per type"),
                            note=f"{len(a_det)} DPO runs per arm; 95% t-interval over runs, paired by run"))
    else:
        claims.append(not_checkable("Cliff-DPO helps on uncertain / sampled-off cliffs, not on deterministic ones",
                                    "uncertain / sampled-off help, deterministic does not",
                                    f"too few pairs per group ({len(det_pairs)} deterministic, {len(other_pairs)} "
                                    "other; need >= 4 each): deterministic cliffs are rare when continuations come "
                                    "from the model's own distribution (see the taxonomy note)",
                                    source=SOURCE))
    return claims, details


def _claims_beyond_the_model(model, tok, cfg: RolloutConfig, det: Detection, plan: Plan, seed: int) -> list[Claim]:
    """The seam: on problems beyond the model, wrong traces often have no cliff at all."""
    correct = np.array([t.correct for t in det.traces])
    beyond = chain_problems(plan.beyond, plan.beyond_lengths, seed=500 + seed)
    det_b = detect(model, tok, beyond, checker="chain", config=cfg, per_problem=plan.per_problem)
    nb = np.array([1.0 - h for h, t in zip(detection_claims.with_cliff(det_b), det_b.traces, strict=True) if not t.correct])
    ni = 1.0 - detection_claims.with_cliff(det)[~correct]
    if nb.size >= 2 and ni.size >= 2:
        d, lo, hi = stats.diff_ci(nb, ni, seed=seed)
        return [Claim(statement=f"the seam: wrong traces without any cliff are more common on problems beyond the "
                                f"model ({plan.beyond_lengths} operands) than in distribution",
                      paper_value="no cliff when the problem is beyond the model", measured=d, ci=(lo, hi),
                      # a trace that starts at potential ~0 has nothing to lose: no drop can pass the test
                      kind=Kind.BY_CONSTRUCTION, source=SOURCE,
                      baseline=f"in distribution: {ni.mean():.2f} of {ni.size} wrong traces have no cliff",
                      ruling=verdicts.direction(d, (lo, hi), why="the caveat is qualitative"),
                      note="By construction: a cliff is a drop in the potential, and on problems beyond the model "
                           "a trace starts near potential 0, so it has nothing to lose. "
                           f"Beyond: {nb.mean():.2f} of {nb.size} wrong traces have no cliff; start potential "
                           f"{np.mean([t.ks[0] / plan.n for t in det_b.traces]):.2f} vs "
                           f"{np.mean([t.ks[0] / plan.n for t in det.traces]):.2f}")]
    return [not_checkable("the seam: no cliff on problems beyond the model", "qualitative",
                          f"too few wrong traces ({nb.size} beyond, {ni.size} in distribution)")]


def _claims_scale(det: Detection, plan: Plan, seed: int) -> list[Claim]:
    """Deterministic cliffs shared with a smaller sibling model (its greedy token is the cliff token)."""
    if plan.sibling is None:
        return [not_checkable("deterministic cliffs are shared between two model sizes", "an 8B and a 0.6B fall at "
                              "the same word", "needs a second model trained from scratch (~1.5 min on this CPU); "
                              "run `divelab reproduce cliff-tokens --scale full`", source=SOURCE)]
    other, _, _ = load_chain_model(plan.sibling)  # trains on first use: not under no_grad
    same: dict[str, list[float]] = {k: [] for k in TYPES}
    with torch.no_grad():
        for c in det.cliffs:
            tr = det.traces[c.trace]
            ctx = torch.as_tensor([tr.prompt_ids + tr.response_ids[:c.token - 1]])
            greedy = int(other(input_ids=ctx).logits[0, -1].argmax())
            same[c.kind].append(float(greedy == c.token_id))
    det_s, unc_s = np.array(same["deterministic"]), np.array(same["uncertain"] + same["sampled-off"])
    if det_s.size >= 3 and unc_s.size >= 3:
        d, lo, hi = stats.diff_ci(det_s, unc_s, seed=seed)
        return [Claim(statement="deterministic cliffs are shared with a smaller sibling more than other cliffs "
                                "(the sibling's greedy token is the cliff token)",
                      paper_value="deterministic cliffs largely scale-invariant", measured=d, ci=(lo, hi),
                      kind=Kind.EMPIRICAL, source=SOURCE, baseline=f"other cliffs {unc_s.mean():.2f}",
                      ruling=verdicts.direction(d, (lo, hi), why="qualitative in the paper"))]
    allc = np.array(sum(same.values(), []))
    return [not_checkable("deterministic cliffs are shared between two model sizes", "scale-invariant",
                          f"only {det_s.size} deterministic and {unc_s.size} other cliffs (need >= 3 each); "
                          f"over all cliffs the sibling falls at the same token in "
                          f"{allc.mean() if allc.size else float('nan'):.2f}", source=SOURCE)]


def _figure(det: Detection) -> Figure:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.2))
    shown = 0
    for i, tr in enumerate(det.traces):
        if shown >= 6 or tr.correct:
            continue
        p = np.array([np.nan if k is None else k / tr.n for k in tr.ks])
        xs = np.flatnonzero(~np.isnan(p))
        line, = ax.plot(xs, p[xs], marker=".", lw=1)
        for c in det.cliffs:
            if c.trace == i:
                ax.plot([c.token], [c.p_curr], "x", color=line.get_color(), ms=9)
        shown += 1
    ax.set_xlabel("response token t")
    ax.set_ylabel("potential P_t")
    ax.set_title("potentials of wrong responses (x = cliff token)")
    fig.tight_layout()
    figure = Figure.from_matplotlib(fig, "potentials", "Token-wise potential of wrong responses; crosses mark cliffs.")
    plt.close(fig)
    return figure
