"""Reproduction tasks, run in process or as Ray tasks; results stream back as they finish.

A task is (system package, scale, seed). On Ray each becomes one remote call with its own
resource request: a system's ``reproduce`` module may set ``RAY_RESOURCES`` (default one CPU; a
GPU only where the system can use one). A task that raises comes back as a failed
:class:`Outcome` carrying its error, never dropped; ``retries`` re-runs it first. Retries are the
driver's own (Ray's are off), so every attempt is seen: each outcome records its attempts, how many
ended with a dead worker (crash, OOM kill, lost node) and why each failed attempt failed, and a
finished reproduction carries that record in ``details["scaleout"]`` (hence in ``results.json``
and the report). A cluster address is checked before any work (:func:`check_ray_address`): a
malformed or unreachable one is a one-line error within seconds, not a hang. Workers share the
cache: every entry is written atomically and model builds hold a lock (``divelab.cache.lock``), so
two workers wanting one model train it once.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import socket
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from divelab.claims import Reproduction, environment_facts

DEFAULT_RESOURCES = {"num_cpus": 1}
RAY_HINT = "Ray is not installed; install it with `pip install 'divelab[ray]'` (or `pip install ray`)"


@dataclass(frozen=True)
class Task:
    module: str  # the system's package, e.g. "divelab.training.backtrack"
    key: str  # its registry key (for messages and the report)
    scale: str
    seed: int
    sets: tuple[tuple[str, str], ...] = ()  # plan overrides (--set key=value)


@dataclass
class Outcome:
    task: Task
    reproduction: Reproduction | None = None
    error: str = ""  # the exception and traceback when the task failed
    runtime_s: float = 0.0
    attempts: int = 1
    where: str = field(default="in-process")
    worker_deaths: int = 0  # attempts that ended because the worker process or its node died
    failed_attempts: list[str] = field(default_factory=list)  # one line per failed attempt, in order

    @property
    def ok(self) -> bool:
        return self.reproduction is not None

    def record(self) -> dict[str, Any]:
        """How the task ran: what ``results.json`` keeps per task (``details["scaleout"]``, ``failed``)."""
        return {"seed": self.task.seed, "where": self.where, "attempts": self.attempts,
                "worker_deaths": self.worker_deaths, "failed_attempts": list(self.failed_attempts)}


def _finish(task: Task, payload: dict[str, Any] | None, error: str, t0: float, attempts: int, where: str,
            deaths: int, failures: list[str]) -> Outcome:
    rep = Reproduction.from_dict(payload) if payload is not None else None
    out = Outcome(task, rep, error, time.perf_counter() - t0, attempts, where, deaths, list(failures))
    if rep is not None:
        rep.details["scaleout"] = [out.record()]
    return out


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "failed"


ADDRESS_FORMS = ("'local' (start Ray on this machine), 'auto' (the cluster `ray start` made here, or RAY_ADDRESS), "
                 "'HOST:PORT' (a head node's GCS port, e.g. 10.0.0.5:6379) or 'ray://HOST:PORT' (Ray Client, "
                 "e.g. ray://head:10001)")
_ADDRESS = re.compile(r"(ray://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9._-]*):(\d{1,5})")


# HTTP/2 client connection preface and an empty SETTINGS frame (RFC 9113 §3.4, §6.5)
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


class _NotGrpc(Exception):
    pass


def _resolve_auto() -> str:
    """The cluster address ``auto`` means (RAY_ADDRESS, else the latest ``ray start`` on this machine)."""
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"]
    try:
        from ray._private.services import canonicalize_bootstrap_address_or_die
    except ImportError:  # a Ray without this helper: let ray.init resolve it
        return "auto"
    try:
        return canonicalize_bootstrap_address_or_die("auto")
    except ConnectionError:
        raise ValueError("Ray address 'auto': no running Ray cluster found on this machine; start one with "
                         "`ray start --head`, or give its address (HOST:PORT or ray://HOST:PORT)") from None


def check_ray_address(address: str | None, timeout: float = 5.0) -> str | None:
    """Check a Ray address before any work: the form, then that something answers there.

    Returns what ``ray.init`` gets (None: start Ray here). Raises ``ValueError`` with one line naming
    the address, what is wrong and the allowed forms; an unreachable host fails within ``timeout``
    seconds (``ray.init`` itself would retry for many minutes)."""
    if address is None or address == "local":
        return None
    shown = address
    if address == "auto":
        address = _resolve_auto()
        if address == "auto":
            return address
        shown = f"auto (= {address})"
    m = _ADDRESS.fullmatch(str(address).strip())
    if m is None or not 0 < int(m.group(3)) < 65536:
        raise ValueError(f"Ray address {shown!r} is malformed; allowed: {ADDRESS_FORMS}")
    host, port = m.group(2).strip("[]"), int(m.group(3))
    t0 = time.perf_counter()
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn:
            # A Ray head (GCS, or the Ray Client server) speaks gRPC, i.e. HTTP/2: it answers a client's
            # connection preface with a SETTINGS frame at once. A port that accepts and stays silent (a
            # proxy, a firewall, another service) is where ray.init would otherwise wait for many minutes.
            conn.settimeout(max(timeout - (time.perf_counter() - t0), 0.1))
            conn.sendall(_H2_PREFACE)
            head = conn.recv(9)
        if len(head) < 4 or head[3] != 0x04:
            raise _NotGrpc("it accepted the connection but did not answer as a gRPC server"
                           if not head else "it answered, but not as a gRPC server (not a Ray head)")
    except socket.gaierror:
        why = f"the host name {host!r} does not resolve"
    except TimeoutError:
        why = f"no answer within {timeout:.0f} s"
    except ConnectionRefusedError:
        why = "connection refused: nothing listens on that port"
    except _NotGrpc as exc:
        why = str(exc)
    except OSError as exc:
        why = f"{type(exc).__name__}: {exc.strerror or exc}"
    else:
        return str(address).strip()
    raise ValueError(f"Ray address {shown!r} is unreachable ({why}, after {time.perf_counter() - t0:.1f} s); "
                     f"start the head with `ray start --head --port {port}` or check the address and firewall")


def run_one(module: str, scale: str, seed: int, env: dict[str, str] | None = None,
            sets: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one reproduction and return it as a dict (what travels back from a Ray worker)."""
    for k, v in (env or {}).items():
        os.environ.setdefault(k, v)
    return run_reproduction(module, scale, seed, sets).to_dict()


def run_reproduction(module: str, scale: str, seed: int, sets: dict[str, str] | None = None) -> Reproduction:
    """Run the reproduction of the system package ``module`` at ``scale`` (the one way to run one).

    The runner owns what every reproduction shares: the scale check and the resolved plan (with
    ``sets`` applied, both recorded), the thread count (``THREADS`` in the module, default 1: float
    reductions split over a different number of threads round differently, so results depend on it),
    the plotting backend (no display) and the timing."""
    import matplotlib

    from divelab import plans
    from divelab.stages import run_context
    from divelab.threads import torch_threads

    matplotlib.use("Agg")
    mod = importlib.import_module(f"{module}.reproduce")
    plan = plans.resolve(mod, scale, sets)
    threads = getattr(mod, "THREADS", 1)  # None: the reproduction pins the parts that need it itself
    # a reproduction records its environment when it builds its Reproduction, which some do only after hours of
    # work; the source commit and the load are taken here, as the run starts, so a commit landed meanwhile is not
    # credited with the run
    at_start = {k: v for k, v in environment_facts().items() if k in ("commit", "uncommitted", "load_1_5_15_min")}
    t0 = time.perf_counter()
    # stages (divelab.stages) report progress, and at full resume from the cache after a kill
    with run_context(module.rsplit(".", 1)[-1], module, scale, plans.to_dict(plan), seed,
                     total_weight=getattr(mod, "STAGE_WEIGHT", None)) as stages:
        if threads is None:
            rep = mod.run(plan, seed)
        else:
            with torch_threads(threads):
                rep = mod.run(plan, seed)
    rep.runtime_s = time.perf_counter() - t0
    rep.environment.pop("commit", None)  # a checkout that is not a git repository records none
    rep.environment.pop("uncommitted", None)
    rep.environment.update(at_start)
    # the load when the run began is in environment_facts; at the end the 15-minute figure covers most of a run
    rep.environment["load_1_5_15_min_at_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    if stages:
        rep.details["stages"] = stages
        loaded = [st for st in stages if st.get("cached")]
        if loaded:
            # runtime_s is this process only; a resumed run also says what its loaded stages took when computed
            rep.details["resumed"] = {"stages_loaded": len(loaded), "of_stages": len(stages),
                                      "loaded_stage_seconds": sum(st["seconds"] for st in loaded)}
    rep.scale = scale
    rep.plan = plans.to_dict(plan)
    rep.overrides = dict(sets or {})
    return rep


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
        payload = None
        attempts = 0
        failures: list[str] = []
        while payload is None and attempts <= retries:
            attempts += 1
            try:
                payload = run_one(task.module, task.scale, task.seed, sets=dict(task.sets))
                error = ""
            except KeyboardInterrupt:
                raise
            except Exception:  # a broken system must not hide the others' results
                error = traceback.format_exc()
                failures.append(f"attempt {attempts}: raised {_last_line(error)}")
        out = _finish(task, payload, error, t0, attempts, "in-process", 0, failures)
        outcomes.append(out)
        if on_result:
            on_result(out)
    return outcomes


CONNECT_TIMEOUT_S = 30.0  # DIVELAB_RAY_TIMEOUT overrides: how long joining a cluster may take


def connect_ray(address: str | None, timeout: float | None = None) -> None:
    """Join (or start) Ray before any work, or fail with a one-line ``ValueError`` within seconds.

    The address is checked first (:func:`check_ray_address`); then ``ray.init`` runs with a deadline,
    because against a host that accepts connections but never completes Ray's handshake (a proxy, a
    different Ray version, token authentication that does not match) it would retry for many minutes."""
    if timeout is None:
        timeout = float(os.environ.get("DIVELAB_RAY_TIMEOUT", CONNECT_TIMEOUT_S))
    target = check_ray_address(address, timeout=min(timeout, 5.0))
    import ray

    if ray.is_initialized():
        return
    kwargs = {"include_dashboard": False, "log_to_driver": False, "ignore_reinit_error": True}
    if target is None:
        ray.init(**kwargs)
        return
    box: dict[str, BaseException] = {}
    kwargs["logging_level"] = logging.ERROR

    def join() -> None:
        try:
            ray.init(address=target, **kwargs)
        except BaseException as exc:  # reported below, in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=join, name="divelab-ray-connect", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise ValueError(f"Ray address {address!r}: no Ray cluster completed the connection within {timeout:.0f} s "
                         f"(something answers there, but not a Ray head this Ray {ray.__version__} can join: check "
                         f"the address, the head's Ray version and token authentication, see docs/scaleout.md)")
    if "error" in box:
        exc = box["error"]
        raise ValueError(f"Ray address {address!r}: could not connect: {type(exc).__name__}: {_last_line(str(exc))}")


def _death_errors(ray: Any) -> tuple[type, ...]:
    """Ray's errors for an attempt whose worker process (or node) died, as far as this Ray has them."""
    names = ("WorkerCrashedError", "NodeDiedError", "OutOfMemoryError", "LocalRayletDiedError", "RaySystemError")
    return tuple(t for t in (getattr(ray.exceptions, n, None) for n in names) if isinstance(t, type))


def _run_ray(tasks: Sequence[Task], address: str | None, retries: int,
             on_result: Callable[[Outcome], None] | None) -> list[Outcome]:
    try:
        import ray
    except ImportError:
        raise RuntimeError(RAY_HINT) from None
    try:
        connect_ray(address)
    except ValueError as exc:
        raise RuntimeError(str(exc)) from None
    # Ray's own retries are off (max_retries=0): the driver re-submits, so it sees every failed attempt.
    remote = ray.remote(run_one)
    env = _forwarded_env()
    deaths_t = _death_errors(ray)
    n = len(tasks)
    attempts, deaths = [0] * n, [0] * n
    failures: list[list[str]] = [[] for _ in range(n)]
    started = [time.perf_counter()] * n
    pending: dict[Any, int] = {}

    def submit(i: int) -> None:
        task = tasks[i]
        attempts[i] += 1
        opts = {"max_retries": 0, "retry_exceptions": False, **resources_of(task.module)}
        pending[remote.options(**opts).remote(task.module, task.scale, task.seed, env, dict(task.sets))] = i

    for i in range(n):
        started[i] = time.perf_counter()
        submit(i)
    results: list[Outcome | None] = [None] * n
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        ref = done[0]
        i = pending.pop(ref)
        payload, error = None, ""
        try:
            payload = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:  # the reproduction raised; carries the worker's traceback
            error = str(exc)
            failures[i].append(f"attempt {attempts[i]}: raised {_last_line(error)}")
        except deaths_t as exc:
            deaths[i] += 1
            error = str(exc)
            failures[i].append(f"attempt {attempts[i]}: worker died ({type(exc).__name__}: "
                               f"{str(exc).strip().splitlines()[0] if str(exc).strip() else 'no detail'})")
        except ray.exceptions.RayError as exc:
            error = str(exc)
            failures[i].append(f"attempt {attempts[i]}: {type(exc).__name__}: {_last_line(error)}")
        if payload is None and attempts[i] <= retries:
            submit(i)
            continue
        out = _finish(tasks[i], payload, error, started[i], attempts[i], "ray", deaths[i], failures[i])
        results[i] = out
        if on_result:
            on_result(out)
    return [r for r in results if r is not None]
