"""The Red Queen Gödel Machine loop over any :class:`World`: epochs with a frozen judge, replacement at
exponential checkpoints on a fixed anchor, selective erasure, and the baselines (fixed judge,
replacement without erasure, self-judging).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from scipy import stats as _st

from divelab.selfimprove.red_queen.archive import Archive, Record
from divelab.selfimprove.red_queen.bestbelief import best_belief, checkpoints, compare_judges

SLOT = "judge"
MODES = ("rqgm", "fixed", "no_erasure", "self_judge")

Task = list[tuple[Any, bool]]  # one judging task: items with their true labels; success iff all judged right


class World(Protocol):
    """What the loop needs from a world (see ``world_synthetic`` and ``world_programs``)."""

    def initial_writer(self) -> Any: ...
    def initial_judge(self) -> Any: ...
    def mutate_writer(self, writer: Any, rng: np.random.Generator) -> Any: ...
    def mutate_judge(self, judge: Any, rng: np.random.Generator) -> Any: ...
    def produce(self, writer: Any, rng: np.random.Generator) -> Any: ...
    def accepts(self, judge: Any, item: Any) -> bool: ...
    def judge_task(self, rng: np.random.Generator, adversarial: bool) -> Task: ...
    def anchor(self, adversarial: bool) -> list[Task]: ...
    def true_quality(self, writer: Any) -> float: ...


@dataclass(frozen=True)
class RQGMConfig:
    budget: int = 200  # evaluations
    mode: str = "rqgm"
    adversarial: bool = False  # judge tasks and anchor are matched pairs across item sources
    alpha: float = 0.6  # UCB-Air: expand when N^alpha >= |nodes|
    eps: float = 0.1  # best-belief quantile
    first_checkpoint: int = 8
    rho: float = 2.0
    rank_items: int = 24  # items per node for the pre/post replacement ranking
    shuffle_anchor: bool = False  # negative control: the anchor's labels permuted across its tasks


    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; allowed: {', '.join(MODES)}")
        if self.budget < 1:
            raise ValueError(f"budget must be >= 1, got {self.budget}")


class DegenerateAnchor(ValueError):
    """The anchor holds items of one label only: a judge that always gives that label is perfect on it,
    so replacement on the anchor would reward the judge for not judging."""


def check_anchor(anchor: list[Task]) -> dict[bool, int]:
    """How many anchor items carry each label; raises :class:`DegenerateAnchor` when one is missing."""
    counts = {True: 0, False: 0}
    for task in anchor:
        for _, label in task:
            counts[bool(label)] += 1
    if not counts[True] or not counts[False]:
        only = "good" if counts[True] else "bad"
        raise DegenerateAnchor(
            f"the anchor is degenerate: all {counts[True] + counts[False]} of its items are labelled {only}, so a "
            f"judge that calls everything {only} scores perfectly on it; an anchor needs items of both labels "
            "(make it stricter or more lenient, or draw more items)")
    return counts


def shuffled_labels(anchor: list[Task], seed: int) -> list[Task]:
    """The anchor with its labels permuted across tasks (task i takes the labels of task perm[i]): the same
    items and the same label counts, but labels no longer tied to the items' truth. A negative control: with
    it, replacement on the anchor can no longer pick judges that are right more often."""
    perm = np.random.default_rng([seed, 23]).permutation(len(anchor))
    labels = [[y for _, y in anchor[k]] for k in perm]
    if any(len(a) != len(b) for a, b in zip(anchor, labels, strict=True)):
        raise ValueError("shuffled_labels needs anchor tasks of one size (single items or matched pairs)")
    return [[(x, y) for (x, _), y in zip(task, ys, strict=True)] for task, ys in zip(anchor, labels, strict=True)]


def judge_score(world: World, judge: Any, tasks: list[Task]) -> tuple[int, int]:
    """(successes, failures) of a judge on labelled tasks (a task succeeds iff every item is judged right)."""
    s = sum(all(world.accepts(judge, x) == y for x, y in t) for t in tasks)
    return s, len(tasks) - s


@dataclass
class Replacement:
    step: int
    decision: Any
    spearman: float | None  # rank correlation of node rankings under old vs new judge
    erased: int


@dataclass
class RunResult:
    archive: Archive
    final_node: int
    final_writer: Any
    final_judge: Any
    initial_judge: Any
    checkpoints: list[int]
    replacements: list[Replacement] = field(default_factory=list)
    evaluations: int = 0
    rescored: int = 0  # evaluations spent on nodes whose earlier records had been erased

    @property
    def epochs(self) -> int:
        return 1 + len(self.replacements)


def _acceptance_by_node(world: World, archive: Archive, judge: Any, seed: int, n: int) -> np.ndarray:
    out = np.zeros(len(archive.nodes))
    for node in archive.nodes:
        r = np.random.default_rng([seed, node.id])
        out[node.id] = np.mean([world.accepts(judge, world.produce(node.writer, r)) for _ in range(n)])
    return out


def run(world: World, cfg: RQGMConfig, seed: int = 0) -> RunResult:
    rng = np.random.default_rng(seed)
    archive = Archive(world.initial_writer(), world.initial_judge())
    incumbent = archive.nodes[0].judge
    marks = checkpoints(cfg.budget, cfg.first_checkpoint, cfg.rho)
    res = RunResult(archive, 0, None, None, incumbent, marks)
    anchor = world.anchor(cfg.adversarial)
    if cfg.shuffle_anchor:
        anchor = shuffled_labels(anchor, seed)
    if cfg.mode in ("rqgm", "no_erasure"):  # the modes that replace judges on the anchor
        check_anchor(anchor)
    epoch = 0
    erased_nodes: set[int] = set()
    for t in range(1, cfg.budget + 1):
        if t ** cfg.alpha >= len(archive.nodes):  # UCB-Air expansion gate
            parent = archive.nodes[archive.thompson(rng)]
            which = rng.integers(3)  # the meta-agent edits the writer, the judge, or both
            w = world.mutate_writer(parent.writer, rng) if which in (0, 2) else parent.writer
            j = world.mutate_judge(parent.judge, rng) if which in (1, 2) else parent.judge
            archive.add_child(parent.id, w, j)
        i = archive.thompson(rng)
        node = archive.nodes[i]
        n_w = sum(1 for r in archive.records if r.node == i and r.role == "writer")
        n_j = sum(1 for r in archive.records if r.node == i and r.role == "judge")
        if n_w <= n_j:  # least-measured role of the node
            item = world.produce(node.writer, rng)
            if cfg.mode == "self_judge":
                ok, deps = world.accepts(node.judge, item), frozenset({f"self:{i}"})
            else:
                ok, deps = world.accepts(incumbent, item), frozenset({SLOT})
            archive.record(Record(i, "writer", bool(ok), deps, epoch, t))
            if i in erased_nodes:
                res.rescored += 1
                erased_nodes.discard(i)
        else:
            task = world.judge_task(rng, cfg.adversarial)
            ok = all(world.accepts(node.judge, x) == y for x, y in task)
            archive.record(Record(i, "judge", bool(ok), frozenset(), epoch, t))
        res.evaluations += 1
        if t in marks and cfg.mode in ("rqgm", "no_erasure"):
            jc = archive.counts("judge")
            bb = [best_belief(int(s), int(f), cfg.eps) for s, f in jc]
            order = np.argsort(bb)[::-1]
            challenger = next((archive.nodes[k].judge for k in order if archive.nodes[k].judge is not incumbent), None)
            if challenger is None:
                continue
            dec = compare_judges(judge_score(world, incumbent, anchor), judge_score(world, challenger, anchor), cfg.eps)
            if dec.replace:
                before = _acceptance_by_node(world, archive, incumbent, seed + 7919 * t, cfg.rank_items)
                after = _acceptance_by_node(world, archive, challenger, seed + 7919 * t, cfg.rank_items)
                rho = None
                if len(before) > 2 and np.ptp(before) > 0 and np.ptp(after) > 0:
                    rho = float(_st.spearmanr(before, after).statistic)
                n_erased = 0
                if cfg.mode == "rqgm":
                    erased_nodes |= {r.node for r in archive.records if SLOT in r.deps}
                    n_erased = archive.erase(SLOT)
                incumbent = challenger
                epoch += 1
                res.replacements.append(Replacement(t, dec, rho, n_erased))
    # final answer: the node with the highest best-belief on its (valid) writer records
    c = archive.counts("writer")
    bb = [best_belief(int(s), int(f), cfg.eps) if s + f else -1.0 for s, f in c]
    best = int(np.argmax(bb))
    res.final_node = best
    res.final_writer = archive.nodes[best].writer
    res.final_judge = archive.nodes[best].judge if cfg.mode == "self_judge" else incumbent
    return res
