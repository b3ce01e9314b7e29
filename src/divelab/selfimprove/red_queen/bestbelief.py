"""The judge-replacement rule: ε-best-belief on the anchor, strict improvement, ties keep the incumbent.

``BB_ε(S, F) = I⁻¹_ε(1 + S, 1 + F)``: the ε-quantile of the Beta(1+S, 1+F) posterior over a
judge's anchor success rate (scipy's ``beta.ppf``), a conservative lower bound. A challenger
replaces the incumbent only when its BB is *strictly* higher.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats as _st


def best_belief(successes: int, failures: int, eps: float = 0.1) -> float:
    """ε-quantile of Beta(1 + successes, 1 + failures)."""
    if successes < 0 or failures < 0:
        raise ValueError(f"successes and failures must be >= 0, got {successes}, {failures}")
    if not 0.0 < eps < 1.0:
        raise ValueError(f"eps must be in (0, 1), got {eps}")
    return float(_st.beta.ppf(eps, 1 + successes, 1 + failures))


@dataclass(frozen=True)
class Decision:
    replace: bool
    incumbent_bb: float
    challenger_bb: float
    incumbent: tuple[int, int]  # (S, F) on the anchor
    challenger: tuple[int, int]
    reason: str


def compare_judges(incumbent: tuple[int, int], challenger: tuple[int, int], eps: float = 0.1) -> Decision:
    """Replace only if the challenger's ε-best-belief is strictly higher; ties keep the incumbent."""
    bi, bc = best_belief(*incumbent, eps=eps), best_belief(*challenger, eps=eps)
    if bc > bi:
        return Decision(True, bi, bc, incumbent, challenger, "challenger strictly better")
    return Decision(False, bi, bc, incumbent, challenger, "tie keeps incumbent" if bc == bi else "incumbent better")


def checkpoints(budget: int, first: int = 8, rho: float = 2.0) -> list[int]:
    """Exponentially spaced checkpoint steps ``first, first·ρ, first·ρ², … ≤ budget``: O(log B) of them."""
    if budget < 0 or first < 1 or rho <= 1:
        raise ValueError(f"need budget >= 0, first >= 1, rho > 1; got {budget}, {first}, {rho}")
    out, t = [], float(first)
    while t <= budget:
        out.append(int(round(t)))
        t *= rho
    return out


def checkpoint_bound(budget: int, first: int = 8) -> int:
    """The stated bound on the number of checkpoints: ⌊log₂(B/first)⌋ + 2 (for ρ = 2)."""
    return int(math.floor(math.log2(max(budget, first) / first))) + 2
