"""Start a multi-process job (``accelerate launch``) on a TCP port of its own, and say clearly why it failed.

A port picked by binding port 0 and closing the socket comes from the kernel's ephemeral range, the same
range every outgoing connection on the machine takes its local port from; between the pick and the moment
torch.distributed's rendezvous store binds it (seconds later, once the launcher has imported torch),
another process may hold it and the job dies with EADDRINUSE. So the port is drawn below the ephemeral
range, where the kernel never hands out a port by itself, and checked free just before the launch. A
listener that appears on it anyway is survived by accelerate (it switches to a port of its own); a
non-listening holder makes the store fail with EADDRINUSE: that one failure, recognised in the job's
output on the chosen port, is retried on a fresh port, a few times at most. Any other failure, and a job
that outlives its time limit, stops at once with the tail of the job's output.
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

# torch.distributed's store: "The server socket has failed to listen on any local network address. port:
# 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use" (older torch:
# "failed to bind to [::]:29500 (errno: 98 - Address already in use)"). Not accelerate's own warning
# "Port `29500` is already in use", after which it moves to a free port and the run goes on.
PORT_TAKEN = re.compile(r"EADDRINUSE|address already in use", re.IGNORECASE)
LOWEST_PORT = 20_000  # above the ports services usually claim
EPHEMERAL_FALLBACK = 32_768  # Linux's default start of the ephemeral range (macOS's starts at 49152)
TAIL_CHARS = 4_000
GRACE_S = 30.0  # after SIGTERM, time for torchrun to stop its workers before they are killed

# (command, environment, time limit in seconds) -> (exit code, stdout, stderr); raises
# subprocess.TimeoutExpired when the limit passes
Runner = Callable[[Sequence[str], Mapping[str, str] | None, float], tuple[int, str, str]]


class LaunchFailed(RuntimeError):
    """The job failed for a reason a relaunch would not cure, or the port stayed taken."""


@dataclass(frozen=True)
class Launched:
    stdout: str
    stderr: str
    port: int
    launches: int  # 1 unless the port was taken under the job


def ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (where outgoing connections take their ports)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return EPHEMERAL_FALLBACK


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def choose_port(rng: random.Random | None = None) -> int:
    """A port below the ephemeral range that nothing is bound to now (drawn at random, so two launches at
    once rarely draw the same one; ``SystemRandom`` because a test plugin may reseed ``random``)."""
    rng = rng or random.SystemRandom()
    high = min(ephemeral_start(), EPHEMERAL_FALLBACK)
    if high - LOWEST_PORT >= 1_000:
        for _ in range(200):
            port = rng.randrange(LOWEST_PORT, high)
            if _bindable(port):
                return port
    with socket.socket() as s:  # a machine whose ephemeral range starts low: the kernel's pick
        s.bind(("", 0))
        return s.getsockname()[1]


def port_taken(output: str, port: int) -> bool:
    """Whether ``output`` reports that ``port`` was already in use when the job tried to bind it."""
    number = re.compile(rf"(?<!\d){port}(?!\d)")
    return any(PORT_TAKEN.search(line) and number.search(line) for line in output.splitlines())


def _text(x: str | bytes | None) -> str:
    return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")


def tail(stdout: str | bytes | None, stderr: str | bytes | None, chars: int = TAIL_CHARS) -> str:
    """The last ``chars`` characters of the job's stderr (and of its stdout, when it printed any)."""
    out, err = _text(stdout)[-chars:], _text(stderr)[-chars:]
    head = f"--- stdout (last {chars} characters) ---\n{out}\n" if out.strip() else ""
    return f"{head}--- stderr (last {chars} characters) ---\n{err}"


def run_job(cmd: Sequence[str], env: Mapping[str, str] | None, timeout_s: float) -> tuple[int, str, str]:
    """Run ``cmd`` in a session of its own; past ``timeout_s`` stop it (SIGTERM: torchrun then stops its
    workers, which run in sessions of their own; SIGKILL after :data:`GRACE_S`) and raise TimeoutExpired
    carrying what it had printed."""
    proc = subprocess.Popen(list(cmd), env=None if env is None else dict(env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        pass
    out = err = None
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            out, err = proc.communicate(timeout=GRACE_S)
            break
        except subprocess.TimeoutExpired as exc:  # a worker still holds the pipes: keep what was read
            out, err = exc.stdout, exc.stderr
    raise subprocess.TimeoutExpired(list(cmd), timeout_s, output=_text(out), stderr=_text(err))


def launch(command: Callable[[int], Sequence[str]], *, timeout_s: float, env: Mapping[str, str] | None = None,
           max_launches: int = 3, run: Runner = run_job, pick_port: Callable[[], int] = choose_port,
           ) -> Launched:
    """Run ``command(port)`` until it exits 0; relaunch on a fresh port only when the job's output says
    its port was already in use (at most ``max_launches`` launches). Raises :class:`LaunchFailed` naming
    the failure, with the tail of the job's output, for a time-out or any other non-zero exit."""
    for n in range(1, max_launches + 1):
        port = pick_port()
        cmd = list(command(port))
        try:
            code, out, err = run(cmd, env, timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise LaunchFailed(f"the job did not finish within {timeout_s:g} s (launch {n}, port {port}): "
                               f"stopped; what it printed:\n{tail(exc.stdout, exc.stderr)}") from None
        if code == 0:
            return Launched(out, err, port, n)
        if not port_taken(err + "\n" + out, port):
            raise LaunchFailed(f"the job exited with code {code} (launch {n}, port {port}); not the port "
                               f"race, so not relaunched:\n{tail(out, err)}")
    raise LaunchFailed(f"port already in use on each of {max_launches} launches (last port {port}):\n"
                       f"{tail(out, err)}")
