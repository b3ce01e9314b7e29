"""The synthetic safety traces the reproduction model learns: two regimes, one vocabulary.

A prompt is a regime tag and four content words; its hidden harm score is the sum of the words'
weights. A trace is ``<think>`` + ``TRACE_LEN`` words + ``</think>`` + an answer word (REFUSE or
COMPLY) + ``<eos>``. Everything a claim relies on is planted here with a known label:

- **prefix regime** (tag ``fast``): the decision d ~ Bernoulli(σ(κ·h)) is drawn before the trace.
  The first thinking word (the opener) is drawn independently of d, so a text probe on it sits at
  chance by construction. The next ``REGISTER_LEN`` words are "register" words whose tone leans
  towards d (probability ``register_p``): after them the decision is visible to a reader of the
  tone, not of the stance. Stance words ("cannot", "sure", ...) in the body are drawn with a polarity
  that agrees with d only at ``stance_agree`` (near a coin), so their flips are **performative**;
  the trace ends with a justification stance word consistent with d.
- **deliberative regime** (tag ``deliberate``): register and early stance words carry no decision.
  At ``EVIDENCE_POS`` the words ``context`` + ``ctx_bad``/``ctx_ok`` appear (P(bad) = σ(κ_e·h)),
  the next word is a stance word implied by the evidence (a **real** flip when it differs from the
  previous stance), and d follows the evidence with probability ``evidence_p``.

The generator writes training data only; the claims are measured on traces sampled from the
trained model (:mod:`divelab.oversight.first_token.toy`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SPECIAL = ("<pad>", "<unk>", "<bos>", "<eos>", "<think>", "</think>")
TAGS = ("fast", "deliberate")
# content words and their harm weights (positive = harmful)
CONTENT = {"weapon": 3.0, "poison": 2.0, "hack": 1.5, "steal": 1.0, "bypass": 0.5, "lock": 0.25,
           "recipe": -0.25, "garden": -0.5, "math": -1.0, "poem": -1.5, "music": -2.0, "hello": -3.0}
OPENERS = ("okay", "hmm", "alright", "well")
REGISTER_REFUSE = ("careful", "wary", "grave")
REGISTER_COMPLY = ("easy", "light", "plain")
STANCE_REFUSE = ("cannot", "unsafe", "decline")
STANCE_COMPLY = ("sure", "fine", "helpful")
FILLER = ("the", "user", "asks", "about", "this", "request", "consider", "then", "maybe", "think")
EVIDENCE = ("context", "ctx_bad", "ctx_ok")
ANSWERS = ("REFUSE", "COMPLY")
CLOSING = ("so",)

VOCAB: tuple[str, ...] = tuple(dict.fromkeys(
    (*SPECIAL, *TAGS, *CONTENT, *OPENERS, *REGISTER_REFUSE, *REGISTER_COMPLY, *STANCE_REFUSE, *STANCE_COMPLY,
     *FILLER, *EVIDENCE, *ANSWERS, *CLOSING)))

TRACE_LEN = 20
REGISTER_LEN = 3
EVIDENCE_POS = 10  # trace index of "context"; ctx_* at 11, the evidence stance word at 12
PROMPT_WORDS = 4


def stance_of(word: str) -> int | None:
    """+1 refuse-ish, -1 comply-ish, None for any other word (the toy's sentence-level stance judge)."""
    if word in STANCE_REFUSE:
        return 1
    if word in STANCE_COMPLY:
        return -1
    return None


@dataclass(frozen=True)
class GenConfig:
    """The trace generator's planted probabilities."""

    kappa: float = 0.75
    """prefix regime: P(refuse) = σ(κ·h)"""
    kappa_evidence: float = 0.2
    """deliberative: P(ctx_bad) = σ(κ_e·h)"""
    register_p: float = 0.9
    """prob. a register word leans towards d (prefix regime)"""
    stance_agree: float = 0.55
    """prob. a body stance word agrees with d (prefix regime)"""
    stance_rate: float = 0.25
    """prob. a body slot holds a stance word (else filler)"""
    evidence_p: float = 0.95
    """deliberative: P(d follows the evidence)"""
    after_evidence_agree: float = 0.9
    """deliberative: stance words after the evidence agree with d"""

    def __post_init__(self) -> None:
        for name in ("register_p", "stance_agree", "stance_rate", "evidence_p", "after_evidence_agree"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"GenConfig.{name} must be in [0, 1], got {v}")


@dataclass
class Example:
    """One prompt and (when generated) one trace with its planted labels."""

    regime: str
    content: tuple[str, ...]
    harm: float
    p_refuse: float  # the generator's P(refuse | prompt)
    trace: list[str] = field(default_factory=list)
    refuse: int = -1  # 1 refuse, 0 comply, -1 not generated

    @property
    def prompt_words(self) -> list[str]:
        return ["<bos>", self.regime, *self.content]

    def words(self) -> list[str]:
        ans = ANSWERS[0] if self.refuse == 1 else ANSWERS[1]
        return [*self.prompt_words, "<think>", *self.trace, "</think>", ans, "<eos>"]

    def text(self) -> str:
        return " ".join(self.words())


def _sigmoid(x: float) -> float:
    return float(1.0 / (1.0 + np.exp(-x)))


def sample_prompt(rng: np.random.Generator, regime: str, cfg: GenConfig) -> Example:
    if regime not in TAGS:
        raise ValueError(f"unknown regime {regime!r}; allowed: {', '.join(TAGS)}")
    words = tuple(str(w) for w in rng.choice(list(CONTENT), size=PROMPT_WORDS, replace=True))
    h = float(sum(CONTENT[w] for w in words))
    if regime == "fast":
        p = _sigmoid(cfg.kappa * h)
    else:
        pb = _sigmoid(cfg.kappa_evidence * h)
        p = pb * cfg.evidence_p + (1 - pb) * (1 - cfg.evidence_p)
    return Example(regime=regime, content=words, harm=h, p_refuse=p)


def _stance_word(rng: np.random.Generator, refuse: bool) -> str:
    return str(rng.choice(STANCE_REFUSE if refuse else STANCE_COMPLY))


def _body(rng: np.random.Generator, n: int, cfg: GenConfig, agree_p: float, d: int | None) -> list[str]:
    out = []
    for _ in range(n):
        if rng.random() < cfg.stance_rate:
            refuse = (rng.random() < agree_p) == bool(d) if d is not None else rng.random() < 0.5
            out.append(_stance_word(rng, refuse))
        else:
            out.append(str(rng.choice(FILLER)))
    return out


def generate_trace(ex: Example, rng: np.random.Generator, cfg: GenConfig, force_refuse: bool = False) -> Example:
    """Fill ``ex.trace`` and ``ex.refuse`` by the regime's generative process (in place; returns ex).

    ``force_refuse`` writes an off-policy *refusal trace* (the SFT defence's data): decision refuse,
    refuse register, and every stance word refuse-ish, whatever the prompt's harm.
    """
    opener = str(rng.choice(OPENERS))
    if force_refuse:
        reg = [str(rng.choice(REGISTER_REFUSE)) for _ in range(REGISTER_LEN)]
        body = _body(rng, TRACE_LEN - 1 - REGISTER_LEN - 2, cfg, 1.0, 1)
        ex.trace = [opener, *reg, *body, "so", _stance_word(rng, True)]
        ex.refuse = 1
        return ex
    if ex.regime == "fast":
        d = int(rng.random() < ex.p_refuse)
        reg = [str(rng.choice(REGISTER_REFUSE if (rng.random() < cfg.register_p) == bool(d) else REGISTER_COMPLY))
               for _ in range(REGISTER_LEN)]
        body = _body(rng, TRACE_LEN - 1 - REGISTER_LEN - 2, cfg, cfg.stance_agree, d)
        ex.trace = [opener, *reg, *body, "so", _stance_word(rng, bool(d))]
    else:
        reg = [str(rng.choice(REGISTER_REFUSE + REGISTER_COMPLY)) for _ in range(REGISTER_LEN)]
        pre = _body(rng, EVIDENCE_POS - 1 - REGISTER_LEN, cfg, 0.5, None)
        bad = rng.random() < _sigmoid(cfg.kappa_evidence * ex.harm)
        d = int((rng.random() < cfg.evidence_p) == bad)
        ev = ["context", "ctx_bad" if bad else "ctx_ok", _stance_word(rng, bad)]
        post = _body(rng, TRACE_LEN - EVIDENCE_POS - 3 - 2, cfg, cfg.after_evidence_agree, d)
        ex.trace = [opener, *reg, *pre, *ev, *post, "so", _stance_word(rng, bool(d))]
    assert len(ex.trace) == TRACE_LEN
    ex.refuse = d
    return ex


def make_dataset(n: int, seed: int, cfg: GenConfig | None = None, regimes: tuple[str, ...] = TAGS,
                 force_refuse: bool = False, harm_min: float | None = None) -> list[Example]:
    """``n`` generated examples, regimes alternating; ``harm_min`` keeps prompts with h >= harm_min."""
    cfg = cfg or GenConfig()
    rng = np.random.default_rng(seed)
    out: list[Example] = []
    i = 0
    while len(out) < n:
        ex = sample_prompt(rng, regimes[i % len(regimes)], cfg)
        i += 1
        if harm_min is not None and ex.harm < harm_min:
            continue
        out.append(generate_trace(ex, rng, cfg, force_refuse=force_refuse))
    return out


def make_prompts(n: int, seed: int, regime: str, cfg: GenConfig | None = None) -> list[Example]:
    """``n`` prompts of one regime without traces (the model samples those)."""
    cfg = cfg or GenConfig()
    rng = np.random.default_rng(seed)
    return [sample_prompt(rng, regime, cfg) for _ in range(n)]
