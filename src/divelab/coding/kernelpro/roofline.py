"""A measured machine roofline: peak FLOP/s and memory bandwidth from two C micro-benchmarks.

Peak: 8 independent AVX2 FMA chains (16 FLOP per instruction) in a register-resident loop.
Bandwidth: a STREAM-style triad over arrays far larger than the last-level cache. Both are
measured on this machine at run time (single thread), median of repeats; on a shared machine
they are lower than the data sheet, which is what the kernels see too.
"""

from __future__ import annotations

import ctypes
import subprocess
from dataclasses import dataclass

import numpy as np

from divelab import cache
from divelab.coding.kernelpro.backend import find_compiler, time_call

_SRC = r"""
#include <immintrin.h>
float peak(long iters) {
  __m256 a0 = _mm256_set1_ps(1.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < iters; i++) {
    a0 = _mm256_fmadd_ps(a0, m, c); a1 = _mm256_fmadd_ps(a1, m, c); a2 = _mm256_fmadd_ps(a2, m, c);
    a3 = _mm256_fmadd_ps(a3, m, c); a4 = _mm256_fmadd_ps(a4, m, c); a5 = _mm256_fmadd_ps(a5, m, c);
    a6 = _mm256_fmadd_ps(a6, m, c); a7 = _mm256_fmadd_ps(a7, m, c);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                           _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  float out[8]; _mm256_storeu_ps(out, s);
  return out[0];
}
void triad(float *restrict a, const float *restrict b, const float *restrict c, long n) {
  for (long i = 0; i < n; i++) a[i] = b[i] + 3.0f * c[i];
}
"""


@dataclass(frozen=True)
class Roofline:
    peak_flops: float  # FLOP/s
    bandwidth: float  # bytes/s

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOP/byte) where the memory roof meets the compute roof."""
        return self.peak_flops / self.bandwidth

    def attainable(self, intensity: float) -> float:
        return min(self.peak_flops, intensity * self.bandwidth)


def _lib() -> ctypes.CDLL:
    cc = find_compiler()
    d = cache.entry_path("kernelpro", "roofline-" + cache.stable_hash({"src": _SRC, "cc": cc}))
    so = d / "roof.so"
    if not so.exists():
        d.parent.mkdir(parents=True, exist_ok=True)
        with cache.atomic_dir(d) as tmp:
            (tmp / "roof.c").write_text(_SRC)
            subprocess.run([cc, "-O2", "-mavx2", "-mfma", "-fPIC", "-shared", "roof.c", "-o", "roof.so"],
                           cwd=tmp, check=True, capture_output=True)
    lib = ctypes.CDLL(str(so))
    lib.peak.restype = ctypes.c_float
    lib.peak.argtypes = [ctypes.c_long]
    lib.triad.restype = None
    lib.triad.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
    return lib


_MEMO: dict[int, Roofline] = {}


def measure_roofline(n_mb: int = 48, repeats: int = 5) -> Roofline:
    """Measure (once per process) peak single-thread FLOP/s and triad bandwidth."""
    if n_mb in _MEMO:
        return _MEMO[n_mb]
    lib = _lib()
    iters = 2_000_000
    t = time_call(lambda: lib.peak(iters), warmup=1, repeats=repeats, min_time=0.0)
    peak = iters * 8 * 16 / t.median_s
    n = n_mb * 1024 * 1024 // 4 // 3
    a, b, c = (np.ones(n, dtype=np.float32) for _ in range(3))
    pa, pb, pc = (x.ctypes.data for x in (a, b, c))
    t = time_call(lambda: lib.triad(pa, pb, pc, n), warmup=1, repeats=repeats, min_time=0.0)
    bw = 3 * 4 * n / t.median_s  # two reads + one write (write-allocate not counted)
    _MEMO[n_mb] = Roofline(peak, bw)
    return _MEMO[n_mb]
