"""A kernel program plus transformations -> C source and compiler flags.

A kernel is a C template with placeholders; a :class:`Config` is the set of transformations
applied to it (loop order, tiling, unrolling, a SIMD pragma, ``restrict``, ISA, -O level,
fast-math, and one deliberately unsafe edit: dropping the remainder loop). Edits are named,
so proposers (rules, bandits, LLMs) talk in edit names.

Placeholders in templates: ``@R@`` (restrict qualifier), ``@SIMD@`` (a ``#pragma omp simd``
line), ``@SIMDRED:var@`` (the same with ``reduction(+:var)``), ``@UNROLL@`` (``#pragma GCC
unroll``), ``@END:X@`` (a loop bound; ``(X & ~7)`` under the unsafe ``drop_tail`` edit).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace

OPT_LEVELS = ("-O1", "-O2", "-O3")


@dataclass(frozen=True)
class Config:
    """Transformations applied to a kernel program (frozen, hashable: a search state)."""

    opt: str = "-O1"
    avx2: bool = False  # -mavx2 -mfma (not -march=native: valgrind cannot run AVX-512)
    restrict: bool = False
    simd: bool = False  # #pragma omp simd (with -fopenmp-simd)
    fast_math: bool = False
    unroll: int = 1
    order: str = "ijk"  # loop order ("ikj": interchanged), programs with the "order" capability
    tile: int = 0  # k/j tile size, programs with the "tile" capability
    drop_tail: bool = False  # UNSAFE: vector loop without remainder (wrong unless n % 8 == 0)
    # -march=native: every ISA extension of this CPU (AVX-512 where it has it). Not an edit: valgrind
    # cannot run AVX-512, so searched kernels never use it; the strong compiler baseline does
    native: bool = False

    def key(self) -> dict:
        return asdict(self)

    def short(self) -> str:
        parts = [self.opt]
        for name in ("native", "avx2", "restrict", "simd", "fast_math", "drop_tail"):
            if getattr(self, name):
                parts.append(name)
        if self.unroll > 1:
            parts.append(f"unroll{self.unroll}")
        if self.order != "ijk":
            parts.append(self.order)
        if self.tile:
            parts.append(f"tile{self.tile}")
        return "+".join(parts)

    def cflags(self) -> list[str]:
        flags = [self.opt, "-fno-strict-aliasing" if not self.restrict else "-fstrict-aliasing"]
        if self.native:
            flags.append("-march=native")
        if self.avx2:
            flags += ["-mavx2", "-mfma"]
        if self.simd:
            flags.append("-fopenmp-simd")
        if self.fast_math:
            flags.append("-ffast-math")
        return flags


# name -> (description, function Config -> Config | None (None: not applicable))
def _set(**kw):
    def f(c: Config) -> Config | None:
        if all(getattr(c, k) == v for k, v in kw.items()):
            return None
        return replace(c, **kw)
    return f


def _opt_up(c: Config) -> Config | None:
    i = OPT_LEVELS.index(c.opt)
    return replace(c, opt=OPT_LEVELS[i + 1]) if i + 1 < len(OPT_LEVELS) else None


EDITS: dict[str, tuple[str, object, str]] = {
    # name: (what it does, transform, capability the program needs: "" | "order" | "tile")
    "opt_up": ("raise the optimisation level (-O1 -> -O2 -> -O3)", _opt_up, ""),
    "avx2": ("target AVX2 + FMA (-mavx2 -mfma): 256-bit vectors and fused multiply-add", _set(avx2=True), ""),
    "restrict": ("mark pointer arguments restrict (no aliasing)", _set(restrict=True), ""),
    "simd": ("add #pragma omp simd (with reduction clauses) to the inner loop", _set(simd=True), ""),
    "fast_math": ("allow FP reassociation and vector libm (-ffast-math)", _set(fast_math=True), ""),
    "unroll4": ("unroll the inner loop 4x (#pragma GCC unroll 4)", _set(unroll=4), ""),
    "interchange": ("reorder loops i-k-j so the inner loop walks memory contiguously", _set(order="ikj"), "order"),
    "tile32": ("tile the k and j loops by 32 for cache reuse", _set(tile=32, order="ikj"), "tile"),
    "drop_tail": ("drop the remainder loop of the vector loop (UNSAFE unless n % 8 == 0)", _set(drop_tail=True), ""),
}


def edit_names(capabilities: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """Edits applicable to a program with these capabilities ("order", "tile")."""
    return [n for n, (_, _, need) in EDITS.items() if not need or need in capabilities]


def apply_edit(config: Config, edit: str) -> Config | None:
    """The config after ``edit``, or None when the edit changes nothing."""
    if edit not in EDITS:
        raise ValueError(f"unknown edit {edit!r}; allowed: {', '.join(EDITS)}")
    return EDITS[edit][1](config)  # type: ignore[operator]


def render(template: str, config: Config) -> str:
    """Fill a kernel template's placeholders for ``config``."""
    src = template.replace("@R@", "restrict" if config.restrict else "")
    src = re.sub(r"@SIMDRED:(\w+)@", lambda m: f"#pragma omp simd reduction(+:{m.group(1)})" if config.simd else "",
                 src)
    src = src.replace("@SIMD@", "#pragma omp simd" if config.simd else "")
    # gcc accepts one loop pragma per loop: under omp simd the unroll pragma is left out
    unroll = config.unroll > 1 and not config.simd
    src = src.replace("@UNROLL@", f"#pragma GCC unroll {config.unroll}" if unroll else "")
    return re.sub(r"@END:(\w+)@", lambda m: f"({m.group(1)} & ~7)" if config.drop_tail else m.group(1), src)
