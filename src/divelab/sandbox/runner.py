"""Run an untrusted Python program in a subprocess with limits, and say how it ended.

What is enforced (see :func:`enforcement` for this host):

- **time**: wall clock (the parent kills the whole process group with SIGKILL) and CPU time
  (``RLIMIT_CPU``: SIGXCPU, then SIGKILL);
- **memory**: ``RLIMIT_AS`` (address space), so allocation fails with ``MemoryError``;
- **processes**: ``RLIMIT_NPROC``. Linux never applies it to real uid 0, so when divelab runs as
  root the child drops to a fresh unprivileged uid first (then the limit binds, and that uid owns
  nothing on the host, so the program cannot write outside its directory or read root's files);
- **file size**: ``RLIMIT_FSIZE`` (also bounds stdout/stderr, which go to files);
- **network**: a new network namespace (only a down loopback inside) when the kernel lets us
  make one, else a socket-blocking audit hook (best effort: C extensions can bypass it);
- **environment**: a minimal one is built from scratch; the parent's variables never pass through;
- **directory**: a fresh temporary directory is the cwd and is removed afterwards, as is anything
  the sandbox uid left in the world-writable temp directories;
- **the whole run** (as root): ``PR_SET_NO_NEW_PRIVS`` (no set-uid gain); new IPC, mount and PID
  namespaces (SysV IPC private, every descendant killed when the run's init exits); a private
  tmpfs of ``Limits.disk_mb`` under /tmp, /var/tmp, /dev/shm, /run and the work directory (one
  quota, nothing left behind, host sockets there hidden); memory and pids cgroups over all of the
  run's processes. The memory cgroup's cap is ``total_memory_mb + disk_mb``: the run's files are
  tmpfs pages, so memory and files share that one cap. ``SandboxResult.enforced`` says which of
  these were applied.

Not contained: a world-writable Unix socket elsewhere on the host filesystem (the private mounts
cover /tmp, /var/tmp, /dev/shm and /run; a network namespace does not cover filesystem sockets);
kernel exploits. Every ending is classified by its cause (:func:`_classify`): the status says which
limit ended the run and ``reason`` names it with its value.
"""

from __future__ import annotations

import json
import os
import pwd
import random
import shutil
import signal
import stat
import sys
import sysconfig
import tempfile
import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from divelab.interrupts import Guard
from divelab.sandbox._bootstrap import MEMORY_EXIT_CODE, MEMORY_MARKER

BOOTSTRAP = Path(__file__).with_name("_bootstrap.py")
TAIL_BYTES = 8192
_WORLD_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm")
_CGROUP_ROOT = Path("/sys/fs/cgroup")


class Status(StrEnum):
    PASSED = "passed"  # exit code 0
    FAILED = "failed"  # non-zero exit (an exception, a failed assert, sys.exit(1))
    TIMEOUT = "timeout"  # wall-clock limit, or CPU limit (SIGXCPU, or SIGKILL at the hard limit)
    MEMORY = "memory"  # MemoryError under the address-space limit, or killed by the run's memory cgroup
    PROCESSES = "processes"  # ended badly after the process limit refused a fork or a thread
    CRASHED = "crashed"  # killed by a signal (segfault, file-size limit, ...)


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run. ``None`` switches a limit off.

    - ``wall_s``: wall-clock seconds; then the whole process group is killed (status ``timeout``).
    - ``cpu_s``: CPU seconds of the program (``RLIMIT_CPU``: SIGXCPU, SIGKILL one second later; ``timeout``).
    - ``memory_mb``: the address space of each process (``RLIMIT_AS``: allocation raises ``MemoryError``;
      status ``memory``). As root it is also the default of ``total_memory_mb``, the memory cgroup over
      all the run's processes, and that cgroup's cap is ``total_memory_mb + disk_mb``: files the run
      writes live in a private tmpfs whose pages are memory, so **memory and files share one cap**. A
      run that writes ``F`` MB of files has ``total_memory_mb + disk_mb - F`` MB left for its processes.
      A process the cgroup kills ends the run with status ``memory``.
    - ``processes``: processes and threads of the program (``RLIMIT_NPROC`` and a pids cgroup); a fork
      refused there makes a failing run end with status ``processes``.
    - ``file_size_mb``: the largest file, stdout and stderr included (``RLIMIT_FSIZE``; SIGXFSZ).
    - ``disk_mb``: all the files the run writes, together (root: a private tmpfs of this size).
    """

    wall_s: float = 10.0
    cpu_s: int | None = 10
    memory_mb: int | None = 512
    processes: int | None = 16
    file_size_mb: float | None = 16.0
    open_files: int | None = 256
    isolate_network: bool = True
    drop_privileges: bool = True  # only meaningful when running as root
    # Whole-run limits (root only): IPC, mount and PID namespaces, a private tmpfs of ``disk_mb`` for
    # everything the run writes (/tmp, /var/tmp, /dev/shm, /run and the work directory), and cgroups
    # capping the memory of all its processes together (``total_memory_mb``, default ``memory_mb``,
    # plus ``disk_mb`` since tmpfs pages are memory) and their number.
    isolate: bool = True
    disk_mb: int | None = 256
    total_memory_mb: int | None = None

    def __post_init__(self) -> None:
        if not self.wall_s > 0:
            raise ValueError(f"Limits.wall_s must be > 0 seconds, got {self.wall_s!r}")
        for name in ("cpu_s", "memory_mb", "processes", "open_files", "disk_mb", "total_memory_mb"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 1):
                raise ValueError(f"Limits.{name} must be a positive int or None, got {v!r}")
        if self.memory_mb is not None and self.memory_mb < 64:
            raise ValueError(f"Limits.memory_mb must be >= 64 (the interpreter needs it), got {self.memory_mb}")
        if self.file_size_mb is not None and self.file_size_mb < 0:
            raise ValueError(f"Limits.file_size_mb must be >= 0 or None, got {self.file_size_mb!r}")


@dataclass
class SandboxResult:
    status: Status
    returncode: int | None
    stdout: str  # the last TAIL_BYTES of stdout
    stderr: str
    wall_s: float
    cpu_s: float
    max_rss_kb: int  # peak RSS of the program itself (VmHWM, sampled; see _vm_hwm_kb)
    reason: str = ""  # why it ended this way, in words
    signal: str | None = None
    enforced: dict[str, Any] = field(default_factory=dict)  # what the child could actually enforce

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        return d


def minimal_env(workdir: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
    }
    for k, v in (extra or {}).items():
        if not isinstance(k, str) or not isinstance(v, str) or not k or "=" in k:
            raise ValueError(f"env entries must be str -> str with a non-empty name without '=', got {k!r}: {v!r}")
        env[k] = v
    return env


def _world_readable(path: Path) -> bool:
    """Can an unprivileged stranger read ``path`` (every parent traversable)?"""
    try:
        p = path.resolve()
        for parent in [*reversed(p.parents)]:
            if not parent.stat().st_mode & stat.S_IXOTH:
                return False
        return bool(p.stat().st_mode & stat.S_IROTH)
    except OSError:
        return False


def _interpreter_for_unprivileged() -> str | None:
    """A Python an unprivileged uid can run *and* import its standard library from.

    ``sys.executable`` may live under a 0700 home (pyenv in /root here); then a system Python of
    the same minor version is used, else None (no uid drop)."""
    candidates = [sys.executable]
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates += [f"/usr/bin/{ver}", f"/usr/local/bin/{ver}"]
    for exe in candidates:
        exe_path = Path(exe)
        if not exe_path.exists() or not _world_readable(exe_path):
            continue
        if exe == sys.executable:
            stdlib = Path(sysconfig.get_paths()["stdlib"]) / "os.py"
            if not _world_readable(stdlib):
                continue
        return str(exe_path)
    return None


def _fresh_uid() -> int:
    """A uid no account and no process on this host uses (so killing 'all its processes' is safe)."""
    rng = random.SystemRandom()
    for _ in range(100):
        uid = rng.randrange(1_000_000, 2_000_000_000)
        try:
            pwd.getpwuid(uid)
            continue
        except KeyError:
            pass
        if not _pids_of_uid(uid):
            return uid
    raise RuntimeError("could not find a free uid for the sandbox")


def _pids_of_uid(uid: int) -> list[int]:
    """Live processes owned by ``uid`` (zombies are dead already; init reaps them)."""
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid != uid:
                    continue
                with open(f"/proc/{entry.name}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
                if state not in ("Z", "X"):
                    out.append(int(entry.name))
            except (OSError, IndexError):
                pass
    return out


def _kill_uid(uid: int) -> None:
    for _ in range(50):
        pids = _pids_of_uid(uid)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)


def _remove_files_of_uid(uid: int) -> None:
    for d in _WORLD_WRITABLE:
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            try:
                if e.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if e.is_dir(follow_symlinks=False):
                    shutil.rmtree(e.path, ignore_errors=True)
                else:
                    os.unlink(e.path)
            except OSError:
                pass


def _own_cgroup(controller: str) -> Path | None:
    """This process's cgroup-v1 directory for ``controller`` (None when there is none to write)."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(","):
                d = _CGROUP_ROOT / controller / path.lstrip("/")
                return d if d.is_dir() and os.access(d, os.W_OK) else None
    except (OSError, ValueError):
        pass
    return None


def _make_cgroups(limits: Limits) -> dict[str, Path]:
    """A memory and a pids cgroup for the whole run (cgroup v1; skipped where not writable)."""
    made: dict[str, Path] = {}
    if os.geteuid() != 0 or not limits.isolate:
        return made
    name = f"divelab-sbx-{os.getpid()}-{random.SystemRandom().randrange(1 << 30)}"
    total_mb = limits.total_memory_mb or limits.memory_mb
    wanted = {"memory": ("memory.limit_in_bytes", (total_mb + (limits.disk_mb or 0)) * 1024 * 1024
                         if total_mb else None),
              # + 2: the bootstrap and the PID namespace's init are processes of the run too
              "pids": ("pids.max", limits.processes + 2 if limits.processes else None)}
    for controller, (knob, value) in wanted.items():
        base = _own_cgroup(controller)
        if base is None or value is None:
            continue
        d = base / name
        try:
            d.mkdir()
            (d / knob).write_text(str(value))
            made[controller] = d
        except OSError:
            shutil.rmtree(d, ignore_errors=True) if d.exists() and not any(d.iterdir()) else None
            try:
                d.rmdir()
            except OSError:
                pass
    return made


def _remove_cgroups(groups: dict[str, Path]) -> None:
    for d in groups.values():
        for _ in range(50):
            try:
                pids = [int(x) for x in (d / "cgroup.procs").read_text().split()]
            except OSError:
                pids = []
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                d.rmdir()
                break
            except OSError:
                time.sleep(0.01)


def _cgroup_events(groups: dict[str, Path]) -> dict[str, int]:
    """What the run's cgroups did: processes the memory cgroup killed (``memory.oom_control``'s
    ``oom_kill``) and forks the pids cgroup refused (``pids.events``' ``max``). 0 where unreadable."""
    counts = {"oom_kills": 0, "forks_refused": 0}
    for controller, knob, key, name in (("memory", "memory.oom_control", "oom_kill", "oom_kills"),
                                        ("pids", "pids.events", "max", "forks_refused")):
        d = groups.get(controller)
        try:
            for line in (d / knob).read_text().splitlines() if d is not None else ():
                k, _, v = line.partition(" ")
                if k == key:
                    counts[name] = int(v)
        except (OSError, ValueError):
            pass
    return counts


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for task in os.scandir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task.name}/children") as f:
                    kids = [int(x) for x in f.read().split()]
                out.extend(kids)
                todo.extend(kids)
        except OSError:
            pass
    return out


def _tail(path: Path, limit: int = TAIL_BYTES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            data = f.read()
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")


def _vm_hwm_kb(pid: int) -> int:
    """Peak resident size of the program's own image, from /proc (0 when unreadable).

    Why not ``wait4``'s ``ru_maxrss``: Linux carries the high-water mark of the process image
    that forked the child across ``exec``, so a sandbox started from a big parent (a test run with
    torch loaded) would report the parent's size. ``VmHWM`` belongs to the post-exec image alone;
    it is sampled while the program runs, so a very short peak can be missed.
    """
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def run_python(
    code: str,
    *,
    limits: Limits | None = None,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    files: dict[str, str] | None = None,
    argv: list[str] | tuple[str, ...] = (),
    output_bytes: int = TAIL_BYTES,
) -> SandboxResult:
    """Run ``code`` (Python source) as ``__main__`` in a sandbox; see the module docstring.

    ``files`` are written into the fresh work directory first (relative names only); ``env`` adds
    variables to a minimal environment (nothing of the caller's leaks in); ``stdin`` is fed whole.
    ``output_bytes`` is how much of the end of stdout and of stderr comes back (default 8 KiB).

    >>> run_python("print(6 * 7)").stdout
    '42\\n'
    """
    if not isinstance(code, str):
        raise TypeError(f"code must be a str of Python source, got {type(code).__name__}")
    if not isinstance(output_bytes, int) or output_bytes < 1:
        raise ValueError(f"output_bytes must be a positive int, got {output_bytes!r}")
    limits = limits or Limits()
    is_root = os.geteuid() == 0
    uid = None
    python = sys.executable
    if is_root and limits.drop_privileges:
        unpriv = _interpreter_for_unprivileged()
        if unpriv is not None:
            python, uid = unpriv, _fresh_uid()
    # Ctrl-C is held back while the run's temporary directories and cgroups are made and while they
    # are removed (a second Ctrl-C cannot cut the cleanup short and leave a live run behind).
    guard = Guard()
    ctrl = work = proc = None
    groups: dict[str, Path] = {}
    try:
        ctrl = Path(tempfile.mkdtemp(prefix="divelab-sbx-ctl-"))
        work = Path(tempfile.mkdtemp(prefix="divelab-sbx-"))
        groups = _make_cgroups(limits)
        guard.arm()
        for name, text in (files or {}).items():
            target = (work / name).resolve()
            if work.resolve() not in target.parents:
                raise ValueError(f"files names must be relative paths inside the work dir, got {name!r}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        if uid is not None:
            for root, dirs, fnames in os.walk(work):
                for n in [*dirs, *fnames]:
                    os.chown(os.path.join(root, n), uid, uid)
            os.chown(work, uid, uid)
        (ctrl / "main.py").write_text(code, encoding="utf-8")
        cfg = {
            "code_path": str(ctrl / "main.py"),
            "workdir": str(work),
            "uid": uid,
            "isolate_network": limits.isolate_network,
            "isolation": {"ipc": limits.isolate, "pid": limits.isolate,
                          "disk_mb": limits.disk_mb if limits.isolate else None,
                          # the interpreter's own environment stays readable even when it lives under
                          # /tmp (a virtualenv in a fresh clone there), which the private tmpfs hides
                          # a virtualenv reached through a symlink: the files live at the resolved path,
                          # so that one must stay readable too
                          "readable": sorted({p for d in (sys.prefix, sys.base_prefix) for p in (d, os.path.realpath(d))}
                                             | {str(Path(python).resolve().parent.parent)})},
            "cgroups": {c: str(d) for c, d in groups.items()},
            "argv": list(argv),
            "limits": {
                "cpu_s": limits.cpu_s,
                "memory_mb": limits.memory_mb,
                "processes": limits.processes,
                "file_size_mb": limits.file_size_mb,
                "open_files": limits.open_files,
            },
        }
        (ctrl / "config.json").write_text(json.dumps(cfg))
        if stdin is not None:
            (ctrl / "stdin").write_text(stdin, encoding="utf-8")
        stdin_f = open(ctrl / "stdin", "rb") if stdin is not None else open(os.devnull, "rb")
        out_f = open(ctrl / "stdout", "wb")
        err_f = open(ctrl / "stderr", "wb")
        import subprocess

        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(
                [python, "-I", str(BOOTSTRAP), str(ctrl / "config.json")],
                stdin=stdin_f, stdout=out_f, stderr=err_f, env=minimal_env(str(work), env),
                cwd=str(work), start_new_session=True, close_fds=True,
            )
        finally:
            for f in (stdin_f, out_f, err_f):
                f.close()
        deadline = t0 + limits.wall_s
        timed_out = False
        delay = 0.0005
        peak_kb = 0
        while True:
            pid, wstatus, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            # the program runs below the bootstrap (and the PID namespace's init): sample them all
            peak_kb = max(peak_kb, _vm_hwm_kb(proc.pid), *(_vm_hwm_kb(p) for p in _descendants(proc.pid)))
            if time.perf_counter() >= deadline:
                timed_out = True
                _killpg(proc.pid)
                pid, wstatus, rusage = os.wait4(proc.pid, 0)
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(wstatus)  # reaped here; keep Popen quiet
        _killpg(proc.pid)  # background children left in the group
        if uid is not None:
            _kill_uid(uid)  # children that escaped the group with setsid()
        meta = _read_json(ctrl / "meta.json")
        stdout, stderr = _tail(ctrl / "stdout", output_bytes), _tail(ctrl / "stderr", output_bytes)
        rc = proc.returncode
        cpu = rusage.ru_utime + rusage.ru_stime
        # Under a PID namespace the program is a grandchild; its reaper recorded exactly how it ended.
        program = _read_json(ctrl / "status.json")
        if program and not timed_out:
            rc = -int(program["signal"]) if "signal" in program else int(program.get("code", rc))
            cpu = max(cpu, float(program.get("cpu_s", 0.0)))
        status, reason, signame = _classify(rc, timed_out, cpu, stderr, limits, _cgroup_events(groups))
        return SandboxResult(
            status=status, returncode=rc, stdout=stdout, stderr=stderr, wall_s=wall, cpu_s=cpu,
            max_rss_kb=peak_kb or int(rusage.ru_maxrss), reason=reason, signal=signame,
            enforced={**meta, "uid_dropped": uid is not None, "interpreter": python,
                      "cgroups": sorted(groups)},
        )
    finally:
        guard.hold()
        if proc is not None and proc.returncode is None:
            _killpg(proc.pid)
            try:
                os.wait4(proc.pid, 0)
            except ChildProcessError:
                pass
        if uid is not None:
            _kill_uid(uid)
            _remove_files_of_uid(uid)
        _remove_cgroups(groups)
        for d in (work, ctrl):
            if d is not None:
                shutil.rmtree(d, ignore_errors=True)
        guard.close()


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _classify(rc: int, timed_out: bool, cpu: float, stderr: str, limits: Limits,
              events: dict[str, int] | None = None) -> tuple[Status, str, str | None]:
    """Status, reason and signal name of a run: every limit that ended it is named with its value."""
    events = events or {}
    signame = None
    if rc < 0:
        try:
            signame = signal.Signals(-rc).name
        except ValueError:
            signame = str(-rc)
    total_mb = limits.total_memory_mb or limits.memory_mb
    cgroup_memory = (f"memory limit of the whole run ({total_mb} MB for its processes + {limits.disk_mb or 0} MB "
                     "of files, one cgroup cap)")
    forks = (f"process limit of {limits.processes} processes/threads reached "
             f"({events.get('forks_refused', 0)} forks refused)")
    if timed_out:
        return Status.TIMEOUT, f"wall-clock limit of {limits.wall_s:g} s reached; process group killed", signame
    if signame == "SIGXCPU":
        return Status.TIMEOUT, f"CPU-time limit of {limits.cpu_s} s reached (SIGXCPU)", signame
    if signame == "SIGKILL" and events.get("oom_kills"):
        return Status.MEMORY, f"{cgroup_memory} reached; killed by the kernel (OOM)", signame
    if signame == "SIGKILL" and limits.cpu_s and cpu >= limits.cpu_s - 0.05:
        return Status.TIMEOUT, (f"CPU-time limit of {limits.cpu_s} s reached (SIGKILL at the hard limit, "
                                f"{limits.cpu_s + 1} s: SIGXCPU was caught or ignored)"), signame
    if rc == MEMORY_EXIT_CODE and MEMORY_MARKER.decode().strip() in stderr:
        return Status.MEMORY, f"memory limit of {limits.memory_mb} MB per process reached (MemoryError)", signame
    if signame == "SIGXFSZ":
        return Status.CRASHED, f"file-size limit of {limits.file_size_mb:g} MB reached (SIGXFSZ)", signame
    ended = f"killed by {signame}" if signame is not None else f"exited {rc}"
    if rc != 0 and events.get("oom_kills"):  # a child was killed and the program failed for it
        return Status.MEMORY, f"{ended}; {cgroup_memory} reached ({events['oom_kills']} processes killed)", signame
    if rc != 0 and events.get("forks_refused"):
        return Status.PROCESSES, f"{ended}; {forks}", signame
    if signame is not None:
        return Status.CRASHED, ended, signame
    if rc == 0:
        notes = [f"{cgroup_memory} killed {events['oom_kills']} processes" if events.get("oom_kills") else "",
                 forks if events.get("forks_refused") else ""]
        return Status.PASSED, "; ".join(["exited 0", *filter(None, notes)]), None
    return Status.FAILED, ended, None


_ENFORCEMENT: dict[str, Any] | None = None


def enforcement() -> dict[str, Any]:
    """What this host actually enforces, found by running a tiny program once (cached)."""
    global _ENFORCEMENT
    if _ENFORCEMENT is None:
        r = run_python("pass", limits=Limits(wall_s=20))
        e = dict(r.enforced)
        e.update({
            "wall_time": "enforced (process group SIGKILL)",
            "cpu_time": "enforced (RLIMIT_CPU)",
            "memory": "enforced (RLIMIT_AS)",
            "file_size": "enforced (RLIMIT_FSIZE)",
            "processes": "enforced (RLIMIT_NPROC)" if e.get("nproc_enforced") else
            "NOT enforced (running as uid 0 without a uid drop; the kernel exempts root)",
            "writes_outside_workdir": "blocked by file permissions (fresh uid)" if e.get("uid_dropped") else
            "NOT blocked (same uid as the caller)",
            "privilege_gain": "blocked (PR_SET_NO_NEW_PRIVS: set-uid bits ignored)",
            "process_survival": "none (PID namespace: every descendant dies with its init)"
            if e.get("pid_namespace") else "best effort (process group and sandbox uid killed)",
            "sysv_ipc": "private (IPC namespace, destroyed with the run)" if e.get("ipc") == "namespace"
            else "NOT isolated (host IPC)",
            "unix_sockets": "host sockets under /tmp, /var/tmp, /dev/shm, /run hidden (private mounts); abstract "
            "sockets isolated by the network namespace; a world-writable socket elsewhere is NOT hidden"
            if e.get("filesystem", "shared") != "shared" else "NOT isolated (host filesystem)",
            "total_disk": e.get("filesystem", "shared") if e.get("filesystem", "shared") != "shared"
            else "NOT limited (per-file RLIMIT_FSIZE only)",
            "total_memory": "enforced (memory cgroup over all processes)" if "memory" in e.get("cgroups", [])
            else "NOT enforced (RLIMIT_AS per process only)",
            "total_processes": "enforced (pids cgroup)" if "pids" in e.get("cgroups", []) else
            "per uid only (RLIMIT_NPROC)",
        })
        _ENFORCEMENT = e
    return dict(_ENFORCEMENT)
