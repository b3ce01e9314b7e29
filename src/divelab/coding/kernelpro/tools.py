"""Micro-profiling tools: deterministic readers of real measurements that emit diagnoses, not numbers.

Two stages, as in the paper: :func:`classify` puts a kernel on the measured roofline
(memory-bound / compute-bound / latency-bound), and only the tools whose ``applies(bound)`` is
true for that class run. Each tool has ``trigger(metrics)`` and ``analyze(metrics)`` returning a
:class:`Diagnosis` that names its evidence (the counter values it read) and the edits it
recommends. The catalogue is **ours** (the paper's 15 tools are not public): CPU analogues of the
Nsight Compute / SASS rules — objdump stands in for SASS, callgrind for ncu.

``metrics`` is a flat dict; the keys a real kernel produces are listed in :data:`METRIC_KEYS`
(fixtures in tests use the same keys).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from divelab.coding.kernelpro.roofline import Roofline

BOUNDS = ("memory", "compute", "latency")
METRIC_KEYS = (
    "time_s", "flops", "bytes", "intensity", "achieved_flops", "attainable_flops", "efficiency",
    "scalar", "packed_xmm", "packed_ymm", "fma", "libm_calls", "Ir", "Dr", "Dw", "D1mr", "D1mw", "DLmr",
    "DLmw", "CEst", "restrict", "opt", "reduction", "strided_inner", "compulsory_lines",
)


@dataclass
class Diagnosis:
    tool: str
    text: str
    severity: float  # 0..1
    evidence: dict[str, Any]
    edits: list[str] = field(default_factory=list)

    def render(self) -> str:
        ev = ", ".join(f"{k}={_fmt(v)}" for k, v in self.evidence.items())
        return f"[{self.tool} sev={self.severity:.2f}] {self.text} (evidence: {ev}; try: {', '.join(self.edits)})"


def _fmt(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def classify(m: dict[str, Any], roof: Roofline, latency_efficiency: float = 0.25) -> tuple[str, dict[str, Any]]:
    """Stage 1: roofline bottleneck class with its evidence.

    Below ``latency_efficiency`` of the attainable roof neither roof binds: latency/issue-bound.
    Otherwise memory-bound when the intensity is left of the ridge point, else compute-bound.
    """
    ai = m["flops"] / m["bytes"]
    att = roof.attainable(ai)
    eff = m["flops"] / m["time_s"] / att
    ev = {"intensity": ai, "ridge": roof.ridge, "achieved_GFLOPs": m["flops"] / m["time_s"] / 1e9,
          "attainable_GFLOPs": att / 1e9, "efficiency": eff}
    if eff < latency_efficiency:
        return "latency", ev
    return ("memory" if ai < roof.ridge else "compute"), ev


class MicroTool:
    name = "tool"
    bounds: tuple[str, ...] = BOUNDS

    def applies(self, bound: str) -> bool:
        return bound in self.bounds

    def trigger(self, m: dict[str, Any]) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def analyze(self, m: dict[str, Any]) -> Diagnosis:  # pragma: no cover - abstract
        raise NotImplementedError


class ScalarFallback(MicroTool):
    """objdump: the kernel does FP arithmetic with scalar instructions only (silent scalar fallback).

    Runs for every class: scalar loads also waste bandwidth (the paper's SASS tool is about loads)."""

    name = "scalar_fallback"
    bounds = BOUNDS

    def trigger(self, m):
        return m["scalar"] > 0 and m["packed_xmm"] + m["packed_ymm"] == 0

    def analyze(self, m):
        edits = ["simd", "fast_math", "restrict", "opt_up"] if m["reduction"] else ["restrict", "opt_up", "simd"]
        return Diagnosis(self.name, "the compiler fell back to scalar FP code: no packed SIMD arithmetic in the "
                         "kernel", 0.9, {"scalar_fp_insns": m["scalar"], "packed_fp_insns": 0}, edits)


class NarrowVectors(MicroTool):
    """objdump: packed arithmetic only on 128-bit xmm registers although the CPU has 256-bit AVX2."""

    name = "narrow_vectors"
    bounds = BOUNDS

    def trigger(self, m):
        return m["packed_xmm"] > 0 and m["packed_ymm"] == 0

    def analyze(self, m):
        return Diagnosis(self.name, "vectorised with 128-bit SSE only; 256-bit AVX2/FMA lanes are idle", 0.6,
                         {"packed_xmm": m["packed_xmm"], "packed_ymm": 0}, ["avx2"])


class NoFMA(MicroTool):
    """objdump: packed multiplies and adds but no fused multiply-add."""

    name = "no_fma"
    bounds = ("compute",)

    def trigger(self, m):
        return m["packed_ymm"] > 0 and m["fma"] == 0 and m["flops"] > 2 * m["bytes"] / 4

    def analyze(self, m):
        return Diagnosis(self.name, "multiply and add issue separately; FMA would halve the FP instructions", 0.4,
                         {"fma": 0, "packed_ymm": m["packed_ymm"]}, ["avx2", "fast_math"])


class LibmInLoop(MicroTool):
    """objdump: a scalar libm call (expf, sqrtf) in the kernel blocks vectorisation of its loop."""

    name = "libm_in_loop"
    bounds = ("compute", "latency")

    def trigger(self, m):
        return any(c in ("expf", "logf", "tanhf") for c in m["libm_calls"])

    def analyze(self, m):
        return Diagnosis(self.name, "the hot loop calls scalar libm; a vector math library (libmvec) needs "
                         "-ffast-math and AVX2", 0.8, {"calls": ",".join(m["libm_calls"])}, ["fast_math", "avx2"])


class ReductionChain(MicroTool):
    """Source + objdump: a floating-point reduction kept serial (strict IEEE order forbids reassociation)."""

    name = "reduction_chain"
    bounds = ("compute", "latency")

    def trigger(self, m):
        return bool(m["reduction"]) and m["packed_ymm"] + m["packed_xmm"] < m["scalar"]

    def analyze(self, m):
        return Diagnosis(self.name, "a serial FP reduction: one add per cycle-latency; allow reassociation "
                         "(omp simd reduction or fast-math)", 0.7,
                         {"scalar_fp_insns": m["scalar"], "packed_fp_insns": m["packed_xmm"] + m["packed_ymm"]},
                         ["simd", "fast_math"])


class Aliasing(MicroTool):
    """Source: pointer arguments without ``restrict`` (the compiler must assume they alias)."""

    name = "aliasing"
    bounds = ("compute", "latency")

    def trigger(self, m):
        return not m["restrict"] and m["packed_ymm"] == 0

    def analyze(self, m):
        return Diagnosis(self.name, "pointer arguments may alias: vectorisation needs runtime checks or is "
                         "refused", 0.5, {"restrict": False}, ["restrict"])


class StridedInner(MicroTool):
    """Source: the innermost loop walks a matrix with a non-unit stride (column access)."""

    name = "strided_inner"
    bounds = BOUNDS

    def trigger(self, m):
        return bool(m["strided_inner"])

    def analyze(self, m):
        return Diagnosis(self.name, "the inner loop reads with stride N (a column of a row-major matrix): "
                         "no contiguous vector loads", 0.8, {"access": m["strided_inner"]}, ["interchange", "tile32"])


class CacheMisses(MicroTool):
    """callgrind: L1 misses well above the compulsory misses (one per 64-byte line) -> poor reuse."""

    name = "cache_misses"
    bounds = ("memory", "latency")

    def trigger(self, m):
        return m["D1mr"] + m["D1mw"] > 2.0 * m["compulsory_lines"]

    def analyze(self, m):
        ratio = (m["D1mr"] + m["D1mw"]) / max(m["compulsory_lines"], 1.0)
        return Diagnosis(self.name, f"L1 misses are {ratio:.1f}x the compulsory misses: data is re-fetched",
                         min(1.0, 0.3 + 0.1 * ratio), {"D1_misses": m["D1mr"] + m["D1mw"],
                                                       "compulsory_lines": m["compulsory_lines"]},
                         ["tile32", "interchange"])


class LoopOverhead(MicroTool):
    """callgrind: many instructions per FLOP in vector code: loop control dominates."""

    name = "loop_overhead"
    bounds = ("compute", "latency")

    def trigger(self, m):
        return m["Ir"] / m["flops"] > 1.0 and m["packed_ymm"] + m["packed_xmm"] > 0

    def analyze(self, m):
        return Diagnosis(self.name, "more than one instruction per FLOP in vectorised code: loop overhead",
                         0.4, {"Ir_per_flop": m["Ir"] / m["flops"]}, ["unroll4", "opt_up"])


class BuildFlags(MicroTool):
    """Build audit: a low optimisation level leaves the vectoriser off."""

    name = "build_flags"
    bounds = BOUNDS

    def trigger(self, m):
        return m["opt"] == "-O1"

    def analyze(self, m):
        return Diagnosis(self.name, "built at -O1: gcc's loop vectoriser does not run", 0.6, {"opt": m["opt"]},
                         ["opt_up"])


class BandwidthSOL(MicroTool):
    """Roofline: a memory-bound kernel already near the bandwidth roof: only cutting bytes helps."""

    name = "bandwidth_sol"
    bounds = ("memory",)

    def trigger(self, m):
        return m["efficiency"] > 0.6

    def analyze(self, m):
        return Diagnosis(self.name, "at the memory roof: fuse with neighbours or move fewer bytes", 0.2,
                         {"efficiency": m["efficiency"]}, [])


TOOLS: tuple[MicroTool, ...] = (BuildFlags(), ScalarFallback(), NarrowVectors(), NoFMA(), LibmInLoop(),
                                ReductionChain(), Aliasing(), StridedInner(), CacheMisses(), LoopOverhead(),
                                BandwidthSOL())


def diagnose(m: dict[str, Any], roof: Roofline, tools: tuple[MicroTool, ...] = TOOLS,
             filter_by_bound: bool = True) -> tuple[str, list[Diagnosis], list[str]]:
    """Stage 1 + stage 2: (bound class, diagnoses sorted by severity, names of tools skipped by the filter)."""
    bound, ev = classify(m, roof)
    m = {**m, "efficiency": ev["efficiency"]}
    diags, skipped = [], []
    for t in tools:
        if filter_by_bound and not t.applies(bound):
            skipped.append(t.name)
            continue
        if t.trigger(m):
            diags.append(t.analyze(m))
    diags.sort(key=lambda d: -d.severity)
    return bound, diags, skipped
