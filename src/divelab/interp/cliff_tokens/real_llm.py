"""E172 on a real LLM: cliff tokens in SmolLM2-135M-Instruct on short arithmetic word problems.

The same detector as the reproduction (:func:`divelab.interp.cliff_tokens.detect`): responses are sampled through
the model's chat template, token-wise potentials come from N batched, KV-cached continuations per computed
prefix, and the first cliff of every trace gets cliff-del and cliff-keep. On a shared CPU this is affordable only
at a small N, with potentials every ``every`` tokens and short answers (a one-shot prompt asks for one line and
"The answer is N."), so the configuration is stated with every number.

Two differences from the tiny model worth knowing:

- continuations are sampled at ``temperature`` < 1 (at T = 1 the 135M model rambles off topic), while the
  taxonomy's entropy and rank are taken from the untempered distribution, as an API's logprobs would be: the
  "decoding mismatch" under which deterministic cliffs become possible (docs/systems/cliff-tokens.md);
- with ``every`` > 1 a cliff is a span of tokens; the token classified is the span's last one.

>>> from divelab.interp.cliff_tokens.real_llm import measure_smollm2     # doctest: +SKIP
>>> claims, details = measure_smollm2(seed=0)
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from divelab import stats, verdicts
from divelab.claims import Claim, Kind, not_checkable
from divelab.interp.cliff_tokens import detection_claims
from divelab.interp.cliff_tokens.detector import Detection, detect
from divelab.interp.cliff_tokens.interventions import Intervention, cliff_del_keep
from divelab.interp.cliff_tokens.potential import RolloutConfig
from divelab.interp.cliff_tokens.task import Problem
from divelab.interp.cliff_tokens.taxonomy import TYPES

MODEL_LABEL = "SmolLM2-135M-Instruct"
SRC = "arXiv 2606.25524; week-in-review E172"

ONE_SHOT = ("Solve the problem in one line, then write 'The answer is' and the number.\n"
            "Example: Ann has 2 pens and buys 3 more. How many pens does she have?\n"
            "2 + 3 = 5. The answer is 5.\n\nProblem: ")

# one- and two-step problems with small numbers: the 135M model solves some of them some of the time
WORD_PROBLEMS: tuple[tuple[str, str], ...] = (
    ("Mia has 5 cookies and eats 1. How many cookies does she have left?", "4"),
    ("There are 2 cats. Each cat has 4 legs. How many legs are there in total?", "8"),
    ("A bag has 4 red balls and 5 blue balls. How many balls are in the bag?", "9"),
    ("Tom has 3 apples and buys 4 more. How many apples does he have?", "7"),
    ("A box holds 6 pens. Sara takes 2 pens out. How many pens are left?", "4"),
    ("Sam has 2 boxes with 3 toys in each box. How many toys does Sam have?", "6"),
    ("Lucy reads 3 pages on Monday and 5 pages on Tuesday. How many pages did she read?", "8"),
    ("Ben has 9 stickers and gives 3 to Lily. How many stickers does Ben have now?", "6"),
)


def word_problems(k: int | None = None) -> list[Problem]:
    """The first ``k`` word problems (all when ``None``), with the one-shot format instruction."""
    items = WORD_PROBLEMS if k is None else WORD_PROBLEMS[:k]
    if k is not None and not 1 <= k <= len(WORD_PROBLEMS):
        raise ValueError(f"k must be in [1, {len(WORD_PROBLEMS)}], got {k}")
    return [Problem(ONE_SHOT + q, a, meta={"question": q}) for q, a in items]


@dataclass(frozen=True)
class RealConfig:
    """Cliffs in the untuned SmolLM2's own responses to the word problems."""

    problems: int = 6
    """word problems whose responses are searched"""
    per_problem: int = 2
    """sampled responses per problem"""
    n: int = 8
    """continuations per computed prefix (the paper: 64)"""
    every: int = 4
    """potentials every k response tokens (plus the last)"""
    max_new_tokens: int = 24
    """responses and continuations"""
    temperature: float = 0.7
    """sampling temperature of responses and continuations"""
    batch_rows: int = 56
    """continuations decoded together (all computed prefixes of a trace in one batch; memory, not results)"""
    zero_patience: int = 2
    """stop a trace's rollouts after this many computed prefixes with potential 0"""


def summarise(det: Detection, ivs: Sequence[Intervention]) -> dict[str, Any]:
    """Cliff rates (wrong / right traces), cliff-del / cliff-keep pass@N and the taxonomy of one detection."""
    has = det.by_trace()
    correct = np.array([t.correct for t in det.traces], dtype=bool)
    with_cliff = np.array([i in has for i in range(len(det.traces))], dtype=float)
    kinds = Counter(c.kind for c in det.cliffs)
    n_c = len(det.cliffs)

    def rate(mask: np.ndarray) -> float | None:
        return float(with_cliff[mask].mean()) if mask.any() else None

    return {"traces": len(det.traces), "right": int(correct.sum()), "wrong": int((~correct).sum()),
            "accuracy": float(correct.mean()) if correct.size else float("nan"),
            "cliff_rate_wrong": rate(~correct), "cliff_rate_right": rate(correct), "cliffs": n_c,
            "types": {k: kinds.get(k, 0) for k in TYPES},
            "type_shares": {k: (kinds.get(k, 0) / n_c if n_c else None) for k in TYPES},
            "interventions": len(ivs),
            "pass_del": float(np.mean([i.pass_del for i in ivs])) if ivs else None,
            "pass_keep": float(np.mean([i.pass_keep for i in ivs])) if ivs else None,
            "mean_p_del": float(np.mean([i.k_del / i.n for i in ivs])) if ivs else None,
            "mean_p_keep": float(np.mean([i.k_keep / i.n for i in ivs])) if ivs else None}


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _tiny_text(tiny: dict[str, Any] | None, key: str) -> str:
    if not tiny:
        return "tiny model: not in this run"
    if key == "rates":
        return (f"tiny chain model: wrong {_fmt(tiny['cliff_rate_wrong'])} ({tiny['wrong']}), right "
                f"{_fmt(tiny['cliff_rate_right'])} ({tiny['right']})")
    if key == "iv":
        return (f"tiny chain model: cliff-del {_fmt(tiny['pass_del'])}, cliff-keep {_fmt(tiny['pass_keep'])} "
                f"({tiny['interventions']} cliffs)")
    return "tiny chain model: " + ", ".join(f"{k} {_fmt(v)}" for k, v in tiny["type_shares"].items()) + \
        f" of {tiny['cliffs']}"


def claims_from(det: Detection, ivs: Sequence[Intervention], cfg: RealConfig, *, label: str = MODEL_LABEL,
                tiny: dict[str, Any] | None = None, seed: int = 0) -> tuple[list[Claim], dict[str, Any]]:
    """The real-LLM claims (labelled with the model), each beside the tiny model's number when given."""
    s = summarise(det, ivs)
    n = cfg.n
    where = (f"{s['traces']} responses to {len(det.traces) // max(1, cfg.per_problem)} word problems, N = {n}, "
             f"potentials every {cfg.every} tokens, T = {cfg.temperature}")
    out: list[Claim] = []
    out.append(detection_claims.wrong_vs_right(det, label=label, where=where, baseline=_tiny_text(tiny, "rates"),
                                               source=SRC, seed=seed))
    stmt = f"{label}: cliff-del beats cliff-keep (pass@{n}, paired by first cliff)"
    if len(ivs) >= 2:
        pdel = np.array([i.pass_del for i in ivs])
        pkeep = np.array([i.pass_keep for i in ivs])
        dd, lo, hi = stats.paired_diff_ci(pdel, pkeep, method="bootstrap", seed=seed)
        out.append(Claim(statement=stmt, paper_value="pass@64: 1.0 vs 0.71–1.00", measured=dd, ci=(lo, hi),
                         kind=Kind.EMPIRICAL, source=SRC, baseline=_tiny_text(tiny, "iv"),
                         ruling=verdicts.direction(dd, (lo, hi), paper=(0.0, 0.29), tol=0.1, tol_kind="abs"),
                         note=f"cliff-del {pdel.mean():.2f}, cliff-keep {pkeep.mean():.2f} over {len(ivs)} first "
                              f"cliffs (fresh continuations, N = {n}; mean potential after: del "
                              f"{s['mean_p_del']:.2f}, keep {s['mean_p_keep']:.2f})"))
    else:
        out.append(not_checkable(stmt, "1.0 vs 0.71–1.00", f"only {len(ivs)} first cliffs (need >= 2; {where})",
                                 source=SRC))
    out.append(detection_claims.taxonomy(
        det, label=label, on_policy=cfg.temperature == 1.0,
        paper_value="three types, by entropy (H_b(0.99)) and greedy rank",
        measured_text=", ".join(f"{k} {_fmt(v)}" for k, v in s["type_shares"].items()) + f" of {s['cliffs']}",
        baseline=_tiny_text(tiny, "types"), source=SRC,
        note=f"entropy and rank from the untempered distribution, continuations at T = {cfg.temperature}; with "
             f"every = {cfg.every} the classified token is the last of its span"))
    details = {"model": label, "config": asdict(cfg), "summary": s, "tiny": tiny, "cliffs": det.table(),
               "responses": [{"correct": t.correct, "text": det.rollouts.decode(t.response_ids),
                              "potentials": t.potentials} for t in det.traces],
               "cost": vars(det.rollouts.cost)}
    return out, details


def measure(model, tok, problems: Sequence[Problem], cfg: RealConfig, *, chat: bool = True,
            checker: str = "last-number", label: str = MODEL_LABEL, tiny: dict[str, Any] | None = None,
            seed: int = 0) -> tuple[list[Claim], dict[str, Any]]:
    """Detect cliffs in ``model``'s responses to ``problems``, intervene at every first cliff, make the claims."""
    t0 = time.perf_counter()
    rc = RolloutConfig(n=cfg.n, temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens,
                       batch_rows=cfg.batch_rows, seed=seed)
    det = detect(model, tok, problems, checker=checker, config=rc, per_problem=cfg.per_problem, every=cfg.every,
                 zero_patience=cfg.zero_patience, chat=chat)
    ivs = cliff_del_keep(det)
    claims, details = claims_from(det, ivs, cfg, label=label, tiny=tiny, seed=seed)
    details["wall_s"] = time.perf_counter() - t0
    return claims, details


def measure_smollm2(cfg: RealConfig | None = None, *, tiny: dict[str, Any] | None = None,
                    seed: int = 0) -> tuple[list[Claim], dict[str, Any]]:
    """The SmolLM2-135M-Instruct measurement (single-threaded; ~10 minutes on a shared CPU at the default)."""
    from divelab.lm import real

    cfg = cfg or RealConfig()
    with real.loaded() as (model, tok):
        return measure(model, tok, word_problems(cfg.problems), cfg, tiny=tiny, seed=seed)


def add_to(rep: Any, cfg: RealConfig, seed: int = 0, tiny: dict[str, Any] | None = None) -> None:
    """Add the SmolLM2 claims of the run ``cfg`` sizes (see :func:`divelab.lm.real.add_claims_at_full`)."""
    from divelab.lm import real

    real.add_claims_at_full(rep, True, lambda: measure_smollm2(cfg, tiny=tiny, seed=seed),
                            statement=f"{MODEL_LABEL}: cliffs on arithmetic word problems",
                            paper_value="see the paper's claims", source=SRC)
