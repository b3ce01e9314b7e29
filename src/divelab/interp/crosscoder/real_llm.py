"""E175 on a real LLM: SmolLM2-135M-Instruct (model B) against a tool-calling sibling (model A) fine-tuned with
LoRA (``peft``) toward the reproduction's strict reward (``task.score``'s ``correct``: the whole reply is
``<call RIGHT>``), merged back into a plain HF model so harvest / DFC / interventions run on the pair unchanged.

Training is **supervised (LoRA SFT on the reward-1 reply), not RL**: on this shared 2-core CPU the base never
produced a reward-1 sample from an instruction-only prompt in a probe (0/32 sampled replies) and sampling 64 six-token
completions took ~160 s, so GRPO (``trl.GRPOTrainer``) gets no learning signal within minutes. The one reply
with strict reward 1 is the exact string ``<call RIGHT>``, so the SFT target equals what rejection sampling
with an oracle filter would keep. Stated in the claims and the docs.

Tool correctness is scored by teacher forcing: greedy decoding emits exactly ``<call RIGHT>`` + end-of-turn iff
at every position of that target the argmax is the target token (one forward pass instead of a generation
loop). Edits act at the last prompt token and every target position, as in generation.

Runs where the reproduction's plan sizes it (``real_llm``, full scale), through :func:`divelab.lm.real.add_claims_at_full`.
"""

from __future__ import annotations

import copy
import random
import time
from dataclasses import asdict, dataclass, replace

import numpy as np
import torch

from divelab import stats, verdicts
from divelab.cache import stable_hash
from divelab.claims import Claim, Kind
from divelab.comparisons import against_strongest
from divelab.interp.crosscoder import task
from divelab.interp.crosscoder.dfc import KEEP_ALIVE, A, CrosscoderConfig, train_crosscoder
from divelab.interp.crosscoder.harvest import capture_acts, forward, harvest_generation_pairs, layer_hook
from divelab.interp.crosscoder.interventions import (
    PairEdit,
    add_direction,
    recon_patch,
    recon_random_direction,
    steer_features,
    steer_random_direction,
)
from divelab.interp.crosscoder.ranking import exclusive_liveness, rank_features
from divelab.lm.adapt import AdaptConfig, LoraSpec
from divelab.stages import stage

SYSTEM = "Reply with only <call NAME>, NAME = the right tool."
SOURCE = "arXiv 2606.26474; week-in-review E175 (on a real LLM)"
CACHE_VERSION = 1


PROJECTIONS = ("down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj")
"""the attention and MLP projections the sibling's LoRA adapter sits on (those the base has, found by name)"""


@dataclass(frozen=True)
class RealPlan:
    """The SmolLM2 pair: the sibling's fine-tuning and the crosscoder sweep on the pair (defaults: the full run)."""

    layer: int = 15
    """decoder layer whose activations the crosscoders read (of SmolLM2's 30: the middle)"""
    harvest: int = 160
    """prompts (50/50 tool / generic) for the crosscoder's activations"""
    heldout: int = 60
    """other prompts (50/50): are the A-exclusive latents alive on activations not trained on?"""
    select: int = 16
    """tool prompts to pick the steering strength α (disjoint from eval)"""
    eval: int = 40
    """tool prompts behind every reported correctness"""
    adapt: AdaptConfig = AdaptConfig(method="sft", steps=40, lr=2e-3, batch_size=8, max_length=256, seed=0,
                                     save_every=10, lora=LoraSpec(r=8, alpha=16, target_modules=PROJECTIONS))
    """the sibling's LoRA SFT run (at most ``steps`` steps of ``batch_size`` fresh tool prompts); its seed is the
    plan's and its target modules are those of PROJECTIONS the base has"""
    target: float = 0.5
    """stop fine-tuning once held-out strict correctness reaches this (headroom for steering, as the tiny RL)"""
    check_every: int = 4
    """optimizer steps between held-out checks"""
    check: int = 16
    """held-out tool prompts of that check"""
    cells: tuple[CrosscoderConfig, ...] = tuple(
        CrosscoderConfig(dict_size=256, k=8, excl_share=0.1, lambda_shared=lsh, steps=600, lr=3e-3, seed=s, **KEEP_ALIVE)
        for lsh in (1e-3, 0.2) for s in (0, 1)) + (
        CrosscoderConfig(dict_size=256, k=8, excl_share=0.0, steps=600, lr=3e-3, **KEEP_ALIVE),)
    """the crosscoders trained on the pair: the paper's DFC and one with a stronger shared penalty, each at two
    seeds (the replication unit of the steering and patch claims), and one plain crosscoder"""
    alphas: tuple[float, ...] = (4.0, 16.0)
    """steering strengths tried on the selection prompts"""
    seed: int = 0
    """seed of the prompts, the adapter and the crosscoders (the run's seed replaces it)"""


# --- prompts and strict scoring ---------------------------------------------------------------------------------
def chat_text(tok, p: task.Prompt) -> str:
    """The prompt as the model sees it: its chat template with a one-line system instruction (raw text for a
    tokenizer without a template, e.g. the tiny char-level one)."""
    if getattr(tok, "chat_template", None):
        return tok.apply_chat_template([{"role": "system", "content": SYSTEM}, {"role": "user", "content": p.text}],
                                       tokenize=False, add_generation_prompt=True)
    return p.text


def _target(tok, p: task.Prompt, reply: str | None = None) -> list[int]:
    text = f"<call {p.tool}>" if reply is None else reply
    return tok(text, add_special_tokens=False)["input_ids"] + ([tok.eos_token_id] if reply is None else [])


@dataclass
class Batch:
    ids: torch.Tensor
    mask: torch.Tensor
    tlen: torch.Tensor  # target length per row (targets end each row; left padding)

    @property
    def start(self) -> int:
        return self.ids.shape[1] - int(self.tlen.max()) - 1

    def edit_mask(self) -> torch.Tensor:
        """[b, n - start] True at the last prompt token and every target position of each row."""
        n = self.ids.shape[1]
        pos = torch.arange(self.start, n)[None]
        return pos >= (n - self.tlen - 1)[:, None]


def make_batch(tok, prompts: list[task.Prompt], replies: list[str] | None = None) -> Batch:
    """Prompt + target rows, left-padded. The target is ``<call RIGHT>`` + end-of-turn, or the given ``replies``
    (as is, no end-of-turn: for checking the scorer against a generation)."""
    rows, tl = [], []
    for i, p in enumerate(prompts):
        t = _target(tok, p, None if replies is None else replies[i])
        rows.append(tok(chat_text(tok, p), add_special_tokens=False)["input_ids"] + t)
        tl.append(len(t))
    n = max(len(r) for r in rows)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    ids = torch.tensor([[pad] * (n - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (n - len(r)) + [1] * len(r) for r in rows])
    return Batch(ids, mask, torch.tensor(tl))


def _masked(edit: PairEdit, keep: torch.Tensor, other: torch.Tensor | None):
    return lambda x: torch.where(keep[..., None], edit(x, other), x)


@torch.no_grad()
def strict_correct(model, batch: Batch, *, layer: int | None = None, edit: PairEdit | None = None,
                   other_acts: torch.Tensor | None = None) -> np.ndarray:
    """1.0 per row where greedy decoding would emit exactly ``<call RIGHT>`` + end-of-turn (teacher-forced argmax
    check), optionally with ``edit`` on the residual after ``layer`` (``other_acts``: the other model's residual
    on the same batch, [b, n, d], for crosscoder edits)."""
    start = batch.start
    if edit is None:
        logits = forward(model, batch.ids, batch.mask)
    else:
        o = other_acts[:, start:] if other_acts is not None else None
        with layer_hook(model, layer, edit=_masked(edit, batch.edit_mask(), o), start=start):
            logits = forward(model, batch.ids, batch.mask)
    pred = logits[:, :-1].argmax(-1)
    gold = batch.ids[:, 1:]
    n = batch.ids.shape[1]
    out = []
    for i, t in enumerate(batch.tlen.tolist()):
        out.append(float(bool((pred[i, n - 1 - t:] == gold[i, n - 1 - t:]).all())))
    return np.array(out)


# --- the sibling: LoRA fine-tune (divelab.lm.adapt), merged ---------------------------------------------------------
def sibling_rows(tok, plan: RealPlan) -> list[dict[str, str]]:
    """The SFT rows: ``adapt.steps`` x ``adapt.batch_size`` fresh tool prompts (the chat-templated prompt as text), each
    completed by the one reply with strict reward 1 and the end-of-turn token."""
    rng = random.Random(plan.seed + 11)
    return [{"prompt": chat_text(tok, p), "completion": f"<call {p.tool}>{tok.eos_token}"}
            for p in (task.tool_prompt(rng) for _ in range(plan.adapt.steps * plan.adapt.batch_size))]


def _lora_targets(model) -> tuple[str, ...]:
    names = {n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    return tuple(sorted(names & {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}))


def train_sibling(base, tok, plan: RealPlan, base_name: str) -> tuple[torch.nn.Module, dict]:
    """A LoRA copy of ``base`` fine-tuned with TRL's SFT (:func:`divelab.lm.adapt.adapt`, cached by content) on
    ``<call RIGHT>`` replies until held-out strict correctness reaches ``plan.target`` (a sibling at 100 % would
    leave steering no headroom) or ``plan.adapt.steps``, merged into a plain model."""
    from divelab.lm.adapt import StopRule, adapt

    check = make_batch(tok, _tool_prompts(plan.check, 9100 + plan.seed))

    def held_out_correctness(model) -> float:
        return float(strict_correct(model, check).mean())

    targets = tuple(t for t in plan.adapt.lora.target_modules if t in _lora_targets(base))
    config = replace(plan.adapt, seed=plan.seed, lora=replace(plan.adapt.lora, target_modules=targets))
    rule = StopRule(held_out_correctness, target=plan.target, every=plan.check_every,
                    version=stable_hash({"v": CACHE_VERSION, "check": plan.check, "seed": plan.seed,
                                         "system": SYSTEM}))

    def fresh_base():  # peft wraps the model it is given in place: train on a copy, keep the base clean
        return copy.deepcopy(base), tok

    with torch.enable_grad():  # callers measure under no_grad; training needs gradients
        adapter = adapt(base_name, sibling_rows(tok, plan), config, name="crosscoder: LoRA tool sibling",
                        base_loader=fresh_base, stop=rule)
    merged, _ = adapter.load(merge=True, base_loader=fresh_base)
    rec = adapter.record
    return merged, {"steps": rec["steps_trained"], "history": rec["stop_checks"], "lora_targets": list(targets),
                    "adapter": adapter.key, "rows": rec["n_rows"], "adapter_train_s": rec["train_s"]}


def _tool_prompts(n: int, seed: int) -> list[task.Prompt]:
    rng = random.Random(seed)
    return [task.tool_prompt(rng) for _ in range(n)]


# --- the measurement -----------------------------------------------------------------------------------------------
def measure_pair(base, tok, plan: RealPlan = RealPlan(), *, base_name: str = "smollm2-135m-instruct",
                 label: str = "SmolLM2-135M-Instruct") -> tuple[list[Claim], dict]:
    """Train (or load) the LoRA sibling of ``base``, then: strict correctness of both, a DFC/CC sweep at
    ``plan.layer``, single-feature steering and the reconstruction patch on the sibling. ``(claims, details)``."""
    t0 = time.perf_counter()
    seed = plan.seed
    sib, meta = train_sibling(base, tok, plan, base_name)
    t_train = time.perf_counter() - t0
    layer = plan.layer
    ev = make_batch(tok, _tool_prompts(plan.eval, 9300 + seed))
    sel = make_batch(tok, _tool_prompts(plan.select, 9200 + seed))
    ca, cb, ca_sel = strict_correct(sib, ev), strict_correct(base, ev), strict_correct(sib, sel)
    d, lo, hi = stats.diff_ci(ca, cb, seed=seed)
    claims = [Claim(
        statement=f"{label}: the LoRA tool sibling emits the strict call to the right tool more often than the base",
        paper_value="ToolRL 19–22.5% vs base 0%", measured=d, ci=(lo, hi), kind=Kind.BY_CONSTRUCTION, source=SOURCE,
        ruling=verdicts.direction(d, (lo, hi), why="a precondition; SFT fallback, not RL"),
        note=f"sibling {ca.mean():.2f}, base {cb.mean():.2f} on {plan.eval} held-out tool prompts (greedy, "
             f"teacher-forced check); LoRA r={plan.adapt.lora.r} SFT on the reward-1 reply for {meta['steps']} steps x "
             f"{plan.adapt.batch_size} prompts (TRL SFT through divelab.lm.adapt, adapter {meta['adapter'][:12]}), stopped "
             f"at held-out correctness >= {plan.target} — RL (GRPO) had no reward signal within the CPU budget")]

    # harvest where the edits act: the last prompt token and every token of the scored reply `<call RIGHT>` on
    # tool prompts (the teacher-forced positions), the last prompt token alone on generic prompts
    prompts = task.prompts(plan.harvest, seed=9400 + seed)
    acts_a, acts_b, owner = harvest_generation_pairs(
        sib, base, tok, [chat_text(tok, p) for p in prompts],
        [f"<call {p.tool}>" if p.is_tool else "" for p in prompts], layer, shard_size=32, progress=True)
    labels = np.array([prompts[o].is_tool for o in owner.tolist()], dtype=int)
    held = task.prompts(plan.heldout, seed=9500 + seed)
    ho_a, ho_b, ho_owner = harvest_generation_pairs(
        sib, base, tok, [chat_text(tok, p) for p in held],
        [f"<call {p.tool}>" if p.is_tool else "" for p in held], layer, shard_size=32, progress=False)
    ho_labels = np.array([held[o].is_tool for o in ho_owner.tolist()], dtype=int)
    tool = torch.tensor(labels == 1)
    dom = acts_a[tool].mean(0) - acts_b[tool].mean(0)
    other_ev, other_sel = capture_acts(base, ev.ids, ev.mask, layer), capture_acts(base, sel.ids, sel.mask, layer)
    dom_a = strict_correct(sib, ev, layer=layer, edit=add_direction(dom))
    dom_g = float(dom_a.mean() - ca.mean())

    rows = []
    for cfg in plan.cells:
        cfg = replace(cfg, seed=seed + cfg.seed)  # a cell's own seed offsets the run's: replicate cells
        with torch.enable_grad():
            cc = train_crosscoder(acts_a, acts_b, cfg)
        recon = strict_correct(sib, ev, layer=layer, edit=recon_patch(cc, A), other_acts=other_ev)
        recon_ctl = strict_correct(sib, ev, layer=layer, edit=recon_random_direction(cc, A, seed), other_acts=other_ev)
        ranked = rank_features(cc, acts_a, acts_b, labels, partition="A" if cc.n_a else None, top=3)
        top = ranked[0].index
        gains = {a: float(strict_correct(sib, sel, layer=layer, edit=steer_features(cc, A, [top], a),
                                         other_acts=other_sel).mean() - ca_sel.mean()) for a in plan.alphas}
        alpha = max(gains, key=gains.get)
        steer = strict_correct(sib, ev, layer=layer, edit=steer_features(cc, A, [top], alpha), other_acts=other_ev)
        row = {"cell": cfg.label() + f" lsh{cfg.lambda_shared:g} s{cfg.seed}", "arch": cfg.arch,
               "heldout": exclusive_liveness(cc, ho_a, ho_b, ho_labels) if cc.n_a else None,
               "forbidden_max": cc.forbidden_max(), "mse": float(cc.loss(acts_a, acts_b)[1]["mse"]),
               "resampled": cc.resampled, "top": top, "top_d": ranked[0].cohens_d, "top_auroc": ranked[0].auroc,
               "alpha": alpha, "sel_gain": gains[alpha], "recon": recon, "recon_ctl": recon_ctl, "steer": steer}
        fired = (cc.encode(acts_a, acts_b)[:, cc.a_slice] > 0).any(0)
        if cc.n_a and bool(fired.any()):
            # the same steering along a random direction of matched size (negative control) and a random other
            # live A-exclusive latent at the same α (a trivial baseline)
            row["steer_ctl"] = strict_correct(sib, ev, layer=layer, edit=steer_random_direction(cc, A, [top], alpha, seed),
                                              other_acts=other_ev)
            live = [i for i in torch.nonzero(fired).flatten().tolist() if i != top]
            if live:
                rand = int(np.random.default_rng(seed + len(rows)).choice(live))
                row["steer_rand"] = strict_correct(sib, ev, layer=layer, edit=steer_features(cc, A, [rand], alpha),
                                                   other_acts=other_ev)
        rows.append(row)
    dfc = [r for r in rows if r["arch"] == "DFC"]
    ccs = [r for r in rows if r["arch"] == "CC"]
    best = max(dfc, key=lambda r: r["sel_gain"])
    live_rows = [r for r in dfc if "steer_ctl" in r]
    worst = min(r["heldout"]["alive"] for r in dfc)
    claims.append(Claim(
        statement=f"{label}: the A-exclusive latents are alive on held-out activations (smallest share alive over "
                  "DFC cells)",
        paper_value="few dead latents with the AuxK loss (Gao et al. 2024); the DFC paper assumes a live exclusive "
                    "block", measured=worst, kind=Kind.CHECK, source=SOURCE,
        ruling=verdicts.outcome(worst >= 0.5, test="in every DFC cell at least half of the A-exclusive latents fire "
                                                   "on at least one held-out position"),
        note=f"{plan.heldout} held-out prompts; per cell share alive, share of tool / generic positions where any "
             "fires: " + "; ".join(f"{r['cell']}: {r['heldout']['alive']:.2f}, {r['heldout']['fire_tool']:.2f} / "
                                   f"{r['heldout']['fire_generic']:.2f}" for r in dfc)))
    cannot = _cannot_speak(dfc, float(ca.mean()))
    if not cannot and len(live_rows) < 2:
        cannot = (f"{len(live_rows)} DFC cell(s) with a live A-exclusive block: one crosscoder training run cannot "
                  "separate the method from the run")
    steer_claim = dict(
        statement=f"{label}: steering one A-exclusive feature raises the LoRA sibling's tool correctness, over the "
                  "strongest alternative (every DFC cell whose A-exclusive block fires)",
        paper_value="best cells +55 and +65 pp over no steering (40 prompts)", kind=Kind.EMPIRICAL, source=SOURCE,
        note=f"layer {layer}; {len(live_rows)} of {len(dfc)} DFC cells with a live A-exclusive block; gain over no "
             "steering per cell " + ", ".join(f"{r['cell']} {r['steer'].mean() - ca.mean():+.2f} (α = {r['alpha']:g})"
                                             for r in live_rows)
             + f"; cell best on the selection prompts: {best['cell']}, feature {best['top']} (Cohen's d "
               f"{best['top_d']:.1f}, AUROC {best['top_auroc']:.2f})")
    if live_rows:
        cells = [r["cell"] for r in live_rows for _ in range(len(ca))]
        arms = {"no steering": np.tile(ca, len(live_rows)), "difference-of-means steering": np.tile(dom_a, len(live_rows))}
        if ccs:
            arms["plain-crosscoder top feature"] = np.tile(max(ccs, key=lambda r: r["sel_gain"])["steer"], len(live_rows))
        if all("steer_rand" in r for r in live_rows):
            arms["random live A-exclusive latent"] = np.concatenate([r["steer_rand"] for r in live_rows])
        cmp = against_strongest(np.concatenate([r["steer"] for r in live_rows]), arms, clusters=cells, seed=seed)
        e, lo, hi = stats.cluster_diff_ci(np.concatenate([r["steer_ctl"] for r in live_rows]), arms[cmp.strongest],
                                          cells, seed=seed)
        ctl = verdicts.control("the same steering along a random direction of matched size", e, (lo, hi))
        claims.append(Claim(
            measured=cmp.effect, ci=cmp.ci, unit="share", **cmp.claim_fields(), **steer_claim,
            ruling=(verdicts.uninformative(cannot) if cannot else verdicts.direction(
                cmp.effect, cmp.ci, why="the paper reports its best cells only; this is every live cell",
                training_runs=len(live_rows), control=ctl)),
            falsifier="steered correctness no higher than the best of no steering, difference-of-means steering, "
                      "the plain crosscoder's feature and a random live exclusive latent would refute it",
            replication={"unit": "crosscoder training runs (cells)", "n": len(live_rows),
                         "clustered_by": "cell (prompts within it)"}))
    else:
        claims.append(Claim(measured=None, ruling=verdicts.uninformative(cannot), **steer_claim))
    rg = np.array([r["recon"].mean() - ca.mean() for r in rows])
    # cells are the independent crosscoder training runs: a cluster bootstrap over cells (prompts within a cell
    # are not independent evidence about the method)
    cells = [r["cell"] for r in rows for _ in range(len(ca))]
    cmp = against_strongest(np.concatenate([r["recon"] for r in rows]), {"no patch": np.tile(ca, len(rows))},
                            clusters=cells, seed=seed)
    e, lo, hi = stats.cluster_diff_ci(np.concatenate([r["recon_ctl"] for r in rows]), np.tile(ca, len(rows)), cells,
                                      seed=seed)
    claims.append(Claim(
        statement=f"{label}: the reconstruction patch alone raises the LoRA sibling's tool correctness (every cell)",
        paper_value="+31.1 ± 9.7 pp, 45/47 runs positive", measured=cmp.effect, ci=cmp.ci, unit="share",
        kind=Kind.EMPIRICAL, source=SOURCE, **cmp.claim_fields(),
        ruling=(verdicts.uninformative(cannot) if cannot and "ceiling" in cannot else
                verdicts.direction(cmp.effect, cmp.ci, paper=0.311, tol=0.15, tol_kind="abs", training_runs=len(rows),
                                   control=verdicts.control("the sibling moved by the reconstruction error's size "
                                                            "along a random direction", e, (lo, hi)))),
        falsifier="patched correctness no higher than the unpatched sibling's on held-out prompts would refute it",
        replication={"unit": "crosscoder training runs (cells)", "n": len(rows), "clustered_by": "cell (prompts within it)"},
        note=f"{int((rg > 0).sum())}/{rg.size} cells positive; per cell " + ", ".join(
            f"{r['cell']} {x:+.2f}" for r, x in zip(rows, rg, strict=True))))
    details = {"model": label, "plan": {k: v for k, v in asdict(plan).items() if k != "cells"},
               "cells": [{k: (float(v.mean()) if isinstance(v, np.ndarray) else v) for k, v in r.items()}
                         for r in rows],
               "base_correct": float(cb.mean()), "sibling_correct": float(ca.mean()), "sibling_training": meta,
               "difference_of_means_gain": dom_g, "train_s": round(t_train, 1),
               "total_s": round(time.perf_counter() - t0, 1)}
    return claims, details


def _cannot_speak(dfc: list[dict], sibling_correct: float) -> str:
    """Why the steering and patch claims cannot speak ("" when they can): no live exclusive latent to steer, or
    a sibling already at the ceiling, which no edit can raise."""
    if not any(r["heldout"]["alive"] > 0 for r in dfc):
        return "failed set-up: no A-exclusive latent fires on any held-out position in any DFC cell"
    if sibling_correct >= 0.95:
        return f"ceiling: the sibling is already correct on {sibling_correct:.0%} of the prompts, no headroom"
    return ""


def measure(seed: int = 0, plan: RealPlan | None = None) -> tuple[list[Claim], dict]:
    """The SmolLM2-135M-Instruct measurement (minutes of CPU; the sibling is cached)."""
    from divelab.lm import load_model

    plan = replace(plan or RealPlan(), seed=seed)
    base, tok = load_model("smollm2-135m-instruct")
    with torch.no_grad():  # threads as the runner pinned them
        return measure_pair(base, tok, plan)


def add_to(rep, plan: RealPlan, seed: int = 0) -> None:
    """Add the real-LLM claims of the run ``plan`` sizes (a "not checkable" claim when the model is missing)."""
    from divelab.lm.real import add_claims_at_full

    add_claims_at_full(rep, True, lambda: stage("SmolLM2 pair", lambda: measure(seed, plan), weight=2),
                       statement="single-feature steering and recon patch on SmolLM2-135M-Instruct vs a LoRA tool "
                       "sibling", paper_value="(not in the paper: the tiny models' measurement on a real LLM)",
                       source=SOURCE)
