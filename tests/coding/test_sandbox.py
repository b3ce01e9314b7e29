"""The sandbox against hostile programs: each is contained, reported, and leaves the host untouched."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest

from divelab.sandbox import Limits, Status, enforcement, run_python
from divelab.sandbox.runner import _pids_of_uid


def test_normal_program_passes_with_stdin_files_argv():
    r = run_python(
        "import sys\nprint(open('data.txt').read().strip(), sys.stdin.read().strip(), sys.argv[1:])",
        stdin="from-stdin\n", files={"data.txt": "from-file"}, argv=["a1"],
    )
    assert r.status is Status.PASSED and r.passed
    assert r.stdout.strip() == "from-file from-stdin ['a1']"
    assert r.returncode == 0 and r.cpu_s >= 0 and r.max_rss_kb > 0


def test_exception_is_failed_with_traceback():
    r = run_python("raise ValueError('boom')")
    assert r.status is Status.FAILED and r.returncode == 1
    assert "ValueError: boom" in r.stderr


def test_infinite_loop_wall_timeout_kills_group():
    r = run_python("while True:\n    pass", limits=Limits(wall_s=1.0, cpu_s=30))
    assert r.status is Status.TIMEOUT and "wall-clock" in r.reason
    assert r.wall_s < 10


def test_cpu_limit():
    r = run_python("while True:\n    pass", limits=Limits(wall_s=30, cpu_s=1))
    assert r.status is Status.TIMEOUT and "CPU" in r.reason
    assert r.cpu_s >= 0.5  # CPU accounting in VMs differs a little from the rlimit's


def test_memory_hog_is_stopped():
    # generous time limits, so on a loaded machine only the memory limit can end it
    r = run_python("x = []\nwhile True:\n    x.append(bytearray(10**7))",
                   limits=Limits(memory_mb=200, wall_s=60, cpu_s=60))
    assert r.status is Status.MEMORY, (r.status, r.reason, r.stderr[-300:])
    assert r.max_rss_kb < 260 * 1024


def test_fork_loop_is_bounded_and_cleaned_up():
    # Bounded in the program itself too (at most 60 forks), so the test can never hurt the machine.
    code = (
        "import os, time\n"
        "n = 0\n"
        "for _ in range(60):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        os.setsid()\n"  # try to escape the process group
        "        time.sleep(30)\n"
        "        os._exit(0)\n"
        "    n += 1\n"
        "print(n)\n"
    )
    r = run_python(code, limits=Limits(processes=8, wall_s=10))
    assert r.status is Status.PASSED
    forks = int(r.stdout.strip())
    if r.enforced["nproc_enforced"]:
        assert forks < 8
    else:  # pragma: no cover - hosts where the limit cannot bind
        assert forks <= 60
    if r.enforced["uid_dropped"]:
        assert _pids_of_uid(r.enforced["uid"]) == []  # even the setsid() escapees are gone


def test_writing_outside_workdir(tmp_path: Path):
    tmp_path.chmod(0o755)
    target = tmp_path / "pwned.txt"
    stray = Path("/tmp") / f"divelab-stray-{uuid.uuid4().hex}"
    code = (
        "import os\n"
        "open('inside.txt', 'w').write('ok')\n"
        f"try:\n    open({str(target)!r}, 'w').write('x')\n    print('outside-written')\n"
        "except OSError as e:\n    print('outside-denied', type(e).__name__)\n"
        f"try:\n    open({str(stray)!r}, 'w').write('x')\n    print('tmp-written')\n"
        "except OSError:\n    print('tmp-denied')\n"
        "print(os.getcwd())\n"
    )
    r = run_python(code)
    assert r.status is Status.PASSED
    workdir = r.stdout.strip().splitlines()[-1]
    assert not Path(workdir).exists()  # the fresh work dir is removed afterwards
    assert not stray.exists()  # what it left in /tmp is removed too
    if r.enforced["uid_dropped"]:
        assert "outside-denied" in r.stdout
        assert not target.exists()


def test_socket_cannot_reach_host():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    code = (
        "import socket\n"
        f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    print('connected')\n"
        "except OSError as e:\n    print('blocked', type(e).__name__)\n"
    )
    try:
        r = run_python(code)
        with pytest.raises(OSError):  # nothing ever arrived on the host's listener
            server.accept()
    finally:
        server.close()
    assert r.status is Status.PASSED
    assert r.stdout.startswith("blocked")
    assert r.enforced["network"] in ("namespace", "user+net namespace", "audit-hook")


def test_environment_secrets_do_not_leak(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DIVELAB_TEST_SECRET", "hunter2-secret")
    code = (
        "import os\n"
        "print(os.environ.get('DIVELAB_TEST_SECRET'))\n"
        "try:\n    print(open(f'/proc/{os.getppid()}/environ', 'rb').read())\n"
        "except OSError as e:\n    print('denied', type(e).__name__)\n"
    )
    r = run_python(code)
    assert "hunter2-secret" not in r.stdout + r.stderr
    assert r.stdout.splitlines()[0] == "None"


def test_output_flood_is_bounded():
    r = run_python("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", limits=Limits(file_size_mb=1, wall_s=10))
    assert r.status is Status.CRASHED and "file-size" in r.reason
    assert len(r.stdout) <= 8192


def test_bad_arguments_are_clear():
    with pytest.raises(ValueError, match="wall_s"):
        Limits(wall_s=0)
    with pytest.raises(ValueError, match="memory_mb"):
        Limits(memory_mb=1)
    with pytest.raises(ValueError, match="relative paths"):
        run_python("pass", files={"../escape.txt": "x"})
    with pytest.raises(ValueError, match="env entries"):
        run_python("pass", env={"A=B": "x"})
    with pytest.raises(TypeError):
        run_python(b"print(1)")  # type: ignore[arg-type]


def test_enforcement_report_is_honest():
    e = enforcement()
    assert e["network"] in ("namespace", "user+net namespace", "audit-hook", "none")
    if os.geteuid() == 0 and not e["uid_dropped"]:  # pragma: no cover
        assert "NOT" in e["processes"]
