"""A small KernelBench-shaped problem set: Level 1 single ops, Level 2 fused chains.

The set is split once, by name: the DEVELOPMENT problems (``DEV_PROBLEMS``) are the ones the MCTS
constants (exploration constant, progressive widening, dead-end threshold, reward clip) were set on;
the TEST problems (``TEST_PROBLEMS``, the rest) are only ever measured, never looked at while
choosing a constant. Reproduction claims are computed on the test problems.

Each problem is a C kernel program (templates with transformation placeholders, see
:mod:`divelab.coding.kernelpro.program`), a float64 NumPy reference with a tolerance, a strong
float32 NumPy baseline (BLAS-backed for the GEMMs), and its FLOP and compulsory-byte counts for
the roofline. Sizes are deliberately not multiples of 8, so a vector loop without its remainder
is wrong (the correctness wall has something to catch). Write your own with :class:`Problem`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from divelab.coding.kernelpro.program import Config, render

Arrays = list[np.ndarray]
# a power of two (sums of spikes and small integers stay exact in float32), and large enough that
# exp() of it overflows float32: a softmax that misses it in its max is caught
SPIKE = 256.0
RAGGED = 15  # the remainder after the last full vector is at most 15 floats (16-wide vectors)
SWEEP = 16  # spike-sweep input sets; together they put a spike on every element
LARGE = 1e4  # the large-magnitude set: standard normals times this


REQUIRED_VARIANT = "ijk"  # the template every problem has; the others are chosen when a config asks for them
OPTIONAL_VARIANTS = ("ikj", "tiled")


@dataclass(frozen=True)
class Problem:
    """One kernel problem: ``kernel(in0, in1, ..., out)`` over float32 row-major buffers.

    ``templates`` maps a loop variant to C source of the function body (the signature is generated):
    ``"ijk"`` is required (the plain loop order, used by every configuration without a better variant);
    ``"ikj"`` (a loop interchange) and ``"tiled"`` (a tiled loop nest using the tile size ``T``) are
    optional. ``inputs`` are shapes; ``defines`` are compile-time sizes.
    """

    name: str
    level: int
    inputs: tuple[tuple[int, ...], ...]
    output: tuple[int, ...]
    defines: dict[str, int]
    templates: dict[str, str]
    reference: Callable[[Arrays], np.ndarray]  # float64 truth
    baseline: Callable[[Arrays], np.ndarray]  # strong float32 NumPy implementation
    flops: float
    rtol: float = 2e-3
    atol: float = 2e-4
    reduction: bool = False  # the hot loop is a reduction (needs reassociation to vectorise)
    libm: bool = False  # the hot loop calls libm (expf/sqrtf)
    capabilities: frozenset[str] = field(default_factory=frozenset)
    # the problem at other compile-time sizes: defines -> (input shapes, output shape); with
    # ``edge_sizes`` (defines to override) the correctness wall also compiles and checks the kernel
    # there: tiny and 1-element shapes, odd sizes that are no multiple of any vector width
    shapes: Callable[[dict[str, int]], tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]] | None = None
    edge_sizes: tuple[dict[str, int], ...] = ()

    def __post_init__(self) -> None:
        # checked here: a missing "ijk" otherwise surfaces as a bare KeyError once a search starts
        if REQUIRED_VARIANT not in self.templates:
            raise ValueError(f"problem {self.name!r}: templates need a {REQUIRED_VARIANT!r} entry (the plain loop "
                             f"order; {', '.join(repr(v) for v in OPTIONAL_VARIANTS)} are optional); got "
                             f"{sorted(self.templates) or 'none'}")
        unknown = sorted(set(self.templates) - {REQUIRED_VARIANT, *OPTIONAL_VARIANTS})
        if unknown:
            raise ValueError(f"problem {self.name!r}: unknown template variant(s) {unknown}; allowed: "
                             f"{REQUIRED_VARIANT!r} (required), {', '.join(repr(v) for v in OPTIONAL_VARIANTS)}")

    def driver_source(self) -> str:
        """A host program for valgrind: ``driver path/to/kernel.so`` loads the kernel with dlopen,
        fills the inputs deterministically and calls it once (one driver per problem, not per kernel)."""
        n = len(self.inputs)
        sizes = ", ".join(str(int(np.prod(s))) for s in self.inputs)
        n_out = int(np.prod(self.output))
        params = ", ".join(["float *"] * (n + 1))
        return f"""#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
typedef void (*kernel_t)({params});
int main(int argc, char **argv) {{
  if (argc < 2) {{ fprintf(stderr, "usage: driver kernel.so\\n"); return 2; }}
  void *h = dlopen(argv[1], RTLD_NOW);
  if (!h) {{ fprintf(stderr, "%s\\n", dlerror()); return 3; }}
  kernel_t kernel = (kernel_t)dlsym(h, "kernel");
  const int sizes[] = {{{sizes}}};
  float *bufs[{n}];
  for (int b = 0; b < {n}; b++) {{
    bufs[b] = malloc(sizeof(float) * sizes[b]);
    for (int i = 0; i < sizes[b]; i++) bufs[b][i] = (float)((i * 37 + b * 11) % 101) / 101.0f - 0.5f;
  }}
  float *o = calloc({n_out}, sizeof(float));
  kernel({", ".join(f"bufs[{i}]" for i in range(n))}, o);
  printf("%f\\n", o[0]);
  return 0;
}}
"""

    @property
    def bytes(self) -> float:
        """Compulsory traffic: every input read once, the output written once (float32)."""
        n = sum(int(np.prod(s)) for s in self.inputs) + int(np.prod(self.output))
        return 4.0 * n

    def make_inputs(self, seed: int = 0) -> Arrays:
        rng = np.random.default_rng(seed)
        return [rng.standard_normal(s).astype(np.float32) for s in self.inputs]

    def check_inputs(self, seed: int = 0) -> list[tuple[str, Arrays, float]]:
        """Named input sets for the correctness wall, so that every element's contribution is checked,
        each with its magnitude relative to standard normals (the first set; for a set whose magnitude
        is not 1, the absolute tolerance scales with its output's magnitude).

        - ``normal``: seeded standard normals; ``large``: the same times LARGE;
        - ``integers``: small integers in [-2, 2]. Sums of them are exact in float32 in any order, so
          a kernel that drops any non-zero element of a sum is off by at least 1 (far past the
          tolerance), while a correct kernel that only reorders its sums (vectorised, -ffast-math)
          is not off at all;
        - ``head`` and ``tail_k`` (k = 1 .. RAGGED): one spike of +-SPIKE per row (rows = the last
          axis) of every input, on its first element / its k-th element from the end, over the integer
          background: the remainder after the last full vector, for vector widths up to 16 floats, is
          among the tails. One spike per row, because spikes of equal size hide each other from a max;
        - ``row_k`` (k < SWEEP): one spike per row, at column ``(r * SWEEP + k) mod C`` of row r: over the
          sets, every column of every multi-row input is spiked alone in some row;
        - ``sweep_k`` (k < SWEEP): spikes on the elements whose flat index is k modulo SWEEP: over the
          sets, every element of every input carries a spike once (for sums, which add them up).
        """
        rng = np.random.default_rng([seed, 177])
        normal = self.make_inputs(seed)

        def integers() -> Arrays:
            return [rng.integers(-2, 3, s).astype(np.float32) for s in self.inputs]

        def spiked(mask: Callable[[tuple[int, ...]], np.ndarray]) -> Arrays:
            out = integers()
            for x in out:
                m = mask(x.shape)
                x[m] += SPIKE * rng.choice(np.array([-1.0, 1.0], np.float32), size=int(m.sum()))
            return out

        def column(shape: tuple[int, ...], col: Callable[[np.ndarray, int], np.ndarray]) -> np.ndarray:
            n = shape[-1] if shape else 1
            rows = np.arange(int(np.prod(shape[:-1])))
            m = np.zeros((rows.size, n), bool)
            m[rows, col(rows, n) % n] = True
            return m.reshape(shape)

        sets = [("normal", normal, 1.0), ("large", [x * np.float32(LARGE) for x in normal], LARGE),
                ("integers", integers(), 1.0), ("head", spiked(lambda sh: column(sh, lambda r, n: 0 * r)), 1.0)]
        for k in range(1, RAGGED + 1):
            sets.append((f"tail_{k}", spiked(lambda sh, k=k: column(sh, lambda r, n: 0 * r + n - k)), 1.0))
        for k in range(SWEEP):
            sets.append((f"row_{k}", spiked(lambda sh, k=k: column(sh, lambda r, n: r * SWEEP + k)), 1.0))
            sets.append((f"sweep_{k}", spiked(lambda sh, k=k: np.arange(int(np.prod(sh))).reshape(sh) % SWEEP == k),
                         1.0))
        return sets

    def at(self, defines: dict[str, int]) -> Problem:
        """The same problem at other compile-time sizes (``defines`` overrides some of them)."""
        if self.shapes is None:
            raise ValueError(f"problem {self.name!r} has no shapes(defines) function, so it cannot be resized")
        d = {**self.defines, **defines}
        inputs, output = self.shapes(d)
        return replace(self, defines=d, inputs=inputs, output=output)

    def variant(self, config: Config) -> str:
        if config.tile and "tiled" in self.templates:
            return "tiled"
        if config.order == "ikj" and "ikj" in self.templates:
            return "ikj"
        return "ijk"

    def source(self, config: Config) -> str:
        """The complete C translation unit of the kernel for ``config``."""
        args = ", ".join([f"const float *@R@ x{i}" for i in range(len(self.inputs))] + ["float *@R@ out"])
        defines = "\n".join(f"#define {k} {v}" for k, v in self.defines.items())
        if config.tile:
            defines += f"\n#define T {config.tile}"
        body = self.templates[self.variant(config)]
        src = f"#include <math.h>\n{defines}\nvoid kernel({args}) {{\n{body}\n}}\n"
        return render(src, config)


# ----------------------------------------------------------------------------------------------
# templates

_MM_IJK = """
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float acc = 0.0f;
      @SIMDRED:acc@
      @UNROLL@
      for (int k = 0; k < @END:K@; k++) acc += x0[i * K + k] * x1[k * N + j];
      out[i * N + j] = acc;
    }
  EPILOGUE
"""
_MM_IKJ = """
  for (int i = 0; i < M * N; i++) out[i] = 0.0f;
  for (int i = 0; i < M; i++)
    for (int k = 0; k < K; k++) {
      const float a = x0[i * K + k];
      @SIMD@
      @UNROLL@
      for (int j = 0; j < @END:N@; j++) out[i * N + j] += a * x1[k * N + j];
    }
  EPILOGUE
"""
_MM_TILED = """
  for (int i = 0; i < M * N; i++) out[i] = 0.0f;
  for (int kk = 0; kk < K; kk += T)
    for (int jj = 0; jj < N; jj += T) {
      const int kend = kk + T < K ? kk + T : K;
      const int jend = jj + T < N ? jj + T : N;
      for (int i = 0; i < M; i++)
        for (int k = kk; k < kend; k++) {
          const float a = x0[i * K + k];
          @SIMD@
          @UNROLL@
          for (int j = jj; j < @END:jend@; j++) out[i * N + j] += a * x1[k * N + j];
        }
    }
  EPILOGUE
"""
_BIAS_RELU = """
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      const float v = out[i * N + j] + x2[j];
      out[i * N + j] = v > 0.0f ? v : 0.0f;
    }
"""

_SOFTMAX = """
  for (int r = 0; r < R; r++) {
    const float *x = x0 + r * C;
    float *y = out + r * C;
    float m = x[0];
    for (int c = 1; c < C; c++) m = x[c] > m ? x[c] : m;
    float s = 0.0f;
    @SIMDRED:s@
    @UNROLL@
    for (int c = 0; c < @END:C@; c++) { const float e = expf(PRE - m); y[c] = e; s += e; }
    const float inv = 1.0f / s;
    @SIMD@
    for (int c = 0; c < C; c++) y[c] *= inv;
  }
"""

_LAYERNORM = """
  for (int r = 0; r < R; r++) {
    const float *x = x0 + r * C;
    float *y = out + r * C;
    float s = 0.0f;
    @SIMDRED:s@
    @UNROLL@
    for (int c = 0; c < @END:C@; c++) s += x[c];
    const float mean = s / C;
    float v = 0.0f;
    @SIMDRED:v@
    @UNROLL@
    for (int c = 0; c < @END:C@; c++) { const float d = x[c] - mean; v += d * d; }
    const float inv = 1.0f / sqrtf(v / C + 1e-5f);
    @SIMD@
    for (int c = 0; c < C; c++) y[c] = (x[c] - mean) * inv * x1[c] + x2[c];
  }
"""

_ROWSUM = """
  for (int r = 0; r < R; r++) {
    float s = 0.0f;
    @SIMDRED:s@
    @UNROLL@
    for (int c = 0; c < @END:C@; c++) s += x0[r * C + c];
    out[r] = s;
  }
"""

_CONV_IJK = """
  for (int i = 0; i < NO; i++) {
    float acc = 0.0f;
    @SIMDRED:acc@
    @UNROLL@
    for (int k = 0; k < @END:KW@; k++) acc += x0[i + k] * x1[k];
    out[i] = acc;
  }
"""
_CONV_IKJ = """
  for (int i = 0; i < NO; i++) out[i] = 0.0f;
  for (int k = 0; k < KW; k++) {
    const float w = x1[k];
    @SIMD@
    @UNROLL@
    for (int i = 0; i < @END:NO@; i++) out[i] += w * x0[i + k];
  }
"""

_GEMV = """
  for (int i = 0; i < M; i++) {
    float acc = 0.0f;
    @SIMDRED:acc@
    @UNROLL@
    for (int k = 0; k < @END:K@; k++) acc += x0[i * K + k] * x1[k];
    EPILOGUE
  }
"""

_RMSNORM = """
  for (int r = 0; r < R; r++) {
    const float *x = x0 + r * C;
    float *y = out + r * C;
    float s = 0.0f;
    @SIMDRED:s@
    @UNROLL@
    for (int c = 0; c < @END:C@; c++) s += x[c] * x[c];
    const float inv = 1.0f / sqrtf(s / C + 1e-5f);
    @SIMD@
    for (int c = 0; c < C; c++) y[c] = x[c] * inv * x1[c];
  }
"""

# LayerNorm of x0 + x1 with gamma x2 and beta x3: the residual add is fused into both reduction passes
# and the output pass (never materialised)
_RESIDUAL_LAYERNORM = (_LAYERNORM.replace("x2[c]", "x3[c]").replace("x1[c]", "x2[c]")
                       .replace("x[c]", "(x[c] + h[c])")
                       .replace("float *y = out + r * C;", "const float *h = x1 + r * C;\n    float *y = out + r * C;"))


def _softmax_ref(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _conv_ref(a: Arrays, dtype: type) -> np.ndarray:
    x, w = a[0].astype(dtype), a[1].astype(dtype)
    return np.correlate(x, w, mode="valid")


def _build() -> dict[str, Problem]:
    mm = {"M": 100, "N": 100, "K": 100}
    mm_t = {k: v.replace("EPILOGUE", "") for k, v in (("ijk", _MM_IJK), ("ikj", _MM_IKJ), ("tiled", _MM_TILED))}
    lr_t = {k: v.replace("EPILOGUE", _BIAS_RELU) for k, v in (("ijk", _MM_IJK), ("ikj", _MM_IKJ),
                                                               ("tiled", _MM_TILED))}
    R, C = 64, 1003
    ln_in = ((R, C), (C,), (C,))

    def ln(a: Arrays, dtype: type) -> np.ndarray:
        x = a[0].astype(dtype)
        mu = x.mean(axis=1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * a[1].astype(dtype) + a[2].astype(dtype)

    nx, kw = 20007, 15
    gm, gk = 256, 1003  # GEMV rows and columns

    def silu(z: np.ndarray) -> np.ndarray:
        # x * sigmoid(x) through tanh: no overflow warning at the large-magnitude input set
        return z * (0.5 + 0.5 * np.tanh(0.5 * z))

    def rms(a: Arrays, dtype: type) -> np.ndarray:
        x = a[0].astype(dtype)
        return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-5) * a[1].astype(dtype)

    def gemv_shapes(*extra):
        return lambda d: (((d["M"], d["K"]), (d["K"],), *[(d["M"],)] * len(extra)), (d["M"],))

    # the other sizes the wall checks: one element, and small odd sizes (prime, no multiple of 4, 8
    # or 16, and past a 32-wide tile edge for the tiled GEMMs)
    def mm_shapes(d):
        return ((d["M"], d["K"]), (d["K"], d["N"])), (d["M"], d["N"])

    def lr_shapes(d):
        return ((d["M"], d["K"]), (d["K"], d["N"]), (d["N"],)), (d["M"], d["N"])

    def rows(*extra):
        return lambda d: (((d["R"], d["C"]), *[(d["C"],)] * len(extra)), (d["R"], d["C"]))

    mm_edges = ({"M": 1, "N": 1, "K": 1}, {"M": 3, "N": 37, "K": 35})
    gemv_edges = ({"M": 1, "K": 1}, {"M": 3, "K": 37})
    row_edges = ({"R": 1, "C": 1}, {"R": 3, "C": 37})
    probs = [
        Problem("matmul", 1, ((100, 100), (100, 100)), (100, 100), mm, mm_t,
                lambda a: a[0].astype(np.float64) @ a[1].astype(np.float64), lambda a: a[0] @ a[1],
                flops=2.0 * 100 ** 3, reduction=True, capabilities=frozenset({"order", "tile"}), shapes=mm_shapes,
                edge_sizes=mm_edges),
        Problem("softmax", 1, ((R, C),), (R, C), {"R": R, "C": C},
                {"ijk": _SOFTMAX.replace("PRE", "x[c]")},
                lambda a: _softmax_ref(a[0].astype(np.float64)), lambda a: _softmax_ref(a[0]),
                flops=5.0 * R * C, reduction=True, libm=True, shapes=rows(), edge_sizes=row_edges),
        Problem("layernorm", 1, ln_in, (R, C), {"R": R, "C": C}, {"ijk": _LAYERNORM},
                lambda a: ln(a, np.float64), lambda a: ln(a, np.float32), flops=8.0 * R * C, reduction=True,
                shapes=rows(1, 2), edge_sizes=row_edges),
        Problem("rowsum", 1, ((256, C),), (256,), {"R": 256, "C": C}, {"ijk": _ROWSUM},
                lambda a: a[0].astype(np.float64).sum(axis=1), lambda a: a[0].sum(axis=1),
                flops=256.0 * C, reduction=True, shapes=lambda d: (((d["R"], d["C"]),), (d["R"],)),
                edge_sizes=row_edges),
        Problem("conv1d", 1, ((nx,), (kw,)), (nx - kw + 1,), {"NO": nx - kw + 1, "KW": kw},
                {"ijk": _CONV_IJK, "ikj": _CONV_IKJ},
                lambda a: _conv_ref(a, np.float64), lambda a: _conv_ref(a, np.float32),
                flops=2.0 * (nx - kw + 1) * kw, reduction=True, capabilities=frozenset({"order"}),
                shapes=lambda d: (((d["NO"] + d["KW"] - 1,), (d["KW"],)), (d["NO"],)),
                edge_sizes=({"NO": 1, "KW": 1}, {"NO": 37, "KW": 15})),
        Problem("linear_relu", 2, ((100, 100), (100, 100), (100,)), (100, 100), mm, lr_t,
                lambda a: np.maximum(a[0].astype(np.float64) @ a[1].astype(np.float64) + a[2], 0.0),
                lambda a: np.maximum(a[0] @ a[1] + a[2], 0.0),
                flops=2.0 * 100 ** 3 + 2e4, reduction=True, capabilities=frozenset({"order", "tile"}),
                shapes=lr_shapes, edge_sizes=mm_edges),
        Problem("scale_softmax", 2, ((R, C), (C,)), (R, C), {"R": R, "C": C},
                {"ijk": _SOFTMAX.replace("PRE", "(x[c] * 0.125f + x1[c])").replace(
                    "float m = x[0];\n    for (int c = 1; c < C; c++) m = x[c] > m ? x[c] : m;",
                    "float m = x[0] * 0.125f + x1[0];\n    for (int c = 1; c < C; c++) "
                    "{ const float t = x[c] * 0.125f + x1[c]; m = t > m ? t : m; }")},
                lambda a: _softmax_ref(a[0].astype(np.float64) * 0.125 + a[1]),
                lambda a: _softmax_ref(a[0] * np.float32(0.125) + a[1]),
                flops=7.0 * R * C, reduction=True, libm=True, shapes=rows(1), edge_sizes=row_edges),
        Problem("gemv", 1, ((gm, gk), (gk,)), (gm,), {"M": gm, "K": gk},
                {"ijk": _GEMV.replace("EPILOGUE", "out[i] = acc;")},
                lambda a: a[0].astype(np.float64) @ a[1].astype(np.float64), lambda a: a[0] @ a[1],
                flops=2.0 * gm * gk, reduction=True, shapes=gemv_shapes(), edge_sizes=gemv_edges),
        Problem("rmsnorm", 1, ((R, C), (C,)), (R, C), {"R": R, "C": C}, {"ijk": _RMSNORM},
                lambda a: rms(a, np.float64), lambda a: rms(a, np.float32), flops=4.0 * R * C, reduction=True,
                shapes=rows(1), edge_sizes=row_edges),
        Problem("residual_layernorm", 2, ((R, C), (R, C), (C,), (C,)), (R, C), {"R": R, "C": C},
                {"ijk": _RESIDUAL_LAYERNORM},
                lambda a: ln([a[0].astype(np.float64) + a[1], a[2], a[3]], np.float64),
                lambda a: ln([a[0] + a[1], a[2], a[3]], np.float32), flops=11.0 * R * C, reduction=True,
                shapes=lambda d: (((d["R"], d["C"]), (d["R"], d["C"]), (d["C"],), (d["C"],)), (d["R"], d["C"])),
                edge_sizes=row_edges),
        # GEMV + bias + SiLU: SiLU is linear for large positive inputs, so an element the GEMV drops
        # still shows in the output (a saturating tanh or sigmoid would hide it from the wall)
        Problem("gemv_bias_silu", 2, ((gm, gk), (gk,), (gm,)), (gm,), {"M": gm, "K": gk},
                {"ijk": _GEMV.replace("EPILOGUE", "const float v = acc + x2[i]; out[i] = v / (1.0f + expf(-v));")},
                lambda a: silu(a[0].astype(np.float64) @ a[1].astype(np.float64) + a[2]),
                lambda a: silu(a[0] @ a[1] + a[2]),
                flops=2.0 * gm * gk + 5.0 * gm, reduction=True, libm=True, shapes=gemv_shapes(1),
                edge_sizes=gemv_edges),
    ]
    return {p.name: p for p in probs}


PROBLEMS: dict[str, Problem] = _build()
# the development problems: the MCTS constants were set while looking at these
# (and at the synthetic trap landscape); the test problems are measured only
DEV_PROBLEMS: tuple[str, ...] = ("matmul", "softmax", "rowsum")
TEST_PROBLEMS: tuple[str, ...] = tuple(p for p in PROBLEMS if p not in DEV_PROBLEMS)


def get_problem(name: str) -> Problem:
    if name not in PROBLEMS:
        raise ValueError(f"unknown kernel problem {name!r}; allowed: {', '.join(PROBLEMS)}")
    return PROBLEMS[name]
