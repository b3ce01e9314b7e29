"""Reproduction of E169 SHERLOC (arXiv 2606.24820) on bugs planted into real packages.

Localizers (same tasks, same run): the SHERLOC loop driven by the spectrum diagnostician
(:mod:`.spectrum_policy`: the test spectrum combined with the repository evidence the loop gathers),
BM25 (Agentless-style), Ochiai SBFL from per-test coverage, LM surprisal; the loop driven by the
rule-based diagnostician without the spectrum (:mod:`.policy`) is recorded beside them. Then a
search-and-validate repair agent that localizes itself with SBFL is given no report / the case file /
location only / a wrong case file / the gated case file / the gold location (a positive control), and
the resolve rates and localization cost are compared.
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np

from divelab import stats, verdicts
from divelab.claims import Claim, Kind, Reproduction, not_checkable
from divelab.coding.sherloc import real_diagnostician, real_llm
from divelab.coding.sherloc.agent import SherlocLocalizer
from divelab.coding.sherloc.baselines import (
    bm25_localize,
    lm_line_scorer,
    ochiai_localize,
    surprisal_localize,
)
from divelab.coding.sherloc.benchmark import Repo, Task, build_benchmark, open_repo
from divelab.coding.sherloc.finding import CaseFile, Finding, Location, render
from divelab.coding.sherloc.mutate import functions
from divelab.coding.sherloc.plan import PLANS, Plan  # noqa: F401  (the runner reads PLANS from here)
from divelab.coding.sherloc.policy import HeuristicDiagnostician
from divelab.coding.sherloc.repair import RepairAgent, gate
from divelab.coding.sherloc.scoring import GRANS, hit
from divelab.coding.sherloc.spectrum_policy import SpectrumDiagnostician
from divelab.coding.sherloc.tools import RepoTools
from divelab.comparisons import against_strongest
from divelab.progress import track
from divelab.stages import stage
from divelab.threads import torch_threads

SOURCE = "arXiv 2606.24820; week-in-review E169"
SEEN_REPOS = ("json", "tomllib", "textlib")  # the surprisal LM is trained on these packages' clean code
# What the repair side of the set-up writes into its outcomes (shown with every run).
PLANTED = ("The repair agent is our search over the inverse of the same mutation operators that planted the "
           "bugs, and it tries the locations a report names first (else the lines SBFL ranks most suspicious): a "
           "report that names the right place makes it resolve within its budget, and a wrong one spends that "
           "budget, by how the agent is built.")


def _train_surprisal_lm(plan: Plan, seed: int):
    """The zoo's smoke LM, trained further on the clean source of the 'seen' packages."""
    from divelab.lm import pretrained
    from divelab.lm.train import TrainConfig, train

    model, tok = pretrained("smoke")
    texts = []
    for name in SEEN_REPOS:
        r = open_repo(name)
        texts += [r.files[f] for f in r.sources]
    ids = np.array([i for t in texts for i in tok.encode(t)], dtype=np.int64)
    train(model, ids, config=TrainConfig(steps=plan.lm_steps, batch_size=8, seq_len=128, lr=3e-3, warmup=5,
                                         eval_every=0, seed=seed), description="SHERLOC: surprisal LM")
    model.eval()
    return model, tok


def _wrong_case(task: Task, files: dict[str, str], rng: random.Random) -> CaseFile:
    """A confident but wrong diagnosis: a random other function of the repository."""
    opts = [(f, fn) for f, t in files.items() if f.endswith(".py") and not f.startswith("test") and "/test" not in f
            for fn in functions(t) if not (f == task.file and fn.qualname == task.function)]
    f, fn = rng.choice(opts)
    return CaseFile(findings=[Finding(
        file=f, symbol=fn.qualname, line_span=(fn.start + 1, fn.start + 1),
        location_description=f"{fn.qualname} in {f}", root_cause_hypothesis="the comparison has the wrong operator",
        solution_idea="flip the comparison operator", dependencies=[], testing_impact="rerun the failing test",
        confidence=0.9)])


# Stage weights (divelab.stages): each stage's rough share of a full run's time. Planting runs each package's
# tests per candidate bug; repair runs them per validated patch, six conditions per task; SmolLM2 at a few tokens
# a second drives the loop on ten tasks.
BUILD_WEIGHT, LOCALIZE_WEIGHT, REPAIR_WEIGHT, LIVE_WEIGHT, DIAG_WEIGHT = 10.0, 4.0, 20.0, 10.0, 15.0
STAGE_WEIGHT = (BUILD_WEIGHT + LOCALIZE_WEIGHT + REPAIR_WEIGHT + LIVE_WEIGHT * (PLANS["full"].real_llm is not None)
                + DIAG_WEIGHT * (PLANS["full"].real_diagnostician is not None))


LOCALIZERS = ("sherloc", "bm25", "ochiai", "surprisal")
OTHERS = ("bm25", "ochiai", "surprisal")  # what the SHERLOC loop is judged against

# The surprisal LM's training runs on the process's default torch threads (the old reproduction pinned only
# the scoring), so the runner leaves threads alone; the scoring keeps its own one-thread pin.
THREADS = None


def _localize(tasks: list[Task], repos: dict[str, Repo], plan: Plan,
              seed: int) -> tuple[dict[str, list[list[Location]]], list[CaseFile], Counter]:
    """Every localizer on every task: (predictions per localizer, SHERLOC's case files, recovery events)."""
    model, tok = _train_surprisal_lm(plan, seed)
    scorer = lm_line_scorer(model, tok)
    score_cache: dict[tuple[str, int], list[float]] = {}
    preds: dict[str, list[list[Location]]] = {k: [] for k in (*LOCALIZERS, "sherloc-heuristic")}
    recov: Counter = Counter()
    cases: list[CaseFile] = []
    for task in track(tasks, "SHERLOC: localizing"):
        repo = repos[task.repo]
        files = repo.with_task(task)
        diag = SpectrumDiagnostician(files=files, spectrum=task.spectrum, n_failing=len(task.failing_tests))
        res = SherlocLocalizer(diag).localize(RepoTools(repo.root, {task.file: task.mutated}), task.issue)
        cases.append(res.case)
        recov.update(res.recoveries)
        preds["sherloc"].append(res.locations)
        # the loop without the spectrum (the rule-based diagnostician alone), recorded beside the others
        old = SherlocLocalizer(HeuristicDiagnostician()).localize(RepoTools(repo.root, {task.file: task.mutated}),
                                                                 task.issue)
        recov.update(old.recoveries)
        preds["sherloc-heuristic"].append(old.locations)
        preds["bm25"].append(bm25_localize(files, task.issue))
        preds["ochiai"].append(ochiai_localize(files, task.spectrum, len(task.failing_tests)))
        line_scores = {}
        for f in repo.sources:
            if not functions(files[f]):
                continue  # no function to localize in (e.g. html/entities.py, a data table)
            key = (f, hash(files[f]))
            if key not in score_cache:
                with torch_threads(1):
                    score_cache[key] = scorer(files[f].splitlines())
            line_scores[f] = score_cache[key]
        preds["surprisal"].append(surprisal_localize(files, line_scores))
    return preds, cases, recov


def _hits(preds: dict[str, list[list[Location]]], tasks: list[Task]) -> tuple[dict, dict[tuple[str, str], np.ndarray]]:
    """(acc@1 and recall@5 per localizer and granularity, the per-task top-1 hits)."""
    table: dict[str, dict[str, dict[str, float]]] = {}
    hits1: dict[tuple[str, str], np.ndarray] = {}
    for name, pl in preds.items():
        table[name] = {}
        for g in GRANS:
            h1 = np.array([hit(p, t, g, 1) for p, t in zip(pl, tasks, strict=True)], float)
            h5 = np.array([hit(p, t, g, 5) for p, t in zip(pl, tasks, strict=True)], float)
            hits1[(name, g)] = h1
            table[name][g] = {"acc@1": float(h1.mean()), "recall@5": float(h5.mean())}
    return table, hits1


def _claims_localization(hits1: dict[tuple[str, str], np.ndarray], n: int, seed: int) -> list[Claim]:
    """SHERLOC's acc@1 at each granularity against the strongest other localizer."""
    out = [not_checkable("SHERLOC acc@1 on SWE-Bench Lite with a reasoning LLM", "84.33%",
                         "needs SWE-Bench Lite and a reasoning LLM; here a programmatic diagnostician (SBFL spectrum "
                         "+ repository evidence) drives the loop; what each localizer reaches on our planted-bug "
                         "tasks is in details['localization']", SOURCE)]
    for g in GRANS:
        k1 = int(hits1[("sherloc", g)].sum())
        lo, hi = stats.proportion_ci(k1, n)
        cmp = against_strongest(hits1[("sherloc", g)], {b: hits1[(b, g)] for b in OTHERS},
                                better="higher", seed=seed)
        best, eff, (elo, ehi) = cmp.strongest, cmp.effect, cmp.ci
        out.append(Claim(
            statement=f"the SHERLOC loop's {g}-level acc@1 beats the strongest other localizer on planted real bugs",
            paper_value="SHERLOC beats localization baselines (e.g. +18.3 pp over non-fine-tuned 32B)",
            measured=float(k1 / n), ci=(lo, hi), kind=Kind.EMPIRICAL, source=SOURCE, unit="acc@1",
            baseline=f"{best}: {hits1[(best, g)].mean():.3f}", **cmp.claim_fields(),
            # the default ±50%: the paper's margin is over LLM baselines, ours over non-LLM ones
            ruling=verdicts.direction(eff, (elo, ehi), expected_sign=1, paper=0.183),
            note=f"paired difference vs {best}: {eff:+.3f} [{elo:+.3f}, {ehi:+.3f}] over {n} tasks; driven by "
                 "the spectrum diagnostician (Ochiai's ranking, its ties broken by the traceback, the failing "
                 "test's calls and the report's names), not an LLM; the loop without the spectrum reaches "
                 f"{hits1[('sherloc-heuristic', g)].mean():.3f}"))
    return out


def _claims_memorisation(hits1: dict[tuple[str, str], np.ndarray], tasks: list[Task], plan: Plan,
                         seed: int) -> list[Claim]:
    """The memorisation seam: surprisal accuracy on packages the LM was trained on vs not."""
    seen = np.array([t.repo in SEEN_REPOS for t in tasks])
    out = []
    for g in ("function", "line"):
        h = hits1[("surprisal", g)]
        if seen.all() or (~seen).all():
            out.append(not_checkable(f"surprisal {g} acc@1 is higher on packages the LM saw",
                                     "~58% of recall may come from memorised famous libraries",
                                     "this scale has tasks from only one group (run quick or full)", SOURCE))
            continue
        eff, elo, ehi = stats.diff_ci(h[seen], h[~seen], seed=seed)
        # a localizer that finds nothing in either group (a floor) cannot show a memorisation gap
        floor = f"the surprisal localizer hit no bug at {g} level in either group (a floor)"
        out.append(Claim(
            statement=f"memorisation seam: surprisal {g}-level acc@1 is higher on packages in the LM's "
                      "training data than on unseen ones",
            paper_value="~58% of recall may come from memorised famous libraries", measured=eff,
            ci=(elo, ehi), kind=Kind.EMPIRICAL, source=SOURCE, unit="acc@1 difference (seen - unseen)",
            baseline=f"unseen packages: {float(h[~seen].mean()):.3f}",
            ruling=verdicts.uninformative(floor) if h.sum() == 0 else verdicts.direction(
                eff, (elo, ehi), expected_sign=1, why="the paper gives a share of recall, not an accuracy gap"),
            note=f"seen {float(h[seen].mean()):.3f} (n={int(seen.sum())}) vs unseen "
                 f"{float(h[~seen].mean()):.3f} (n={int((~seen).sum())}); our LM is the zoo's tiny "
                 f"model trained {plan.lm_steps} more steps on {', '.join(SEEN_REPOS)}"))
    return out


REPAIR_CONDITIONS = ("none", "case", "location", "wrong", "gated", "oracle")


def _oracle_case(task: Task) -> CaseFile:
    """The positive control: the planted edit's own location, with no hint of the operator."""
    return CaseFile(findings=[Finding(
        file=task.file, symbol=task.function, line_span=task.span,
        location_description=f"{task.function} in {task.file} (the planted edit)",
        root_cause_hypothesis="the code on these lines was altered", solution_idea="restore these lines",
        dependencies=[], testing_impact="rerun the failing test", confidence=1.0)])


def _repair(tasks: list[Task], repos: dict[str, Repo], preds: dict[str, list[list[Location]]],
            cases: list[CaseFile], plan: Plan, seed: int) -> tuple[dict[str, list[float]], dict[str, list[int]],
                                                                   list[bool]]:
    """The repair agent given each report condition: (resolved per task, characters read for localization,
    whether the gate injected the case file), per condition."""
    rng = random.Random(seed)
    agents = {name: RepairAgent(r, plan.repair_budget, localizer="sbfl") for name, r in repos.items()}
    resolved: dict[str, list[float]] = {c: [] for c in REPAIR_CONDITIONS}
    chars: dict[str, list[int]] = {c: [] for c in REPAIR_CONDITIONS}
    gated_on = []
    for i in track(range(0, len(tasks), plan.repair_every), "SHERLOC: repairing"):
        task = tasks[i]
        agent = agents[task.repo]
        files = agent.repo.with_task(task)
        inject = gate(cases[i], [preds["bm25"][i], preds["ochiai"][i]])
        gated_on.append(inject)
        msgs = {"none": task.issue, "case": task.issue + "\n\n" + render(cases[i]),
                "location": task.issue + "\n\n" + render(cases[i], location_only=True),
                "wrong": task.issue + "\n\n" + render(_wrong_case(task, files, rng)),
                "oracle": task.issue + "\n\n" + render(_oracle_case(task))}
        msgs["gated"] = msgs["case"] if inject else msgs["none"]
        for c in REPAIR_CONDITIONS:
            out = agent.repair(task, msgs[c])
            resolved[c].append(float(out.resolved))
            chars[c].append(out.localization_chars)
    return resolved, chars, gated_on


def _positive_control(res_: dict[str, list[float]], seed: int) -> tuple[Claim, str]:
    """The gold location must lift the resolve rate over no report, else the repair arm cannot tell a good report
    from a bad one: (the claim, the reason every repair claim is uninformative, "" when the control fired)."""
    e, lo, hi = stats.paired_diff_ci(res_["oracle"], res_["none"], method="bootstrap", seed=seed)
    r_o, r_n = float(np.mean(res_["oracle"])), float(np.mean(res_["none"]))
    fired = lo > 0
    diff = np.asarray(res_["oracle"], float) - np.asarray(res_["none"], float)
    mde = stats.mde_two_sample(float(diff.std(ddof=1)) if diff.size > 1 else 0.0, int(diff.size))
    claim = Claim(statement="positive control: a report naming the planted edit's location raises the repair "
                            "agent's resolve rate over no report",
                  paper_value="(a set-up check, not a paper claim)", measured=e, ci=(lo, hi),
                  unit="resolve-rate difference", kind=Kind.CHECK, source=SOURCE, baseline=f"no report: {r_n:.3f}",
                  ruling=verdicts.direction(e, (lo, hi), expected_sign=1, why="a set-up check: the paper has no such arm"),
                  note=f"gold location {r_o:.3f} vs no report {r_n:.3f} (the agent then localizes with SBFL itself) "
                       f"on {len(res_['none'])} tasks; at this many tasks and this spread the smallest difference "
                       f"detected with 80% power is {mde:.2f}; if this does not fire, no repair claim can speak")
    why = "" if fired else (f"the positive control did not fire: the gold location resolves {r_o:.3f} vs {r_n:.3f} "
                            "with no report, an interval that does not exclude 0")
    return claim, why


def _bounded(rates: dict[str, float], arms: tuple[str, ...]) -> str:
    """Why a comparison of ``arms`` cannot speak when every arm sits at 0 (a floor) or 1 (a ceiling), else ""."""
    vals = {rates[a] for a in arms}
    if vals == {0.0}:
        return f"every arm compared ({', '.join(arms)}) resolves nothing (a floor)"
    if vals == {1.0}:
        return f"every arm compared ({', '.join(arms)}) resolves every task (a ceiling)"
    return ""


def _claims_injection(res_: dict[str, list[float]], chars: dict[str, list[int]], gated_on: list[bool],
                      plan: Plan, seed: int) -> list[Claim]:
    """Injecting the case file into the repair agent: resolve rates and localization cost per condition."""
    rates = {c: float(np.mean(v)) for c, v in res_.items()}
    control, silent = _positive_control(res_, seed)
    out = [control]
    # the case file against every report-free or reduced report measured (no report, location only)
    cmp = against_strongest(res_["case"], {"no report": res_["none"], "location only": res_["location"]},
                            better="higher", seed=seed)
    e, (lo, hi) = cmp.effect, cmp.ci
    why = silent or _bounded(rates, ("case", "none", "location"))
    out.append(Claim(statement="injecting the case file raises the repair agent's resolve rate over the stronger of "
                               "no report and a location-only report",
                     paper_value="+5.95 pp over no report (avg over 5 models x 2 frameworks)", measured=e, ci=(lo, hi),
                     unit="resolve-rate difference", kind=Kind.PLANTED, source=SOURCE,
                     baseline=f"no report: {rates['none']:.3f}; location only: {rates['location']:.3f}",
                     ruling=verdicts.uninformative(why) if why else verdicts.direction(
                         e, (lo, hi), expected_sign=1, paper=0.0595 if cmp.strongest == "no report" else None,
                         why="the paper's +5.95 pp is over no report"),
                     **cmp.claim_fields(),
                     note=f"resolve rates {rates} on {len(res_['none'])} tasks; budget {plan.repair_budget} "
                          "validated candidates per task; with no report the agent edits the lines SBFL ranks "
                          "most suspicious"))
    e, lo, hi = stats.paired_diff_ci(res_["wrong"], res_["none"], method="bootstrap", seed=seed)
    # nothing can fall below a no-report rate of zero: the floor is detected, not argued
    why = silent or ("the no-report resolve rate is 0 (a floor): no report can drag it lower"
                     if rates["none"] == 0 else "")
    out.append(Claim(statement="a wrong diagnosis drags the resolve rate below the no-report baseline",
                     paper_value="20% vs 62% no-report", measured=e, ci=(lo, hi), unit="resolve-rate difference",
                     kind=Kind.PLANTED, source=SOURCE, baseline=f"no report: {rates['none']:.3f}",
                     ruling=verdicts.uninformative(why) if why else
                     verdicts.direction(e, (lo, hi), expected_sign=-1, paper=-0.42, tol=0.5, tol_kind="rel"),
                     note=f"wrong case file {rates['wrong']:.3f} vs none {rates['none']:.3f}; the wrong file costs "
                          "validation budget before the agent falls back to its own search"))
    c_none, c_case = np.array(chars["none"], float), np.array(chars["case"], float)
    if c_none.mean() > 0:
        red = 1 - c_case.mean() / c_none.mean()
        rel = np.where(c_none > 0, 1 - c_case / np.maximum(c_none, 1), 0.0)
        lo, hi = stats.bootstrap_ci(rel, seed=seed)
        out.append(Claim(statement="with the case file the repair agent spends less on localization",
                         paper_value="-36.7% localization tokens", measured=float(red), ci=(lo, hi),
                         unit="fraction of characters read saved", kind=Kind.BY_CONSTRUCTION, source=SOURCE,
                         baseline=f"no report: {c_none.mean():.0f} chars read",
                         ruling=verdicts.value(float(red), paper=0.367, tol=0.5, tol_kind="rel", ci=(lo, hi),
                                               chance=0.0, chance_why="no saving"),
                         note="partly by construction: a trusted report replaces the agent's own search; it reads "
                              "again only when the report's locations yield no fix"))
    e, lo, hi = stats.paired_diff_ci(res_["gated"], res_["case"], method="bootstrap", seed=seed)
    why = silent or _bounded(rates, ("gated", "case"))
    out.append(Claim(statement="selective injection (deployable gate: confidence + agreement with BM25/SBFL) "
                               "does at least as well as injecting everything",
                     paper_value="strong agents lose ground when fed findings indiscriminately; paper's gate used "
                                 "the gold patch", measured=e, ci=(lo, hi), unit="resolve-rate difference",
                     kind=Kind.EMPIRICAL, source=SOURCE, baseline=f"inject everything: {rates['case']:.3f}",
                     ruling=verdicts.uninformative(why) if why else verdicts.direction(
                         e, (lo, hi), expected_sign=1, why="the paper reports no number for gated vs inject-all"),
                     note=f"gate injected on {np.mean(gated_on):.0%} of tasks"))
    return out


def _claim_recovery(cases: list[CaseFile], recov: Counter, n: int) -> list[Claim]:
    """The self-recovery layer fired and every localization ended with a case file."""
    return [Claim(statement="the self-recovery layer fired on real tasks and every task ended with a case file",
                  paper_value="a lightweight self-recovery layer handles invalid outputs and tool errors",
                  measured=float(sum(recov.values())), kind=Kind.CHECK, source=SOURCE, unit="recovery events",
                  ruling=verdicts.outcome(len(cases) == n and all(c.findings for c in cases),
                                          test="every localization returned a non-empty case file"),
                  note=f"recovery paths fired: {dict(recov)} (programmatic diagnostician)")]


def _setup(plan: Plan, n: int) -> str:
    return (f"{n} bugs planted by E170's mutation operators into {', '.join(plan.repos)} (CPython stdlib "
            "packages and pyflakes), each detected by the package's own unittest suite run in divelab.sandbox; "
            "issue text generated from the failing test's output. Localizers: the SHERLOC loop driven by a "
            "programmatic diagnostician that reads the SBFL spectrum and breaks its ties with the repository "
            "evidence the loop gathers (traceback frames, the failing test's calls, names in the issue), BM25 "
            "(rank-bm25), Ochiai SBFL (coverage.py per-test contexts), LM surprisal (zoo smoke LM trained on "
            "json/tomllib/textlib). Repair: search over inverse mutation operators at the reported lines (else "
            "at the lines SBFL ranks most suspicious), validated by the real tests; a report naming the planted "
            f"edit's location is the positive control. {PLANTED}")


def run(plan: Plan, seed: int) -> Reproduction:
    tasks = stage("plant bugs", lambda: build_benchmark(list(plan.repos), plan.n_per_repo, seed=seed),
                  weight=BUILD_WEIGHT)
    if not tasks:
        raise RuntimeError("no planted bug was detected by the test suites; nothing to measure")
    repos = {name: open_repo(name) for name in plan.repos}
    n = len(tasks)
    preds, cases, recov = stage("train the surprisal LM and localize", lambda: _localize(tasks, repos, plan, seed),
                                weight=LOCALIZE_WEIGHT)
    table, hits1 = _hits(preds, tasks)
    resolved, chars, gated_on = stage("repair under 6 report conditions",
                                      lambda: _repair(tasks, repos, preds, cases, plan, seed), weight=REPAIR_WEIGHT)

    rep = Reproduction("sherloc", "SHERLOC: diagnostic case files for bug localization (E169)", "", seed,
                       setup=_setup(plan, n), planted=PLANTED)
    rep.details = {"localization": table, "n_tasks": n, "tasks_per_repo": dict(Counter(t.repo for t in tasks)),
                   "recoveries": dict(recov), "resolve_rate": {c: float(np.mean(v)) for c, v in resolved.items()},
                   "localization_chars": {c: float(np.mean(v)) for c, v in chars.items()},
                   "gate_injected_fraction": float(np.mean(gated_on)),
                   "repair_tasks": [{"task": tasks[i].id, "operator": tasks[i].operator,
                                     **{c: resolved[c][j] for c in REPAIR_CONDITIONS}}
                                    for j, i in enumerate(range(0, n, plan.repair_every))]}
    rep.claims += _claims_localization(hits1, n, seed)
    rep.claims += _claims_memorisation(hits1, tasks, plan, seed)
    rep.claims += _claims_injection(resolved, chars, gated_on, plan, seed)
    rep.claims += _claim_recovery(cases, recov, n)
    if plan.real_llm is not None:  # SmolLM2 driving the loop raw
        real_llm.add_to(rep, plan.real_llm, seed, tasks, repos, preds, weight=LIVE_WEIGHT)
    else:
        rep.add(not_checkable("SHERLOC driven by SmolLM2-135M-Instruct on a slice",
                              "thinking off: recall@1 74% -> 10%, 87% of runs without valid output",
                              "run at full scale only (SmolLM2 generates ~4-16 tok/s on this CPU); "
                              "`divelab sherloc localize --llm smollm2` runs the loop with it on one task", SOURCE))
    if plan.real_diagnostician is not None:
        # SmolLM2 as the diagnostician: SBFL shortlist + repository evidence, adapted on disjoint training bugs
        real_diagnostician.add_to(rep, plan.real_diagnostician, seed, tasks, repos, preds, weight=DIAG_WEIGHT)
    else:
        rep.add(not_checkable("SHERLOC with a real diagnostician (SBFL shortlist + repository evidence + "
                              "SmolLM2-135M-Instruct, LoRA-adapted on disjoint training bugs) beats the strongest "
                              "other localizer", "SHERLOC beats localization baselines (e.g. +18.3 pp over "
                              "non-fine-tuned 32B)", "run at full scale only (planting training bugs and LoRA SFT of "
                              "SmolLM2 take minutes of CPU)", SOURCE))
    return rep
