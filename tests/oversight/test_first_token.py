"""E171 first-token probe: the probe pipeline, valley test, CV and cut-replay on known answers."""

from __future__ import annotations

import numpy as np
import pytest

from divelab.oversight.first_token.continuation import Flip, continuation_variance, cut_replay, find_flips
from divelab.oversight.first_token.labels import RegexLabeler, VoteLabeler, answer_word_labeler, stance_judge
from divelab.oversight.first_token.probe import FirstTokenProbe, fisher_curve, text_control, valley_test
from divelab.oversight.first_token.rollout import Rollout, ThinkFormat, split_generation


def _planted(n: int = 240, d: int = 20, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    w = rng.normal(size=d)
    y = (X @ w + 0.5 * rng.normal(size=n) > 0).astype(int)
    return X, y


def test_probe_recovers_planted_linear_signal():
    X, y = _planted()
    res = FirstTokenProbe(C=1.0, n_resamples=100).fit_oof(X, y)
    assert res.auroc > 0.9 and res.ci[0] > 0.8
    assert res.balanced_accuracy > 0.75
    assert res.scores.shape == y.shape


def test_probe_on_shuffled_labels_is_at_chance():
    X, y = _planted()
    perm = np.random.default_rng(1).permutation(y)
    res = FirstTokenProbe(n_resamples=100).fit_oof(X, perm)
    assert abs(res.auroc - 0.5) < 0.12
    assert res.ci[0] < 0.5 < res.ci[1] or abs(res.auroc - 0.5) < 0.05


def test_probe_errors_are_clear():
    X, y = _planted(n=40)
    with pytest.raises(ValueError, match="two outcome classes"):
        FirstTokenProbe().fit_oof(X, np.ones(40, dtype=int))
    with pytest.raises(ValueError, match="fewer prompts"):
        FirstTokenProbe(folds=5).fit_oof(X[:3], y[:3])
    with pytest.raises(ValueError, match="rarer class"):
        FirstTokenProbe(folds=5).fit_oof(X, np.r_[np.ones(38, dtype=int), [0, 0]])


def test_text_control_reads_words_only_when_they_carry_the_outcome():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    noise = [str(w) for w in rng.choice(["okay", "hmm", "well"], 200)]
    leak = ["careful" if v else "easy" for v in y]
    assert abs(text_control(noise, y, FirstTokenProbe(n_resamples=100)).auroc - 0.5) < 0.12
    assert text_control(leak, y, FirstTokenProbe(n_resamples=100)).auroc > 0.99


def test_valley_test_detects_a_u_shape_and_not_a_flat_curve():
    rng = np.random.default_rng(0)
    n, P, d = 160, 11, 8
    y = rng.integers(0, 2, n)
    t = np.linspace(0, 1, P)
    sep = 2.0 * (2 * t - 1) ** 2 + 0.05  # high at both ends, near zero in the middle
    H = rng.normal(size=(n, P, d))
    H[:, :, 0] += (2 * y - 1)[:, None] * sep[None, :]
    v = valley_test(H, y, t, n_resamples=100)
    assert v.curvature_ci[0] > 0 and v.depth_ci[0] > 0
    assert 0.3 <= v.argmin <= 0.7
    flat = rng.normal(size=(n, P, d))
    flat[:, :, 0] += (2 * y - 1)[:, None] * 1.0
    vf = valley_test(flat, y, t, n_resamples=100)
    assert vf.curvature_ci[0] < 0 < vf.curvature_ci[1] or abs(vf.curvature) < 0.5 * v.curvature
    with pytest.raises(ValueError, match="both outcome classes"):
        fisher_curve(H, np.zeros(n))


def test_the_valley_bootstrap_computes_each_resamples_curve_from_sums_exactly():
    """The bootstrap reads J(t) of a resample from per-trace sums weighted by the resample's draw counts: the
    same curve as copying the resample (states offset far from 0, where a one-pass variance would lose digits)."""
    from divelab.oversight.first_token.probe import _ResampledFisher

    rng = np.random.default_rng(1)
    n, P, d = 120, 7, 16
    y = rng.integers(0, 2, n)
    H = rng.normal(size=(n, P, d)) * 2 + 10 + y[:, None, None] * np.linspace(1, 0, P)[None, :, None]
    fast = _ResampledFisher(H, y)
    for _ in range(10):
        ii = rng.integers(0, n, n)
        np.testing.assert_allclose(fast(ii), fisher_curve(H[ii], y[ii]), rtol=1e-9)
    assert len(fast.memo) == 10 and fast(ii) is fast(ii)  # a resample drawn again is not recomputed


class LockedAfter:
    """A hand-built model: the outcome is a coin until the prefix reaches ``lock_at`` tokens, after which
    it is fixed by the parity of the token at ``lock_at - 1`` (refuse if odd)."""

    def __init__(self, lock_at: int):
        self.lock_at = lock_at

    def outcomes(self, prefixes, n, seed):
        rng = np.random.default_rng(seed)
        out = np.zeros((len(prefixes), n), dtype=int)
        for i, p in enumerate(prefixes):
            if len(p) >= self.lock_at:
                out[i] = p[self.lock_at - 1] % 2
            else:
                out[i] = rng.integers(0, 2, n)
        return out


def _rollout(ids_prompt, ids_trace, label=0):
    return Rollout(prompt="p", prompt_ids=list(ids_prompt), gen_ids=list(ids_trace) + [99, 98],
                   think_end=len(ids_prompt) + len(ids_trace), trace_text="", answer_text="", label=label, closed=True)


def test_continuation_variance_on_a_hand_built_model():
    rng = np.random.default_rng(0)
    rs = [_rollout([1, 2], rng.integers(10, 20, 10).tolist()) for _ in range(30)]
    cv = continuation_variance(LockedAfter(lock_at=2 + 5), rs, fractions=(0.0, 0.2, 0.4, 0.6, 1.0), n=8, seed=0)
    assert cv.cv[0] > 0.6 and cv.cv[1] > 0.6 and cv.cv[2] > 0.6  # before the lock: a coin
    assert cv.cv[3] == 0.0 and cv.cv[4] == 0.0  # after it: fixed
    assert cv.random_reference == pytest.approx(0.875)
    with pytest.raises(ValueError, match="n >= 2"):
        continuation_variance(LockedAfter(3), rs, n=1)


def test_cut_replay_separates_real_from_performative_flips():
    rs = [_rollout([1, 2], [11, 12, 13, 14, 15, 16, 17, 18])]
    # lock_at = 6: cutting at 5 (pre) vs 6 (post) crosses the lock -> a real, significant change (coin -> fixed)
    real = Flip(0, pre_cut=5, post_cut=6, stance_before=1, stance_after=-1)
    perf = Flip(0, pre_cut=7, post_cut=9, stance_before=1, stance_after=-1)  # both after the lock: locked, n.s.
    rows = cut_replay(LockedAfter(lock_at=6), rs, [real, perf], k=100, seed=0)
    assert rows[0].significant and not rows[0].locked and rows[0].category == "soft-causal"
    assert rows[0].follows_stance  # token 5 is 14 (even) -> comply after the cut, as the comply-ish stance implies
    assert not rows[1].significant and rows[1].locked and rows[1].category == "theater"
    assert rows[0].p_holm >= rows[0].p
    assert cut_replay(LockedAfter(6), rs, []) == []


class _WordTok:
    """The minimum of a tokenizer the flip finder needs: ids are indices into a word list."""

    def __init__(self, words):
        self.words = words

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(self.words[i] for i in ids)


def test_performative_share_needs_the_positive_control_to_fire():
    from divelab.oversight.first_token.reproduce import silent_control

    assert silent_control((0.7, 0.4, 0.9)) is None  # real flips flagged far more often than performative ones
    assert "did not fire" in silent_control((0.1, -0.2, 0.4))  # not separated: a miss looks performative
    assert "did not fire" in silent_control(None)  # too few planted flips replayed to tell


def test_find_flips_by_token_and_sentence():
    words = ["<think>", "sure", "the", "cannot", "fine", ".", "ok", "x"]
    tok = _WordTok(words)
    r = _rollout([0], [1, 2, 3, 2, 4, 5])  # sure the cannot the fine .
    judge = stance_judge(["cannot"], ["sure", "fine"])
    flips = find_flips(tok, [r], judge, unit="token")
    assert [(f.stance_before, f.stance_after) for f in flips] == [(-1, 1), (1, -1)]
    assert flips[0].pre_cut == 2 and flips[0].post_cut == 4
    # one sentence holding both stances is mixed -> no stance, no flip
    assert find_flips(tok, [r], judge, unit="sentence") == []


def test_labelers_and_vote():
    assert answer_word_labeler()("REFUSE") == 1 and answer_word_labeler()("COMPLY") == 0
    yes, no = RegexLabeler("x"), RegexLabeler("^$never")
    assert VoteLabeler([yes, yes, yes, no])("x") == 1
    assert VoteLabeler([yes, yes, no, no])("x") == 0  # 2 of 4 is a tie: comply, as in the paper
    assert VoteLabeler([yes, yes, no, no], min_votes=2)("x") == 1
    with pytest.raises(ValueError, match="invalid pattern"):
        RegexLabeler("(")
    with pytest.raises(ValueError, match="min_votes"):
        VoteLabeler([yes], min_votes=2)


def test_think_format_errors():
    with pytest.raises(ValueError, match="no thinking delimiter"):
        ThinkFormat(template="{prompt} Answer:")
    with pytest.raises(ValueError, match="must end with"):
        ThinkFormat(template="<think> {prompt}")
    with pytest.raises(ValueError, match="placeholder"):
        ThinkFormat(template="hello <think>")


def test_split_generation_with_a_multi_token_delimiter():
    tok = _WordTok(["a", "</", "think>", "REFUSE", "b"])
    tok.__call__ = None

    class T(_WordTok):
        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [1, 2]}

        def decode(self, ids, skip_special_tokens=True):
            return "".join(self.words[i] for i in ids)

    k, trace, answer, closed = split_generation(T(tok.words), [0, 0, 1, 2, 3], "</think>")
    assert closed and k == 2 and trace == "aa" and answer == "REFUSE"
    assert split_generation(T(tok.words), [0, 4], "</think>")[3] is False
