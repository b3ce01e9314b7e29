"""The belief that the current candidate is correct: log-odds evidence updates and refinement.

Critic k has likelihoods alpha_k = P(pass | correct) and beta_k = P(pass | wrong), calibrated by
counting on logged candidates of the training tasks (Laplace-smoothed). A pass adds
log(alpha/beta) to the log-odds, a fail adds log((1-alpha)/(1-beta)); an abstention adds nothing.
A refinement replaces the candidate: b_new = rho11 * b + rho01 * (1 - b), and evidence about the
old candidate does not carry over.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

EPS = 1e-9


def logit(p: float) -> float:
    p = min(max(p, EPS), 1 - EPS)
    return math.log(p / (1 - p))


def sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@dataclass(frozen=True)
class Likelihood:
    """A critic's calibrated likelihoods. ``alpha`` = P(pass | correct), ``beta`` = P(pass | wrong)."""

    alpha: float
    beta: float

    def __post_init__(self) -> None:
        for name in ("alpha", "beta"):
            v = getattr(self, name)
            if not 0.0 < v < 1.0:
                raise ValueError(f"Likelihood.{name} must be strictly between 0 and 1, got {v!r}")

    def llr(self, passed: bool) -> float:
        return math.log(self.alpha / self.beta) if passed else math.log((1 - self.alpha) / (1 - self.beta))

    @property
    def youden(self) -> float:
        """alpha - beta: 0 for an uninformative critic, 1 for an oracle."""
        return self.alpha - self.beta

    def p_pass(self, b: float) -> float:
        return self.alpha * b + self.beta * (1 - b)

    def posterior(self, b: float, passed: bool) -> float:
        if b <= 0.0 or b >= 1.0:
            return b  # certainty is not moved by an imperfect critic
        return sigmoid(logit(b) + self.llr(passed))


def calibrate(observations: Iterable[tuple[bool | None, bool]], smoothing: float = 1.0) -> Likelihood:
    """Likelihoods from logged (critic passed?, candidate correct?) pairs; abstentions are skipped."""
    pc = nc = pw = nw = 0
    for obs, correct in observations:
        if obs is None:
            continue
        if correct:
            nc += 1
            pc += bool(obs)
        else:
            nw += 1
            pw += bool(obs)
    return Likelihood(alpha=(pc + smoothing) / (nc + 2 * smoothing), beta=(pw + smoothing) / (nw + 2 * smoothing))


@dataclass(frozen=True)
class RefineModel:
    """rho11 = P(next correct | current correct), rho01 = P(next correct | current wrong)."""

    rho11: float
    rho01: float

    def __post_init__(self) -> None:
        for name in ("rho11", "rho01"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"RefineModel.{name} must be in [0, 1], got {v!r}")

    def next_belief(self, b: float) -> float:
        return self.rho11 * b + self.rho01 * (1 - b)


@dataclass(frozen=True)
class BeliefModel:
    """Everything a Bayesian controller knows: the first candidate's prior, critics, refinement."""

    prior: float
    critics: tuple[Likelihood, ...]
    refine: RefineModel

    def to_dict(self) -> dict:
        return {"prior": self.prior, "critics": [[c.alpha, c.beta] for c in self.critics],
                "refine": [self.refine.rho11, self.refine.rho01]}

    @classmethod
    def from_dict(cls, d: dict) -> BeliefModel:
        try:
            return cls(prior=float(d["prior"]), critics=tuple(Likelihood(a, b) for a, b in d["critics"]),
                       refine=RefineModel(*d["refine"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"bad belief-model JSON (need prior, critics [[alpha, beta], ...], refine "
                             f"[rho11, rho01]): {exc}") from None
