"""Every way the sandbox ends a run is reported as what it was, with the limit named.

CPU time (SIGXCPU at the soft limit; SIGKILL at the hard limit when the program catches or ignores
SIGXCPU), wall clock, memory (``MemoryError`` under the per-process cap; a kill by the run's memory
cgroup, of the program itself or of a child it needed), processes (forks and threads refused) and
file size each get their own status and a reason that carries the limit's value. Before, a SIGKILL
of the program (the hard CPU limit, the memory cgroup) came back as "failed, exited 1", because the
bootstrap tried to reset SIGKILL's handler to end the same way, and a refused fork as a plain failure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from divelab.sandbox import Limits, Status, _bootstrap, enforcement, run_python

LOOP = "while True:\n    pass\n"


def _needs_cgroup(controller: str) -> None:
    if controller not in enforcement().get("cgroups", []):
        pytest.skip(f"this host gives the sandbox no {controller} cgroup (needs root and writable cgroup v1)")


@pytest.mark.parametrize("prelude, signame", [
    ("", "SIGXCPU"),  # the soft limit's signal ends it
    ("import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\n", "SIGKILL"),  # the hard limit's SIGKILL
    ("import signal\nsignal.signal(signal.SIGXCPU, lambda *a: None)\n", "SIGKILL"),  # caught and shrugged off
])
def test_cpu_limit_is_a_timeout_whichever_signal_ends_it(prelude, signame):
    r = run_python(prelude + LOOP, limits=Limits(wall_s=60, cpu_s=1))
    assert (r.status, r.signal) == (Status.TIMEOUT, signame), (r.status, r.reason, r.stderr[-500:])
    assert "CPU-time limit of 1 s" in r.reason


def test_wall_clock_is_a_timeout_naming_the_limit():
    r = run_python("import time\ntime.sleep(60)", limits=Limits(wall_s=1.5, cpu_s=30))
    assert r.status is Status.TIMEOUT and "wall-clock limit of 1.5 s" in r.reason


def test_per_process_memory_cap_is_memory_naming_the_limit():
    r = run_python("x = []\nwhile True:\n    x.append(bytearray(10**7))", limits=Limits(memory_mb=150, wall_s=60))
    assert r.status is Status.MEMORY and "150 MB" in r.reason, (r.status, r.reason)


TOUCH = "b = bytearray({mb} * 1024 * 1024)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\n"


def test_memory_cgroup_kill_of_the_program_is_memory():
    _needs_cgroup("memory")
    # the address-space cap (512 MB) allows it; the run's total (100 + 16 MB) does not
    r = run_python(TOUCH.format(mb=300), limits=Limits(wall_s=60, memory_mb=512, total_memory_mb=100, disk_mb=16))
    assert (r.status, r.signal) == (Status.MEMORY, "SIGKILL"), (r.status, r.reason, r.stderr[-500:])
    assert "100 MB" in r.reason and "16 MB" in r.reason


def test_memory_cgroup_kill_of_a_needed_child_is_memory():
    _needs_cgroup("memory")
    code = ("import subprocess, sys\n"
            f"subprocess.run([sys.executable, '-c', {TOUCH.format(mb=300)!r}], check=True)\n")
    r = run_python(code, limits=Limits(wall_s=60, memory_mb=512, total_memory_mb=100, disk_mb=16))
    assert r.status is Status.MEMORY, (r.status, r.reason, r.stderr[-500:])
    assert "exited 1" in r.reason and "100 MB" in r.reason


def test_files_and_memory_share_one_cap():
    """Files in the run's tmpfs are memory: 60 MB of files leave less room for the program."""
    _needs_cgroup("memory")
    limits = Limits(wall_s=60, memory_mb=512, total_memory_mb=100, disk_mb=64)  # one cap of 164 MB
    files = "for i in range(4):\n    open(f'/tmp/big{i}', 'wb').write(b'x' * 15 * 1024 * 1024)\n"
    assert run_python(TOUCH.format(mb=110), limits=limits).status is Status.PASSED  # 110 < 164
    r = run_python(files + TOUCH.format(mb=110), limits=limits)  # 60 + 110 > 164
    assert r.status is Status.MEMORY, (r.status, r.reason)


FORKS = ("import os, time\n"
         "for _ in range(40):\n"
         "    if os.fork() == 0:\n"
         "        time.sleep(20)\n"
         "        os._exit(0)\n")
THREADS = ("import threading, time\n"
           "for _ in range(40):\n"
           "    threading.Thread(target=time.sleep, args=(20,), daemon=True).start()\n")


@pytest.mark.parametrize("code", [FORKS, THREADS], ids=["forks", "threads"])
def test_refused_fork_or_thread_is_processes_naming_the_limit(code):
    _needs_cgroup("pids")
    r = run_python(code, limits=Limits(wall_s=30, processes=6))
    assert r.status is Status.PROCESSES, (r.status, r.reason, r.stderr[-500:])
    assert "process limit of 6" in r.reason and "refused" in r.reason


def test_program_that_copes_with_the_process_limit_passes_and_is_told():
    _needs_cgroup("pids")
    code = FORKS.replace("    if os.fork() == 0:", "    try:\n        pid = os.fork()\n    except OSError:\n"
                                                      "        break\n    if pid == 0:")
    r = run_python(code, limits=Limits(wall_s=30, processes=6))
    assert r.status is Status.PASSED and "process limit of 6" in r.reason, (r.status, r.reason, r.stderr[-500:])


def test_file_size_limit_is_named():
    r = run_python("open('f', 'wb').write(b'x' * 3 * 1024 * 1024)", limits=Limits(file_size_mb=2, wall_s=20))
    assert (r.status, r.signal) == (Status.CRASHED, "SIGXFSZ") and "file-size limit of 2 MB" in r.reason


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGSEGV", "SIGTERM"])
def test_bootstrap_ends_like_the_program_for_every_signal(sig):
    """The bootstrap re-raises the program's fatal signal on itself; SIGKILL's handler cannot be
    reset (the old code tried, raised, and exited 1)."""
    code = f"import sys; sys.path.insert(0, {os.path.dirname(_bootstrap.__file__)!r})\n" \
           f"import _bootstrap, signal\n_bootstrap._end_like({{'signal': int(signal.{sig})}})\n"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert p.returncode == -int(getattr(signal, sig)), p.stderr
