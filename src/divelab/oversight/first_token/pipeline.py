"""The whole probe on one model and one prompt set: sample → label → harvest → probe, valley, CV, flips.

This is what ``divelab probe-first-token`` runs, and what the SmolLM2 run uses. It returns a plain,
JSON-serialisable dict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from divelab.oversight.first_token.continuation import (
    HFContinuer,
    continuation_variance,
    cut_replay,
    find_flips,
    replay_table,
)
from divelab.oversight.first_token.harvest import harvest
from divelab.oversight.first_token.labels import Labeler, stance_judge
from divelab.oversight.first_token.probe import FirstTokenProbe, text_control, valley_test
from divelab.oversight.first_token.rollout import ThinkFormat, sample_rollouts

DEFAULT_REFUSE_WORDS = ("cannot", "can't", "won't", "refuse", "decline", "unsafe", "harmful", "illegal", "sorry",
                        "not appropriate", "shouldn't")
DEFAULT_COMPLY_WORDS = ("sure", "here is", "here's", "happy to", "of course", "certainly", "let me", "i can help")


@dataclass(frozen=True)
class ProbeSettings:
    fmt: ThinkFormat = ThinkFormat()
    max_new_tokens: int = 128
    temperature: float = 1.0
    folds: int = 5
    layer: int | None = None
    n_positions: int = 21
    cv_n: int = 0  # continuations per cut for CV(B); 0 = skip
    cv_traces: int = 32
    fractions: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    replay_k: int = 0  # resamples per side for cut-replay; 0 = skip
    max_flips: int = 50
    refuse_words: tuple[str, ...] = DEFAULT_REFUSE_WORDS
    comply_words: tuple[str, ...] = DEFAULT_COMPLY_WORDS
    unit: str = "sentence"
    batch_size: int = 32
    boot: int = 2000  # bootstrap resamples for the AUROC CI (the valley uses at most 500)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.folds < 2:
            raise ValueError(f"folds must be >= 2, got {self.folds}")
        if self.unit not in ("token", "sentence"):
            raise ValueError(f"unit must be 'token' or 'sentence', got {self.unit!r}")


def check_prompts(prompts: Sequence[str], folds: int) -> None:
    if len(prompts) < folds:
        raise ValueError(f"fewer prompts ({len(prompts)}) than folds ({folds}): the probe needs at least one prompt "
                         f"per fold, and in practice dozens of each outcome")


def run_probe(model: Any, tokenizer: Any, prompts: Sequence[str], labeler: Labeler,
              settings: ProbeSettings | None = None, metas: Sequence[dict] | None = None,
              threads: int = 1, guard_position: str | None = None) -> dict:
    """Sample one trace per prompt and measure: first-token AUROC (+ text control), the valley J(t),
    optionally CV(B) and cut-replay of stance flips. Torch runs with ``threads`` intra-op threads. With
    ``guard_position`` (``"first"`` or ``"prompt_last"``) the dict also holds ``"guard"``: the probe at that
    position fitted on every prompt, as a :class:`divelab.guard.GuardProbe` for ``divelab serve --guard``."""
    from divelab.threads import torch_threads

    with torch_threads(threads):
        return _run_probe(model, tokenizer, prompts, labeler, settings, metas, guard_position)


def guard_probe(model: Any, X: np.ndarray, y: np.ndarray, s: ProbeSettings, layer: int, position: str):
    """The probe fitted on all of ``X`` as a guard; its threshold is the Youden point of the out-of-fold scores
    (so it is chosen on scores of prompts each fold's probe did not see)."""
    from sklearn.metrics import roc_curve

    from divelab.guard import from_sklearn, model_identity

    probe = FirstTokenProbe(folds=s.folds, seed=s.seed, n_resamples=s.boot)
    oof = probe.fit_oof(X, y)
    fpr, tpr, thr = roc_curve(y, oof.scores)
    threshold = float(thr[int(np.argmax(tpr - fpr))])
    pipe, _ = probe.pipeline(X.shape[1], X.shape[0])
    pipe.fit(X, y)
    meta = {"n": int(y.size), "refusals": int(y.sum()), "oof_auroc": oof.auroc, "oof_auroc_ci": list(oof.ci),
            "template": s.fmt.template, "chat": s.fmt.chat, "system": s.fmt.system, "seed": s.seed}
    return from_sklearn(pipe, layer=layer, position=position, threshold=threshold, model=model_identity(model),
                        meta=meta)


def _run_probe(model: Any, tokenizer: Any, prompts: Sequence[str], labeler: Labeler,
               settings: ProbeSettings | None, metas: Sequence[dict] | None,
               guard_position: str | None = None) -> dict:
    s = settings or ProbeSettings()
    check_prompts(prompts, s.folds)
    rs = sample_rollouts(model, tokenizer, list(prompts), labeler, fmt=s.fmt, max_new_tokens=s.max_new_tokens,
                         temperature=s.temperature, seed=s.seed, batch_size=s.batch_size, metas=metas)
    y = np.array([r.label for r in rs])
    out: dict = {"n": len(rs), "refusals": int(y.sum()), "closed": float(np.mean([r.closed for r in rs])),
                 "rollouts": [{"prompt": r.prompt, "trace": r.trace_text, "answer": r.answer_text, "label": r.label,
                               "closed": r.closed, **r.meta} for r in rs]}
    if np.unique(y).size < 2:
        raise ValueError(f"all {len(rs)} sampled answers got the same label ({'refuse' if y[0] else 'comply'}); "
                         f"the probe needs both outcomes: use more varied prompts or check the labeler")
    acts = harvest(model, rs, n_positions=s.n_positions, batch_size=s.batch_size)
    probe = FirstTokenProbe(folds=s.folds, seed=s.seed, n_resamples=s.boot)
    res = probe.fit_oof(acts.layer(s.layer), y)
    out["probe"] = res.to_dict()
    out["oof_scores"] = res.scores.tolist()
    # the same probe one token earlier: is the decision readable before the trace begins?
    out["probe_prompt_last"] = probe.fit_oof(acts.layer(s.layer, at="prompt_last"), y).to_dict()
    # a probe on permuted labels must sit at chance; if it does not, the probe reads something else
    shuffled = np.random.default_rng(s.seed).permutation(y)
    sham = probe.fit_oof(acts.layer(s.layer), shuffled)
    out["shuffled_control"] = sham.to_dict()
    # its out-of-fold scores, read against the true labels, are the sham every other probe claim is held to
    out["oof_scores_shuffled"] = sham.scores.tolist()
    out["shuffled_prompt_last"] = probe.fit_oof(acts.layer(s.layer, at="prompt_last"), shuffled).to_dict()
    # the strongest text baseline: the request's own words predict the decision without any activation
    prompt_text = text_control(list(prompts), y, probe, words=True)
    out["prompt_text_control"] = prompt_text.to_dict()
    out["oof_scores_prompt_text"] = prompt_text.scores.tolist()
    out["per_layer_auroc"] = [FirstTokenProbe(folds=s.folds, seed=s.seed, n_resamples=10).fit_oof(
        acts.first[:, k], y).auroc for k in range(acts.first.shape[1])]
    text = text_control([tokenizer.decode(r.gen_ids[:1]) for r in rs], y, probe)
    out["text_control"] = text.to_dict()
    out["oof_scores_text"] = text.scores.tolist()
    if guard_position is not None:
        n_states = acts.first.shape[1]
        k = s.layer if s.layer is not None else ((n_states - 1) // 2 + 1 if n_states > 2 else n_states - 1)
        out["guard"] = guard_probe(model, acts.layer(s.layer, at=guard_position), y, s, k % n_states, guard_position)
    out["valley"] = valley_test(acts.curve, y, acts.positions, seed=s.seed, n_resamples=min(s.boot, 500)).to_dict()
    judge = stance_judge(s.refuse_words, s.comply_words)
    flips = find_flips(tokenizer, rs, judge, unit=s.unit)
    out["flips_found"] = len(flips)
    out["rollouts_with_flip"] = float(np.mean([any(f.rollout == i for f in flips) for i in range(len(rs))]))
    cont = HFContinuer(model, tokenizer, labeler, close=s.fmt.close, max_new_tokens=s.max_new_tokens,
                       temperature=s.temperature, batch_size=max(s.batch_size, 64))
    if s.cv_n:
        out["cv"] = continuation_variance(cont, rs[: s.cv_traces], s.fractions, s.cv_n, seed=s.seed).to_dict()
    if s.replay_k and flips:
        rows = cut_replay(cont, rs, flips[: s.max_flips], k=s.replay_k, seed=s.seed)
        out["flip_table"] = replay_table(rows)
        out["performative_share"] = float(np.mean([not r.significant for r in rows]))
    return out
