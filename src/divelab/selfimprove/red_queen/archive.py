"""The archive tree of workspace nodes, utility records with dependency sets, and selective erasure.

A node holds two roles: a *writer* (the agent being improved) and a *judge* (an evaluator role
the meta-agent can also edit). Every evaluation appends a :class:`Record`; a record that used a
judge slot names it in ``deps``. Replacing the judge of a slot erases exactly the records whose
``deps`` contain that slot (selective erasure); evaluator-independent records survive.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Node:
    id: int
    parent: int | None
    writer: Any
    judge: Any
    children: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Record:
    node: int
    role: str  # "writer" | "judge"
    outcome: bool
    deps: frozenset[str]  # judge slots this outcome depended on; empty = ground truth
    epoch: int
    step: int


class Archive:
    def __init__(self, writer: Any, judge: Any) -> None:
        self.nodes: list[Node] = [Node(0, None, writer, judge)]
        self.records: list[Record] = []
        self.erased = 0

    def add_child(self, parent: int, writer: Any, judge: Any) -> Node:
        if not 0 <= parent < len(self.nodes):
            raise ValueError(f"no node {parent}; the archive has {len(self.nodes)} nodes")
        node = Node(len(self.nodes), parent, writer, judge)
        self.nodes.append(node)
        self.nodes[parent].children.append(node.id)
        return node

    def record(self, rec: Record) -> None:
        self.records.append(rec)

    def erase(self, slot: str) -> int:
        """Drop every record that depended on ``slot``; return how many were dropped."""
        keep = [r for r in self.records if slot not in r.deps]
        n = len(self.records) - len(keep)
        self.records = keep
        self.erased += n
        return n

    def counts(self, role: str) -> np.ndarray:
        """(successes, failures) per node for one role, valid records only: shape (n_nodes, 2)."""
        c = np.zeros((len(self.nodes), 2), dtype=int)
        for r in self.records:
            if r.role == role:
                c[r.node, 0 if r.outcome else 1] += 1
        return c

    def clade(self, i: int) -> list[int]:
        out, stack = [], [i]
        while stack:
            j = stack.pop()
            out.append(j)
            stack.extend(self.nodes[j].children)
        return out

    def clade_counts(self, role: str = "writer") -> np.ndarray:
        """Clade-metaproductivity counts (HGM): each node's successes/failures summed over its clade."""
        own = self.counts(role)
        total = own.copy()
        for node in reversed(self.nodes):  # children have larger ids than parents
            if node.parent is not None:
                total[node.parent] += total[node.id]
        return total

    def thompson(self, rng: np.random.Generator, role: str = "writer") -> int:
        """Sample a node by Thompson sampling on its clade's Beta(1+S, 1+F) posterior."""
        c = self.clade_counts(role)
        draws = rng.beta(1 + c[:, 0], 1 + c[:, 1])
        return int(np.argmax(draws))
