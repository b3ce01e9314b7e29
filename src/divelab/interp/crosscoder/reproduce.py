"""Reproduction of E175 (arXiv 2606.26474): a Dedicated Feature Crosscoder localises RL-induced tool use, on a
tiny base LM and its RL-trained tool-calling sibling."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch
from scipy import stats as st

from divelab import stats, verdicts
from divelab.claims import Claim, Kind, Reproduction, not_checkable, strongest
from divelab.comparisons import against_strongest, baseline_records
from divelab.interp.crosscoder import task
from divelab.interp.crosscoder.dfc import A, B, CrosscoderConfig, train_crosscoder
from divelab.interp.crosscoder.harvest import harvest_generation_pairs
from divelab.interp.crosscoder.interventions import (
    ablate_features,
    add_direction,
    generate,
    prescale_topk,
    recon_patch,
    steer_features,
)
from divelab.interp.crosscoder.models import PairSpec, load_pair, tool_correctness
from divelab.interp.crosscoder.ranking import (
    exclusive_liveness,
    latent_scaling,
    rank_features,
    relative_decoder_norm,
)
from divelab.interp.crosscoder.real_llm import RealPlan
from divelab.stages import stage

# the notes give no paper section per number, so every claim cites the paper and the episode
SOURCE = "arXiv 2606.26474; week-in-review E175"


@dataclass(frozen=True)
class Plan:
    pair: PairSpec
    """the base LM and its RL tool-calling sibling: corpus size, pre-training steps, RL iterations."""
    harvest: int
    """prompts (half tool, half generic) whose activations (last prompt token and every response token) train
    every crosscoder."""
    heldout: int
    """other prompts (half tool, half generic) on which the A-exclusive latents' liveness is measured."""
    cells: tuple[CrosscoderConfig, ...]
    """the crosscoders trained: dedicated-feature (DFC) and plain cells over dictionary size, top-k and
    shared-feature penalty, with their training steps."""
    select: int
    """tool prompts used to pick the steering strength α (disjoint from the evaluation prompts)."""
    eval: int
    """held-out tool prompts behind every reported tool correctness."""
    alphas: tuple[float, ...]
    """steering strengths tried on the selection prompts."""
    real_llm: RealPlan | None
    """SmolLM2-135M-Instruct against a LoRA tool sibling, sized by this (minutes of CPU), or None to skip it."""


def _grid(ds, ks, lxs, p, steps) -> tuple[CrosscoderConfig, ...]:
    dfc = [CrosscoderConfig(dict_size=d, k=k, excl_share=p, lambda_excl=lx, steps=steps)
           for d in ds for k in ks for lx in lxs]
    cc = [CrosscoderConfig(dict_size=d, k=k, excl_share=0.0, steps=steps) for d in ds for k in ks]
    return tuple(dfc + cc)


PLANS = {
    "smoke": Plan(PairSpec(corpus=600, base_steps=40, rl_iters=3, check_prompts=10), harvest=120, heldout=40,
                  cells=_grid((64,), (4,), (0.0,), 0.1, 60), select=8, eval=12, alphas=(8.0,), real_llm=None),
    # quick: 4 DFC cells (2 dictionary sizes x 2 shared-feature penalties at k=8), to stay near the time
    # budget; full sweeps k too
    "quick": Plan(PairSpec(), harvest=1200, heldout=200, cells=_grid((128, 256), (8,), (0.0, 1e-3), 0.1, 600), select=40,
                  eval=60, alphas=(4.0, 8.0, 16.0, 32.0), real_llm=None),
    "full": Plan(PairSpec(), harvest=4000, heldout=1000, cells=_grid((128, 256, 512), (4, 8, 16), (0.0, 1e-3), 0.1, 2000),
                 select=80, eval=300, alphas=(4.0, 8.0, 16.0, 32.0), real_llm=RealPlan()),
}


@dataclass
class Measured:
    """Everything the claims read: the pair's clean scores, the harvested activations (one row per position:
    the last prompt token and every response token), the difference-of-means baselines and one row per
    crosscoder cell."""
    base: torch.nn.Module
    sib: torch.nn.Module
    layer: int
    texts: list[task.Prompt]
    labels: np.ndarray
    """per activation row: 1 when its prompt is a tool prompt."""
    owner: np.ndarray
    """per activation row: the index of its prompt in ``texts``."""
    acts_a: torch.Tensor
    acts_b: torch.Tensor
    ev: list[task.Prompt]
    sel: list[task.Prompt]
    clean_a: dict
    clean_b: dict
    meta: dict
    dom_a: dict
    dom_b: dict
    b_dom: float
    rows: list[dict]
    score: Callable[..., dict]
    """score(model, prompts=ev, **kw): per-prompt tool correctness, format and selection."""

    @property
    def dfc(self) -> list[dict]:
        return [r for r in self.rows if r["arch"] == "DFC"]

    @property
    def ccs(self) -> list[dict]:
        return [r for r in self.rows if r["arch"] == "CC"]

    @property
    def tool(self) -> torch.Tensor:
        return torch.tensor(self.labels == 1)

    @property
    def tool_names(self) -> list[str]:
        """The right tool of each tool-prompt activation row (in row order)."""
        return [self.texts[o].tool for o, lab in zip(self.owner, self.labels, strict=True) if lab == 1]

    @property
    def live(self) -> list[dict]:
        """The DFC cells with an A-exclusive feature that fires on a harvested position (all DFC cells when none
        has one: the claims are then uninformative through :attr:`dead`). Steering or ablating a dead block
        changes nothing by construction, so a cell without one cannot test those claims."""
        return [r for r in self.dfc if r["excl_alive"]] or self.dfc

    def live_note(self) -> str:
        return (f"over the {len(self.live)} of {len(self.dfc)} DFC cells whose A-exclusive block fires (a dead "
                "block cannot be steered or ablated)")

    @property
    def best(self) -> dict:
        """The live DFC cell whose steering gained most on the selection prompts."""
        return max(self.live, key=lambda r: r["sel_gain"])

    @property
    def dead(self) -> str:
        # A failed set-up is detected from the measurement, never by hand: when no DFC cell has a live
        # A-exclusive feature, every claim about steering or ablating those features is uninformative.
        return failed_setup([r["excl_alive"] for r in self.dfc], len(self.labels))

    def excl(self, ruling: verdicts.Ruling) -> verdicts.Ruling:
        return verdicts.uninformative(self.dead) if self.dead else ruling


STAGE_WEIGHT = 3
"""At full: the tiny pair with its crosscoder cells (1), then the SmolLM2 pair (2); other scales end after the first."""

def run(plan: Plan, seed: int) -> Reproduction:
    rep = Reproduction(system="crosscoder", title="A dedicated-feature crosscoder localises RL-induced tool use",
                       scale="", seed=seed)
    with torch.no_grad():
        m = stage("tiny pair and crosscoder cells",
                  lambda: _measure(replace(plan, pair=replace(plan.pair, seed=seed)), seed), weight=1)
        rep.setup = _setup(m, plan)
        rep.claims += _claims_precondition(m, plan, seed)
        rep.claims += _claims_checks(m)
        rep.claims += _claims_liveness(m, plan)
        rep.claims += _claims_steering(m, seed)
        rep.claims += _claims_recon_patch(m, seed)
        rep.claims += _claims_spillover(m)
        rep.claims += _claims_exclusive_block(m)
        rep.claims += _claims_base_steering(m, seed)
        rep.claims += _claims_cc_vs_dfc(m, seed)
        rep.claims += _claims_template_detector(m)
        rep.details = _details(m)
    if plan.real_llm is not None:  # SmolLM2-135M-Instruct vs a LoRA tool sibling
        from divelab.interp.crosscoder import real_llm

        real_llm.add_to(rep, plan.real_llm, seed)
    return rep


def _harvest(sib, base, tok, prompts: list[task.Prompt], layer: int):
    """Activations at the positions the generation-time edits act on: the last prompt token and every token of
    a greedy response, of the sibling for even-indexed prompts and of the base for odd ones, so both models'
    trajectories (the sibling's and the base's patched runs) are in the training distribution."""
    texts = [p.text for p in prompts]
    sib_resp, base_resp = generate(sib, tok, texts[0::2]), generate(base, tok, texts[1::2])
    resp = [sib_resp[i // 2] if i % 2 == 0 else base_resp[i // 2] for i in range(len(texts))]
    a, b, owner = harvest_generation_pairs(sib, base, tok, texts, resp, layer, progress=False)
    return a, b, owner.numpy()


def _tool_prompts(n: int, seed: int) -> list[task.Prompt]:
    out: list[task.Prompt] = []
    s = seed
    while len(out) < n:
        out += [p for p in task.prompts(2 * n, seed=s) if p.is_tool]
        s += 1
    return out[:n]


def _score_on(tok, ev: list[task.Prompt], model, prompts: list[task.Prompt] | None = None, **kw) -> dict:
    """Per-prompt tool correctness, format and selection of ``model`` on ``prompts`` (default: ``ev``)."""
    return tool_correctness(model, tok, ev if prompts is None else prompts, **kw)


def _measure(plan: Plan, seed: int) -> Measured:
    """Train the pair and every crosscoder cell; score the sibling and the base clean, through each
    cell's reconstruction, steered and ablated, and along the difference-of-means baselines."""
    with torch.enable_grad():
        base, sib, tok, meta = load_pair(plan.pair)
    layer = base.config.num_hidden_layers // 2
    sel = _tool_prompts(plan.select, 7000 + seed)
    ev = _tool_prompts(plan.eval, 8000 + seed)

    score = functools.partial(_score_on, tok, ev)  # a partial, not a closure: a full run's stage pickles it

    clean_a, clean_b = score(sib), score(base)
    clean_a_sel = score(sib, sel)
    texts = task.prompts(plan.harvest, seed=5000 + seed)
    acts_a, acts_b, owner = _harvest(sib, base, tok, texts, layer)
    labels = np.array([texts[o].is_tool for o in owner], dtype=int)
    held = task.prompts(plan.heldout, seed=6000 + seed)
    held_a, held_b, held_owner = _harvest(sib, base, tok, held, layer)
    held_labels = np.array([held[o].is_tool for o in held_owner], dtype=int)

    # difference-of-means baselines (sibling − base on tool-prompt rows, at the positions every edit acts on)
    tool = torch.tensor(labels == 1)
    dom = acts_a[tool].mean(0) - acts_b[tool].mean(0)
    dom_gain_sel = {b: score(sib, sel, layer=layer, edit=add_direction(b * dom))["correct"].mean() -
                    clean_a_sel["correct"].mean() for b in (0.5, 1.0, 2.0)}
    b_dom = max(dom_gain_sel, key=dom_gain_sel.get)
    dom_a = score(sib, layer=layer, edit=add_direction(b_dom * dom))
    dom_b = score(base, layer=layer, edit=add_direction(dom))

    rows = []
    for cfg in plan.cells:
        cfg = replace(cfg, seed=seed)
        with torch.enable_grad():
            cc = train_crosscoder(acts_a, acts_b, cfg)
        # A-exclusive features that fire (survive top-k) on at least one harvested position: steering and
        # ablating scale with the activation, so a cell whose exclusive block never fires cannot test them.
        alive = int((cc.encode(acts_a, acts_b)[:, cc.a_slice] > 0).any(0).sum())
        row: dict = {"cell": cfg.label(), "arch": cfg.arch, "D": cfg.dict_size, "k": cfg.k,
                     "lambda_excl": cfg.lambda_excl, "forbidden_max": cc.forbidden_max(),
                     "mse": float(cc.loss(acts_a, acts_b)[1]["mse"]), "excl_alive": alive,
                     "dead_at_end": int(cc.dead_latents().sum()),
                     "heldout": exclusive_liveness(cc, held_a, held_b, held_labels) if cfg.n_excl else {}}
        ra = score(sib, layer=layer, edit=recon_patch(cc, A), other=base)
        rb = score(base, layer=layer, edit=recon_patch(cc, B), other=sib)
        row.update(recon_a=ra["correct"], recon_a_fmt=ra["format"], recon_b_sel=rb["selection"],
                   recon_b_fmt=rb["format"])
        ranked = rank_features(cc, acts_a, acts_b, labels, partition="A" if cfg.n_excl else None, top=5)
        top = ranked[0].index
        gains = {a: score(sib, sel, layer=layer, edit=steer_features(cc, A, [top], a), other=base)["correct"].mean()
                 - clean_a_sel["correct"].mean() for a in plan.alphas}
        alpha = max(gains, key=gains.get)
        row.update(top=top, top_d=ranked[0].cohens_d, top_auroc=ranked[0].auroc, alpha=alpha,
                   sel_gain=gains[alpha],
                   steer=score(sib, layer=layer, edit=steer_features(cc, A, [top], alpha), other=base)["correct"],
                   ablate=score(sib, layer=layer, edit=ablate_features(cc, A, [top]), other=base)["correct"],
                   cc=cc, ranked=ranked)
        if cfg.n_excl:
            row["ablate_block"] = score(sib, layer=layer, edit=ablate_features(cc, A, range(cc.n_a)),
                                        other=base)["correct"]
        rows.append(row)
    return Measured(base=base, sib=sib, layer=layer, texts=texts, labels=labels, owner=owner, acts_a=acts_a,
                    acts_b=acts_b, ev=ev,
                    sel=sel, clean_a=clean_a, clean_b=clean_b, meta=meta, dom_a=dom_a, dom_b=dom_b, b_dom=b_dom,
                    rows=rows, score=score)


def _setup(m: Measured, plan: Plan) -> str:
    return (f"Base: a {sum(p.numel() for p in m.base.parameters()):,}-parameter Llama-style divelab LM trained "
            f"from scratch on {plan.pair.corpus} prompts (half list three numbered tools with a request, half "
            f"generic text), where the strict call `<call NAME>` follows only {plan.pair.call_rate:.0%} of tool "
            "prompts. Sibling (model A): the base further trained with group-normalised REINFORCE (GRPO "
            "advantage from divelab.rl) rewarded 1 for a strict call to the right tool. Crosscoders on "
            f"residuals after layer {m.layer} at the positions every edit acts on during generation (the last "
            f"prompt token and each token of a greedy response, the sibling's or the base's in turn) of "
            f"{plan.harvest} prompts (50/50; {len(m.labels)} positions), {len(plan.cells)} cells, dead latents "
            "kept alive by the AuxK loss of Gao et al. 2024; every correctness on "
            f"{len(m.ev)} held-out tool prompts (greedy); steering α picked on {len(m.sel)} other prompts. The "
            "other model runs in lockstep so the crosscoder encodes both.")


def _claims_precondition(m: Measured, plan: Plan, seed: int) -> list[Claim]:
    """The sibling must call tools far more often than the base, or there is nothing to localise."""
    clean_a, clean_b = m.clean_a, m.clean_b
    d, lo, hi = stats.diff_ci(clean_a["correct"], clean_b["correct"], seed=seed)
    return [Claim(statement="the RL sibling calls the right tool in strict format far more often than the base",
                  paper_value="ToolRL 19–22.5% vs base 0%", measured=d, ci=(lo, hi), kind=Kind.BY_CONSTRUCTION,
                  source=SOURCE,
                  ruling=verdicts.direction(d, (lo, hi), why="a precondition; the paper's pair differs"),
                  note=f"sibling {clean_a['correct'].mean():.2f}, base {clean_b['correct'].mean():.2f} on "
                       f"{len(m.ev)} held-out tool prompts (greedy); RL stopped once held-out correctness reached "
                       f"{plan.pair.target} (after {m.meta['rl_iters']} iterations), to leave headroom as the "
                       "paper's 19% sibling does")]


def _claims_checks(m: Measured) -> list[Claim]:
    """Exact properties of the construction: exclusivity and the pre-top-k scaling no-op."""
    worst = max(r["forbidden_max"] for r in m.dfc)
    cc0 = m.dfc[0]["cc"]
    same = all(bool(torch.equal(prescale_topk(cc0, m.acts_a, m.acts_b, 1.0), prescale_topk(cc0, m.acts_a, m.acts_b, a)))
               for a in (2.0, 5.0, 10.0))
    return [Claim(statement="DFC exclusivity holds exactly after training (largest forbidden weight)",
                  paper_value="forbidden weights zeroed after every step", measured=worst, kind=Kind.CHECK,
                  source=SOURCE, ruling=verdicts.bound(worst, 0.0, sense="<=", exact=True),
                  note=f"{len(m.dfc)} DFC cells (the largest weight itself, not a sample)"),
            Claim(statement="uniform pre-top-k scaling leaves the top-k set unchanged (a no-op)",
                  paper_value="identical results at α ∈ {2, 5, 10}", measured=str(same), kind=Kind.CHECK,
                  source=SOURCE,
                  ruling=verdicts.outcome(same, test=f"top-k index sets equal on {len(m.labels)} positions"))]


def _claims_liveness(m: Measured, plan: Plan) -> list[Claim]:
    """Did the set-up work: are the A-exclusive latents alive on activations they were not trained on?"""
    live = [r["heldout"] for r in m.dfc]
    worst = min(x["alive"] for x in live)
    return [Claim(statement="the A-exclusive latents are alive on held-out activations (smallest share alive over "
                            "DFC cells)",
                  paper_value="few dead latents with the AuxK loss (Gao et al. 2024); the DFC paper assumes a live "
                              "exclusive block",
                  measured=worst, kind=Kind.CHECK, source=SOURCE,
                  ruling=verdicts.outcome(worst >= 0.5, test="in every DFC cell at least half of the A-exclusive "
                                                             "latents fire on at least one held-out position"),
                  note=f"{plan.heldout} held-out prompts; per cell: share alive, mean activation when firing, "
                       "share of tool / generic positions where any fires: "
                       + "; ".join(f"{r['cell']}: {x['alive']:.2f}, {x['mean_when_on']:.2f}, {x['fire_tool']:.2f} / "
                                   f"{x['fire_generic']:.2f}" for r, x in zip(m.dfc, live, strict=True)))]


def _claims_steering(m: Measured, seed: int) -> list[Claim]:
    """Steering the sibling with one A-exclusive feature: the best cell, then every DFC cell."""
    ca, dfc, best = m.clean_a["correct"], m.live, m.best
    best_cc = max(m.ccs, key=lambda r: r["sel_gain"]) if m.ccs else None
    # judged against the strongest alternative measured on the same prompts (paired by prompt)
    alts = {"no steering": ca, "difference-of-means steering": m.dom_a["correct"]}
    if best_cc:
        alts["plain-crosscoder top feature"] = best_cc["steer"]
    rand = _random_feature(m, seed)
    if rand is not None:  # a random live A-exclusive feature of the same cell at the same α
        alts["random A-exclusive feature"] = m.score(
            m.sib, layer=m.layer, edit=steer_features(best["cc"], A, [rand], best["alpha"]), other=m.base)["correct"]
    cmp = against_strongest(best["steer"], alts, seed=seed)
    out = [Claim(statement="steering one A-exclusive feature raises sibling tool correctness (best cell), over the "
                           "strongest alternative",
                 paper_value="+65 pp over no steering (22.5% → 87.5%, one best cell, 40 prompts)", measured=cmp.effect,
                 ci=cmp.ci, unit="share", kind=Kind.EMPIRICAL, source=SOURCE,
                 # one crosscoder training run stands behind the best cell: the interval is over prompts
                 ruling=m.excl(verdicts.direction(cmp.effect, cmp.ci, paper=0.65, tol=0.2, tol_kind="abs",
                                                  training_runs=1)),
                 note=f"cell {best['cell']}, feature {best['top']} (Cohen's d {best['top_d']:.1f}, AUROC "
                      f"{best['top_auroc']:.2f}), α = {best['alpha']:g}; cell and α chosen on separate prompts",
                 **cmp.claim_fields())]
    cell_gains = np.array([r["steer"].mean() - ca.mean() for r in dfc])
    pvals = []
    for r in dfc:
        up, down = int(((r["steer"] > ca)).sum()), int(((r["steer"] < ca)).sum())
        pvals.append(st.binomtest(up, up + down, 0.5, alternative="greater").pvalue if up + down else 1.0)
    sig = int((stats.holm(pvals) < 0.05).sum())
    # cells are independent crosscoder training runs: the interval is over cells, against the stronger of
    # no steering and difference-of-means steering (each measured once on the evaluation prompts)
    recs = baseline_records({"no steering": ca, "difference-of-means steering": m.dom_a["correct"]}, seed=seed)
    ref = strongest(recs, "higher")
    over = np.array([r["steer"].mean() for r in dfc]) - ref["value"]
    mean, (lo, hi) = float(over.mean()), stats.mean_ci(over)
    out.append(Claim(statement="single-feature steering over all DFC cells, minus the strongest alternative (mean; "
                               "Holm-corrected count)",
                     paper_value="best cells +55 and +65 pp; the rest not reported", measured=mean, ci=(lo, hi),
                     kind=Kind.EMPIRICAL, source=SOURCE, baselines=recs, better="higher", compared_with=ref["name"],
                     ruling=m.excl(verdicts.direction(mean, (lo, hi), why="the paper reports best cells only",
                                                      training_runs=len(dfc))),
                     note=f"{m.live_note()}; {sig}/{len(dfc)} cells significant after Holm (exact McNemar per "
                          "cell); gains " + ", ".join(f"{x:+.2f}" for x in cell_gains)))
    return out


def _random_feature(m: Measured, seed: int) -> int | None:
    """A random A-exclusive feature of the best cell, other than its top one, that fires on a harvested
    position (None when there is none)."""
    best = m.best
    f = best["cc"].encode(m.acts_a, m.acts_b)[:, best["cc"].a_slice]
    live = [i for i in torch.nonzero((f > 0).any(0)).flatten().tolist() if i != best["top"]]
    return int(np.random.default_rng(seed).choice(live)) if live else None


def _claims_recon_patch(m: Measured, seed: int) -> list[Claim]:
    """Routing the sibling's activation through the reconstruction alone, and whether MSE predicts the gain."""
    ca, rows = m.clean_a["correct"], m.rows
    rg = np.array([r["recon_a"].mean() - ca.mean() for r in rows])
    mean, (lo, hi) = float(rg.mean()), stats.mean_ci(rg)
    out = [Claim(statement="the reconstruction patch alone raises sibling tool correctness (mean over cells)",
                 paper_value="+31.1 ± 9.7 pp, 45/47 runs positive", measured=mean, ci=(lo, hi), kind=Kind.EMPIRICAL,
                 source=SOURCE, ruling=verdicts.direction(mean, (lo, hi), paper=0.311, tol=0.15, tol_kind="abs"),
                 note=f"{int((rg > 0).sum())}/{rg.size} cells positive")]
    mse = np.array([r["mse"] for r in rows])
    if not (rg.size >= 4 and np.ptp(rg) > 0):
        return out + [not_checkable("reconstruction MSE vs recon-patch gain", "r = +0.08",
                                    "needs >= 4 cells with varying gains")]

    def corr(idx: np.ndarray) -> float:
        i = idx.astype(int)
        return float(np.corrcoef(mse[i], rg[i])[0, 1]) if np.ptp(rg[i]) > 0 and np.ptp(mse[i]) > 0 else 0.0

    r0 = corr(np.arange(rg.size).astype(float))
    lo, hi = stats.bootstrap_ci(np.arange(rg.size).astype(float), corr, seed=seed, method="percentile")
    return out + [Claim(statement="reconstruction MSE is a weak predictor of the recon-patch gain (Pearson r)",
                        paper_value="r = +0.08, 95% CI [−0.21, 0.36]", measured=r0, ci=(lo, hi),
                        kind=Kind.EMPIRICAL, source=SOURCE,
                        ruling=verdicts.value(r0, paper=0.08, tol=0.3, tol_kind="abs", ci=(lo, hi)),
                        note=f"{rg.size} cells, bootstrap over cells")]


def _claims_spillover(m: Measured) -> list[Claim]:
    """The base through the jointly trained dictionary: tool selection rises, the call syntax does not."""
    rows, clean_b = m.rows, m.clean_b
    sp = np.array([r["recon_b_sel"].mean() - clean_b["selection"].mean() for r in rows])
    mean, (lo, hi) = float(sp.mean()), stats.mean_ci(sp)
    worst_fmt = max(rows, key=lambda r: float(r["recon_b_fmt"].mean()))
    fmt, n_fmt = float(worst_fmt["recon_b_fmt"].mean()), worst_fmt["recon_b_fmt"].size
    control = max(float(r["recon_a_fmt"].mean()) for r in rows)
    return [Claim(statement="spillover: the base model through the crosscoder names the right tool more often",
                  paper_value="0% → ~7% (+6.8 ± 5.0 pp)", measured=mean, ci=(lo, hi), kind=Kind.EMPIRICAL,
                  source=SOURCE, baseline=f"base + difference-of-means direction: selection "
                                          f"{m.dom_b['selection'].mean() - clean_b['selection'].mean():+.2f}",
                  ruling=verdicts.direction(mean, (lo, hi), paper=0.068, tol=0.1, tol_kind="abs")),
            Claim(statement="format spillover: the patched base never emits the call syntax (max over cells)",
                  paper_value="exactly 0 in every run", measured=fmt,
                  ci=stats.proportion_ci(round(fmt * n_fmt), n_fmt), kind=Kind.EMPIRICAL, source=SOURCE,
                  ruling=format_ruling(fmt, n_fmt, control),
                  note=f"positive control: the sibling through the same reconstruction emits the call syntax on "
                       f"{control:.2f} of prompts (best cell)")]


def _claims_exclusive_block(m: Measured) -> list[Claim]:
    """The exclusive partition is load-bearing: ablating it, penalising it, ablating its top feature."""
    ca, dfc, live = m.clean_a["correct"], m.dfc, m.live
    ab = np.array([r["ablate_block"].mean() - ca.mean() for r in live])
    mean, (lo, hi) = float(ab.mean()), stats.mean_ci(ab)
    out = [Claim(statement="ablating the whole A-exclusive block degrades the sibling's tool correctness",
                 paper_value="the exclusive shelf is load-bearing", measured=mean, ci=(lo, hi), kind=Kind.EMPIRICAL,
                 source=SOURCE, ruling=m.excl(verdicts.direction(mean, (lo, hi), expected_sign=-1,
                                                                 why="the paper gives no number")),
                 note=m.live_note())]
    pen = {(r["D"], r["k"]): r["recon_a"].mean() for r in dfc if r["lambda_excl"] > 0}
    free = {(r["D"], r["k"]): r["recon_a"].mean() for r in dfc if r["lambda_excl"] == 0}
    keys = sorted(set(pen) & set(free))
    if len(keys) >= 2:
        dd, lo, hi = stats.paired_diff_ci([pen[k] for k in keys], [free[k] for k in keys])
        out.append(Claim(statement="penalising the exclusive block (λ_excl = 1e-3) lowers the sibling's recon "
                                   "fidelity",
                         paper_value="lower A fidelity with λ_excl = 1e-3", measured=dd, ci=(lo, hi),
                         kind=Kind.EMPIRICAL, source=SOURCE,
                         ruling=m.excl(verdicts.direction(dd, (lo, hi), expected_sign=-1,
                                                          why="the paper gives no number")),
                         note=f"paired by (D, k) over {len(keys)} pairs; recon-patched correctness"))
    else:
        out.append(not_checkable("λ_excl lowers A fidelity", "lower fidelity", "needs >= 2 (D, k) pairs"))
    fa = np.array([r["ablate"].mean() - ca.mean() for r in live])
    mean, (lo, hi) = float(fa.mean()), stats.mean_ci(fa)
    out.append(Claim(statement="ablating the single top A-exclusive feature lowers sibling tool correctness",
                     paper_value="causal (steering raises it)", measured=mean, ci=(lo, hi), kind=Kind.EMPIRICAL,
                     source=SOURCE, ruling=m.excl(verdicts.direction(mean, (lo, hi), expected_sign=-1,
                                                                     why="the paper gives no number")),
                     note=f"mean of (ablated − clean) {m.live_note()}"))
    return out


def _top_activations(m: Measured) -> torch.Tensor:
    """The best cell's top feature on the harvested tool prompts."""
    best = m.best
    return best["cc"].encode(m.acts_a, m.acts_b)[m.tool, best["top"]]


def _claims_base_steering(m: Measured, seed: int) -> list[Claim]:
    """Steering the base along the top exclusive feature's A-decoder direction (a causal check)."""
    best, clean_b = m.best, m.clean_b
    vec = best["alpha"] * float(_top_activations(m).mean()) * best["cc"].direction(best["top"], A)
    sb = m.score(m.base, layer=m.layer, edit=add_direction(vec))
    cmp = against_strongest(sb["selection"], {"no steering": clean_b["selection"],
                                              "difference-of-means direction": m.dom_b["selection"]}, seed=seed)
    return [Claim(statement="steering the base along the top exclusive feature's A-decoder direction raises its "
                            "tool selection, over the strongest alternative",
                  paper_value="(no paper number: a causal check the paper does not run)", measured=cmp.effect,
                  ci=cmp.ci, kind=Kind.EMPIRICAL, source=SOURCE,
                  # the direction comes from one crosscoder training run; the interval is over prompts
                  ruling=m.excl(verdicts.direction(cmp.effect, cmp.ci, why="proposed check, no paper number",
                                                   training_runs=1)), **cmp.claim_fields(),
                  note=f"strict-format correctness of the steered base {sb['correct'].mean():.2f}")]


def _claims_cc_vs_dfc(m: Measured, seed: int) -> list[Claim]:
    """Spillover of the plain crosscoder against the DFC (needs two cells of each)."""
    ccs, dfc, clean_b = m.ccs, m.dfc, m.clean_b
    if len(ccs) < 2 or len(dfc) < 2:
        return []
    sc = np.array([r["recon_b_sel"].mean() for r in ccs]) - clean_b["selection"].mean()
    sd = np.array([r["recon_b_sel"].mean() for r in dfc]) - clean_b["selection"].mean()
    dd, lo, hi = stats.diff_ci(sc, sd, seed=seed)
    p = float(st.ttest_ind(sc, sd, equal_var=False).pvalue) if np.ptp(np.r_[sc, sd]) > 0 else 1.0
    return [Claim(statement="the plain crosscoder spills more tool selection into the base than the DFC",
                  paper_value="+8.9 vs +5.9 pp, Welch p = 0.12 (underpowered)", measured=dd, ci=(lo, hi),
                  kind=Kind.EMPIRICAL, source=SOURCE,
                  ruling=verdicts.direction(dd, (lo, hi), paper=0.03, tol=0.05, tol_kind="abs"),
                  note=f"Welch p = {p:.2g} with {len(ccs)} CC vs {len(dfc)} DFC cells: underpowered too")]


def _tool_eta2(m: Measured) -> float:
    """Share of the top feature's variance over tool-prompt positions explained by which tool is right."""
    names = m.tool_names
    ft = _top_activations(m).numpy()
    groups = [ft[[i for i, n in enumerate(names) if n == t]] for t in sorted(task.TOOLS)]
    groups = [x for x in groups if x.size]
    grand = ft.mean()
    ss_b = sum(x.size * (x.mean() - grand) ** 2 for x in groups)
    ss_t = float(((ft - grand) ** 2).sum())
    return float(ss_b / ss_t) if ss_t > 0 else 0.0


def _claims_template_detector(m: Measured) -> list[Claim]:
    """The seam: is the top feature a template detector rather than a tool-choice feature?"""
    best, eta2 = m.best, _tool_eta2(m)
    template = best["top_auroc"] >= 0.95 and eta2 < 0.2
    return [Claim(statement="the top feature is a structural-template detector (fires on every tool prompt, "
                            "carries little about which tool)", paper_value="cleanest features are template "
                  "detectors (<tool_call>, dialogue tags)", measured=f"AUROC {best['top_auroc']:.2f}, eta² {eta2:.2f}",
                  kind=Kind.EMPIRICAL, source=SOURCE,
                  ruling=m.excl(verdicts.outcome(template,
                                                 test="AUROC tool-vs-generic >= 0.95 and eta² over right tool < 0.2")))]


def _details(m: Measured) -> dict:
    best, rows = m.best, m.rows
    tp = [m.texts[o] for o, lab in zip(m.owner, m.labels, strict=True) if lab == 1]
    ft = _top_activations(m).numpy()
    return {
        "base": {k: float(v.mean()) for k, v in m.clean_b.items() if k != "responses"},
        "sibling": {k: float(v.mean()) for k, v in m.clean_a.items() if k != "responses"},
        "rl": m.meta, "difference_of_means": {"beta": m.b_dom,
                                              "sibling_gain": float(m.dom_a["correct"].mean()
                                                                    - m.clean_a["correct"].mean())},
        "cells": [{k: (float(v.mean()) if isinstance(v, np.ndarray) else v) for k, v in r.items()
                   if k not in ("cc", "ranked")} | {"ranked": [vars(f) for f in r["ranked"]]} for r in rows],
        "best_cell": best["cell"], "latent_scaling_top": latent_scaling(best["cc"], m.acts_a, m.acts_b, best["top"]),
        "top_contexts": [tp[i].text for i in np.argsort(-ft)[:5]],
        "rel_decoder_norm_hist": {r["cell"]: np.histogram(relative_decoder_norm(r["cc"]), bins=10,
                                                          range=(0, 1))[0].tolist() for r in rows},
    }


def failed_setup(alive_per_dfc_cell: list[int], positions: int) -> str:
    """The reason the exclusive-feature claims cannot speak ("" when at least one cell has a live feature)."""
    if alive_per_dfc_cell and not any(alive_per_dfc_cell):
        return (f"failed set-up: every A-exclusive feature is dead (never active on the {positions} harvested "
                f"positions) in all {len(alive_per_dfc_cell)} DFC cells, so steering or ablating them changes nothing")
    return ""


def format_ruling(base_rate: float, n: int, control_rate: float) -> verdicts.Ruling:
    """'The patched base never emits the call syntax' means something only when the same reconstruction lets
    the sibling emit it (the positive control); then the base's rate is bounded at its Wilson upper end."""
    if control_rate <= 0:
        return verdicts.uninformative("positive control did not fire: the sibling through the crosscoder's "
                                      "reconstruction never emits the call syntax either, so nothing emits it")
    ci = stats.proportion_ci(round(base_rate * n), n)
    return verdicts.bound(base_rate, 0.0, sense="<=", ci=ci)
