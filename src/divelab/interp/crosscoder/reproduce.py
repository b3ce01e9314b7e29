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
from divelab.claims import Claim, Kind, Reproduction, not_checkable
from divelab.comparisons import against_strongest
from divelab.interp.crosscoder import task
from divelab.interp.crosscoder.dfc import KEEP_ALIVE, A, B, CrosscoderConfig, train_crosscoder
from divelab.interp.crosscoder.harvest import harvest_generation_pairs
from divelab.interp.crosscoder.interventions import (
    ablate_features,
    add_direction,
    generate,
    prescale_topk,
    random_unit,
    recon_patch,
    recon_random_direction,
    steer_features,
    steer_random_direction,
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
    dfc = [CrosscoderConfig(dict_size=d, k=k, excl_share=p, lambda_excl=lx, steps=steps, **KEEP_ALIVE)
           for d in ds for k in ks for lx in lxs]
    cc = [CrosscoderConfig(dict_size=d, k=k, excl_share=0.0, steps=steps, **KEEP_ALIVE) for d in ds for k in ks]
    return tuple(dfc + cc)


PLANS = {
    "smoke": Plan(PairSpec(corpus=600, base_steps=40, rl_iters=3, check_prompts=10), harvest=120, heldout=40,
                  cells=_grid((64,), (4,), (0.0,), 0.1, 60), select=8, eval=12, alphas=(8.0,), real_llm=None),
    # quick: 4 DFC cells (2 dictionary sizes x 2 shared-feature penalties at k=8), to stay near the time
    # budget; full sweeps k too
    "quick": Plan(PairSpec(), harvest=1200, heldout=200, cells=_grid((128, 256), (8,), (0.0, 1e-3), 0.1, 600), select=40,
                  eval=60, alphas=(4.0, 8.0, 16.0, 32.0), real_llm=None),
    # full: every cell is scored with its controls (a random latent, a random direction of matched size), so the
    # evaluation set is 150 prompts per cell (the paper's is 40) to keep the run within its time budget
    "full": Plan(PairSpec(), harvest=4000, heldout=1000, cells=_grid((128, 256, 512), (4, 8, 16), (0.0, 1e-3), 0.1, 2000),
                 select=80, eval=150, alphas=(4.0, 8.0, 16.0, 32.0), real_llm=RealPlan()),
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


PLANTED = ("The tiny pair's data come from our generator: every tool prompt is one template (`tools: 1 a 2 b 3 c. ask: "
           "... |`), every generic prompt another, and the right tool is a uniform draw; the base corpus's 5% strict-call "
           "rate and the sibling's RL stopping target (40% held-out correctness) are our constants. Whether a "
           "tool-vs-generic feature is a template detector is therefore decided by the generator.")

STAGE_WEIGHT = 3
"""At full: the tiny pair with its crosscoder cells (1), then the SmolLM2 pair (2); other scales end after the first."""

def run(plan: Plan, seed: int) -> Reproduction:
    rep = Reproduction(system="crosscoder", title="A dedicated-feature crosscoder localises RL-induced tool use",
                       scale="", seed=seed, planted=PLANTED)
    with torch.no_grad():
        m = stage("tiny pair and crosscoder cells",
                  lambda: _measure(replace(plan, pair=replace(plan.pair, seed=seed)), seed), weight=1)
        rep.setup = _setup(m, plan)
        rep.claims += _claims_precondition(m, plan, seed)
        rep.claims += _claims_checks(m)
        rep.claims += _claims_liveness(m, plan)
        rep.claims += _claims_steering(m, seed)
        rep.claims += _claims_recon_patch(m, seed)
        rep.claims += _claims_spillover(m, seed)
        rep.claims += _claims_exclusive_block(m, seed)
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
        cfg = replace(cfg, seed=seed + cfg.seed)  # a cell's own seed offsets the run's: replicate cells
        with torch.enable_grad():
            cc = train_crosscoder(acts_a, acts_b, cfg)
        # A-exclusive features that fire (survive top-k) on at least one harvested position: steering and
        # ablating scale with the activation, so a cell whose exclusive block never fires cannot test them.
        fired = cc.encode(acts_a, acts_b)[:, cc.a_slice] > 0
        alive = int(fired.any(0).sum())
        row: dict = {"cell": cfg.label() + (f" s{cfg.seed}" if cfg.seed != seed else ""), "arch": cfg.arch,
                     "D": cfg.dict_size, "k": cfg.k, "seed": cfg.seed,
                     "lambda_excl": cfg.lambda_excl, "forbidden_max": cc.forbidden_max(),
                     "mse": float(cc.loss(acts_a, acts_b)[1]["mse"]), "excl_alive": alive,
                     "dead_at_end": int(cc.dead_latents().sum()), "resampled": cc.resampled,
                     "heldout": exclusive_liveness(cc, held_a, held_b, held_labels) if cfg.n_excl else {}}
        ra = score(sib, layer=layer, edit=recon_patch(cc, A), other=base)
        rb = score(base, layer=layer, edit=recon_patch(cc, B), other=sib)
        row.update(recon_a=ra["correct"], recon_a_fmt=ra["format"], recon_b_sel=rb["selection"],
                   recon_b_fmt=rb["format"],
                   # negative controls: the patch's size along a random direction, on each model
                   recon_a_ctl=score(sib, layer=layer, edit=recon_random_direction(cc, A, seed), other=base)["correct"],
                   recon_b_ctl=score(base, layer=layer, edit=recon_random_direction(cc, B, seed),
                                     other=sib)["selection"])
        ranked = rank_features(cc, acts_a, acts_b, labels, partition="A" if cfg.n_excl else None, top=5)
        top = ranked[0].index
        gains = {a: score(sib, sel, layer=layer, edit=steer_features(cc, A, [top], a), other=base)["correct"].mean()
                 - clean_a_sel["correct"].mean() for a in plan.alphas}
        alpha = max(gains, key=gains.get)
        row.update(top=top, top_d=ranked[0].cohens_d, top_auroc=ranked[0].auroc, alpha=alpha,
                   sel_gain=gains[alpha],
                   steer=score(sib, layer=layer, edit=steer_features(cc, A, [top], alpha), other=base)["correct"],
                   cc=cc, ranked=ranked)
        if cfg.n_excl and alive:
            # a random other live A-exclusive latent (a trivial baseline) and the same edits along a random
            # direction of matched size (the negative controls); a dead block makes every edit a no-op
            live = [i for i in torch.nonzero(fired.any(0)).flatten().tolist() if i != top]
            rand = int(np.random.default_rng(seed + len(rows)).choice(live)) if live else None
            on = cc.encode(acts_a, acts_b)[labels == 1, top]
            vec = alpha * float(on[on > 0].mean() if bool((on > 0).any()) else 0.0) * cc.direction(top, A)
            row.update(
                rand=rand,
                ablate=score(sib, layer=layer, edit=ablate_features(cc, A, [top]), other=base)["correct"],
                ablate_block=score(sib, layer=layer, edit=ablate_features(cc, A, range(cc.n_a)), other=base)["correct"],
                steer_ctl=score(sib, layer=layer, edit=steer_random_direction(cc, A, [top], alpha, seed),
                                other=base)["correct"],
                ablate_ctl=score(sib, layer=layer, edit=steer_random_direction(cc, A, [top], 0.0, seed),
                                 other=base)["correct"],
                block_ctl=score(sib, layer=layer, edit=steer_random_direction(cc, A, range(cc.n_a), 0.0, seed),
                                other=base)["correct"],
                base_steer=score(base, layer=layer, edit=add_direction(vec))["selection"],
                base_steer_ctl=score(base, layer=layer,
                                     edit=add_direction(vec.norm() * random_unit(vec.numel(), seed)))["selection"])
            if rand is not None:
                row.update(steer_rand=score(sib, layer=layer, edit=steer_features(cc, A, [rand], alpha),
                                            other=base)["correct"],
                           ablate_rand=score(sib, layer=layer, edit=ablate_features(cc, A, [rand]),
                                             other=base)["correct"])
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
            "kept alive by the AuxK loss of Gao et al. 2024 and resampled at 20, 40 and 60% of training (Bricken et "
            "al. 2023); every correctness on "
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


def _clustered(rows: list[dict], method: str, alts: dict[str, Callable[[dict], np.ndarray]], ctl: str,
               ctl_name: str, seed: int, better: str = "higher"):
    """The method's per-prompt scores in every cell against the strongest alternative measured on the same
    prompts (cluster bootstrap over cells: each cell is one crosscoder training run), and the negative control's
    difference to that same alternative. ``(comparison, control, replication)``."""
    cells = [r["cell"] for r in rows for _ in range(len(r[method]))]
    meth = np.concatenate([r[method] for r in rows])
    arms = {name: np.concatenate([f(r) for r in rows]) for name, f in alts.items()}
    cmp = against_strongest(meth, arms, better=better, clusters=cells, seed=seed)
    e, lo, hi = stats.cluster_diff_ci(np.concatenate([r[ctl] for r in rows]), arms[cmp.strongest], cells, seed=seed)
    return (cmp, verdicts.control(ctl_name, e, (lo, hi)),
            {"unit": "crosscoder training runs (cells)", "n": len(rows), "clustered_by": "cell (prompts within it)"})


def _one_run(rows: list[dict], ruling: verdicts.Ruling) -> verdicts.Ruling:
    """A comparison over crosscoder cells needs two of them: one training run cannot tell the method from the run."""
    if len(rows) < 2:
        return verdicts.uninformative(f"{len(rows)} DFC cell(s) with a live A-exclusive block: one crosscoder "
                                      "training run cannot separate the method from the run")
    return ruling


def _claims_steering(m: Measured, seed: int) -> list[Claim]:
    """Steering the sibling with one A-exclusive feature, in every DFC cell whose block fires, against the
    strongest alternative (no steering, difference-of-means, the plain crosscoder's top feature, a random live
    A-exclusive latent of the same cell) and a random direction of the same size as control."""
    live, best = m.live, m.best
    ca = m.clean_a["correct"]
    best_cc = max(m.ccs, key=lambda r: r["sel_gain"]) if m.ccs else None
    rows = [r for r in live if "steer_ctl" in r]
    if not rows:
        return [Claim(statement="steering one A-exclusive feature raises sibling tool correctness, over the "
                                "strongest alternative (every DFC cell whose A-exclusive block fires)",
                      paper_value="best cells +55 and +65 pp over no steering", measured=None, kind=Kind.EMPIRICAL,
                      source=SOURCE, ruling=verdicts.uninformative(m.dead or "no DFC cell has a live A-exclusive "
                                                                   "latent"))]
    alts: dict[str, Callable[[dict], np.ndarray]] = {
        "no steering": lambda r: ca, "difference-of-means steering": lambda r: m.dom_a["correct"]}
    if best_cc:
        alts["plain-crosscoder top feature"] = lambda r: best_cc["steer"]
    if all("steer_rand" in r for r in rows):
        alts["random live A-exclusive latent"] = lambda r: r["steer_rand"]
    cmp, ctl, rep = _clustered(rows, "steer", alts, "steer_ctl",
                               "the same steering along a random direction of matched size", seed)
    gains = [float(r["steer"].mean() - ca.mean()) for r in rows]
    pvals = []
    for r in rows:
        up, down = int((r["steer"] > ca).sum()), int((r["steer"] < ca).sum())
        pvals.append(st.binomtest(up, up + down, 0.5, alternative="greater").pvalue if up + down else 1.0)
    sig = int((stats.holm(pvals) < 0.05).sum())
    return [Claim(statement="steering one A-exclusive feature raises sibling tool correctness, over the strongest "
                            "alternative (every DFC cell whose A-exclusive block fires)",
                  paper_value="best cells +55 and +65 pp over no steering (22.5% → 87.5%, 40 prompts)",
                  measured=cmp.effect, ci=cmp.ci, unit="share", kind=Kind.EMPIRICAL, source=SOURCE,
                  ruling=m.excl(_one_run(rows, verdicts.direction(
                      cmp.effect, cmp.ci, why="the paper reports its best cells only; this is every live cell",
                      training_runs=len(rows), control=ctl))),
                  falsifier="steered correctness no higher than the best of no steering, difference-of-means "
                            "steering, the plain crosscoder's feature and a random live exclusive latent on held-out "
                            "prompts would refute it; the trained models and dictionaries, not our constants, "
                            "decide it",
                  replication=rep, **cmp.claim_fields(),
                  note=f"{m.live_note()}; gain over no steering per cell "
                       + ", ".join(f"{g:+.2f}" for g in gains)
                       + f"; {sig}/{len(rows)} cells significant over no steering after Holm (exact McNemar); cell "
                         f"best on the selection prompts: {best['cell']}, feature {best['top']} (Cohen's d "
                         f"{best['top_d']:.1f}, AUROC {best['top_auroc']:.2f}), α = {best['alpha']:g}, "
                         f"{best['steer'].mean() - ca.mean():+.2f} over no steering on the evaluation prompts")]


def _claims_recon_patch(m: Measured, seed: int) -> list[Claim]:
    """Routing the sibling's activation through the reconstruction alone, and whether MSE predicts the gain."""
    ca, rows = m.clean_a["correct"], m.rows
    cmp, ctl, rep = _clustered(rows, "recon_a", {"no patch": lambda r: ca}, "recon_a_ctl",
                               "the sibling moved by the reconstruction error's size along a random direction", seed)
    rg = np.array([r["recon_a"].mean() - ca.mean() for r in rows])
    out = [Claim(statement="the reconstruction patch alone raises sibling tool correctness (every cell)",
                 paper_value="+31.1 ± 9.7 pp, 45/47 runs positive", measured=cmp.effect, ci=cmp.ci, unit="share",
                 kind=Kind.EMPIRICAL, source=SOURCE,
                 ruling=_one_run(rows, verdicts.direction(cmp.effect, cmp.ci, paper=0.311, tol=0.15, tol_kind="abs",
                                                          training_runs=len(rows), control=ctl)),
                 falsifier="patched correctness no higher than the unpatched sibling's on held-out prompts would "
                           "refute it; how much of the sibling's tool use the dictionary keeps is learned, not set",
                 replication=rep, **cmp.claim_fields(),
                 note=f"{int((rg > 0).sum())}/{rg.size} cells positive")]
    mse = np.array([r["mse"] for r in rows])
    if not (rg.size >= 4 and np.ptp(rg) > 0):
        return out + [not_checkable("reconstruction MSE vs recon-patch gain", "r = +0.08",
                                    "needs >= 4 cells with varying gains")]

    def corr(y: np.ndarray):
        def f(idx: np.ndarray) -> float:
            i = idx.astype(int)
            return float(np.corrcoef(mse[i], y[i])[0, 1]) if np.ptp(y[i]) > 0 and np.ptp(mse[i]) > 0 else 0.0
        return f

    cells = np.arange(rg.size).astype(float)
    r0 = corr(rg)(cells)
    lo, hi = stats.bootstrap_ci(cells, corr(rg), seed=seed, method="percentile")
    # negative control: the same correlation with the gains shuffled over cells (no pairing left)
    sh = np.random.default_rng(seed).permutation(rg)
    c0 = corr(sh)(cells)
    clo, chi = stats.bootstrap_ci(cells, corr(sh), seed=seed, method="percentile")
    return out + [Claim(statement="reconstruction MSE is a weak predictor of the recon-patch gain (Pearson r)",
                        paper_value="r = +0.08, 95% CI [−0.21, 0.36]", measured=r0, ci=(lo, hi),
                        kind=Kind.EMPIRICAL, source=SOURCE,
                        ruling=verdicts.value(r0, paper=0.08, tol=0.3, tol_kind="abs", ci=(lo, hi),
                                              control=verdicts.control("gains shuffled over cells", c0, (clo, chi))),
                        falsifier="a correlation whose interval leaves the paper's band (|r| well above 0.4) would "
                                  "refute it",
                        replication={"unit": "crosscoder training runs (cells)", "n": int(rg.size),
                                     "clustered_by": ""},
                        note=f"{rg.size} cells, bootstrap over cells")]


def _claims_spillover(m: Measured, seed: int) -> list[Claim]:
    """The base through the jointly trained dictionary: tool selection rises, the call syntax does not."""
    rows, clean_b = m.rows, m.clean_b
    cmp, ctl, rep = _clustered(rows, "recon_b_sel", {"no patch": lambda r: clean_b["selection"],
                                                     "base + difference-of-means direction":
                                                         lambda r: m.dom_b["selection"]},
                               "recon_b_ctl", "the base moved by the reconstruction error's size along a random "
                                              "direction", seed)
    worst_fmt = max(rows, key=lambda r: float(r["recon_b_fmt"].mean()))
    fmt, n_fmt = float(worst_fmt["recon_b_fmt"].mean()), worst_fmt["recon_b_fmt"].size
    control = max(float(r["recon_a_fmt"].mean()) for r in rows)
    return [Claim(statement="spillover: the base model through the crosscoder names the right tool more often, over "
                            "the strongest alternative",
                  paper_value="0% → ~7% (+6.8 ± 5.0 pp)", measured=cmp.effect, ci=cmp.ci, unit="share",
                  kind=Kind.EMPIRICAL, source=SOURCE,
                  ruling=_one_run(rows, verdicts.direction(cmp.effect, cmp.ci, paper=0.068, tol=0.1, tol_kind="abs",
                                                           training_runs=len(rows), control=ctl)),
                  falsifier="the patched base naming the right tool no more often than the clean base or the base "
                            "moved along the difference of means would refute it",
                  replication=rep, **cmp.claim_fields()),
            Claim(statement="format spillover: the patched base never emits the call syntax (max over cells)",
                  paper_value="exactly 0 in every run", measured=fmt,
                  ci=stats.proportion_ci(round(fmt * n_fmt), n_fmt), kind=Kind.EMPIRICAL, source=SOURCE,
                  ruling=format_ruling(fmt, n_fmt, control),
                  falsifier="the patched base emitting `<call NAME>` on any held-out prompt in any cell would refute "
                            "it",
                  replication={"unit": "crosscoder training runs (cells), worst one", "n": len(rows),
                               "clustered_by": ""},
                  note=f"positive control: the sibling through the same reconstruction emits the call syntax on "
                       f"{control:.2f} of prompts (best cell)")]


def _claims_exclusive_block(m: Measured, seed: int) -> list[Claim]:
    """The exclusive partition is load-bearing: ablating it, penalising it, ablating its top feature."""
    ca, dfc = m.clean_a["correct"], m.dfc
    rows = [r for r in m.live if "ablate" in r]
    out = []
    if rows:
        cmp, ctl, rep = _clustered(rows, "ablate_block", {"no ablation": lambda r: ca}, "block_ctl",
                                   "the block's contribution removed along a random direction of matched size",
                                   seed, better="lower")
        out.append(Claim(statement="ablating the whole A-exclusive block degrades the sibling's tool correctness",
                         paper_value="the exclusive shelf is load-bearing", measured=cmp.effect, ci=cmp.ci,
                         unit="share", kind=Kind.EMPIRICAL, source=SOURCE,
                         ruling=m.excl(_one_run(rows, verdicts.direction(
                             cmp.effect, cmp.ci, expected_sign=-1, why="the paper gives no number",
                             training_runs=len(rows), control=ctl))),
                         falsifier="ablated correctness no lower than the clean sibling's would refute it",
                         replication=rep, **cmp.claim_fields(), note=m.live_note()))
        alts: dict[str, Callable[[dict], np.ndarray]] = {"no ablation": lambda r: ca}
        if all("ablate_rand" in r for r in rows):
            alts["a random live A-exclusive latent ablated"] = lambda r: r["ablate_rand"]
        cmp, ctl, rep = _clustered(rows, "ablate", alts, "ablate_ctl",
                                   "the feature's contribution removed along a random direction of matched size",
                                   seed, better="lower")
        out.append(Claim(statement="ablating the single top A-exclusive feature lowers sibling tool correctness, "
                                   "over the strongest alternative",
                         paper_value="causal (steering raises it)", measured=cmp.effect, ci=cmp.ci, unit="share",
                         kind=Kind.EMPIRICAL, source=SOURCE,
                         ruling=m.excl(_one_run(rows, verdicts.direction(
                             cmp.effect, cmp.ci, expected_sign=-1, why="the paper gives no number",
                             training_runs=len(rows), control=ctl))),
                         falsifier="correctness after ablating the top feature no lower than after ablating a random "
                                   "live exclusive latent or nothing would refute it",
                         replication=rep, **cmp.claim_fields(), note=m.live_note()))
    else:
        out.append(Claim(statement="ablating the whole A-exclusive block degrades the sibling's tool correctness",
                         paper_value="the exclusive shelf is load-bearing", measured=None, kind=Kind.EMPIRICAL,
                         source=SOURCE, ruling=verdicts.uninformative(m.dead or "no live A-exclusive block")))
    pen = {(r["D"], r["k"], r["seed"]): r["recon_a"].mean() for r in dfc if r["lambda_excl"] > 0}
    free = {(r["D"], r["k"], r["seed"]): r["recon_a"].mean() for r in dfc if r["lambda_excl"] == 0}
    keys = sorted(set(pen) & set(free))
    if len(keys) >= 2:
        dd, lo, hi = stats.paired_diff_ci([pen[k] for k in keys], [free[k] for k in keys])
        out.append(Claim(statement="penalising the exclusive block (λ_excl = 1e-3) lowers the sibling's recon "
                                   "fidelity",
                         paper_value="lower A fidelity with λ_excl = 1e-3", measured=dd, ci=(lo, hi),
                         kind=Kind.EMPIRICAL, source=SOURCE,
                         ruling=m.excl(verdicts.direction(
                             dd, (lo, hi), expected_sign=-1, why="the paper gives no number", training_runs=len(keys),
                             control={"none": "a penalty has no sham: the unpenalised twin of each cell is the "
                                              "comparison itself"})),
                         falsifier="penalised cells keeping the sibling's correctness through the reconstruction as "
                                   "well as their unpenalised twins would refute it",
                         replication={"unit": "(D, k) pairs of crosscoder training runs", "n": len(keys),
                                      "clustered_by": ""},
                         note=f"paired by (D, k, seed) over {len(keys)} pairs; recon-patched correctness"))
    else:
        out.append(not_checkable("λ_excl lowers A fidelity", "lower fidelity", "needs >= 2 (D, k) pairs"))
    return out


def _top_activations(m: Measured) -> torch.Tensor:
    """The best cell's top feature on the harvested tool prompts."""
    best = m.best
    return best["cc"].encode(m.acts_a, m.acts_b)[m.tool, best["top"]]


def _claims_base_steering(m: Measured, seed: int) -> list[Claim]:
    """Steering the base along each live cell's top exclusive feature's A-decoder direction (a causal check)."""
    clean_b = m.clean_b
    rows = [r for r in m.live if "base_steer" in r]
    if not rows:
        return []
    cmp, ctl, rep = _clustered(rows, "base_steer", {"no steering": lambda r: clean_b["selection"],
                                                    "difference-of-means direction": lambda r: m.dom_b["selection"]},
                               "base_steer_ctl", "a random direction of the same norm", seed)
    return [Claim(statement="steering the base along the top exclusive feature's A-decoder direction raises its "
                            "tool selection, over the strongest alternative",
                  paper_value="(no paper number: a causal check the paper does not run)", measured=cmp.effect,
                  ci=cmp.ci, unit="share", kind=Kind.EMPIRICAL, source=SOURCE,
                  ruling=m.excl(_one_run(rows, verdicts.direction(
                      cmp.effect, cmp.ci, why="proposed check, no paper number", training_runs=len(rows),
                      control=ctl))),
                  falsifier="the steered base naming the right tool no more often than the clean base or the base "
                            "moved along the difference of means would refute it",
                  replication=rep, **cmp.claim_fields(),
                  note=f"{m.live_note()}; the direction scaled by α times the feature's mean activation when it "
                       "fires on tool prompts")]


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
                  ruling=verdicts.direction(dd, (lo, hi), paper=0.03, tol=0.05, tol_kind="abs",
                                            training_runs=min(len(ccs), len(dfc)),
                                            control={"none": "a comparison of two architectures: removing the "
                                                             "exclusive partition is the comparison itself"}),
                  falsifier="plain-crosscoder cells spilling no more tool selection into the base than DFC cells "
                            "would refute it",
                  replication={"unit": "crosscoder training runs (cells)", "n": len(ccs) + len(dfc),
                               "clustered_by": ""},
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
                  # our generator writes every tool prompt in one template and draws the right tool uniformly,
                  # so a feature that separates tool from generic prompts is a template detector by our data
                  kind=Kind.PLANTED, source=SOURCE,
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
