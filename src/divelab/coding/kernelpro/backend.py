"""The CPU backend: gcc -> shared library (ctypes) + a driver executable (valgrind), and the real profilers.

- :func:`compile_kernel` builds one translation unit into ``kernel.so`` in the divelab cache
  (keyed by source + flags; never in the repository); one ``driver`` per problem dlopens it.
- :func:`verify` is the correctness wall: the kernel runs through ctypes on every input set of the
  problem (normal, large, integer, spikes at each row edge, ragged tails, a spike sweep over every
  element) and is compiled and run again at tiny and odd sizes; all must match the float64 reference.
- :func:`time_call` times any callable properly: warm-up, repeats, median and CV.
- :func:`disassemble` counts scalar vs packed SIMD arithmetic in ``objdump -d`` of the kernel.
- :func:`callgrind` runs the driver under valgrind's callgrind with cache simulation, counting only
  inside ``kernel`` (deterministic: instruction counts and simulated cache misses).
"""

from __future__ import annotations

import ctypes
import math
import re
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from divelab import cache
from divelab.coding.kernelpro.problems import Arrays, Problem
from divelab.coding.kernelpro.program import Config


class CompilerNotFound(RuntimeError):
    pass


def find_compiler() -> str:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise CompilerNotFound("no C compiler found (looked for gcc and cc on PATH); install gcc, "
                               "e.g. `apt-get install -y gcc`")
    return cc


@dataclass
class Build:
    ok: bool
    so: Path | None
    exe: Path | None  # the problem's valgrind driver
    log: str


def _driver(problem: Problem, cc: str) -> Path:
    """The problem's valgrind host program (built once per problem; it dlopens each kernel)."""
    src = problem.driver_source()
    d = cache.entry_path("kernelpro", "driver-" + cache.stable_hash({"src": src, "cc": cc}))
    exe = d / "driver"
    if not exe.exists():
        d.parent.mkdir(parents=True, exist_ok=True)
        with cache.atomic_dir(d) as tmp:
            (tmp / "driver.c").write_text(src)
            subprocess.run([cc, "-O1", "driver.c", "-o", "driver", "-ldl"], cwd=tmp, check=True,
                           capture_output=True, text=True)
    return exe


def compile_kernel(problem: Problem, config: Config) -> Build:
    """The kernel's translation unit -> ``kernel.so`` (cached by source + flags).

    Compiled and linked in two gcc calls: linking with ``-ffast-math`` adds gcc's crtfastmath.o, whose
    constructor turns on flush-to-zero / denormals-are-zero for the whole process when the library is
    loaded, silently changing every later float computation in divelab (and in the caller's program).
    The optimisation flags apply to the code; the link never sees them.
    """
    cc = find_compiler()
    src = problem.source(config)
    flags = ["-fPIC", "-g0", *config.cflags()]
    d = cache.entry_path("kernelpro", cache.stable_hash({"src": src, "flags": flags, "cc": cc, "link": "separate"}))
    so = d / "kernel.so"
    exe = _driver(problem, cc)
    if so.exists():
        return Build(True, so, exe, "")
    fail = d.with_suffix(".fail")
    if fail.exists():
        return Build(False, None, None, fail.read_text())
    d.parent.mkdir(parents=True, exist_ok=True)
    with cache.atomic_dir(d) as tmp:
        (tmp / "kernel.c").write_text(src)
        cmd = [cc, *flags, "-c", "kernel.c", "-o", "kernel.o"]
        r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        if r.returncode == 0:
            cmd = [cc, "-shared", "kernel.o", "-o", "kernel.so", "-lm"]
            r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        if r.returncode != 0:
            log = f"$ {' '.join(cmd)}\n{r.stderr[-2000:]}"
            cache.atomic_write_text(fail, log)
            raise _Abort(log)
    return Build(True, so, exe, "")


class _Abort(Exception):
    pass


def build(problem: Problem, config: Config) -> Build:
    """Compile, turning a compile error into ``Build(ok=False, log=...)``."""
    try:
        return compile_kernel(problem, config)
    except _Abort as e:
        return Build(False, None, None, str(e))


_LIBS: dict[Path, ctypes.CDLL] = {}


def load(build_: Build) -> Callable[..., None]:
    """The compiled ``kernel`` as a Python callable taking float32 arrays (inputs..., out)."""
    if not build_.ok or build_.so is None:
        raise RuntimeError(f"kernel did not compile:\n{build_.log}")
    lib = _LIBS.get(build_.so)
    if lib is None:
        lib = _LIBS[build_.so] = ctypes.CDLL(str(build_.so))
    fn = lib.kernel
    fn.restype = None

    def call(*arrays: np.ndarray) -> None:
        for a in arrays:
            if a.dtype != np.float32 or not a.flags["C_CONTIGUOUS"]:
                raise TypeError("kernel arguments must be C-contiguous float32 arrays")
        fn(*[a.ctypes.data_as(ctypes.c_void_p) for a in arrays])
    return call


@dataclass
class Verification:
    """What the correctness wall found: ``error`` is the worst normalised error over every input set
    and size (<= 1 passes); ``failed`` names each input set (and size) the kernel got wrong."""

    ok: bool
    error: float
    failed: list[str]


_REFERENCES: dict[tuple, list[tuple[str, Arrays, float, np.ndarray]]] = {}


def _cases(problem: Problem, seed: int) -> list[tuple[str, Arrays, float, np.ndarray]]:
    """The problem's input sets with their float64 references (computed once per problem and size)."""
    key = (problem.name, id(problem.reference), tuple(problem.inputs), tuple(sorted(problem.defines.items())), seed)
    if key not in _REFERENCES:
        if len(_REFERENCES) > 64:
            _REFERENCES.clear()
        sets = [(name, xs, scale, problem.reference(xs)) for name, xs, scale in problem.check_inputs(seed)]
        # the absolute tolerance follows the output's magnitude: a product of two scaled inputs
        # (a GEMM, a convolution) grows with the square of their scale
        rms = float(np.sqrt(np.mean(np.square(sets[0][3])))) or 1.0
        _REFERENCES[key] = [(name, xs, max(1.0, float(np.sqrt(np.mean(np.square(ref)))) / rms) if scale != 1.0
                             else 1.0, ref) for name, xs, scale, ref in sets]
    return _REFERENCES[key]


def check_sets(problem: Problem, call: Callable[..., None], seed: int = 0) -> Verification:
    """Run the kernel on every input set of :meth:`Problem.check_inputs` (output pre-filled with NaN,
    so an element never written fails) and compare each with the float64 reference."""
    worst, failed = 0.0, []
    for name, xs, scale, ref in _cases(problem, seed):
        out = np.full(problem.output, np.nan, dtype=np.float32)
        call(*xs, out)
        if not np.all(np.isfinite(out)):
            err = math.inf
        else:
            err = float(np.max(np.abs(out - ref) / (problem.atol * scale + problem.rtol * np.abs(ref))))
        worst = max(worst, err)
        if not err <= 1.0:
            failed.append(name)
    return Verification(not failed, worst, failed)


def check(problem: Problem, call: Callable[..., None], seed: int = 0) -> tuple[bool, float]:
    """(passed, worst normalised error) over every input set at the problem's own size."""
    v = check_sets(problem, call, seed)
    return v.ok, v.error


def verify(problem: Problem, config: Config, call: Callable[..., None], seed: int = 0) -> Verification:
    """The whole correctness wall for a kernel built from ``config``: every input set at the
    problem's size, then (if those pass) the same kernel compiled and checked at each of the
    problem's ``edge_sizes``. A kernel that fails any of them is wrong."""
    v = check_sets(problem, call, seed)
    if not v.ok:
        return v
    for sizes in problem.edge_sizes:
        at = problem.at(sizes)
        label = ",".join(f"{k}={n}" for k, n in sizes.items())
        b = build(at, config)
        if not b.ok:
            return Verification(False, math.inf, [f"{label}: does not compile"])
        e = check_sets(at, load(b), seed)
        v = Verification(v.ok and e.ok, max(v.error, e.error), v.failed + [f"{label}: {n}" for n in e.failed])
    return v


@dataclass
class Timing:
    median_s: float
    cv: float
    repeats: int


def time_call(fn: Callable[[], object], *, warmup: int = 2, repeats: int = 7, min_time: float = 2e-3) -> Timing:
    """Median of ``repeats`` timings after ``warmup`` calls; each timing loops until ``min_time``."""
    for _ in range(warmup):
        fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    inner = max(1, int(min_time / one))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    med = statistics.median(samples)
    cv = statistics.pstdev(samples) / statistics.mean(samples) if len(samples) > 1 else 0.0
    return Timing(med, cv, repeats)


def time_kernel(problem: Problem, call: Callable[..., None], **kw) -> Timing:
    xs = problem.make_inputs(1)
    out = np.zeros(problem.output, dtype=np.float32)
    return time_call(lambda: call(*xs, out), **kw)


# ---------------------------------------------------------------------------------------------- objdump

_ARITH = re.compile(r"\b(v?(?:add|sub|mul|div|max|min|sqrt)(ss|ps|sd|pd)|vfn?m(?:add|sub)\d+(ss|ps|sd|pd))\b")


@dataclass
class Disasm:
    scalar: int  # scalar FP arithmetic (…ss/…sd)
    packed_xmm: int  # packed FP arithmetic on 128-bit registers
    packed_ymm: int  # packed FP arithmetic on 256-bit registers
    fma: int
    libm_calls: list[str]
    text: str

    @property
    def packed(self) -> int:
        return self.packed_xmm + self.packed_ymm


def disassemble(build_: Build) -> Disasm:
    """``objdump -d`` of the ``kernel`` function of the shared library, with instruction counts."""
    if shutil.which("objdump") is None:
        raise RuntimeError("objdump not found (binutils); it is needed for the disassembly tool")
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(build_.so)], capture_output=True,
                         text=True, check=True).stdout
    m = re.search(r"<kernel>:\n(.*?)(?:\n\n|\Z)", out, re.S)
    text = m.group(1) if m else ""
    scalar = pxmm = pymm = fma = 0
    for line in text.splitlines():
        mm = _ARITH.search(line)
        if not mm:
            continue
        suffix = mm.group(2) or mm.group(3)
        if "fmadd" in line or "fmsub" in line:
            fma += 1
        if suffix in ("ss", "sd"):
            scalar += 1
        elif "ymm" in line:
            pymm += 1
        else:
            pxmm += 1
    calls = sorted(set(re.findall(r"call\s+\w+\s+<([\w.@]+?)(?:@plt)?>", text)))
    return Disasm(scalar, pxmm, pymm, fma, calls, text)


# ---------------------------------------------------------------------------------------------- valgrind

CALLGRIND_EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")


def have_valgrind() -> bool:
    return shutil.which("valgrind") is not None


def callgrind(build_: Build) -> dict[str, float]:
    """Callgrind counts inside ``kernel`` (cache simulation on), plus the estimated cycles
    ``CEst = Ir + 10 * L1 misses + 100 * LL misses`` (KCachegrind's formula). Deterministic."""
    if not have_valgrind():
        raise RuntimeError("valgrind not found; install it (`apt-get install -y valgrind`)")
    key = cache.stable_hash({"so": str(build_.so), "exe": str(build_.exe), "v": 2})
    memo = cache.entry_path("kernelpro-cg", key + ".txt")
    if memo.exists():
        text = memo.read_text()
    else:
        out = build_.so.parent / "callgrind.out"
        subprocess.run(["valgrind", "--tool=callgrind", "--cache-sim=yes", "--toggle-collect=kernel",
                        f"--callgrind-out-file={out}", str(build_.exe), str(build_.so)], capture_output=True,
                       text=True, check=True, timeout=120)
        text = out.read_text()
        memo.parent.mkdir(parents=True, exist_ok=True)
        cache.atomic_write_text(memo, text)
    ev = re.search(r"^events: (.*)$", text, re.M).group(1).split()
    tot = re.search(r"^summary: (.*)$", text, re.M).group(1).split()
    d = {e: float(v) for e, v in zip(ev, tot, strict=False)}
    for e in CALLGRIND_EVENTS:
        d.setdefault(e, 0.0)
    d["CEst"] = d["Ir"] + 10 * (d["I1mr"] + d["D1mr"] + d["D1mw"]) + 100 * (d["ILmr"] + d["DLmr"] + d["DLmw"])
    return d
