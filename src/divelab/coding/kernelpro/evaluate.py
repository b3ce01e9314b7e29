"""Every search node is a compiled, correctness-checked, profiled kernel: :class:`Evaluator`.

``evaluate(config)`` compiles the problem's program under ``config``, checks it against the
float64 reference on every input set and at tiny and odd sizes (the correctness wall,
:func:`backend.verify`), times it (warm-up, repeats, median), disassembles it,
runs it under callgrind (deterministic counts) and runs the micro-tools. Results are memoised
per config, so searches that meet the same candidate pay once; ``evaluations`` counts distinct
candidates (the search budget).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from divelab.coding.kernelpro import backend
from divelab.coding.kernelpro.problems import Problem
from divelab.coding.kernelpro.program import Config
from divelab.coding.kernelpro.roofline import Roofline, measure_roofline
from divelab.coding.kernelpro.tools import TOOLS, Diagnosis, diagnose


@dataclass
class Candidate:
    config: Config
    compiled: bool
    correct: bool
    cost: float  # what the search minimises (callgrind CEst by default; seconds with cost="time")
    time_s: float = math.inf
    cv: float = 0.0
    error: float = math.inf
    bound: str = ""
    diagnoses: list[Diagnosis] = field(default_factory=list)
    skipped_tools: list[str] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    log: str = ""
    failed_checks: list[str] = field(default_factory=list)  # input sets / sizes the kernel got wrong

    @property
    def ok(self) -> bool:
        return self.compiled and self.correct


_INNER = re.compile(r"for \(int (\w+) = [^;]*;[^;]*;[^)]*\)\s*([^\n{]*;)")


def strided_inner(src: str) -> str:
    """The first one-line innermost loop whose body indexes ``[v * ...]`` with its own variable."""
    for m in _INNER.finditer(src.split("#ifdef DRIVER")[0]):
        v, body = m.group(1), m.group(2)
        hit = re.search(rf"\w+\[{v} \* \w+[^\]]*\]", body)
        if hit:
            return hit.group(0)
    return ""


class Evaluator:
    """Compile + check + profile candidates of one problem (memoised)."""

    def __init__(self, problem: Problem, *, cost: str = "cest", roofline: Roofline | None = None,
                 profile: bool = True, timing_repeats: int = 5):
        if cost not in ("cest", "time"):
            raise ValueError(f"cost must be 'cest' (callgrind estimated cycles) or 'time', got {cost!r}")
        if cost == "cest" and not backend.have_valgrind():
            raise RuntimeError("cost='cest' needs valgrind; install it or use cost='time'")
        self.problem, self.cost, self.profile, self.repeats = problem, cost, profile, timing_repeats
        self.roofline = roofline or measure_roofline()
        self.memo: dict[Config, Candidate] = {}
        self.order: list[Config] = []

    @property
    def evaluations(self) -> int:
        return len(self.memo)

    def evaluate(self, config: Config) -> Candidate:
        if config in self.memo:
            return self.memo[config]
        c = self._evaluate(config)
        self.memo[config] = c
        self.order.append(config)
        return c

    def _evaluate(self, config: Config) -> Candidate:
        p = self.problem
        b = backend.build(p, config)
        if not b.ok:
            return Candidate(config, False, False, math.inf, log=b.log)
        call = backend.load(b)
        wall = backend.verify(p, config, call)
        t = backend.time_kernel(p, call, repeats=self.repeats, min_time=1e-3)
        m: dict[str, Any] = {"time_s": t.median_s, "flops": p.flops, "bytes": p.bytes, "restrict": config.restrict,
                             "opt": config.opt, "reduction": p.reduction,
                             "strided_inner": strided_inner(p.source(config)),
                             "compulsory_lines": p.bytes / 64.0}
        if self.profile or self.cost == "cest":
            d = backend.disassemble(b)
            m.update(scalar=d.scalar, packed_xmm=d.packed_xmm, packed_ymm=d.packed_ymm, fma=d.fma,
                     libm_calls=d.libm_calls)
            m.update(backend.callgrind(b))
        cost = m["CEst"] if self.cost == "cest" else t.median_s
        cand = Candidate(config, True, wall.ok, cost, t.median_s, t.cv, wall.error, metrics=m,
                         failed_checks=wall.failed)
        if self.profile:
            cand.bound, cand.diagnoses, cand.skipped_tools = diagnose(m, self.roofline, TOOLS)
        return cand
