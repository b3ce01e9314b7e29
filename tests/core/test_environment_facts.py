"""Every result records the machine it ran on: how busy it was and which commit of the source ran."""

from __future__ import annotations

import re


def test_a_result_records_the_load_and_the_commit_it_ran_from(monkeypatch):
    from divelab import claims

    facts = claims.environment_facts()
    assert re.fullmatch(r"\d+\.\d\d \d+\.\d\d \d+\.\d\d", facts["load_1_5_15_min"])
    # the tests run from a git checkout: a commit, marked dirty when the source differs from it
    assert re.fullmatch(r"[0-9a-f]{12}(\+dirty)?", facts["commit"])
    monkeypatch.setattr(claims, "_source_commit", lambda: "")  # an installed package outside a checkout
    assert "commit" not in claims.environment_facts()
    # a dirty checkout names the files that differ, so a reader can tell whether they are code the run used
    monkeypatch.setattr(claims, "_source_commit", lambda: "a" * 12 + "+dirty")
    monkeypatch.setattr(claims, "_uncommitted_files", lambda: ["src/divelab/x.py", "src/divelab/y.py"])
    assert claims.environment_facts()["uncommitted"] == "src/divelab/x.py src/divelab/y.py"


def test_the_runner_records_the_load_at_the_end_of_a_run(fake_system):
    from divelab.scaleout.tasks import run_reproduction

    rep = run_reproduction(fake_system.module, "smoke", 0)
    assert re.fullmatch(r"\d+\.\d\d \d+\.\d\d \d+\.\d\d", rep.environment["load_1_5_15_min_at_end"])
    assert "load_1_5_15_min" in rep.environment


def test_the_runner_records_the_commit_the_run_started_from(fake_system, monkeypatch):
    import importlib

    from divelab import claims
    from divelab.scaleout.tasks import run_reproduction

    # a commit lands while the run works (before it builds its Reproduction): the run must not be credited to it
    head = {"commit": "a" * 12}
    monkeypatch.setattr(claims, "_source_commit", lambda: head["commit"])
    mod = importlib.import_module(f"{fake_system.module}.reproduce")
    original = mod.run

    def run_while_a_commit_lands(plan, seed):
        head["commit"] = "b" * 12
        return original(plan, seed)

    monkeypatch.setattr(mod, "run", run_while_a_commit_lands)
    rep = run_reproduction(fake_system.module, "smoke", 0)
    assert rep.environment["commit"] == "a" * 12


def test_a_result_records_the_cpu_and_the_kernels_that_decide_its_numbers(monkeypatch):
    """The same seed gives other numbers under other kernels: the record names them (CPU, the ISA PyTorch
    dispatches to, MKL/oneDNN, numpy's BLAS, thread counts, and the variables that select them)."""
    import torch

    from divelab import claims

    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    facts = claims.environment_facts()
    assert facts["cpu_model"]
    assert facts["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert facts["torch_threads"] == str(torch.get_num_threads())
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?", facts["mkl"]) and re.fullmatch(r"\d+\.\d+\.\d+", facts["onednn"])
    assert facts["numpy_blas"] and facts["numpy_blas_threads"]
    assert "OMP_NUM_THREADS=1" in facts["numerics_env"] and "ATEN_CPU_CAPABILITY" not in facts["numerics_env"]
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert "OMP_NUM_THREADS" not in claims.environment_facts()["numerics_env"]

def test_the_kernel_isa_recorded_is_the_one_a_process_runs(tmp_path):
    """ATEN_CPU_CAPABILITY is read when torch starts, so check it in a fresh process."""
    import json
    import subprocess
    import sys

    code = "import json; from divelab.claims import environment_facts as f; print(json.dumps(f()))"
    env = {**__import__("os").environ, "ATEN_CPU_CAPABILITY": "default"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    facts = json.loads(out.stdout)
    assert facts["torch_cpu_capability"] == "DEFAULT"
    assert "ATEN_CPU_CAPABILITY=default" in facts["numerics_env"]
