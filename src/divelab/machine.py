"""What on this machine changes the numbers a seeded run computes.

The same seed gives the same numbers only on the same kernels: PyTorch picks its CPU kernels by instruction
set at start-up (AVX-512, AVX2 or the portable default, overridable with ``ATEN_CPU_CAPABILITY``), MKL and
oneDNN pick theirs by CPU, numpy's OpenBLAS by its detected core type, and thread counts change the order of
floating-point reductions. Every saved result records these facts, so a reader can tell why a re-run on
another machine gives other values (``divelab`` expects identical numbers only where they all match).
"""

from __future__ import annotations

import os
import platform
import re

# Variables that change which kernels run or how work is split between threads.
NUMERICS_ENV_VARS = (
    "ATEN_CPU_CAPABILITY", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA", "KMP_DETERMINISTIC_REDUCTION", "CUBLAS_WORKSPACE_CONFIG",
)


def cpu_model() -> str:
    """The processor's name as the kernel reports it (``platform.processor()`` is often empty on Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _torch_facts() -> dict[str, str]:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a core dependency
        return {}
    config = torch.__config__.show()
    facts = {"torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
             "torch_threads": str(torch.get_num_threads())}
    mkl = re.search(r"Math Kernel Library Version ([\d.]+)", config)
    onednn = re.search(r"MKL-DNN v([\d.]+)", config)
    if mkl:
        facts["mkl"] = mkl.group(1)
    if onednn:
        facts["onednn"] = onednn.group(1)
    return facts


def _blas_facts() -> dict[str, str]:
    """numpy/scipy's BLAS: which library, its version, the core type it tuned for and its threads."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - a scikit-learn dependency
        return {}
    import numpy  # noqa: F401  (loads numpy's BLAS so threadpoolctl can see it)

    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    if not blas:
        return {}
    b = blas[0]
    parts = [str(b.get("internal_api")), str(b.get("version") or "?")]
    if b.get("architecture"):
        parts.append(f"core {b['architecture']}")
    return {"numpy_blas": " ".join(parts), "numpy_blas_threads": str(b.get("num_threads"))}


def numerics_facts() -> dict[str, str]:
    """The CPU, the kernels in use and the settings that select them (see the module docstring)."""
    facts = {"cpu_model": cpu_model(), **_torch_facts(), **_blas_facts()}
    set_vars = {k: os.environ[k] for k in NUMERICS_ENV_VARS if k in os.environ}
    facts["numerics_env"] = " ".join(f"{k}={v}" for k, v in sorted(set_vars.items())) or "none set"
    return facts
