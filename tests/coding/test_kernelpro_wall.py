"""KernelPro (E177): the correctness wall checks every element's contribution, at the edges.

Deliberately wrong kernels (each skips or misplaces elements of a row) are built with gcc and must
all be rejected; each of them passes a single seeded standard-normal input, which was the wall
before. Correct kernels, reordered by vectorisation and -ffast-math, must still pass every set."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest

from divelab.coding.kernelpro import Config, Evaluator, backend, get_problem, log_reward
from divelab.coding.kernelpro.problems import PROBLEMS, RAGGED, SWEEP
from divelab.coding.kernelpro.roofline import Roofline

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
ROOF = Roofline(peak_flops=50e9, bandwidth=25e9)

# softmax's max loop: softmax is shift-invariant, so a max that misses elements changes nothing on
# standard normals; it only overflows when a missed element is large
SOFTMAX = """
  for (int r = 0; r < R; r++) {
    const float *x = x0 + r * C;
    float *y = out + r * C;
    float m = -3.0e38f;
    MAX_LOOP
    float s = 0.0f;
    for (int c = 0; c < C; c++) { const float e = expf(x[c] - m); y[c] = e; s += e; }
    const float inv = 1.0f / s;
    for (int c = 0; c < C; c++) y[c] *= inv;
  }
"""
BODY = "m = x[c] > m ? x[c] : m;"
LOOPS = {
    "correct": "for (int c = 0; c < C; c++) BODY",
    "tail skip": "for (int c = 0; c < C - 1; c++) BODY",
    "head skip": "for (int c = 1; c < C; c++) BODY",
    # a vector loop of stride 8, then the remainder loop starting one element late
    "off-by-one at the stride": "{ int c = 0; for (; c + 8 <= C; c += 8) { const int c0 = c; "
                                "for (int c = c0; c < c0 + 8; c++) BODY } for (c = c + 1; c < C; c++) BODY }",
    # right whenever C is even (as it is at the benchmark size below)
    "wrong on odd sizes": "for (int c = 0; c < (C & ~1); c++) BODY",
}


def softmax_problem(loop: str, C: int = 1003):
    body = SOFTMAX.replace("MAX_LOOP", loop.replace("BODY", BODY))
    base = get_problem("softmax")
    return dataclasses.replace(base, name=f"softmax-{abs(hash(loop))}", templates={"ijk": body}).at({"C": C})


@needs_gcc
@pytest.mark.parametrize("wrong", [k for k in LOOPS if k != "correct"])
def test_every_deliberately_wrong_kernel_is_rejected(wrong, tmp_path, monkeypatch):
    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path))
    even = wrong == "wrong on odd sizes"
    p = softmax_problem(LOOPS[wrong], C=1002 if even else 1003)
    for cfg in (Config(), Config(opt="-O3", avx2=True, fast_math=True)):
        call = backend.load(backend.build(p, cfg))
        # the old wall: one seeded standard-normal input, which this kernel passes
        xs = p.make_inputs(0)
        out = np.full(p.output, np.nan, dtype=np.float32)
        call(*xs, out)
        ref = p.reference(xs)
        assert np.max(np.abs(out - ref) / (p.atol + p.rtol * np.abs(ref))) <= 1.0
        v = backend.verify(p, cfg, call)
        assert not v.ok and v.error > 1.0 and v.failed, (wrong, cfg)
        if even:  # only another size shows it
            assert all(f.startswith("R=") and "C=" in f for f in v.failed)
    right = softmax_problem(LOOPS["correct"])
    for cfg in (Config(), Config(opt="-O3", avx2=True, fast_math=True)):
        ok = backend.verify(right, cfg, backend.load(backend.build(right, cfg)))
        assert ok.ok and ok.error <= 1.0, ok.failed


@needs_gcc
def test_a_wrong_kernel_earns_no_reward_and_names_what_it_got_wrong(tmp_path, monkeypatch):
    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path))
    ev = Evaluator(softmax_problem(LOOPS["tail skip"]), cost="time", profile=False, roofline=ROOF, timing_repeats=1)
    c = ev.evaluate(Config(opt="-O2"))
    assert c.compiled and not c.ok and "tail_1" in c.failed_checks and "normal" not in c.failed_checks
    assert log_reward(1.0, c) == -2.0  # behind the wall: the floor, however fast


@needs_gcc
@pytest.mark.parametrize("name", list(PROBLEMS))
def test_correct_kernels_pass_every_set_and_size_and_unsafe_ones_do_not(name, tmp_path, monkeypatch):
    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path))
    p = PROBLEMS[name]
    assert p.edge_sizes and any(1 in s.values() for s in p.edge_sizes)  # a 1-element size is checked
    # the naive program, a fully edited one, and the -O3 -march=native baseline (which keeps IEEE semantics)
    for cfg in (Config(), Config(opt="-O3", avx2=True, simd=True, fast_math=True, restrict=True),
                Config(opt="-O3", native=True)):
        v = backend.verify(p, cfg, backend.load(backend.build(p, cfg)))
        assert v.ok and v.error <= 1.0, (name, cfg.short(), v.failed)
    unsafe = Config(opt="-O3", avx2=True, fast_math=True, drop_tail=True)
    assert not backend.verify(p, unsafe, backend.load(backend.build(p, unsafe))).ok


def test_input_sets_put_a_spike_on_every_element_and_on_each_edge():
    p = get_problem("layernorm")
    sets = {name: xs for name, xs, _ in p.check_inputs(0)}
    assert {"normal", "large", "integers", "head", "tail_1", f"tail_{RAGGED}"} <= set(sets)
    for i, shape in enumerate(p.inputs):
        swept = np.zeros(shape, bool)
        for k in range(SWEEP):
            swept |= np.abs(sets[f"sweep_{k}"][i]) > 8
        assert swept.all()  # the sweep covers every element of every input
        for name in ("head", *(f"tail_{k}" for k in range(1, RAGGED + 1)), *(f"row_{k}" for k in range(SWEEP))):
            assert ((np.abs(sets[name][i]) > 8).sum(axis=-1) == 1).all()  # one spike per row, alone
        assert (np.abs(sets["tail_1"][i][..., -1]) > 8).all() and (np.abs(sets["head"][i][..., 0]) > 8).all()
    x = [np.abs(sets[f"row_{k}"][0]) > 8 for k in range(SWEEP)]
    assert np.logical_or.reduce(x).any(axis=0).all()  # every column is spiked alone in some row
    with pytest.raises(ValueError, match="cannot be resized"):
        dataclasses.replace(p, shapes=None).at({"C": 5})


@needs_gcc
def test_loading_a_fast_math_kernel_leaves_the_process_floating_point_mode_alone(tmp_path):
    # gcc links crtfastmath.o into anything linked with -ffast-math; its constructor turns on
    # flush-to-zero for the whole process on load. Checked in a child so a failure cannot leak here.
    import os
    import subprocess
    import sys

    code = (
        "from divelab.coding.kernelpro import Config, backend, get_problem\n"
        "import sys\n"
        "tiny = sys.float_info.min / 4  # a subnormal\n"
        "assert tiny * 1.0 > 0\n"
        "p = get_problem(sorted(__import__('divelab.coding.kernelpro.problems', fromlist=['x']).PROBLEMS)[0])\n"
        "backend.load(backend.build(p, Config(opt='-O3', avx2=True, fast_math=True)))\n"
        "print('subnormals kept' if tiny * 1.0 > 0 else 'flushed to zero')\n"
    )
    env = {**os.environ, "DIVELAB_CACHE": str(tmp_path), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "subnormals kept"
