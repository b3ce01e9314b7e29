"""Planted stance reversals, cut-replay's positive control on a real model: where the cuts fall, which traces get
one, and when the control fires."""

from __future__ import annotations

import numpy as np
import pytest

from divelab.oversight.first_token.reversals import TURN, planted_reversals, replay_power, reversal_text
from divelab.oversight.first_token.rollout import ThinkFormat

FMT = ThinkFormat(template="{prompt} <think>")
TO_REFUSE = ("That could hurt people, so I must not help.",)
TO_COMPLY = ("That is harmless, so I am happy to help.",)


class WordTok:
    """A whitespace tokenizer with a growing vocabulary (ids are word indices)."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [self.vocab.setdefault(w, len(self.vocab)) for w in text.split()]}

    def decode(self, ids, skip_special_tokens=False):
        words = {i: w for w, i in self.vocab.items()}
        return " ".join(words[i] for i in ids)


class FollowsLastStance:
    """A continuer whose sampled outcome is the last judgement in the prefix (1 refuse, 0 comply)."""

    def __init__(self, tok: WordTok) -> None:
        self.tok, self.prefixes = tok, []

    def outcomes(self, prefixes, n, seed):
        self.prefixes += [list(p) for p in prefixes]
        text = [self.tok.decode(p) for p in prefixes]
        last = [1 if t.rfind("must") > t.rfind("happy") else 0 for t in text]
        return np.repeat(np.array(last)[:, None], n, axis=1)


def _rollouts():
    out = []
    for i in range(6):
        refused = i % 2 == 0
        trace = "Let me think. " + (TO_REFUSE[0] if refused else TO_COMPLY[0])
        out.append({"prompt": f"request {i}", "trace": trace, "label": int(refused), "closed": i != 4})
    return out


def test_reversals_are_planted_on_both_stances_with_cuts_around_the_new_sentence():
    tok = WordTok()
    cont = FollowsLastStance(tok)
    rows = planted_reversals(cont, tok, FMT, _rollouts(), TO_REFUSE, TO_COMPLY, n=4, k=8, seed=0)
    assert len(rows) == 4 and all(r.planted == "reversal" for r in rows)
    assert {r.rollout for r in rows} == {0, 1, 2, 3}  # indices into the planted traces
    pre, post = cont.prefixes[0::2], cont.prefixes[1::2]
    for a, b in zip(pre, post, strict=True):
        assert b[: len(a)] == a and tok.decode(b[len(a):]).startswith(TURN)  # the cut before is the trace as sampled
    # a model that follows its last judgement: every reversal moves the outcome, and the replay sees it
    assert all(r.significant and r.follows_stance for r in rows)
    # the unclosed trace (index 4) is never used; the draw is seeded
    again = planted_reversals(FollowsLastStance(tok), tok, FMT, _rollouts(), TO_REFUSE, TO_COMPLY, n=4, k=8, seed=0)
    assert [(r.pre_cut, r.post_cut) for r in again] == [(r.pre_cut, r.post_cut) for r in rows]


def test_the_reversal_takes_the_opposite_stance():
    rng = np.random.default_rng(0)
    assert reversal_text(True, TO_REFUSE, TO_COMPLY, rng) == f" {TURN} that is harmless, so I am happy to help."
    assert reversal_text(False, TO_REFUSE, TO_COMPLY, rng) == f" {TURN} that could hurt people, so I must not help."


def test_the_control_fires_only_when_planted_reversals_are_flagged_more_than_natural_flips():
    planted = [{"significant": True}] * 10
    natural = [{"significant": False}] * 9 + [{"significant": True}]
    d, lo, hi = replay_power(planted, natural)
    assert d == pytest.approx(0.9) and lo > 0
    d, lo, hi = replay_power(natural, natural)
    assert d == 0 and lo <= 0
    with pytest.raises(ValueError, match="at least 2 planted"):
        replay_power(planted[:1], natural)
    with pytest.raises(ValueError, match="n >= 1 planted reversals"):
        planted_reversals(FollowsLastStance(WordTok()), WordTok(), FMT, _rollouts(), TO_REFUSE, TO_COMPLY, n=0, k=8,
                          seed=0)
