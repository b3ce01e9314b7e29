"""Reproduction tasks, run in process or as Ray tasks; results stream back as they finish.

A task is (system package, scale, seed). On Ray each becomes one remote call with its own
resource request: a system's ``reproduce`` module may set ``RAY_RESOURCES`` (default one CPU; a
GPU only where the system can use one). A task that raises comes back as a failed
:class:`Outcome` carrying its error, never dropped; ``retries`` re-runs it first. Workers share the
cache: every entry is written atomically and model builds hold a lock (``divelab.cache.lock``), so
two workers wanting one model train it once.
"""

from __future__ import annotations

import importlib
import os
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from divelab.claims import Reproduction

DEFAULT_RESOURCES = {"num_cpus": 1}
RAY_HINT = "Ray is not installed; install it with `pip install 'divelab[ray]'` (or `pip install ray`)"


@dataclass(frozen=True)
class Task:
    module: str  # the system's package, e.g. "divelab.training.backtrack"
    key: str  # its registry key (for messages and the report)
    scale: str
    seed: int


@dataclass
class Outcome:
    task: Task
    reproduction: Reproduction | None = None
    error: str = ""  # the exception and traceback when the task failed
    runtime_s: float = 0.0
    attempts: int = 1
    where: str = field(default="in-process")

    @property
    def ok(self) -> bool:
        return self.reproduction is not None


def run_one(module: str, scale: str, seed: int, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one reproduction and return it as a dict (what travels back from a Ray worker)."""
    for k, v in (env or {}).items():
        os.environ.setdefault(k, v)
    t0 = time.perf_counter()
    rep = importlib.import_module(f"{module}.reproduce").reproduce(scale=scale, seed=seed)
    rep.runtime_s = time.perf_counter() - t0
    return rep.to_dict()


def resources_of(module: str) -> dict[str, float]:
    try:
        mod = importlib.import_module(f"{module}.reproduce")
    except ImportError:
        return dict(DEFAULT_RESOURCES)
    return dict(getattr(mod, "RAY_RESOURCES", DEFAULT_RESOURCES))


def _forwarded_env() -> dict[str, str]:
    # Workers read and write the same cache as the driver, and stay as quiet or loud as it is.
    return {k: os.environ[k] for k in ("DIVELAB_CACHE", "DIVELAB_QUIET") if k in os.environ}


def run_tasks(tasks: Sequence[Task], *, backend: str = "inprocess", address: str | None = None,
              retries: int = 0, on_result: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """Run every task; call ``on_result`` as each finishes; return the outcomes in task order."""
    if backend not in ("inprocess", "ray"):
        raise ValueError(f"backend must be 'inprocess' or 'ray', got {backend!r}")
    if retries < 0:
        raise ValueError(f"retries must be >= 0, got {retries}")
    if backend == "inprocess":
        return _run_inprocess(tasks, retries, on_result)
    return _run_ray(tasks, address, retries, on_result)


def _run_inprocess(tasks: Sequence[Task], retries: int, on_result: Callable[[Outcome], None] | None) -> list[Outcome]:
    outcomes = []
    for task in tasks:
        t0 = time.perf_counter()
        error = ""
        rep = None
        attempts = 0
        while rep is None and attempts <= retries:
            attempts += 1
            try:
                rep = Reproduction.from_dict(run_one(task.module, task.scale, task.seed))
                error = ""
            except KeyboardInterrupt:
                raise
            except Exception:  # a broken system must not hide the others' results
                error = traceback.format_exc()
        out = Outcome(task, rep, error, time.perf_counter() - t0, attempts)
        outcomes.append(out)
        if on_result:
            on_result(out)
    return outcomes


def _run_ray(tasks: Sequence[Task], address: str | None, retries: int,
             on_result: Callable[[Outcome], None] | None) -> list[Outcome]:
    try:
        import ray
    except ImportError:
        raise RuntimeError(RAY_HINT) from None
    if not ray.is_initialized():
        ray.init(address=address or None, include_dashboard=False, log_to_driver=False,
                 ignore_reinit_error=True)
    remote = ray.remote(run_one)
    env = _forwarded_env()
    pending: dict[Any, tuple[int, float]] = {}
    for i, task in enumerate(tasks):
        ref = remote.options(max_retries=retries, retry_exceptions=retries > 0,
                             **resources_of(task.module)).remote(task.module, task.scale, task.seed, env)
        pending[ref] = (i, time.perf_counter())
    results: list[Outcome | None] = [None] * len(tasks)
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        ref = done[0]
        i, t0 = pending.pop(ref)
        try:
            out = Outcome(tasks[i], Reproduction.from_dict(ray.get(ref)), "", time.perf_counter() - t0,
                          where="ray")
        except Exception as exc:  # RayTaskError carries the worker's traceback
            out = Outcome(tasks[i], None, str(exc), time.perf_counter() - t0, attempts=retries + 1, where="ray")
        results[i] = out
        if on_result:
            on_result(out)
    return [r for r in results if r is not None]
