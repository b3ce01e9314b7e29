"""Stages of a long reproduction: progress with an ETA, and resuming a killed full run where it stopped.

A full-scale run takes up to an hour. A reproduction wraps each expensive part in :func:`stage`::

    runs = stage("train 5 seeds", lambda: [train(plan, s) for s in range(plan.seeds)], weight=5)

Inside a run started by the runner (:func:`divelab.scaleout.run_reproduction`) at ``full`` scale, a finished
stage's result is pickled into the cache under a key of the system, the resolved plan, the seed, the stage's
name and the source code of the system's package; a killed run started again loads every finished stage and
goes on from the first unfinished one. At other scales (and outside the runner) a stage just runs: quick stays
a cold, self-contained demo. Either way each stage prints one line when it starts and when it ends, with the
time it took and, from the stages' ``weight``\\s, an estimate of the time left — on a terminal or in a log.

A stage loaded from the cache also restores the global random states (``random``, NumPy, torch) that the stage
left behind when it ran, so whatever runs after it draws the same numbers as in an uninterrupted run: the same
seed gives the same results whether or not the run was killed on the way.

The run's record keeps every stage's name, seconds and whether it came from the cache (``details["stages"]``),
so a resumed run's total compute is the sum of its stages, not the wall time of its last process.

Independent stages — each training seed of a replicated method comparison, say — can run side by side with
:func:`parallel_stages`: one single-threaded process per core (``DIVELAB_STAGE_WORKERS`` caps how many). Such
stages must seed themselves; they leave the caller's random states untouched, so one worker and several give
the same numbers.
"""

from __future__ import annotations

import hashlib
import importlib.util
import multiprocessing
import os
import pickle
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from divelab.cache import atomic_write_bytes, entry_path, stable_hash
from divelab.progress import quiet

T = TypeVar("T")
RESUMABLE_SCALES = ("full",)
"""Scales at which finished stages are cached, so a killed run resumes."""


@dataclass
class _Run:
    system: str
    package: str
    scale: str
    key: str
    total_weight: float | None
    t0: float = field(default_factory=time.monotonic)
    done_weight: float = 0.0
    cached_weight: float = 0.0
    stages: list[dict[str, Any]] = field(default_factory=list)


_RUN: ContextVar[_Run | None] = ContextVar("divelab_stage_run", default=None)


def package_source_hash(package: str) -> str:
    """A hash of every ``.py`` file of ``package``: a code change invalidates the stages it cached."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"{package!r} is not an importable package")
    h = hashlib.sha256()
    for root in spec.submodule_search_locations:
        for path in sorted(Path(root).rglob("*.py")):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


@contextmanager
def run_context(system: str, package: str, scale: str, plan: dict[str, Any], seed: int,
                total_weight: float | None = None) -> Iterator[list[dict[str, Any]]]:
    """Make :func:`stage` calls inside the block belong to one run; yields the list of stage records."""
    # the key names cached stages, so only a resumable scale pays for hashing the package's source
    key = (stable_hash({"system": system, "plan": plan, "seed": seed, "code": package_source_hash(package)})
           if scale in RESUMABLE_SCALES else "")
    run = _Run(system, package, scale, key, total_weight)
    token = _RUN.set(run)
    try:
        yield run.stages
    finally:
        _RUN.reset(token)


def _say(text: str) -> None:
    if not quiet():
        print(text, file=sys.stderr, flush=True)


def _rng_states() -> dict[str, Any]:
    import random

    import numpy as np

    states: dict[str, Any] = {"random": random.getstate(), "numpy": np.random.get_state()}
    torch = sys.modules.get("torch")  # only a run that imported torch has torch state worth keeping
    if torch is not None:
        states["torch"] = torch.get_rng_state()
    return states


def _restore_rng_states(states: dict[str, Any]) -> None:
    import random

    import numpy as np

    random.setstate(states["random"])
    np.random.set_state(states["numpy"])
    if "torch" in states:
        import torch

        torch.set_rng_state(states["torch"])


def _stage_path(run: _Run, name: str) -> Path:
    return entry_path("stages", f"{run.system}-{run.key}-{stable_hash(name, 12)}.pkl")


def stage(name: str, fn: Callable[[], T], *, weight: float = 1.0) -> T:
    """Run ``fn()`` as one stage of the current run (see the module docstring). ``weight`` is the stage's
    share of the run's work, for the estimate of the time left; ``fn``'s result must pickle."""
    if weight <= 0:
        raise ValueError(f"weight must be > 0, got {weight}")
    run = _RUN.get()
    if run is None:
        return fn()
    record = _load_stage(run, name, weight)
    if record is not None:
        _restore_rng_states(record["rng"])
        return record["value"]
    _say(f"[{run.system}] stage '{name}': started")
    t0 = time.perf_counter()
    value = fn()
    _finish_stage(run, name, weight, value, time.perf_counter() - t0, _rng_states())
    return value


def _load_stage(run: _Run, name: str, weight: float) -> dict[str, Any] | None:
    """The cached record of a finished stage (counted in the run's progress), or None when it must run."""
    path = _stage_path(run, name)
    if run.scale not in RESUMABLE_SCALES or not path.exists():
        return None
    record = pickle.loads(path.read_bytes())
    run.stages.append({"name": name, "seconds": record["seconds"], "cached": True})
    run.done_weight += weight
    run.cached_weight += weight
    _say(f"[{run.system}] stage '{name}': finished in an earlier run ({record['seconds']:.0f} s), loaded")
    return record


def _finish_stage(run: _Run, name: str, weight: float, value: Any, seconds: float, rng: dict[str, Any]) -> None:
    """Cache a stage that just ran (at a resumable scale) and count it in the run's progress."""
    if run.scale in RESUMABLE_SCALES:
        atomic_write_bytes(_stage_path(run, name), pickle.dumps({"value": value, "seconds": seconds, "rng": rng}))
    run.stages.append({"name": name, "seconds": seconds, "cached": False})
    run.done_weight += weight
    _say(f"[{run.system}] stage '{name}': done in {seconds:.0f} s{_eta(run)}")


def stage_workers(n_stages: int) -> int:
    """How many processes :func:`parallel_stages` uses: one per core (``DIVELAB_STAGE_WORKERS`` overrides),
    never more than there are stages to run."""
    raw = os.environ.get("DIVELAB_STAGE_WORKERS", "")
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise ValueError(f"DIVELAB_STAGE_WORKERS must be a whole number >= 1, got {raw!r}")
        cap = int(raw)
    else:
        cap = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cap, n_stages))


# the stages a forked worker runs, by index: fork hands the closures over without pickling them
_PENDING: list[Callable[[], Any]] = []


def _run_pending(i: int) -> tuple[Any, float]:
    from divelab.threads import torch_threads

    t0 = time.perf_counter()
    with torch_threads(1):  # one core per worker: threads on top would oversubscribe the machine
        value = _PENDING[i]()
    return value, time.perf_counter() - t0


def parallel_stages(items: Sequence[tuple[str, Callable[[], T], float]]) -> list[T]:
    """Run independent ``(name, fn, weight)`` stages of the current run side by side; returns their values
    in order. Each is cached and loaded like a :func:`stage`; the ones to run go to ``stage_workers`` forked
    single-threaded processes (in this process when that is one). ``fn`` must seed itself: the caller's random
    states are left as they were, so the result does not depend on the number of workers or on the cache."""
    names = [name for name, _, _ in items]
    if len(set(names)) != len(names):
        raise ValueError(f"parallel stages need distinct names, got {names}")
    for name, _, weight in items:
        if weight <= 0:
            raise ValueError(f"weight must be > 0, got {weight} for stage {name!r}")
    run = _RUN.get()
    values: list[Any] = [None] * len(items)
    todo: list[int] = []
    for i, (name, _, weight) in enumerate(items):
        record = _load_stage(run, name, weight) if run is not None else None
        if record is None:
            todo.append(i)
        else:
            values[i] = record["value"]
    if not todo:
        return values
    saved = _rng_states()

    def finish(i: int, value: Any, seconds: float) -> None:
        values[i] = value
        if run is not None:
            _finish_stage(run, items[i][0], items[i][2], value, seconds, saved)

    workers = stage_workers(len(todo))
    system = f"[{run.system}] " if run is not None else ""
    _PENDING[:] = [fn for _, fn, _ in items]
    try:
        if workers == 1:
            for i in todo:
                _say(f"{system}stage '{items[i][0]}': started")
                value, seconds = _run_pending(i)
                _restore_rng_states(saved)  # as if it had run in its own process
                finish(i, value, seconds)
            return values
        _say(f"{system}{len(todo)} stages on {workers} processes: " + ", ".join(f"'{items[i][0]}'" for i in todo))
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            futures = {pool.submit(_run_pending, i): i for i in todo}
            pending = set(futures)
            while pending:  # record each stage as it finishes, so a killed run keeps the finished ones
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    value, seconds = fut.result()
                    finish(futures[fut], value, seconds)
        return values
    finally:
        _PENDING.clear()


def _eta(run: _Run) -> str:
    if run.total_weight is None or run.done_weight >= run.total_weight:
        return ""
    # only this process's stages tell the speed: stages loaded from the cache took no time here
    ran_weight = run.done_weight - run.cached_weight
    if ran_weight <= 0:
        return ""
    rate = (time.monotonic() - run.t0) / ran_weight
    return f"; about {rate * (run.total_weight - run.done_weight):.0f} s left"
