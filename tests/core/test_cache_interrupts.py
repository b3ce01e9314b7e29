"""Ctrl-C at random points of many cache writes leaves no temporary and no half-replaced entry.

A child process writes in a loop while a thread of its own sends SIGINT to its main thread at
random moments (some a few microseconds apart, so a second interrupt can land in the cleanup of
the first). Interrupts that land in the loop's own bookkeeping may end the child early; that is
fine, because the loop never holds a temporary there. What must hold whatever happened: no
``*.tmp`` sibling is left, and every entry on disk is whole (both of its files from one write).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CHILD = r'''
import importlib, random, signal, sys, threading, time

# a parent started in the background (nohup, CI) passes SIGINT on ignored: restore Ctrl-C
signal.signal(signal.SIGINT, signal.default_int_handler)
from pathlib import Path

cache = importlib.import_module(sys.argv[1])
root, kind, seed, n = Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
rng = random.Random(seed)
main = threading.main_thread().ident
stop = threading.Event()


def pester():
    while not stop.is_set():
        # mostly spaced, sometimes back to back: the second lands in the first one's cleanup
        time.sleep(rng.choice([0.0, 0.0, rng.uniform(0, 2e-4), rng.uniform(0, 2e-3)]))
        signal.pthread_kill(main, signal.SIGINT)


def write(i):
    if kind == "dir":
        with cache.atomic_dir(root / "entry") as tmp:
            (tmp / "a").write_text(str(i))
            (tmp / "b").write_text(str(i))
    elif kind == "file":
        cache.atomic_write_bytes(root / "file.bin", str(i).encode() * 64)
    else:  # a file written inside a directory being written: two temporaries at once
        with cache.atomic_dir(root / "entry") as tmp:
            (tmp / "a").write_text(str(i))
            cache.atomic_write_bytes(root / "file.bin", str(i).encode())
            (tmp / "b").write_text(str(i))


done = interrupted = 0
threading.Thread(target=pester, daemon=True).start()
while done < n:
    try:
        while done < n:
            done += 1
            try:
                write(done)
            except KeyboardInterrupt:
                interrupted += 1
    except KeyboardInterrupt:
        interrupted += 1
stop.set()
signal.signal(signal.SIGINT, signal.SIG_IGN)
print(done, interrupted)
'''


def _temporaries(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*") if p.name.endswith(".tmp"))


@pytest.mark.parametrize("kind", ["dir", "file", "nested"])
@pytest.mark.parametrize("seed", [0, 1])
def test_random_interrupts_leave_no_temporary_and_no_half_entry(tmp_path, kind, seed, module="divelab.cache"):
    proc = subprocess.run([sys.executable, "-c", CHILD, module, str(tmp_path), kind, str(seed), "600"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1, -2, 130), proc.stderr[-2000:]  # an interrupt may end the loop early
    assert _temporaries(tmp_path) == [], "temporaries left after interrupted writes"
    entry = tmp_path / "entry"
    if entry.exists():  # whole: both files, from the same write
        assert sorted(p.name for p in entry.iterdir()) == ["a", "b"]
        assert (entry / "a").read_text() == (entry / "b").read_text()
    if proc.returncode == 0:
        done, interrupted = map(int, proc.stdout.split())
        assert interrupted >= 20, f"only {interrupted} of {done} writes were interrupted: the test proved little"


SANDBOX_CHILD = r'''
import random, signal, sys, threading, time

signal.signal(signal.SIGINT, signal.default_int_handler)  # as above: never inherit an ignored Ctrl-C
from divelab.sandbox import Limits, run_python

rng = random.Random(int(sys.argv[1]))
main = threading.main_thread().ident
for i in range(int(sys.argv[2])):
    threading.Timer(rng.uniform(0.0, 0.4), signal.pthread_kill, (main, signal.SIGINT)).start()
    try:
        try:
            run_python("import time\ntime.sleep(30)", limits=Limits(wall_s=20))
        except KeyboardInterrupt:
            pass
        time.sleep(0.45)  # let a late timer fire here, outside the run
    except KeyboardInterrupt:
        pass
'''


def test_interrupted_sandbox_runs_leave_no_directory_and_no_process(tmp_path):
    """Ctrl-C at random moments of ``run_python`` (while its directories and cgroups are made, while
    the program runs, while they are removed): nothing of the runs is left."""
    import os
    import tempfile

    tmpdir = Path(tempfile.mkdtemp(prefix="divelab-intr-", dir="/tmp"))
    tmpdir.chmod(0o755)  # the sandbox's fresh uid must traverse it
    try:
        proc = subprocess.run([sys.executable, "-c", SANDBOX_CHILD, "3", "12"], capture_output=True, text=True,
                              timeout=300, env={**os.environ, "TMPDIR": str(tmpdir)})
        assert proc.returncode in (0, 1, -2, 130), proc.stderr[-2000:]
        assert sorted(os.listdir(tmpdir)) == [], "sandbox directories left after interrupted runs"
        # a run's bootstrap is named by its config under TMPDIR
        assert [p for p in os.listdir("/proc") if p.isdigit() and str(tmpdir) in _cmdline(p)] == []
    finally:
        import shutil

        shutil.rmtree(tmpdir, ignore_errors=True)


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""
