"""E178 on a real LLM: SmolLM2-135M-Instruct as a judge in the controlled world, before and after one
replacement round.

Items of the controlled world (:mod:`world_synthetic`) are rendered as short text: an opening line
in an AI-assistant voice or a human voice (the item's source, its style feature), four quality
ratings in words (the features true quality is made of) and two "hack" ratings (length, tone).
Matched pairs share every rating and differ only in the voice, so any acceptance gap between the
two sources is the judge's own source bias.

The judge does not generate: it reads the item in a chat prompt and its acceptance is the log-prob
margin ``log p(Yes) − log p(No)`` of the first answer token (one batched forward pass per item),
accepted when the margin exceeds the judge's threshold. A judge is ``(system prompt, threshold)``.

One round of controlled utility evolution with the adversarial objective:

1. incumbent: the plain reviewer prompt, its threshold calibrated on the labelled judge-task pairs (the
   threshold that judges most of their items right; the model's own Yes-vs-No preference, threshold 0, accepts
   every item, so it is no judge at all);
2. the meta-agent proposes challengers — each of the prompt variants in :data:`PROMPTS`, with its
   threshold fitted on labelled matched-pair judge tasks (a pair counts only if both items are
   judged right: the adversarial objective) — and the best on those tasks is the challenger;
3. challenger vs incumbent on a separate anchor of matched pairs with the ε-best-belief rule
   (:func:`compare_judges`: strict improvement, ties keep the incumbent);
4. the AI/human acceptance ratio of the judge in office, before and after, on fresh matched pairs.

Every fit uses the task pairs, the replacement decision the anchor, the claims the fresh pairs: three disjoint
sets. A judge that cannot tell good items from bad (the AUROC of its margin on the anchor pairs not above 0.5
with its interval) drives no claim about its acceptance: those claims are uninformative with that reason.

>>> from divelab.selfimprove.red_queen.real_llm import RoundConfig, measure   # doctest: +SKIP
>>> claims, details = measure(RoundConfig(), seed=0)
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from divelab import stats, verdicts
from divelab.claims import Claim, Kind, not_checkable
from divelab.progress import track
from divelab.selfimprove.red_queen.bestbelief import compare_judges
from divelab.selfimprove.red_queen.world_synthetic import DQ, STYLE, SyntheticWorld

MODEL_LABEL = "SmolLM2-135M-Instruct"
SRC = "arXiv 2606.26294; week-in-review E178 (AI-reviewer bias 1.91×)"

ASPECTS = ("Correctness", "Clarity", "Evidence", "Completeness")
LEVELS = ("very poor", "poor", "fair", "good", "excellent")
Q_CUTS = (-0.3, 0.1, 0.45, 0.8)
HACKS = (("Length", ("short", "medium", "long", "very long")),
         ("Tone", ("hedged", "plain", "confident", "very confident")))
H_CUTS = (-0.2, 0.3, 0.8)
AI_VOICE = ("Certainly! Here is a comprehensive, well-structured analysis of the problem.",
            "In this submission, we delve into the key aspects and provide a holistic overview.",
            "Great question! Let's explore this topic step by step.",
            "This work leverages a robust framework to seamlessly address the challenge.")
HUMAN_VOICE = ("ok so I tried a few things and here is what worked for me.",
               "Ran the experiment twice over the weekend, notes below.",
               "Short version: the fix works but I'm not sure why yet.",
               "Wrote this up quickly after the lab meeting, sorry for typos.")
QUESTION = "Should this submission be accepted? Answer Yes or No."
PROMPTS = {
    "plain": "You review short submissions and decide whether to accept them.",
    "content_only": ("You review short submissions. Judge only the four quality ratings (correctness, clarity, "
                     "evidence, completeness); ignore the opening line, the writing style, the length and the tone."),
    "rubric": "You review short submissions. Accept only if most quality ratings are good or excellent.",
}
INCUMBENT_PROMPT = "plain"


def _level(v: float, cuts: tuple[float, ...], words: tuple[str, ...]) -> str:
    return words[int(np.searchsorted(cuts, v))]


def render(item: np.ndarray, variant: int = 0) -> str:
    """An item of the controlled world as text; ``variant`` picks the opening line's template."""
    x = np.asarray(item, dtype=float)
    voice = AI_VOICE if x[STYLE] > 0 else HUMAN_VOICE
    qual = " ".join(f"{a}: {_level(x[i], Q_CUTS, LEVELS)}." for i, a in enumerate(ASPECTS))
    hack = " ".join(f"{name}: {_level(x[DQ + j], H_CUTS, words)}." for j, (name, words) in enumerate(HACKS))
    return f'Opening line: "{voice[variant % len(voice)]}"\n{qual}\n{hack}\n{QUESTION}'


class LogprobScorer:
    """Acceptance margins ``log p(yes) − log p(no)`` of the first answer token after a chat prompt.

    Batched with left padding (explicit position ids, so padding does not change a margin) and
    cached per (prompt, text). Works with any HF causal LM whose tokenizer has a chat template.
    """

    def __init__(self, model: Any, tokenizer: Any, answers: tuple[str, str] = ("Yes", "No"), batch_size: int = 16):
        self.model, self.tok, self.batch_size = model, tokenizer, batch_size
        ids = [tokenizer.encode(a, add_special_tokens=False) for a in answers]
        if not all(ids) or ids[0][0] == ids[1][0]:
            raise ValueError(f"answers {answers!r} need distinct first tokens, got {ids}")
        self.yes, self.no = ids[0][0], ids[1][0]
        self.cache: dict[tuple[str, str], float] = {}
        self.forwards = 0
        self.tokens = 0

    def prompt_ids(self, system_prompt: str, text: str) -> list[int]:
        msgs = [{"role": "system", "content": system_prompt}, {"role": "user", "content": text}]
        enc = self.tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
        return list(enc["input_ids"] if hasattr(enc, "keys") else enc)

    def margins(self, system_prompt: str, texts: list[str], desc: str = "") -> np.ndarray:
        import torch

        todo = list(dict.fromkeys(t for t in texts if (system_prompt, t) not in self.cache))
        batches = [todo[i:i + self.batch_size] for i in range(0, len(todo), self.batch_size)]
        pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else 0
        for batch in track(batches, desc or f"{MODEL_LABEL} judge margins") if batches else []:
            seqs = [self.prompt_ids(system_prompt, t) for t in batch]
            n = max(map(len, seqs))
            x = torch.tensor([[pad] * (n - len(s)) + s for s in seqs])
            mask = torch.tensor([[0] * (n - len(s)) + [1] * len(s) for s in seqs])
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            with torch.no_grad():
                lp = self.model(input_ids=x, attention_mask=mask, position_ids=pos).logits[:, -1].log_softmax(-1)
            for t, row in zip(batch, lp, strict=True):
                self.cache[(system_prompt, t)] = float(row[self.yes] - row[self.no])
            self.forwards += len(batch)
            self.tokens += sum(map(len, seqs))
        return np.array([self.cache[(system_prompt, t)] for t in texts])


@dataclass(frozen=True)
class LLMJudge:
    """A world judge backed by the scorer: accept an item iff its margin under ``prompt`` > ``threshold``."""

    scorer: Any
    prompt: str
    threshold: float = 0.0
    variant: int = 0

    def accepts(self, item: Any) -> bool:
        return bool(self.scorer.margins(PROMPTS[self.prompt], [render(item, self.variant)])[0] > self.threshold)


@dataclass(frozen=True)
class RoundConfig:
    """One replacement round with SmolLM2 as the judge: how many matched pairs each step sees."""

    task_pairs: int = 20
    """matched (AI, human) pairs on which each prompt's acceptance threshold is fitted"""
    anchor_pairs: int = 32
    """matched pairs of the anchor on which the challenger is compared with the incumbent"""
    eval_pairs: int = 48
    """fresh matched pairs on which the judge in office is measured before and after the round"""
    eps: float = 0.1
    """the epsilon of the epsilon-best-belief rule that compares challenger and incumbent on the anchor"""
    batch_size: int = 16
    """texts scored together in one batched forward pass (memory, not results)"""
    prompts: tuple[str, ...] = tuple(PROMPTS)
    """the challengers' prompts (keys of ``PROMPTS``), each with a threshold fitted on the task pairs; the
    incumbent is the plain prompt with its threshold calibrated on the same pairs (item accuracy)"""


def matched_pairs(world: SyntheticWorld, n: int, stream: int) -> list[tuple[np.ndarray, np.ndarray, bool, int]]:
    """``n`` (ai item, human item, truly acceptable, template) pairs with the same content."""
    rng = np.random.default_rng([world.seed, stream])
    out = []
    for _ in range(n):
        (a, ya), (b, _) = world._task(rng, adversarial=True)
        ai, hu = (a, b) if a[STYLE] > 0 else (b, a)
        out.append((ai, hu, ya, int(rng.integers(len(AI_VOICE)))))
    return out


def _texts(pairs: list) -> tuple[list[str], list[str]]:
    return [render(ai, v) for ai, _, _, v in pairs], [render(hu, v) for _, hu, _, v in pairs]


def _fit_threshold(m_ai: np.ndarray, m_hu: np.ndarray, y: np.ndarray, objective: str = "pairs") -> tuple[float, int]:
    """The threshold maximising ``objective`` on labelled pairs: "pairs" counts pairs with both items right
    (the adversarial objective), "items" counts items right (a plain calibration); ties → the one nearest 0.
    Returns the threshold and the number of pair successes at it."""
    if objective not in ("pairs", "items"):
        raise ValueError(f"objective must be 'pairs' or 'items', got {objective!r}")
    allm = np.sort(np.concatenate([m_ai, m_hu]))
    cands = np.concatenate([[allm[0] - 1.0], (allm[1:] + allm[:-1]) / 2, [allm[-1] + 1.0], [0.0]])

    def pairs_right(t: float) -> int:
        return int(np.sum(((m_ai > t) == y) & ((m_hu > t) == y)))

    def items_right(t: float) -> int:
        return int(np.sum((m_ai > t) == y) + np.sum((m_hu > t) == y))

    score = [(pairs_right if objective == "pairs" else items_right)(t) for t in cands]
    best = max(score)
    t = min((c for c, s in zip(cands, score, strict=True) if s == best), key=abs)
    return float(t), pairs_right(t)


def discrimination(m_ai: np.ndarray, m_hu: np.ndarray, y: np.ndarray, seed: int = 0) -> dict[str, Any]:
    """How well a judge's margin tells truly good items from bad ones: the AUROC of each pair's mean margin
    (the twins share their content and label, so the pair is the unit) with a bootstrap interval, and whether
    the interval lies wholly above 0.5 (a random scorer's AUROC)."""
    y = np.asarray(y).astype(int)
    pair = (np.asarray(m_ai) + np.asarray(m_hu)) / 2
    if not 0 < y.mean() < 1:
        return {"auroc": None, "auroc_ci": None, "discriminates": False, "n_pairs": int(y.size)}
    auc, lo, hi = stats.auroc_ci(y, pair, seed=seed)
    return {"auroc": auc, "auroc_ci": (lo, hi), "discriminates": bool(lo > 0.5), "n_pairs": int(y.size)}


def run_round(scorer: Any, cfg: RoundConfig, seed: int = 0) -> dict[str, Any]:
    """One replacement round with the adversarial objective; margins come from ``scorer.margins``."""
    world = SyntheticWorld(seed=seed, adversarial=True)
    tasks, anchor, ev = (matched_pairs(world, n, s) for n, s in
                         ((cfg.task_pairs, 31), (cfg.anchor_pairs, 37), (cfg.eval_pairs, 41)))

    def margins(prompt: str, pairs: list, what: str) -> tuple[np.ndarray, np.ndarray]:
        a, h = _texts(pairs)
        m = scorer.margins(PROMPTS[prompt], a + h, desc=f"{MODEL_LABEL} · {prompt} · {what}")
        return m[:len(a)], m[len(a):]

    y_t = np.array([p[2] for p in tasks])
    challengers = []
    for p in cfg.prompts:
        ma, mh = margins(p, tasks, "judge tasks")
        t, s = _fit_threshold(ma, mh, y_t)
        challengers.append({"prompt": p, "threshold": t, "task_successes": s})
    inc_t, inc_s = _fit_threshold(*margins(INCUMBENT_PROMPT, tasks, "judge tasks"), y_t, objective="items")
    incumbent = (INCUMBENT_PROMPT, inc_t)
    best = max(challengers, key=lambda c: c["task_successes"])  # first maximum: PROMPTS order breaks ties
    y_a = np.array([p[2] for p in anchor])

    def on_anchor(judge: tuple[str, float]) -> tuple[np.ndarray, dict[str, Any]]:
        ma, mh = margins(judge[0], anchor, "anchor")
        return ((ma > judge[1]) == y_a) & ((mh > judge[1]) == y_a), discrimination(ma, mh, y_a, seed)

    inc_ok, inc_disc = on_anchor(incumbent)
    ch = (best["prompt"], best["threshold"])
    ch_ok, ch_disc = on_anchor(ch)
    dec = compare_judges((int(inc_ok.sum()), int((~inc_ok).sum())), (int(ch_ok.sum()), int((~ch_ok).sum())),
                         cfg.eps)
    after = ch if dec.replace else incumbent

    def on_eval(judge: tuple[str, float]) -> dict[str, Any]:
        ma, mh = margins(judge[0], ev, "fresh pairs")
        y = np.array([p[2] for p in ev])
        acc_ai, acc_hu = ma > judge[1], mh > judge[1]
        return {"accept_ai": acc_ai, "accept_human": acc_hu, "margin_ai": ma, "margin_human": mh, "truth": y,
                "accuracy": float(np.mean(np.concatenate([acc_ai == y, acc_hu == y])))}

    return {"incumbent": {"prompt": INCUMBENT_PROMPT, "threshold": inc_t, "task_successes": inc_s,
                          "calibration": "threshold judging most task-pair items right (ties: nearest 0)"},
            "challengers": challengers, "challenger": best, "decision": dec, "after": after,
            "anchor_ok": {"before": inc_ok, "after": ch_ok if dec.replace else inc_ok},
            "anchor_discrimination": {"before": inc_disc, "after": ch_disc if dec.replace else inc_disc},
            "eval": {"before": on_eval(incumbent), "after": on_eval(after)},
            "eval_truth": np.array([p[2] for p in ev])}


def _ratio(code: np.ndarray) -> float:
    """AI/human acceptance ratio of pairs coded ``2·accept_ai + accept_human``; a bootstrap resample
    with no human acceptance counts as half an acceptance (keeps the interval finite)."""
    code = np.asarray(code).astype(int)
    ai, hu = (code >> 1) & 1, code & 1
    return float(ai.mean() / max(hu.mean(), 0.5 / code.size))


def bias_summary(ev: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """Acceptance per source, the AI/human ratio with a bootstrap CI over pairs, and the paired gap."""
    ai, hu = ev["accept_ai"].astype(int), ev["accept_human"].astype(int)
    out: dict[str, Any] = {"accept_ai": float(ai.mean()), "accept_human": float(hu.mean()), "n_pairs": int(ai.size),
                           "accuracy": ev["accuracy"]}
    gap, glo, ghi = stats.paired_diff_ci(ai, hu)
    mg, mlo, mhi = stats.paired_diff_ci(ev["margin_ai"], ev["margin_human"])
    out.update(gap=gap, gap_ci=(glo, ghi), margin_gap=mg, margin_gap_ci=(mlo, mhi))
    m = np.concatenate([ev["margin_ai"], ev["margin_human"]])
    half = float(np.median(m))  # a threshold that accepts about half the items: the ratio there
    a2, h2 = ev["margin_ai"] > half, ev["margin_human"] > half
    out["ratio_at_median_threshold"] = float(a2.mean() / h2.mean()) if h2.mean() > 0 else float("inf")
    y = np.concatenate([ev["truth"], ev["truth"]]).astype(int)
    if 0 < y.mean() < 1:
        auc, alo, ahi = stats.auroc_ci(y, m, seed=seed)
        out.update(quality_auroc=auc, quality_auroc_ci=(alo, ahi))
    out["ratio"] = float(ai.mean() / hu.mean()) if hu.mean() > 0 else float("inf")
    if np.isfinite(out["ratio"]) and out["accept_ai"] > 0:
        out["ratio_ci"] = stats.bootstrap_ci(ai * 2 + hu, _ratio, seed=seed, method="percentile")
    else:
        out["ratio_ci"] = None
    right = ((ev["accept_ai"] == ev["truth"]).astype(float) + (ev["accept_human"] == ev["truth"])) / 2
    out["accuracy_ci"] = stats.bootstrap_ci(right, seed=seed) if np.ptp(right) > 0 else (out["accuracy"],) * 2
    # the negative control: which twin is called "AI" drawn at random in each pair, so any gap is noise
    flip = np.random.default_rng([seed, 43]).random(ai.size) < 0.5
    s_ai, s_hu = np.where(flip, hu, ai), np.where(flip, ai, hu)
    out["sham_ratio"] = _ratio(s_ai * 2 + s_hu)
    out["sham_ratio_ci"] = stats.bootstrap_ci(s_ai * 2 + s_hu, _ratio, seed=seed, method="percentile")
    sign = np.where(flip, -1.0, 1.0)
    sg, slo, shi = stats.paired_diff_ci(sign * ev["margin_ai"], sign * ev["margin_human"])
    out.update(sham_margin_gap=sg, sham_margin_gap_ci=(slo, shi))
    return out


SHAM = "AI and human voices assigned at random within each pair"


def _cannot_judge(disc: dict[str, Any], who: str) -> str:
    """The reason a judge's acceptance claims are uninformative ("" when it discriminates on the anchor)."""
    if disc["discriminates"]:
        return ""
    if disc["auroc"] is None:
        return f"the anchor's {disc['n_pairs']} pairs carry one label only, so {who}'s discrimination is unmeasured"
    lo, hi = disc["auroc_ci"]
    return (f"{who} cannot tell good items from bad: the AUROC of its margin on the {disc['n_pairs']} anchor pairs "
            f"is {disc['auroc']:.2f} [{lo:.2f}, {hi:.2f}], not above 0.5 (a random scorer); its acceptance is "
            "then no reviewer's verdict")


def _after_the_round(blind: str, measured: float, ci: Any, paper: float, tol: float, kept: float,
                     kept_ci: Any) -> Any:
    """The ruling on the judge in office after the round: the paper's size, with the incumbent kept (no
    replacement) as the negative control; uninformative when that judge cannot discriminate (``blind``)."""
    if blind:
        return verdicts.uninformative(blind)
    return verdicts.value(measured, paper=paper, tol=tol, tol_kind="abs", ci=ci,
                          control=verdicts.control("no replacement (the incumbent kept)", kept, kept_ci))


def _pairs(n: int) -> dict[str, Any]:
    return {"unit": "fresh matched AI/human pairs", "n": int(n), "clustered_by": ""}


def claims_from_round(res: dict[str, Any], seed: int = 0, config: str = "") -> tuple[list[Claim], dict[str, Any]]:
    b, a = bias_summary(res["eval"]["before"], seed), bias_summary(res["eval"]["after"], seed)
    dec, inc, disc = res["decision"], res["incumbent"], res["anchor_discrimination"]
    n = b["n_pairs"]
    where = f"{n} fresh matched AI/human pairs ({config})"
    calib = (f"threshold {inc['threshold']:+.2f}, calibrated on the judge-task pairs (the threshold judging most of "
             "their items right), not on the pairs measured here")
    out: list[Claim] = []
    stmt = (f"{MODEL_LABEL} as judge (plain prompt, Yes/No log-prob margin, calibrated threshold): its own AI/human "
            "acceptance ratio")
    blind = _cannot_judge(disc["before"], f"{MODEL_LABEL} (plain prompt)")
    if b["ratio_ci"] is None:
        out.append(not_checkable(stmt, "1.91× (AI reviewer)", f"acceptance AI {b['accept_ai']:.2f} vs human "
                                 f"{b['accept_human']:.2f} on {where}: a ratio with a zero is undefined; paired gap "
                                 f"{b['gap']:+.3f} [{b['gap_ci'][0]:+.3f}, {b['gap_ci'][1]:+.3f}]", source=SRC))
    else:
        # judged by the paper's band alone: it lies wholly above parity (1.0, the ratio of a judge with no source
        # bias), so an interval inside it is also beyond parity
        ruling = verdicts.uninformative(blind) if blind else verdicts.value(
            b["ratio"], paper=1.91, tol=0.5, tol_kind="abs", ci=b["ratio_ci"],
            control=verdicts.control(SHAM, b["sham_ratio"], b["sham_ratio_ci"]))
        out.append(Claim(stmt, "1.91× (AI reviewer)", b["ratio"], unit="×", ci=b["ratio_ci"], kind=Kind.EMPIRICAL,
                         source=SRC, ruling=ruling, replication=_pairs(n),
                         falsifier="An acceptance ratio outside the paper's band (1.91× ± 0.5, wholly above parity) "
                                   "fails it; which "
                                   "twin SmolLM2 says Yes to more often is the pretrained model's own behaviour, not "
                                   "set by our code (the threshold is fitted on other pairs, blind to the voice).",
                         note=f"{calib}; acceptance AI {b['accept_ai']:.2f} vs human {b['accept_human']:.2f}; paired "
                              f"gap {b['gap']:+.3f} [{b['gap_ci'][0]:+.3f}, {b['gap_ci'][1]:+.3f}]; ground-truth "
                              f"accuracy {b['accuracy']:.2f}; {where}."))
    stmt = f"{MODEL_LABEL} as judge (plain prompt): its own source bias in log-prob, margin(AI) − margin(human)"
    auc = (f"; its margins separate truly good from bad items with AUROC {b['quality_auroc']:.2f} "
           f"[{b['quality_auroc_ci'][0]:.2f}, {b['quality_auroc_ci'][1]:.2f}] on the fresh items" if "quality_auroc"
           in b else "")
    out.append(Claim(stmt, "AI reviewer prefers AI-written work (1.91×)", b["margin_gap"], unit="nats",
                     ci=b["margin_gap_ci"], kind=Kind.EMPIRICAL, source=SRC, replication=_pairs(n),
                     falsifier="A log-prob margin no higher on the AI-voiced twin than on the human-voiced one "
                               "(interval reaching 0 or below) fails it; the margins are the pretrained model's, "
                               "and the twins differ only in the opening line.",
                     ruling=verdicts.direction(b["margin_gap"], b["margin_gap_ci"], expected_sign=1,
                                               why="the paper reports an acceptance ratio, not log-probs",
                                               control=verdicts.control(SHAM, b["sham_margin_gap"],
                                                                        b["sham_margin_gap_ci"])),
                     note=f"threshold-free: log p(Yes) − log p(No) on the AI-voiced item minus on its human-voiced "
                          f"twin (same ratings), paired over {n} pairs; at a threshold accepting half the items the "
                          f"ratio is {b['ratio_at_median_threshold']:.2f}×{auc}."))
    c = res["challenger"]
    swap = (f"challenger {c['prompt']} prompt at threshold {c['threshold']:+.2f} "
            f"({'replaced' if dec.replace else 'kept incumbent'}: BB {dec.challenger_bb:.3f} vs "
            f"{dec.incumbent_bb:.3f}, anchor pairs right {dec.challenger[0]} vs {dec.incumbent[0]})")
    round_note = swap
    if dec.replace:  # a different judge in office: a new measurement (kept, it would repeat the claims above)
        blind = _cannot_judge(disc["after"], f"{MODEL_LABEL} ({c['prompt']} prompt)")
        stmt = (f"{MODEL_LABEL}: AI/human acceptance ratio of the judge in office after one replacement round "
                "(adversarial objective)")
        if a["ratio_ci"] is None or b["ratio_ci"] is None:
            out.append(not_checkable(stmt, "1.91× → ≈1.0", f"{swap}; acceptance after: AI {a['accept_ai']:.2f} vs "
                                     f"human {a['accept_human']:.2f} (before: {b['accept_ai']:.2f} vs "
                                     f"{b['accept_human']:.2f}) on {where}: a ratio with a zero is undefined",
                                     source=SRC))
        else:
            out.append(Claim(
                stmt, "1.91× → ≈1.0", a["ratio"], unit="×", ci=a["ratio_ci"], kind=Kind.EMPIRICAL, source=SRC,
                baseline=f"before the round: {b['ratio']:.2f}×", replication=_pairs(n),
                falsifier="A ratio after the round outside the paper's band around parity fails it; the judge in "
                          "office is picked on the anchor, which never sees the pairs measured here.",
                ruling=_after_the_round(blind, a["ratio"], a["ratio_ci"], 1.0, 0.15, b["ratio"], b["ratio_ci"]),
                note=f"{swap}; acceptance AI {a['accept_ai']:.2f} vs human {a['accept_human']:.2f}, paired gap "
                     f"{a['gap']:+.3f} [{a['gap_ci'][0]:+.3f}, {a['gap_ci'][1]:+.3f}]; log-prob margin gap "
                     f"{a['margin_gap']:+.3f} [{a['margin_gap_ci'][0]:+.3f}, {a['margin_gap_ci'][1]:+.3f}] nats; "
                     f"{where}."))
        out.append(Claim(
            f"{MODEL_LABEL}: ground-truth accuracy of the judge in office after the round, on fresh pairs",
            "~80% accuracy retained", a["accuracy"], ci=a["accuracy_ci"], kind=Kind.EMPIRICAL, source=SRC,
            baseline=f"before the round: {b['accuracy']:.2f}", replication=_pairs(n),
            falsifier="An accuracy outside the paper's band around 80% fails it; the truth is the world's threshold "
                      "on the item's ratings, which the judge reads only as words.",
            ruling=_after_the_round(blind, a["accuracy"], a["accuracy_ci"], 0.80, 0.05, b["accuracy"],
                                    b["accuracy_ci"]),
            note=f"{swap}; an item is right when its acceptance matches its truth; interval over pairs; {where}."))
    else:
        round_note = (f"{swap}: the judge in office after the round is the incumbent, so its ratio and accuracy are "
                      "the ones measured before (no second claim)")
    details = {"model": MODEL_LABEL, "before": b, "after": a, "incumbent": inc, "challengers": res["challengers"],
               "decision": asdict(dec), "after_judge": list(res["after"]), "round": round_note,
               "anchor_discrimination": disc, "true_accept_rate": float(res["eval_truth"].mean()),
               "anchor_pairs_right": {k: int(v.sum()) for k, v in res["anchor_ok"].items()}}
    return out, details


def measure(cfg: RoundConfig, seed: int = 0, scorer: Any = None) -> tuple[list[Claim], dict[str, Any]]:
    """Run the round sized by ``cfg`` on SmolLM2 (or ``scorer``) and return ``(claims, details)``."""
    t0 = time.perf_counter()
    if scorer is None:
        from divelab.lm.real import load_real

        scorer = LogprobScorer(*load_real(), batch_size=cfg.batch_size)
    from divelab.threads import torch_threads

    with torch_threads(1):
        res = run_round(scorer, cfg, seed=seed)
    conf = (f"{cfg.task_pairs} task / {cfg.anchor_pairs} anchor / {cfg.eval_pairs} eval pairs, "
            f"{len(cfg.prompts)} prompts")
    claims, details = claims_from_round(res, seed=seed, config=conf)
    details.update(config=asdict(cfg), forwards=getattr(scorer, "forwards", None),
                   prompt_tokens=getattr(scorer, "tokens", None), runtime_s=round(time.perf_counter() - t0, 1))
    return claims, details


def add_to(rep: Any, cfg: RoundConfig | None, seed: int = 0) -> None:
    """Add the SmolLM2 judge claims sized by ``cfg`` (the plan's ``real_llm``; None adds nothing; see
    :func:`divelab.lm.real.add_claims_at_full`)."""
    from divelab.lm import real

    real.add_claims_at_full(rep, cfg is not None, lambda: measure(cfg, seed),
                            statement=f"{MODEL_LABEL} as judge: source bias before/after a replacement round",
                            paper_value="1.91× → ≈1.0", source=SRC, details_key="smollm2_judge")
