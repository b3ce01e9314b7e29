"""Controllers: which of critic / refine / verify / ship to do next.

State: the belief ``b`` that the current candidate is correct, how many of the (cost-ordered)
critics have run on it, and the steps left. Utilities: shipping gives ``R`` if correct and ``-L``
if wrong; every action costs. Verify reveals correctness: a verified-correct candidate is shipped
at once, a failed one leaves belief 0 (refine, or ship known-bad code).

- :class:`GreedyController`: one-step value of information. Its ship/verify rule is
  ``ship iff b >= 1 - c_V / (L + W0)`` where ``W0`` is the value of continuing from a known
  failure, taken as the fixed point of a refine-then-verify loop.
- :class:`DPController`: backward induction over a belief grid and the steps left.
- Baselines: always verify, never verify, verify when all critics pass, ship when all critics pass
  (the gate rule), fixed belief threshold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Protocol

import numpy as np

from divelab.coding.bayes_control.belief import BeliefModel

SHIP, VERIFY, REFINE, CRITIC = "ship", "verify", "refine", "critic"


@dataclass(frozen=True)
class Costs:
    """Utilities in units of the reward for shipping correct code."""

    reward: float = 1.0
    loss: float = 2.0  # shipping wrong code is worse than shipping right code is good
    verify: float = 0.3
    refine: float = 0.1
    critics: tuple[float, ...] = (0.001, 0.002, 0.01, 0.02)

    def __post_init__(self) -> None:
        for name in ("reward", "loss", "verify", "refine"):
            if getattr(self, name) < 0:
                raise ValueError(f"Costs.{name} must be >= 0, got {getattr(self, name)!r}")
        if any(c < 0 for c in self.critics):
            raise ValueError(f"critic costs must be >= 0, got {self.critics!r}")

    def ship_value(self, b: float | np.ndarray) -> float | np.ndarray:
        return b * self.reward - (1 - b) * self.loss


@dataclass
class State:
    belief: float
    next_critic: int | None  # index of the next available critic, None when all have run
    steps_left: int  # refinements + verifications left before a forced ship
    observations: tuple[bool, ...] = ()  # critic results on the current candidate
    known_wrong: bool = False  # the verifier failed the current candidate
    available: tuple[bool, ...] = ()  # which critics can run on this task (empty: all)


class Controller(Protocol):
    name: str

    def act(self, state: State) -> tuple[str, int | None]: ...


def _post(model: BeliefModel, k: int, b: float) -> tuple[float, float, float]:
    lik = model.critics[k]
    p = lik.p_pass(b)
    return p, lik.posterior(b, True), lik.posterior(b, False)


def known_failure_value(model: BeliefModel, costs: Costs, iters: int = 500) -> float:
    """W0: value of continuing from a known failure with an unbounded refine-then-(ship|verify)
    loop: W0 = -c_R + max(U(rho01), -c_V + rho01 R + (1 - rho01) W0), solved by iteration."""
    r = model.refine.rho01
    w = costs.ship_value(0.0)
    for _ in range(iters):
        w_new = -costs.refine + max(costs.ship_value(r), -costs.verify + r * costs.reward + (1 - r) * w)
        w_new = max(w_new, costs.ship_value(0.0))  # one can always ship the known-bad code instead
        if abs(w_new - w) < 1e-12:
            break
        w = w_new
    return float(w)


def greedy_threshold(model: BeliefModel, costs: Costs) -> float:
    """The belief above which the greedy controller ships rather than verifies."""
    w0 = known_failure_value(model, costs)
    denom = costs.loss + w0
    return 1.0 - costs.verify / denom if denom > 0 else float("-inf")


@dataclass
class GreedyController:
    """Myopic value of information: compare each action followed by the best stopping decision."""

    model: BeliefModel
    costs: Costs
    name: str = "greedy-VOI"
    _w0: float = field(init=False)

    def __post_init__(self) -> None:
        self._w0 = known_failure_value(self.model, self.costs)

    def stop_value(self, b: float) -> float:
        c = self.costs
        return max(c.ship_value(b), -c.verify + b * c.reward + (1 - b) * self._w0)

    def q_values(self, s: State) -> dict[tuple[str, int | None], float]:
        c, b = self.costs, s.belief
        q = {(SHIP, None): float(c.ship_value(b)),
             (VERIFY, None): -c.verify + b * c.reward + (1 - b) * self._w0,
             (REFINE, None): -c.refine + self.stop_value(self.model.refine.next_belief(b))}
        if s.next_critic is not None and not s.known_wrong:
            k = s.next_critic
            p, bp, bm = _post(self.model, k, b)
            q[(CRITIC, k)] = -c.critics[k] + p * self.stop_value(bp) + (1 - p) * self.stop_value(bm)
        return q

    def act(self, s: State) -> tuple[str, int | None]:
        if s.steps_left <= 0:
            return SHIP, None
        q = self.q_values(s)
        return max(q, key=q.get)


@dataclass
class DPController:
    """Finite-horizon dynamic programming over (belief grid, critics run, budget left).

    The budget counts refinements and verifications (the expensive calls); critics run at most
    once per candidate, in cost order, without using it up.

    ``V_0(b) = U_ship(b)``; ``V_h(b, k) = max(U_ship(b), verify, critic k, refine)`` with verify's
    failure branch worth ``V_{h-1}(0, done)`` (or ``failure_terminal`` when h = 1, if given).
    """

    model: BeliefModel
    costs: Costs
    horizon: int = 8
    grid: int = 401
    available: tuple[bool, ...] | None = None  # which critics exist for this task (None: all)
    failure_terminal: float | None = None
    name: str = "DP"

    def __post_init__(self) -> None:
        if self.horizon < 1:
            raise ValueError(f"DPController.horizon must be >= 1, got {self.horizon}")
        if self.grid < 3:
            raise ValueError(f"DPController.grid must be >= 3, got {self.grid}")
        self._tables: dict[tuple[bool, ...], list[np.ndarray]] = {}
        self.b = np.linspace(0.0, 1.0, self.grid)

    def _order(self, avail: tuple[bool, ...]) -> list[int]:
        return [k for k, a in enumerate(avail) if a]

    def tables(self, avail: tuple[bool, ...]) -> list[np.ndarray]:
        """V[h] of shape (n_available_critics + 1, grid): row j = j critics already run."""
        if avail in self._tables:
            return self._tables[avail]
        order = self._order(avail)
        n = len(order)
        c, b = self.costs, self.b
        v0 = np.tile(c.ship_value(b), (n + 1, 1))
        tables = [v0]
        for h in range(1, self.horizon + 1):
            prev = tables[-1]
            fail = prev[n, 0] if (h > 1 or self.failure_terminal is None) else self.failure_terminal
            cur = np.empty_like(prev)
            refine = -c.refine + np.interp(self.model.refine.next_belief(b), b, prev[0])
            stop = np.maximum(np.maximum(c.ship_value(b), -c.verify + b * c.reward + (1 - b) * fail), refine)
            # Critics do not use up the budget (it counts refinements and verifications), so a critic
            # leads to the same h with one more critic run: fill rows from the last critic backwards.
            for j in range(n, -1, -1):
                best = stop
                if j < n:
                    lik = self.model.critics[order[j]]
                    p = lik.alpha * b + lik.beta * (1 - b)
                    with np.errstate(divide="ignore", invalid="ignore"):
                        bp = np.where(p > 0, lik.alpha * b / np.maximum(p, 1e-300), b)
                        bm = np.where(p < 1, (1 - lik.alpha) * b / np.maximum(1 - p, 1e-300), b)
                    crit = -c.critics[order[j]] + p * np.interp(bp, b, cur[j + 1]) + (1 - p) * np.interp(bm, b, cur[j + 1])
                    best = np.maximum(best, crit)
                cur[j] = best
            tables.append(cur)
        self._tables[avail] = tables
        return tables

    def q_values(self, s: State, avail: tuple[bool, ...] | None = None) -> dict[tuple[str, int | None], float]:
        avail = avail or s.available or self.available or tuple(True for _ in self.model.critics)
        order = self._order(avail)
        n = len(order)
        h = min(s.steps_left, self.horizon)
        tables = self.tables(avail)
        prev = tables[h - 1]
        c, bb, b = self.costs, self.b, s.belief
        j = n if (s.next_critic is None or s.known_wrong) else order.index(s.next_critic)
        fail = prev[n, 0] if (h > 1 or self.failure_terminal is None) else self.failure_terminal
        q = {(SHIP, None): float(c.ship_value(b)),
             (VERIFY, None): float(-c.verify + b * c.reward + (1 - b) * fail),
             (REFINE, None): float(-c.refine + np.interp(self.model.refine.next_belief(b), bb, prev[0]))}
        if j < n:
            k = order[j]
            p, bp, bm = _post(self.model, k, b)
            same = tables[h]  # a critic keeps the budget: its continuation is V_h with one more critic run
            q[(CRITIC, k)] = float(-c.critics[k] + p * np.interp(bp, bb, same[j + 1]) + (1 - p) * np.interp(bm, bb, same[j + 1]))
        return q

    def act(self, s: State, avail: tuple[bool, ...] | None = None) -> tuple[str, int | None]:
        if s.steps_left <= 0:
            return SHIP, None
        q = self.q_values(s, avail)
        return max(q, key=q.get)

    def ship_verify_boundary(self, avail: tuple[bool, ...] | None = None) -> float:
        """At horizon 1: the smallest grid belief where shipping is at least as good as verifying."""
        avail = avail or tuple(False for _ in self.model.critics)
        tables = self.tables(avail)
        n = len(self._order(avail))
        prev = tables[0]
        fail = prev[n, 0] if self.failure_terminal is None else self.failure_terminal
        c, b = self.costs, self.b
        ship_better = c.ship_value(b) >= -c.verify + b * c.reward + (1 - b) * fail
        idx = np.flatnonzero(ship_better)
        return float(b[idx[0]]) if idx.size else float("nan")


# --------------------------------------------------------------------------------------- baselines


@dataclass
class AlwaysVerify:
    name: str = "always-verify"

    def act(self, s: State) -> tuple[str, int | None]:
        if s.steps_left <= 0:
            return SHIP, None
        return (REFINE, None) if s.known_wrong else (VERIFY, None)


@dataclass
class NeverVerify:
    name: str = "never-verify"

    def act(self, s: State) -> tuple[str, int | None]:
        return SHIP, None


@dataclass
class VerifyIfCriticsPass:
    """Run every critic; any failure → refine; all passed → verify (a failed verify → refine)."""

    name: str = "verify-if-critics-pass"
    on_pass: ClassVar[str] = VERIFY  # what to do once every critic has passed

    def act(self, s: State) -> tuple[str, int | None]:
        if s.steps_left <= 0:
            return SHIP, None
        if s.known_wrong or (s.observations and not all(s.observations)):
            return REFINE, None
        if s.next_critic is not None:
            return CRITIC, s.next_critic
        return self.on_pass, None


@dataclass
class ShipIfCriticsPass(VerifyIfCriticsPass):
    """The gate rule: run every critic; any failure → refine; all passed → ship without verifying."""

    name: str = "ship-if-critics-pass"
    on_pass: ClassVar[str] = SHIP


@dataclass
class FixedThreshold:
    """Run every critic; ship if the belief clears a fixed threshold, else verify."""

    threshold: float = 0.8
    name: str = "fixed-threshold"

    def act(self, s: State) -> tuple[str, int | None]:
        if s.steps_left <= 0:
            return SHIP, None
        if s.known_wrong:
            return REFINE, None
        if s.next_critic is not None:
            return CRITIC, s.next_critic
        return (SHIP, None) if s.belief >= self.threshold else (VERIFY, None)


def simple_rules(thresholds: tuple[float, ...]) -> list[Controller]:
    """Every simple rule a Bayesian controller is measured against, the fixed-threshold rule once per candidate
    threshold (the caller picks among them on a development split)."""
    return [AlwaysVerify(), NeverVerify(), VerifyIfCriticsPass(), ShipIfCriticsPass(),
            *(FixedThreshold(t, name=f"fixed-threshold@{t:g}") for t in thresholds)]
