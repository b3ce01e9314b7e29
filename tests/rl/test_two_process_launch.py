"""The launch rule of the two-process TRL test: relaunch only when the job's port was taken under it."""

from __future__ import annotations

import datetime
import socket
import subprocess
import sys
import time

import pytest
from two_process_launch import LaunchFailed, choose_port, ephemeral_start, launch, port_taken, run_job

# torch 2.x's store, when another process holds its port (recorded from a real bind, see the test below)
RACE = ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
        "address. port: {port}, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use")


class FakeLauncher:
    """Stands in for ``accelerate launch``: answers each launch from a script of (exit code, stderr)."""

    def __init__(self, *script: tuple[int, str] | Exception) -> None:
        self.script, self.ports = list(script), []

    def command(self, port: int) -> list[str]:
        self.ports.append(port)
        return ["accelerate", "launch", "--main_process_port", str(port)]

    def __call__(self, cmd, env, timeout_s):
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        code, err = step
        return code, "", err.format(port=cmd[-1])


def _ports():
    return iter(range(21_000, 21_100)).__next__


def test_port_race_once_then_success_is_relaunched_on_a_fresh_port() -> None:
    fake = FakeLauncher((1, "Traceback ...\n" + RACE + "\n"), (0, "done"))
    got = launch(fake.command, timeout_s=5, run=fake, pick_port=_ports())
    assert got.launches == 2 and got.port == fake.ports[1] != fake.ports[0] and got.stderr == "done"


def test_any_other_failure_is_not_relaunched_and_the_message_names_it() -> None:
    fake = FakeLauncher((1, "ValueError: repetition_penalty=1.1 is not supported"), (0, "done"))
    with pytest.raises(LaunchFailed) as err:
        launch(fake.command, timeout_s=5, run=fake, pick_port=_ports())
    msg = str(err.value)
    assert "exited with code 1" in msg and "not the port race" in msg
    assert "ValueError: repetition_penalty=1.1 is not supported" in msg  # the job's own stderr tail
    assert len(fake.ports) == 1


def test_address_in_use_on_another_port_is_not_the_race() -> None:
    """EADDRINUSE about some other port (a server the job starts itself) is the job's failure: no relaunch."""
    fake = FakeLauncher((1, RACE.replace("{port}", "8080")), (0, "done"))
    with pytest.raises(LaunchFailed, match="not the port race"):
        launch(fake.command, timeout_s=5, run=fake, pick_port=_ports())
    assert len(fake.ports) == 1
    assert not port_taken("UserWarning: Port `21000` is already in use. Accelerate will attempt ...", 21_000)
    assert not port_taken(RACE.format(port=210001), 21_000)  # the number must be the port itself


def test_timeout_fails_at_once_with_the_jobs_stderr_tail() -> None:
    fake = FakeLauncher(subprocess.TimeoutExpired(["accelerate"], 5, output="", stderr="rank 1 waiting in gloo"),
                        (0, "done"))
    with pytest.raises(LaunchFailed) as err:
        launch(fake.command, timeout_s=5, run=fake, pick_port=_ports())
    assert "did not finish within 5 s" in str(err.value) and "rank 1 waiting in gloo" in str(err.value)
    assert len(fake.ports) == 1


def test_a_port_that_stays_taken_gives_up_after_a_few_launches() -> None:
    fake = FakeLauncher(*[(1, RACE)] * 5)
    with pytest.raises(LaunchFailed, match="port already in use on each of 3 launches"):
        launch(fake.command, timeout_s=5, run=fake, pick_port=_ports())
    assert len(fake.ports) == 3 == len(set(fake.ports))


def test_torchs_own_message_for_a_taken_port_is_recognised() -> None:
    torch_distributed = pytest.importorskip("torch.distributed")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(Exception) as err:
            torch_distributed.TCPStore("127.0.0.1", port, 1, True, timeout=datetime.timedelta(seconds=5))
    assert port_taken(f"{type(err.value).__name__}: {err.value}", port)
    assert not port_taken(f"{type(err.value).__name__}: {err.value}", port + 1)


def test_chosen_port_is_free_and_outside_the_ephemeral_range() -> None:
    port, low = choose_port(), ephemeral_start()
    assert port < low or low < 21_000  # a machine whose ephemeral range starts low gets the kernel's pick
    with socket.socket() as s:
        s.bind(("", port))


def test_run_job_stops_a_job_past_its_limit_and_keeps_its_output() -> None:
    code = "import sys, time; print('rank 0 started', file=sys.stderr, flush=True); time.sleep(120)"
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as err:
        run_job([sys.executable, "-c", code], None, 3)
    assert time.monotonic() - start < 30 and "rank 0 started" in err.value.stderr
