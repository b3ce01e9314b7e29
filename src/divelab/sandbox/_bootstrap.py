"""Child-side start-up of a sandboxed run (stdlib only; never imported by divelab itself).

Run as ``python -I _bootstrap.py CONFIG.json``. It reads the program and its config *before*
giving anything up, then, in this order: isolates the network (a new network namespace), moves
into the fresh work directory, sets the resource limits, drops to an unprivileged uid (when
started as root), installs a socket-blocking audit hook if no namespace could be made, and only
then executes the untrusted code. What it achieved is written to ``meta.json`` beside the config
(a directory only the parent can read) before privileges are dropped.
"""

import builtins
import ctypes
import json
import os
import resource
import signal
import sys

MEMORY_EXIT_CODE = 86
MEMORY_MARKER = b"\ndivelab-sandbox: MemoryError (memory limit reached)\n"
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000


def _unshare(flags):
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.unshare(flags) == 0
    except Exception:  # noqa: BLE001 - no libc / no symbol: report "not isolated"
        return False


def _block_sockets(event, args):
    # Audit hooks cannot be removed once installed, so the program cannot switch this off.
    if event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo"):
        raise PermissionError(f"divelab sandbox: network access blocked ({event})")


def main():
    config_path = sys.argv[1]
    with open(config_path) as f:
        cfg = json.load(f)
    with open(cfg["code_path"], encoding="utf-8") as f:
        code = f.read()
    meta = {"network": "none", "uid": os.getuid(), "nproc_enforced": False}

    if cfg["isolate_network"]:
        if os.geteuid() == 0 and _unshare(CLONE_NEWNET):
            meta["network"] = "namespace"
        elif os.geteuid() != 0 and _unshare(CLONE_NEWUSER | CLONE_NEWNET):
            meta["network"] = "user+net namespace"
        else:
            meta["network"] = "audit-hook"

    os.chdir(cfg["workdir"])
    lim = cfg["limits"]
    if lim.get("cpu_s"):
        cpu = int(lim["cpu_s"])
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU first, SIGKILL a second later
    if lim.get("memory_mb"):
        nbytes = int(lim["memory_mb"]) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))
    if lim.get("file_size_mb") is not None:
        nbytes = int(lim["file_size_mb"] * 1024 * 1024)
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    if lim.get("open_files"):
        resource.setrlimit(resource.RLIMIT_NOFILE, (int(lim["open_files"]),) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Python ignores SIGXFSZ (writes then fail with EFBIG); restore the default so a file/output
    # flood ends the run with a signal the parent can name.
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    uid = cfg.get("uid")
    if lim.get("processes"):
        resource.setrlimit(resource.RLIMIT_NPROC, (int(lim["processes"]),) * 2)
        # The kernel never applies RLIMIT_NPROC to real uid 0, so it only binds after the uid drop.
        meta["nproc_enforced"] = uid is not None or os.getuid() != 0
    if uid is not None:
        meta["uid"] = uid
    with open(os.path.join(os.path.dirname(config_path), "meta.json"), "w") as f:
        json.dump(meta, f)
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    if meta["network"] == "audit-hook":
        sys.addaudithook(_block_sockets)

    sys.argv = ["main.py", *cfg.get("argv", [])]
    sys.path.insert(0, cfg["workdir"])
    namespace = {"__name__": "__main__", "__file__": "main.py", "__builtins__": builtins}
    try:
        exec(compile(code, "main.py", "exec"), namespace)
    except MemoryError:
        os.write(2, MEMORY_MARKER)
        os._exit(MEMORY_EXIT_CODE)
    except SystemExit:
        raise
    except BaseException:
        import traceback

        try:
            traceback.print_exc()
            sys.stderr.flush()
        except MemoryError:
            os.write(2, MEMORY_MARKER)
            os._exit(MEMORY_EXIT_CODE)
        os._exit(1)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
