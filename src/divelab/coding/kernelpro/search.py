"""Domain-adapted MCTS over kernel candidates, and greedy / random search at equal budget.

MCTS (ours, after the paper's description):

- **UCT** selection ``Q/N + c * sqrt(ln N_parent / N)`` over live children;
- **progressive widening**: a node may hold ``ceil(C * N**alpha)`` children; **asymmetric
  branching**: the root and the current best node widen with a larger ``C``;
- **log reward** ``r = log(cost_ref / cost)``, clipped to ``[-2, 5]``;
- the **correctness wall**: a candidate that does not compile or fails the reference check earns
  the floor reward, is marked dead, and can never be the best kernel;
- **dead-end pruning**: a node with ``dead_after`` non-improving expansions, or with no live
  children and nothing left to try, is pruned;
- **search memory**: the observed change in log cost of each edit (over all parents) re-ranks
  the proposer's suggestions at every later expansion.

Two shams remove one ingredient each, for negative controls: ``sham_reward=True`` backs up a random
reward in place of the measured one for every correct kernel (the tree no longer sees speed; the
best kernel is still chosen by its measured cost), and ``sham_memory=True`` credits each edit's
observed effect to another edit (a seeded permutation of the edit names), so the memory re-ranks
proposals with the right numbers attached to the wrong edits.

The budget counts distinct evaluated candidates (each one a compile + check + profile).
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field

from divelab.coding.kernelpro.evaluate import Candidate
from divelab.coding.kernelpro.program import EDITS, Config, apply_edit

R_MIN, R_MAX = -2.0, 5.0


def log_reward(ref_cost: float, cand: Candidate) -> float:
    """The log-calibrated reward; candidates behind the correctness wall get the floor."""
    if not cand.ok or not math.isfinite(cand.cost) or cand.cost <= 0:
        return R_MIN
    return max(R_MIN, min(R_MAX, math.log(ref_cost / cand.cost)))


@dataclass
class SearchResult:
    method: str
    best: Candidate
    ref: Candidate
    evaluations: int
    history: list[float]  # best speedup (ref cost / best cost) after each evaluation
    candidates: list[Candidate] = field(default_factory=list)
    memory: dict[str, list[float]] = field(default_factory=dict)

    @property
    def speedup(self) -> float:
        return self.ref.cost / self.best.cost

    @property
    def fast_but_wrong(self) -> list[Candidate]:
        """Compiled candidates that were faster than the reference but failed the check."""
        return [c for c in self.candidates if c.compiled and not c.correct and c.cost < self.ref.cost]


class _Tracker:
    """Shared bookkeeping: budget, best-so-far under the wall, history, seen configs."""

    def __init__(self, evaluator, budget: int, root: Config):
        if budget < 1:
            raise ValueError(f"budget must be >= 1 evaluation, got {budget}")
        self.ev, self.budget, self.start = evaluator, budget, evaluator.evaluations
        self.seen: set[Config] = set()
        self.cands: list[Candidate] = []
        self.history: list[float] = []
        self.ref = self.eval(root)
        if not self.ref.ok:
            raise RuntimeError(f"the reference kernel of {evaluator.problem.name!r} fails (compiled="
                               f"{self.ref.compiled}, error={self.ref.error:.3g}):\n{self.ref.log[-800:]}")
        self.best = self.ref
        self.history[-1] = 1.0

    def left(self) -> bool:
        return len(self.seen) < self.budget

    def eval(self, cfg: Config) -> Candidate:
        self.seen.add(cfg)
        c = self.ev.evaluate(cfg)
        self.cands.append(c)
        if c.ok and hasattr(self, "best") and c.cost < self.best.cost:
            self.best = c
        self.history.append(self.ref.cost / self.best.cost if hasattr(self, "best") else 1.0)
        return c

    def result(self, method: str, memory=None) -> SearchResult:
        assert self.best.ok  # the wall: the best kernel is always a correct one
        return SearchResult(method, self.best, self.ref, len(self.seen), self.history, self.cands,
                            dict(memory or {}))


class _Node:
    __slots__ = ("cand", "parent", "children", "untried", "n", "w", "dead", "no_improve", "edit", "r")

    def __init__(self, cand: Candidate, parent: _Node | None, edit: str, r: float):
        self.cand, self.parent, self.edit, self.r = cand, parent, edit, r
        self.children: list[_Node] = []
        self.untried: list[str] | None = None
        self.n, self.w, self.dead, self.no_improve = 0, 0.0, not cand.ok, 0


class MCTS:
    def __init__(self, proposer, *, c_uct: float = 0.7, pw_c: float = 0.7, pw_alpha: float = 0.5,
                 root_c: float = 1.5, dead_after: int = 5, memory: bool = True, seed: int = 0,
                 sham_reward: bool = False, sham_memory: bool = False):
        if sham_memory and not memory:
            raise ValueError("sham_memory=True needs memory=True (it permutes the memory's edit labels)")
        self.proposer, self.c_uct, self.pw_c, self.pw_alpha = proposer, c_uct, pw_c, pw_alpha
        self.root_c, self.dead_after, self.use_memory, self.seed = root_c, dead_after, memory, seed
        self.sham_reward, self.sham_memory = sham_reward, sham_memory
        names = list(EDITS)
        # the sham memory reads edit e's entry under perm[e], a derangement (a shuffled cycle: no edit keeps its
        # own entry); its own rng, so the proposer's draws are unchanged
        cycle = random.Random(f"sham-memory-{seed}").sample(names, len(names))
        self._perm = ({a: cycle[(i + 1) % len(cycle)] for i, a in enumerate(cycle)} if sham_memory
                      else {n: n for n in names})

    @property
    def name(self) -> str:
        return ("mcts" if self.use_memory else "mcts-nomem") + ("-shamreward" if self.sham_reward else "") + (
            "-shammem" if self.sham_memory else "")

    def _ranked(self, node: _Node, caps, rng, memory) -> list[str]:
        edits = self.proposer.propose(node.cand.config, node.cand.diagnoses, caps, rng)
        if self.use_memory and memory:
            def key(e: str) -> float:
                seen = memory.get(self._perm[e])
                return -statistics.fmean(seen) if seen else 0.0
            edits = sorted(edits, key=key)
        return edits

    def _reward(self, ref_cost: float, cand: Candidate, sham: random.Random) -> float:
        r = log_reward(ref_cost, cand)
        # the sham keeps the correctness wall (a wrong kernel still gets the floor) but not the speed
        return sham.uniform(R_MIN, R_MAX) if self.sham_reward and cand.ok else r

    def search(self, evaluator, budget: int, root: Config | None = None) -> SearchResult:
        rng = random.Random(self.seed)
        sham = random.Random(f"sham-reward-{self.seed}")
        caps = evaluator.problem.capabilities
        tr = _Tracker(evaluator, budget, root or Config())
        top = _Node(tr.ref, None, "", 0.0)
        top.n = 1
        memory: dict[str, list[float]] = {}
        stall = 0
        while tr.left() and not top.dead and stall < 200:
            node, path = top, [top]
            child = None
            while True:
                if node.untried is None:
                    node.untried = self._ranked(node, caps, rng, memory)
                wide = self.root_c if (node is top or node.cand is tr.best) else self.pw_c
                k = math.ceil(wide * max(node.n, 1) ** self.pw_alpha)
                if len(node.children) < k and node.untried:
                    edit = node.untried.pop(0)
                    cfg = apply_edit(node.cand.config, edit)
                    if cfg is None or cfg in tr.seen:
                        continue
                    cand = tr.eval(cfg)
                    child = _Node(cand, node, edit, self._reward(tr.ref.cost, cand, sham))
                    node.children.append(child)
                    path.append(child)
                    if cand.ok and node.cand.ok:
                        memory.setdefault(edit, []).append(math.log(node.cand.cost / cand.cost))
                    if child.r <= node.r:
                        node.no_improve += 1
                        if node.no_improve >= self.dead_after and node is not top and node.cand is not tr.best:
                            node.dead = True
                    break
                live = [c for c in node.children if not c.dead]
                if not live:
                    if not node.untried:
                        node.dead = True
                    break
                node = max(live, key=lambda c: c.w / max(c.n, 1)
                           + self.c_uct * math.sqrt(math.log(node.n + 1) / max(c.n, 1)))
                path.append(node)
            if child is None:
                stall += 1
                r = path[-1].r
            else:
                stall = 0
                r = child.r
            for nd in path:
                nd.n += 1
                nd.w += r
        return tr.result(self.name, memory)


class Greedy:
    """Hill-climbing: from the best kernel so far, try the proposer's edits in rank order; move on improvement."""

    def __init__(self, proposer, seed: int = 0):
        self.proposer, self.seed = proposer, seed

    def search(self, evaluator, budget: int, root: Config | None = None) -> SearchResult:
        rng = random.Random(self.seed)
        caps = evaluator.problem.capabilities
        tr = _Tracker(evaluator, budget, root or Config())
        cur = tr.ref
        todo = self.proposer.propose(cur.config, cur.diagnoses, caps, rng)
        while tr.left() and todo:
            cfg = apply_edit(cur.config, todo.pop(0))
            if cfg is None or cfg in tr.seen:
                continue
            c = tr.eval(cfg)
            if c.ok and c.cost < cur.cost:
                cur = c
                todo = self.proposer.propose(cur.config, cur.diagnoses, caps, rng)
        return tr.result("greedy")


class RandomSearch:
    """Random edits applied to random correct candidates found so far."""

    def __init__(self, proposer, seed: int = 0):
        self.proposer, self.seed = proposer, seed

    def search(self, evaluator, budget: int, root: Config | None = None) -> SearchResult:
        rng = random.Random(self.seed)
        caps = evaluator.problem.capabilities
        tr = _Tracker(evaluator, budget, root or Config())
        pool, stall = [tr.ref], 0
        while tr.left() and stall < 200:
            base = rng.choice(pool)
            edits = self.proposer.propose(base.config, base.diagnoses, caps, rng)
            cfg = apply_edit(base.config, rng.choice(edits)) if edits else None
            if cfg is None or cfg in tr.seen:
                stall += 1
                continue
            stall = 0
            c = tr.eval(cfg)
            if c.ok:
                pool.append(c)
        return tr.result("random")
