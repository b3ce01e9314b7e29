"""The sandbox's whole-run isolation: what used to get out, and now does not.

Each case ran out of the sandbox before it had namespaces, a private tmpfs, cgroups and
``PR_SET_NO_NEW_PRIVS``: a set-uid program outliving the run, SysV shared memory pinning host RAM,
a host Unix socket reached, files and memory adding up over per-process limits, files left in
world-writable directories. Needs root (the sandbox's isolation is root-only; as a normal user it
reports what it could not apply), so these skip otherwise.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from divelab.sandbox import Limits as _Limits
from divelab.sandbox import run_python
from divelab.sandbox.runner import enforcement


def Limits(**kw):  # noqa: N802 - stands in for the class
    # DIVELAB_SANDBOX_OLD=1 runs every case with the whole-run isolation off: each then fails, which
    # is what the sandbox did before it had namespaces, a private tmpfs and cgroups.
    return _Limits(**kw, isolate=not os.environ.get("DIVELAB_SANDBOX_OLD"))


pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="whole-run isolation needs root")


def _needs(key: str, value_part: str) -> None:
    if os.environ.get("DIVELAB_SANDBOX_OLD"):  # to show what these tests catch: run without isolation
        return
    got = str(enforcement().get(key, ""))
    if value_part not in got:
        pytest.skip(f"this host does not provide {key}: {got}")


@pytest.fixture
def suid_dir():
    # outside /tmp (private inside the sandbox) and traversable by the sandbox's fresh uid
    d = Path(tempfile.mkdtemp(prefix="divelab-suid-", dir="/opt" if os.path.isdir("/opt") else "/"))
    d.chmod(0o755)
    for name in ("sleep", "id"):
        shutil.copy(shutil.which(name), d / name)
        (d / name).chmod(0o4755)  # set-uid root
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _procs_running(exe: Path) -> list[int]:
    out = []
    for e in os.scandir("/proc"):
        if e.name.isdigit():
            try:
                if os.readlink(f"/proc/{e.name}/exe") == str(exe):
                    out.append(int(e.name))
            except OSError:
                pass
    return out


def test_setuid_program_gains_nothing_and_does_not_survive(suid_dir):
    _needs("process_survival", "PID namespace")
    code = (f"import subprocess\n"
            f"print(subprocess.run([{str(suid_dir / 'id')!r}, '-u'], capture_output=True, text=True).stdout)\n"
            f"subprocess.Popen([{str(suid_dir / 'sleep')!r}, '300'], start_new_session=True)\n")
    r = run_python(code, limits=Limits(wall_s=20))
    assert r.passed, r.stderr
    assert r.stdout.strip() != "0", "a set-uid program gained root inside the sandbox"
    time.sleep(0.2)
    assert _procs_running(suid_dir / "sleep") == []


def _shm_ids() -> set[str]:
    try:
        return {line.split()[1] for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]}
    except OSError:
        return set()


def test_sysv_shared_memory_dies_with_the_run():
    _needs("sysv_ipc", "IPC namespace")
    code = ("import ctypes\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "libc.shmat.restype = ctypes.c_void_p\n"
            "sid = libc.shmget(0, 64 * 1024 * 1024, 0o1000 | 0o600)\n"
            "addr = libc.shmat(sid, None, 0)\n"
            "ctypes.memset(addr, 1, 64 * 1024 * 1024)\n"
            "print(sid)\n")
    before = _shm_ids()
    r = run_python(code, limits=Limits(wall_s=20, memory_mb=256))
    assert r.passed, r.stderr
    assert int(r.stdout.strip()) >= 0  # the segment was made, inside the run's own IPC namespace
    assert _shm_ids() <= before  # and nothing of it is left on the host


def test_host_unix_sockets_are_out_of_reach(tmp_path):
    _needs("unix_sockets", "hidden")
    path = Path("/tmp") / f"divelab-host-{uuid.uuid4().hex[:8]}.sock"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(path))
    path.chmod(0o777)
    srv.listen(1)
    abstract = socket.socket(socket.AF_UNIX)
    name = f"\0divelab-{uuid.uuid4().hex[:8]}"
    abstract.bind(name)
    abstract.listen(1)
    try:
        code = ("import socket\n"
                f"for addr in ({str(path)!r}, {name!r}):\n"
                "    s = socket.socket(socket.AF_UNIX)\n"
                "    try:\n"
                "        s.connect(addr); print('CONNECTED')\n"
                "    except OSError as e:\n"
                "        print('blocked', type(e).__name__)\n")
        r = run_python(code, limits=Limits(wall_s=20))
        assert r.passed, r.stderr
        assert "CONNECTED" not in r.stdout and r.stdout.count("blocked") == 2
    finally:
        srv.close()
        abstract.close()
        path.unlink(missing_ok=True)


def test_files_add_up_to_one_disk_quota_and_leave_nothing_behind():
    _needs("total_disk", "private tmpfs")
    tag = uuid.uuid4().hex[:8]
    code = (f"import os\n"
            f"total = 0\n"
            f"for d in ('.', '/tmp', '/var/tmp', '/dev/shm'):\n"
            f"    for i in range(4):\n"
            f"        try:\n"
            f"            with open(os.path.join(d, 'leftover-{tag}-%d' % i), 'wb') as f:\n"
            f"                f.write(b'x' * 8 * 1024 * 1024)\n"
            f"            total += 8\n"
            f"        except OSError:\n"
            f"            pass\n"
            f"print(total)\n")
    r = run_python(code, limits=Limits(wall_s=30, disk_mb=48, file_size_mb=16, memory_mb=512, total_memory_mb=512))
    assert r.passed, r.stderr
    assert int(r.stdout.strip()) <= 48  # per-file caps of 16 MB would have allowed 128 MB
    for d in ("/tmp", "/var/tmp", "/dev/shm"):
        assert not [n for n in os.listdir(d) if tag in n], f"the run left files in {d}"


def test_memory_of_all_processes_together_is_capped():
    _needs("total_memory", "enforced")
    code = ("import os\n"
            "kids = []\n"
            "for _ in range(3):\n"
            "    pid = os.fork()\n"
            "    if pid == 0:\n"
            "        b = bytearray(120 * 1024 * 1024)\n"
            "        for i in range(0, len(b), 4096): b[i] = 1\n"
            "        import time; time.sleep(2); os._exit(0)\n"
            "    kids.append(pid)\n"
            "print([os.waitstatus_to_exitcode(os.waitpid(k, 0)[1]) for k in kids])\n")
    # each child is within its own 200 MB address space; three together exceed 200 MB in total
    r = run_python(code, limits=Limits(wall_s=30, memory_mb=200, total_memory_mb=200, disk_mb=16))
    if r.passed:
        codes = eval(r.stdout.strip())  # noqa: S307 - our own program's printed list of ints
        assert -9 in codes, f"three children used 360 MB under a 200 MB run total: {codes}"
    else:
        assert r.status.value in ("memory", "crashed"), r.reason


def test_interpreter_environment_under_tmp_stays_readable_not_writable(monkeypatch):
    """A virtualenv in a clone under /tmp (as CI may have) is hidden by the private /tmp unless it is
    bound back read-only; the program can import from it but not write to it."""
    import sys

    d = Path(tempfile.mkdtemp(prefix="divelab-venvsim-", dir="/tmp"))
    try:
        d.chmod(0o755)
        (d / "simmod.py").write_text("X = 42\n")
        (d / "simmod.py").chmod(0o644)
        monkeypatch.setattr(sys, "prefix", str(d))
        code = (f"import sys; sys.path.append({str(d)!r}); import simmod; print(simmod.X)\n"
                f"try:\n    open({str(d)!r} + '/w', 'w'); print('WROTE')\nexcept OSError as e:\n    print('refused')\n")
        r = run_python(code, limits=Limits(wall_s=20))
        assert r.passed, r.stderr
        assert r.stdout.split() == ["42", "refused"]
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_output_printed_before_an_exception_is_kept():
    r = run_python("print('before')\nraise ValueError('boom')", limits=Limits(wall_s=20))
    assert r.status.value == "failed" and r.stdout == "before\n" and "boom" in r.stderr


def test_unix_socket_outside_the_private_dirs_is_reachable_only_when_world_writable():
    """A documented limit, pinned: the sandbox hides /tmp, /var/tmp, /dev/shm and /run, not the rest
    of the host filesystem, and a network namespace does not cover filesystem sockets. A socket
    elsewhere that any uid may write to is reachable; one only its owner may write to is not (the
    program runs as a fresh uid that owns nothing on the host)."""
    _needs("unix_sockets", "hidden")
    if not enforcement().get("uid_dropped"):
        pytest.skip("no uid drop on this host: the program runs as the caller and reaches the caller's sockets")
    d = Path(tempfile.mkdtemp(prefix="divelab-sock-", dir="/opt" if os.path.isdir("/opt") else "/"))
    servers = []
    try:
        d.chmod(0o755)
        for name, mode in (("open.sock", 0o777), ("owner-only.sock", 0o755)):
            srv = socket.socket(socket.AF_UNIX)
            srv.bind(str(d / name))
            (d / name).chmod(mode)
            srv.listen(1)
            servers.append(srv)
        code = ("import socket\n"
                f"for name in ('open.sock', 'owner-only.sock'):\n"
                "    s = socket.socket(socket.AF_UNIX)\n"
                "    try:\n"
                f"        s.connect({str(d)!r} + '/' + name); print(name, 'CONNECTED')\n"
                "    except OSError as e:\n"
                "        print(name, 'blocked', type(e).__name__)\n")
        r = run_python(code, limits=Limits(wall_s=20))
        assert r.passed, r.stderr
        assert r.stdout.splitlines() == ["open.sock CONNECTED", "owner-only.sock blocked PermissionError"]
        assert "NOT hidden" in enforcement()["unix_sockets"]  # and the host report says so
    finally:
        for srv in servers:
            srv.close()
        shutil.rmtree(d, ignore_errors=True)
