"""E170 with a real coder: SmolLM2-135M-Instruct on generated tasks it partly solves, real critics, real verifier.

The coder samples several attempts per task (:mod:`.attempts`); every critic and the hidden suite run on each
attempt for real. An episode draws the attempts in a seeded order: the first is the first attempt, each
refinement is the next (regeneration), verification runs the hidden suite. The tasks are split three ways:

- calibration tasks fit the belief model (prior, every critic's alpha/beta, rho11/rho01, the reviewer's
  pass threshold) on the coder's own attempts;
- dev tasks pick the Bayesian controller (greedy-VOI or DP) and, separately, the best simple rule
  (always-verify, never-verify, verify-if-critics-pass, ship-if-critics-pass, fixed thresholds);
- test tasks (half of every family, fixed) measure the two picks; nothing is chosen on them.

The split of the non-test tasks into calibration and dev is redrawn ``replicates`` times (seeded): each
redraw is one "training run" of the controllers, and the interval is over test tasks (cluster bootstrap).

The coder's competence (pass@1 of first attempts) is reported beside each claim; outside the pre-stated
window the comparison is uninformative (a coder that never or always succeeds leaves nothing to control).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from divelab import stats, verdicts
from divelab.cache import stable_hash
from divelab.claims import Claim, Kind, not_checkable
from divelab.coding.bayes_control.attempts import Sampling, prompt_text, task_attempts
from divelab.coding.bayes_control.belief import BeliefModel, RefineModel, calibrate
from divelab.coding.bayes_control.controllers import (
    Controller,
    Costs,
    DPController,
    GreedyController,
    simple_rules,
)
from divelab.coding.bayes_control.episode import run_episode
from divelab.coding.bayes_control.tasks_generated import (
    EVAL_FAMILIES,
    TRAIN_FAMILIES,
    GeneratedTask,
    generated_tasks,
)
from divelab.comparisons import against_strongest
from divelab.lm.adapt import AdaptConfig, LoraSpec, top_layer_modules
from divelab.progress import track

MODEL_LABEL = "SmolLM2-135M-Instruct"
SOURCE = "arXiv 2606.24453; week-in-review E170"
CRITICS = ("syntax", "pyflakes", "public-tests", "self-consistency", "SmolLM2-reviewer")
STATEMENT = (f"{MODEL_LABEL} on generated tasks: Bayesian control (chosen on dev) beats the best simple rule "
             "(chosen on dev) in net utility on held-out test tasks when verification is costly")




CODER_SFT = AdaptConfig(method="sft", steps=60, lr=3e-4, batch_size=8, max_length=384,
                        lora=LoraSpec(r=16, alpha=32, target_modules=top_layer_modules(8)), save_every=20,
                        activation_checkpointing=False)
"""The coder's LoRA SFT on the training families (its ``seed`` is replaced by the run's seed)."""


@dataclass(frozen=True)
class GenConfig:
    """The real-coder experiment, one value each (the full plan's)."""

    sampling: Sampling = field(default_factory=Sampling)
    """attempts per task and how they are sampled"""
    adapt: AdaptConfig | None = CODER_SFT
    """the coder's LoRA SFT on the training families (None: the coder is the untuned model); its ``seed`` is
    replaced by the run's seed"""
    max_steps: int = 4
    """refinements + verifications per episode (critics do not count)"""
    reps: int = 20
    """seeded attempt orders per task (each an episode of every controller)"""
    replicates: int = 3
    """seeded calibration/dev redraws of the non-test tasks: the controllers' training runs"""
    test_share: float = 0.5
    """share of every family's tasks held out for test"""
    verify_cost: float = 0.4
    """"verification is costly": 40 % of the reward for shipping correct code"""
    critic_costs: tuple[float, ...] = (0.001, 0.002, 0.01, 0.03, 0.05)
    """syntax, pyflakes, public tests, self-consistency (runs the other samples too), the SmolLM2 reviewer"""
    agree_pass: float = 0.5
    """the self-consistency critic passes when on average at least this share of the other attempts agree"""
    thresholds: tuple[float, ...] = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
    """the fixed-threshold rule's candidate thresholds"""
    window: tuple[float, float] = (0.15, 0.60)
    """pre-stated competence window for pass@1 of first attempts"""
    n_tasks: int | None = None
    """evaluation tasks used (None: all; a spread over the families otherwise)"""


def eval_tasks(cfg: GenConfig) -> list[GeneratedTask]:
    tasks = generated_tasks(EVAL_FAMILIES)
    if cfg.n_tasks is None or cfg.n_tasks >= len(tasks):
        return tasks
    return tasks[:: max(1, len(tasks) // cfg.n_tasks)][: cfg.n_tasks]


# ------------------------------------------------------------------------------------------------ the coder
def sft_rows(tok: Any, seeds: Sequence[int] = (0, 1, 2)) -> list[dict[str, str]]:
    """Training-family tasks (each with several seeded sets of examples) as prompt -> completion: the def line
    and the reference body, then the closing fence. The untuned model copies the whole docstring first and
    runs out of tokens; this teaches the short answer format, on templates the evaluation never uses."""
    rows = []
    for seed in seeds:
        for g in generated_tasks(TRAIN_FAMILIES, seed=seed):
            body = g.solution[len(g.task.prompt):]
            rows.append({"prompt": prompt_text(tok, g),
                         "completion": g.task.prompt.split("\n", 1)[0] + "\n" + body.rstrip() + "\n```"})
    return rows


def load_coder(cfg: GenConfig, seed: int) -> tuple[Any, Any, str, dict[str, Any]]:
    """(model, tokenizer, weights key, adapter record): the untuned model, or it with the cached LoRA adapter."""
    from divelab.lm.real import load_real

    model, tok = load_real()
    if cfg.adapt is None:
        return model, tok, "smollm2-135m-instruct", {}
    from divelab.lm.adapt import adapt

    ad = adapt("smollm2-135m-instruct", sft_rows(tok), replace(cfg.adapt, seed=seed),
               name="E170 coder SFT (training families)")
    model, tok = ad.load()
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return model, tok, ad.key, {"key": ad.key, "train_s": ad.record.get("train_s"), "n_rows": ad.record["n_rows"]}


def collect(cfg: GenConfig, seed: int = 0) -> dict[str, Any]:
    """Every evaluation task's judged attempts (cached per task, so a killed run resumes)."""
    from divelab.threads import torch_threads

    tasks = eval_tasks(cfg)
    t0 = time.perf_counter()
    with torch_threads(1):
        model, tok, weights, record = load_coder(cfg, seed)
        rows = {g.task.task_id: task_attempts(model, tok, weights, g, cfg.sampling,
                                              int(stable_hash([seed, g.task.task_id], 8), 16))
                for g in track(tasks, f"E170: {MODEL_LABEL} attempts, critics and hidden tests")}
    return {"attempts": rows, "families": {g.task.task_id: g.family for g in tasks}, "adapter": record,
            "collect_s": round(time.perf_counter() - t0, 1)}


# ------------------------------------------------------------------------------------------ replay of attempts
def critic_pass(row: dict[str, Any], k: int, review_threshold: float, agree_pass: float) -> bool:
    if k == 0:
        return bool(row["syntax"])
    if k == 1:
        return bool(row["pyflakes"])
    if k == 2:
        return bool(row["public"])
    if k == 3:
        return row["agreement"] >= agree_pass
    if k == 4:
        return row["review"] >= review_threshold
    raise ValueError(f"critic index {k} out of range 0..{len(CRITICS) - 1}")


class AttemptEnv:
    """A task's real attempts seen through a controller's actions: refinement draws the next attempt."""

    def __init__(self, rows: list[dict[str, Any]], order: Sequence[int], review_threshold: float, agree_pass: float):
        self.rows, self.order, self.i = rows, list(order), 0
        self.thr, self.agree = review_threshold, agree_pass
        self.available = tuple(True for _ in CRITICS)

    @property
    def current(self) -> dict[str, Any]:
        return self.rows[self.order[self.i]]

    def critic(self, k: int) -> tuple[bool | None, str]:
        return critic_pass(self.current, k, self.thr, self.agree), ""

    def refine(self, feedback: str) -> None:
        self.i = min(self.i + 1, len(self.order) - 1)  # the last sample is kept once all are drawn

    def verify(self) -> bool:
        return bool(self.current["correct"])

    def shipped_correct(self) -> bool:
        return bool(self.current["correct"])


def orders(task_id: str, n: int, reps: int, seed: int) -> list[list[int]]:
    out = []
    for r in range(reps):
        o = list(range(n))
        random.Random(stable_hash(["order", seed, task_id, r], 8)).shuffle(o)
        out.append(o)
    return out


@dataclass(frozen=True)
class Fitted:
    model: BeliefModel
    review_threshold: float


SHAM = "shuffled labels"  # the negative control: critic likelihoods fitted on shuffled correctness labels


def fit_belief(attempts: dict[str, list[dict]], tasks: Sequence[str], cfg: GenConfig, seed: int,
               shuffle_labels: bool = False) -> Fitted:
    """Prior, critic likelihoods and the refinement rates from the calibration tasks' attempts; the reviewer's
    pass threshold is the median reviewer score there. ``shuffle_labels`` (the negative control) fits the critic
    likelihoods on the attempts' correctness labels shuffled among them (seeded): the critics then carry no
    evidence, while the prior, the refinement rates and the reviewer's threshold stay those of the real data."""
    rows = [r for t in tasks for r in attempts[t]]
    thr = float(np.median([r["review"] for r in rows]))
    labels = [bool(r["correct"]) for r in rows]
    if shuffle_labels:
        random.Random(stable_hash(["shuffle-labels", seed], 8)).shuffle(labels)
    liks = tuple(calibrate([(critic_pass(r, k, thr, cfg.agree_pass), y) for r, y in zip(rows, labels, strict=True)])
                 for k in range(len(CRITICS)))
    prior = (sum(r["correct"] for r in rows) + 1) / (len(rows) + 2)
    trans = {True: [0, 0], False: [0, 0]}  # current correct -> [next correct, pairs]
    for t in tasks:
        for o in orders(t, len(attempts[t]), cfg.reps, seed):
            for a, b in zip(o[: cfg.max_steps], o[1: cfg.max_steps + 1], strict=False):
                c = bool(attempts[t][a]["correct"])
                trans[c][0] += bool(attempts[t][b]["correct"])
                trans[c][1] += 1
    refine = RefineModel(rho11=(trans[True][0] + 1) / (trans[True][1] + 2),
                         rho01=(trans[False][0] + 1) / (trans[False][1] + 2))
    return Fitted(BeliefModel(prior=prior, critics=liks, refine=refine), thr)


def bayes_controllers(fit: Fitted, costs: Costs, cfg: GenConfig, tag: str = "") -> list[Controller]:
    return [GreedyController(fit.model, costs, name="greedy-VOI" + tag),
            DPController(fit.model, costs, horizon=cfg.max_steps, name="DP" + tag)]


def utilities(ctls: Sequence[Controller], attempts: dict[str, list[dict]], tasks: Sequence[str], fit: Fitted,
              costs: Costs, cfg: GenConfig, seed: int) -> dict[str, np.ndarray]:
    """Mean net utility per task (over ``cfg.reps`` seeded attempt orders) of each controller."""
    out = {}
    for c in ctls:
        per = np.zeros(len(tasks))
        for i, t in enumerate(tasks):
            u = [run_episode(c, AttemptEnv(attempts[t], o, fit.review_threshold, cfg.agree_pass), fit.model, costs,
                             max_steps=cfg.max_steps).utility for o in orders(t, len(attempts[t]), cfg.reps, seed)]
            per[i] = float(np.mean(u))
        out[c.name] = per
    return out


def split(task_ids: Sequence[str], families: dict[str, str], cfg: GenConfig, seed: int
          ) -> tuple[list[str], list[tuple[list[str], list[str]]]]:
    """Test tasks (a fixed share of every family) and, per replicate, a calibration/dev halving of the rest."""
    by_fam: dict[str, list[str]] = {}
    for t in task_ids:
        by_fam.setdefault(families[t], []).append(t)
    test, rest = [], []
    for fam, ts in sorted(by_fam.items()):
        ts = sorted(ts)
        random.Random(stable_hash(["test", seed, fam], 8)).shuffle(ts)
        n_test = int(round(cfg.test_share * len(ts)))
        test += ts[:n_test]
        rest += ts[n_test:]
    reps = []
    for r in range(cfg.replicates):
        rr = sorted(rest)
        random.Random(stable_hash(["calib-dev", seed, r], 8)).shuffle(rr)
        reps.append((sorted(rr[: len(rr) // 2]), sorted(rr[len(rr) // 2:])))
    return sorted(test), reps


def competence(attempts: dict[str, list[dict]], tasks: Sequence[str], seed: int) -> dict[str, Any]:
    """pass@1 of first attempts: every sample is a first attempt; interval: bootstrap over tasks."""
    per = np.array([np.mean([r["correct"] for r in attempts[t]]) for t in tasks])
    k = int(sum(r["correct"] for t in tasks for r in attempts[t]))
    n = sum(len(attempts[t]) for t in tasks)
    lo, hi = stats.bootstrap_ci(per, seed=seed) if per.size > 1 else (float(per.mean()), float(per.mean()))
    return {"pass_at_1": float(per.mean()), "ci": [float(lo), float(hi)], "correct": k, "attempts": n,
            "tasks_with_a_correct_attempt": int((per > 0).sum()), "tasks": len(tasks)}


def analyse(run: dict[str, Any], cfg: GenConfig, seed: int = 0) -> tuple[list[Claim], dict[str, Any]]:
    attempts, families = run["attempts"], run["families"]
    test, reps = split(sorted(attempts), families, cfg, seed)
    comp = competence(attempts, sorted(attempts), seed)
    comp_test = competence(attempts, test, seed)
    costs = Costs(verify=cfg.verify_cost, critics=cfg.critic_costs)
    method, sham_u, clusters, picks, fits, sham_fits = [], [], [], [], [], []
    all_test: dict[str, list[np.ndarray]] = {}
    simple_names: list[str] = []
    for r, (calib, dev) in enumerate(track(reps, "E170: fit, pick on dev, replay on test")):
        fit = fit_belief(attempts, calib, cfg, seed + r)
        sham = fit_belief(attempts, calib, cfg, seed + r, shuffle_labels=True)
        bayes, simple = bayes_controllers(fit, costs, cfg), simple_rules(cfg.thresholds)
        sham_ctl = bayes_controllers(sham, costs, cfg, f" ({SHAM})")
        simple_names = [c.name for c in simple]
        d = {**utilities([*bayes, *simple], attempts, dev, fit, costs, cfg, seed + r),
             **utilities(sham_ctl, attempts, dev, sham, costs, cfg, seed + r)}
        dev_mean = {k: float(v.mean()) for k, v in d.items()}
        best_b = max((c.name for c in bayes), key=lambda n: dev_mean[n])
        best_sh = max((c.name for c in sham_ctl), key=lambda n: dev_mean[n])
        best_s = max((c.name for c in simple), key=lambda n: dev_mean[n])
        u = {**utilities([c for c in bayes if c.name == best_b] + simple, attempts, test, fit, costs, cfg,
                         seed + 1000 + r),
             **utilities([c for c in sham_ctl if c.name == best_sh], attempts, test, sham, costs, cfg,
                         seed + 1000 + r)}
        method.append(u[best_b])
        sham_u.append(u[best_sh])
        clusters += test
        for k, v in u.items():
            key = "Bayes (dev pick)" if k == best_b else f"Bayes on {SHAM} (dev pick)" if k == best_sh else k
            all_test.setdefault(key, []).append(v)
        picks.append({"bayes": best_b, "sham": best_sh, "simple": best_s, "dev_mean": dev_mean,
                      "test_mean": {k: float(v.mean()) for k, v in u.items()}, "calibration_tasks": len(calib),
                      "dev_tasks": len(dev)})
        fits.append({"belief": fit.model.to_dict(), "review_threshold": fit.review_threshold})
        sham_fits.append({"belief": sham.model.to_dict(), "review_threshold": sham.review_threshold})
    m, sh = np.concatenate(method), np.concatenate(sham_u)
    base = {k: np.concatenate(all_test[k]) * 100 for k in simple_names}
    cmp = against_strongest(m * 100, base, better="higher", clusters=clusters, seed=seed)
    c_eff, c_lo, c_hi = stats.cluster_diff_ci(sh * 100, base[cmp.strongest], clusters, seed=seed)
    test_means = {k: float(np.mean(np.concatenate(v))) * 100 for k, v in all_test.items()}
    lo_w, hi_w = cfg.window
    p1, ci1 = comp["pass_at_1"], comp["ci"]
    tuned = " + LoRA SFT on the training families" if cfg.adapt is not None else ""
    comp_txt = (f"{MODEL_LABEL}{tuned} pass@1 (first "
                f"attempts) {p1:.2f} [{ci1[0]:.2f}, {ci1[1]:.2f}] over {comp['tasks']} tasks ({comp['attempts']} "
                f"attempts); on the test tasks {comp_test['pass_at_1']:.2f}")
    if not lo_w <= p1 <= hi_w:
        ruling = verdicts.uninformative(f"the coder's pass@1 {p1:.2f} is outside the pre-stated window "
                                        f"[{lo_w:.2f}, {hi_w:.2f}]: too little to control")
    else:
        ruling = verdicts.direction(cmp.effect, cmp.ci, why="the paper gives no utility number for this setting",
                                    training_runs=cfg.replicates,
                                    control=verdicts.control(f"Bayesian controller with critic likelihoods fitted on "
                                                             f"{SHAM}, minus the same rule", c_eff, (c_lo, c_hi)))
    picks_txt = "; ".join(f"run {i}: {p['bayes']} vs {p['simple']}" for i, p in enumerate(picks))
    claims = [Claim(
        statement=STATEMENT + f" (c_V={cfg.verify_cost:g} x reward; critics: {', '.join(CRITICS)})",
        paper_value="Bayesian control is most valuable when verification is costly and critics are informative but "
                    "imperfect (no number for this setting)",
        measured=cmp.effect, unit="utility points per 100 tasks", ci=cmp.ci, kind=Kind.EMPIRICAL, source=SOURCE,
        baseline=f"strongest simple rule on test: {cmp.strongest}; picks on dev per training run ({picks_txt}); "
                 f"always-verify on test {test_means['always-verify']:+.1f}, never-verify "
                 f"{test_means['never-verify']:+.1f} per 100 tasks",
        ruling=ruling, **cmp.claim_fields(),
        falsifier=(f"Had the dev-chosen Bayesian controller earned no more net utility on the held-out problems than "
                   f"the best simple rule measured there, the claim would fail; {MODEL_LABEL} writes the attempts and "
                   "real critics and hidden tests judge them, so neither how often it is right nor what its critics "
                   "reveal is set by our code."),
        replication={"unit": "training run x held-out test task", "n": int(m.size), "clustered_by": "test task"},
        note=(f"{comp_txt}. {len(test)} test tasks (half of each of {len(set(families.values()))} template "
              f"families), {cfg.replicates} training runs (seeded calibration/dev redraws of the other "
              f"{len(attempts) - len(test)} tasks); {cfg.sampling.k} sampled attempts per task, refinement = the next "
              f"sample, {cfg.reps} seeded orders per task, at most {cfg.max_steps} refinements+verifications. "
              f"Interval: bootstrap over test tasks (clustered: a task's runs move together). The claim is judged "
              f"against the strongest simple rule on test ({cmp.strongest}), which favours the baseline. Negative "
              f"control: the same controllers with critic likelihoods fitted on {SHAM} (prior, refinement rates and "
              f"the reviewer's threshold kept), picked on dev the same way: {c_eff:+.1f} [{c_lo:+.1f}, {c_hi:+.1f}] "
              "per 100 tasks against the same rule; every rule's dev and test means are in details."))]
    claims.append(_claim_auroc(attempts, test, fits, sham_fits, cfg, seed, comp_txt, (lo_w <= p1 <= hi_w)))
    details = {"competence": comp, "competence_test": comp_test, "picks": picks, "fits": fits,
               "shuffled_label_fits": sham_fits, "control_minus_strongest_per_100": [c_eff, c_lo, c_hi],
               "test_mean_per_100": test_means, "split": {"test": len(test), "calibration": len(reps[0][0]),
                                                          "dev": len(reps[0][1])},
               "config": {"k": cfg.sampling.k, "temperature": cfg.sampling.temperature,
                          "sft_steps": cfg.adapt.steps if cfg.adapt else 0,
                          "max_steps": cfg.max_steps, "reps": cfg.reps, "replicates": cfg.replicates,
                          "verify_cost": cfg.verify_cost, "critic_costs": list(cfg.critic_costs)},
               "adapter": run.get("adapter", {}), "collect_s": run.get("collect_s"), "test_tasks": test,
               "pass_rate_per_task": {t: float(np.mean([r["correct"] for r in rows])) for t, rows in attempts.items()},
               "critic_youden": [[round(c.alpha - c.beta, 3) for c in BeliefModel.from_dict(f["belief"]).critics]
                                 for f in fits]}
    return claims, details


def _claim_auroc(attempts: dict[str, list[dict]], test: list[str], fits: list[dict], sham_fits: list[dict],
                 cfg: GenConfig, seed: int, comp_txt: str, competent: bool) -> Claim:
    """The belief after every critic as a correctness score on the test tasks' attempts, against raw scores;
    the negative control is the belief with critic likelihoods fitted on shuffled labels."""
    models = [(BeliefModel.from_dict(f["belief"]), f["review_threshold"]) for f in fits]
    shams = [(BeliefModel.from_dict(f["belief"]), f["review_threshold"]) for f in sham_fits]
    rows = [(i, r) for i, t in enumerate(test) for r in attempts[t]]
    owner = np.array([i for i, _ in rows])
    y = np.array([int(r["correct"]) for _, r in rows])

    def belief(r: dict, model: BeliefModel, thr: float) -> float:
        b = model.prior
        for k in range(len(CRITICS)):
            b = model.critics[k].posterior(b, critic_pass(r, k, thr, cfg.agree_pass))
        return b

    bel = np.mean([[belief(r, m, thr) for _, r in rows] for m, thr in models], axis=0)
    sham_bel = np.mean([[belief(r, m, thr) for _, r in rows] for m, thr in shams], axis=0)
    raw = {"#critics passed": np.array([sum(critic_pass(r, k, thr, cfg.agree_pass) for k in range(len(CRITICS)))
                                        for (_, r) in rows for thr in [models[0][1]]], dtype=float),
           "token probability": np.array([r["mean_logprob"] for _, r in rows]),
           "SmolLM2-reviewer score": np.array([r["review"] for _, r in rows]),
           "self-consistency score": np.array([r["agreement"] for _, r in rows])}

    def auc(idx: np.ndarray, s: np.ndarray) -> float:
        sel = np.concatenate([np.flatnonzero(owner == i) for i in idx])
        yy = y[sel]
        return stats.auroc(yy, s[sel]) if 0 < yy.sum() < yy.size else 0.5

    all_idx = np.arange(len(test))
    base_auc = {k: auc(all_idx, v) for k, v in raw.items()}
    strongest = max(base_auc, key=base_auc.get)
    diff = auc(all_idx, bel) - base_auc[strongest]
    from divelab.coding.bayes_control.replay import task_bootstrap_ci

    lo, hi = task_bootstrap_ci(lambda idx: auc(idx, bel) - auc(idx, raw[strongest]), len(test), seed)
    c_eff = auc(all_idx, sham_bel) - base_auc[strongest]
    c_lo, c_hi = task_bootstrap_ci(lambda idx: auc(idx, sham_bel) - auc(idx, raw[strongest]), len(test), seed + 1)
    degenerate = not 0 < y.sum() < y.size
    ruling = (verdicts.uninformative("no correct (or no wrong) attempt on the test tasks") if degenerate else
              verdicts.uninformative("the coder's pass@1 is outside the pre-stated window") if not competent else
              verdicts.direction(diff, (lo, hi), why="the paper states no AUROC for this setting",
                                 training_runs=cfg.replicates,
                                 control=verdicts.control(f"belief fitted on {SHAM} (critic likelihoods), minus the "
                                                          "same raw score", c_eff, (c_lo, c_hi))))
    return Claim(
        statement=f"{MODEL_LABEL} on generated tasks: the belief (after all five critics) scores its attempts' "
                  "correctness better than the strongest raw score (critics passed, token probability, reviewer, "
                  "self-consistency)",
        paper_value="the belief beats token-probability and raw tool-success baselines (no number for this setting)",
        measured=diff, unit="AUROC difference", ci=(lo, hi), kind=Kind.EMPIRICAL, source=SOURCE,
        baseline=f"strongest raw score on test: {strongest} (AUROC {base_auc[strongest]:.3f})",
        baselines=[{"name": k, "value": v, "ci": None} for k, v in base_auc.items()], better="higher",
        compared_with=strongest, ruling=ruling,
        falsifier=(f"Had the belief, fitted on the calibration problems' attempts, ranked the held-out attempts' "
                   "correctness no better than the strongest raw score (critics passed, token probability, reviewer "
                   f"score, self-consistency), the claim would fail; {MODEL_LABEL} writes the attempts and real "
                   "critics judge them, so how much each critic tells is not set by our code."),
        replication={"unit": "held-out test tasks (their attempts resampled together)", "n": len(test),
                     "clustered_by": ""},
        note=f"{comp_txt}. Belief AUROC {auc(all_idx, bel):.3f} on {y.size} test attempts ({int(y.sum())} correct), "
             f"averaged over the {len(models)} training runs' belief models; interval: bootstrap over test tasks. "
             "The strongest raw score is picked on test, which favours the baseline. Negative control: the same "
             f"runs' beliefs with critic likelihoods fitted on {SHAM}, AUROC {auc(all_idx, sham_bel):.3f} "
             f"({c_eff:+.3f} [{c_lo:+.3f}, {c_hi:+.3f}] against {strongest}).")


def measure(cfg: GenConfig, seed: int = 0) -> tuple[list[Claim], dict[str, Any]]:
    """Collect the coder's judged attempts (cached per task) and compare the controllers on them."""
    return analyse(collect(cfg, seed), cfg, seed)


def add_to(rep: Any, cfg: GenConfig | None, seed: int = 0, weight: float = 1.0) -> None:
    """The real-coder claims sized by ``cfg`` (the plan's ``live_llm``) as one resumable stage (the attempts are
    also cached per task); with None, one not-checkable line (tens of minutes of SmolLM2 on a CPU)."""
    from divelab.lm import real
    from divelab.stages import stage

    if cfg is None:
        rep.add(not_checkable(STATEMENT, "no number for this setting", "runs at full scale only: "
                              f"{MODEL_LABEL} samples and judges attempts for tens of minutes of CPU", source=SOURCE))
        return
    real.add_claims_at_full(rep, True, lambda: stage(f"{MODEL_LABEL} attempts on generated tasks",
                                                     lambda: measure(cfg, seed), weight=weight),
                            statement=STATEMENT, paper_value="no number for this setting", source=SOURCE,
                            details_key="smollm2_generated")
