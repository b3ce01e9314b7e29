"""Shared test set-up: every test session gets its own divelab cache, so tests never read a
developer's cached models and never leave files behind."""

from __future__ import annotations

import os
import sys
import textwrap

import pytest

from divelab import registry
from divelab.registry import System

os.environ.setdefault("DIVELAB_QUIET", "1")

# Under pytest-xdist (`make test` runs one worker per core) each worker is one of several busy processes: one
# thread each, for torch here and for the processes a test starts (CLIs, stage workers), keeps them from
# oversubscribing the cores. A test that needs more threads or workers sets them itself.
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "DIVELAB_STAGE_WORKERS"):
        os.environ.setdefault(_var, "1")
    import torch

    torch.set_num_threads(1)


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    if "DIVELAB_TEST_CACHE" in os.environ:  # reuse a warm cache on purpose, e.g. while developing
        os.environ["DIVELAB_CACHE"] = os.environ["DIVELAB_TEST_CACHE"]
    else:
        os.environ["DIVELAB_CACHE"] = str(tmp_path_factory.mktemp("divelab-cache"))


# A stand-in system for testing the CLI, report and scale-out plumbing without training anything.
FAKE_REPRODUCE = '''
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from divelab import verdicts
from divelab.claims import Claim, Figure, Kind, Reproduction, not_checkable

from dataclasses import dataclass

@dataclass(frozen=True)
class Plan:
    points: int
    """points on the curve."""

PLANS = {"smoke": Plan(2), "quick": Plan(3), "full": Plan(4)}

def run(plan, seed=0):
    rep = Reproduction(system="fake", title="Fake system <b>escaped</b>", scale="", seed=seed,
                       setup="a stand-in for plumbing tests")
    rep.add(Claim("measured thing", "1.0 (§1)", 1.0 + seed, unit="x", kind=Kind.EMPIRICAL,
                  ruling=verdicts.value(1.0 + seed, paper=1.0, tol=0.5, exact=True)))
    rep.add(Claim("a | pipe in text", "2", 3.0, note="disagrees", kind=Kind.CHECK,
                  ruling=verdicts.bound(3.0, 2.0, exact=True)))
    rep.add(not_checkable("needs a GPU", "5", "no GPU here"))
    fig, ax = plt.subplots()
    ax.plot(list(range(plan.points)), [seed] * plan.points)
    rep.figures.append(Figure.from_matplotlib(fig, "curve", "a curve"))
    return rep
'''


@pytest.fixture
def fake_system(tmp_path, monkeypatch):
    pkg = tmp_path / "fakepkg" / "fakesys"
    pkg.mkdir(parents=True)
    (tmp_path / "fakepkg" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "reproduce.py").write_text(textwrap.dedent(FAKE_REPRODUCE))
    monkeypatch.syspath_prepend(str(tmp_path))
    fake = System(999, "fake", "Fake system", "0000.00000", "testing", "fakepkg.fakesys", sources=("§1",))
    monkeypatch.setattr(registry, "SYSTEMS", (*registry.SYSTEMS, fake))
    yield fake
    for name in [m for m in sys.modules if m.startswith("fakepkg")]:
        del sys.modules[name]
