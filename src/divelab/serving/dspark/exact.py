"""Exact losslessness check by enumeration (paper §8; notes §6.3 E1a/E1b).

A tiny "speculative problem": R requests, vocabulary V, block γ; per request a target
distribution and a draft distribution for every prefix, and a draft confidence for every
position that depends on the *sampled* previous draft token (as DSpark's Markov-fed head does).
We enumerate every joint draft sample, run the scheduler on the resulting confidences, and
compute, in float64 and without sampling, the exact joint distribution of each request's first
γ+1 output tokens under speculative sampling (accept min(1, p_t/p_d), residual resample, bonus
token; tokens not committed in the round are completed from the target, which is what later
rounds produce by induction). A lossless scheduler gives exactly the target's distribution.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from divelab.serving.dspark.scheduler import Scheduler
from divelab.serving.dspark.sps import SPSCurve

Prefix = tuple[int, ...]


@dataclass
class SpecProblem:
    n_requests: int
    vocab: int
    gamma: int
    target: list[dict[Prefix, np.ndarray]]  # per request: prefix -> p_t(· | prefix)
    draft: list[dict[Prefix, np.ndarray]]  # per request: prefix -> p_d(· | prefix)
    conf: list[dict[Prefix, float]]  # per request: draft prefix x_<k -> c_k

    @property
    def depth(self) -> int:
        return self.gamma + 1

    @classmethod
    def random(cls, n_requests: int, vocab: int, gamma: int, seed: int = 0, peaked: float = 1.0) -> SpecProblem:
        rng = np.random.default_rng(seed)
        prefixes = [p for d in range(gamma + 1) for p in itertools.product(range(vocab), repeat=d)]

        def dist() -> np.ndarray:
            return rng.dirichlet(np.full(vocab, peaked))

        target = [{p: dist() for p in prefixes} for _ in range(n_requests)]
        draft = [{p: dist() for p in prefixes} for _ in range(n_requests)]
        conf = [{p: float(rng.uniform(0.05, 0.99)) for p in prefixes if len(p) < gamma} for _ in range(n_requests)]
        return cls(n_requests, vocab, gamma, target, draft, conf)

    @classmethod
    def counterexample(cls) -> SpecProblem:
        """The paper's §8 example: p_t = (0.7, 0.3), p_d = (0.5, 0.5), a_1 = 0.8, and the second
        confidence is 0.9 after token A, 0 after token B."""
        p_t, p_d = np.array([0.7, 0.3]), np.array([0.5, 0.5])
        prefixes = [(), (0,), (1,), (0, 0), (0, 1), (1, 0), (1, 1)]
        target = [{p: p_t.copy() for p in prefixes}]
        draft = [{p: p_d.copy() for p in prefixes}]
        conf = [{(): 0.8, (0,): 0.9, (1,): 0.0}]
        return cls(1, 2, 2, target, draft, conf)


COUNTEREXAMPLE_SPS = SPSCurve(np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.5, 0.45]),
                              label="paper §8 counterexample table")


def _index(seq: Prefix, vocab: int) -> int:
    i = 0
    for t in seq:
        i = i * vocab + t
    return i


def target_distribution(problem: SpecProblem, r: int) -> np.ndarray:
    """Exact distribution of request r's first γ+1 tokens under the target alone."""
    out = np.zeros(problem.vocab ** problem.depth)
    _complete(problem, r, (), 1.0, out)
    return out


def _complete(problem: SpecProblem, r: int, prefix: Prefix, w: float, out: np.ndarray) -> None:
    if w == 0.0:
        return
    if len(prefix) == problem.depth:
        out[_index(prefix, problem.vocab)] += w
        return
    p = problem.target[r][prefix]
    for v in range(problem.vocab):
        _complete(problem, r, prefix + (v,), w * p[v], out)


def verify_distribution(problem: SpecProblem, r: int, drafts: Prefix, ell: int) -> np.ndarray:
    """Exact output distribution of one verification round with drafts ``drafts`` of which the
    first ``ell`` are sent to the target (speculative sampling), completed from the target."""
    out = np.zeros(problem.vocab ** problem.depth)

    def rec(k: int, s: Prefix, w: float) -> None:
        p_t = problem.target[r][s]
        if k < ell:
            x = drafts[k]
            q = problem.draft[r][s]
            alpha = min(1.0, p_t[x] / q[x])
            rec(k + 1, s + (x,), w * alpha)
            res = np.maximum(p_t - q, 0.0)
            z = res.sum()
            if alpha < 1.0 and z > 0:
                for y in range(problem.vocab):
                    _complete(problem, r, s + (y,), w * (1.0 - alpha) * res[y] / z, out)
        else:  # bonus token from the target
            for y in range(problem.vocab):
                _complete(problem, r, s + (y,), w * p_t[y], out)

    rec(0, (), 1.0)
    return out


def output_distribution(problem: SpecProblem, scheduler: Scheduler, sps: SPSCurve,
                        prime: Callable[[Scheduler], None] | None = None) -> list[np.ndarray]:
    """Exact joint output distribution (as a list of per-request marginals and, for R ≤ 2, the
    joint as the last element when R == 2) of one round scheduled by ``scheduler``."""
    R, V, g = problem.n_requests, problem.vocab, problem.gamma
    marg = [np.zeros(V ** problem.depth) for _ in range(R)]
    joint = np.zeros((V ** problem.depth,) * 2) if R == 2 else None
    for flat in itertools.product(range(V), repeat=R * g):
        drafts = [tuple(flat[r * g:(r + 1) * g]) for r in range(R)]
        w = 1.0
        conf = np.zeros((R, g))
        for r in range(R):
            for k in range(g):
                w *= problem.draft[r][drafts[r][:k]][drafts[r][k]]
                conf[r, k] = problem.conf[r][drafts[r][:k]]
        if w == 0.0:
            continue
        sched = copy.deepcopy(scheduler)
        if prime is not None:
            prime(sched)
        ell = sched(conf, sps)
        dists = [verify_distribution(problem, r, drafts[r], int(ell[r])) for r in range(R)]
        for r in range(R):
            marg[r] += w * dists[r]
        if joint is not None:
            joint += w * np.outer(dists[0], dists[1])
    return marg + ([joint] if joint is not None else [])


def max_tv_error(problem: SpecProblem, scheduler: Scheduler, sps: SPSCurve,
                 prime: Callable[[Scheduler], None] | None = None) -> float:
    """Largest total-variation distance between the scheduled output and the target, over the
    per-request marginals and (for two requests) the joint."""
    outs = output_distribution(problem, scheduler, sps, prime)
    targets = [target_distribution(problem, r) for r in range(problem.n_requests)]
    errs = [0.5 * np.abs(outs[r] - targets[r]).sum() for r in range(problem.n_requests)]
    if problem.n_requests == 2:
        errs.append(0.5 * np.abs(outs[2] - np.outer(targets[0], targets[1])).sum())
    return float(max(errs))


def first_token_distribution(problem: SpecProblem, scheduler: Scheduler, sps: SPSCurve, r: int = 0) -> np.ndarray:
    out = output_distribution(problem, scheduler, sps)[r]
    return out.reshape(problem.vocab, -1).sum(axis=1)
