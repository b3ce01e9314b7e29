"""Child-side start-up of a sandboxed run (stdlib only; never imported by divelab itself).

Run as ``python -I _bootstrap.py CONFIG.json``. It reads the program and its config *before*
giving anything up, then, in this order: joins the run's cgroups (whole-run memory and process
totals), makes new network, IPC, mount and PID namespaces, puts a private size-limited tmpfs under
``/tmp``, ``/var/tmp``, ``/dev/shm`` and ``/run`` (the work directory lives in it), and forks the
PID namespace's init — a reaper whose exit takes every descendant with it. The reaper forks the
program, which moves into the work directory, sets the resource limits, drops to an unprivileged
uid (when started as root), sets ``PR_SET_NO_NEW_PRIVS`` (no set-uid program can gain privileges),
installs a socket-blocking audit hook if no namespace could be made, and only then executes the
untrusted code. What was achieved is written to ``meta.json`` beside the config (a directory only
the parent can read) before anything untrusted runs; the reaper writes the program's exit status
and CPU time there too (``status.json``, which the parent classifies), and this process ends the
same way the program did.
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
CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
PRIVATE_DIRS = ("/var/tmp", "/dev/shm", "/run")  # bound onto subdirectories of the private /tmp
# No process can install a handler for these, so ending "like the program" must not try to reset them.
UNCATCHABLE = (signal.SIGKILL, signal.SIGSTOP)


def _unshare(flags):
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.unshare(flags) == 0
    except Exception:  # noqa: BLE001 - no libc / no symbol: report "not isolated"
        return False


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option, arg):
    try:
        return _libc().prctl(option, arg, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001
        return False


def _mount(source, target, fstype, flags, data=None):
    libc = _libc()
    enc = [x.encode() if isinstance(x, str) else x for x in (source, target, fstype, data)]
    return libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]) == 0


def _join_cgroups(groups):
    """Join each ``{controller: directory}`` cgroup; returns the controllers joined."""
    joined = []
    for controller, path in groups.items():
        try:
            with open(os.path.join(path, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            joined.append(controller)
        except OSError:
            pass
    return joined


def _read_tree(root):
    """Every file under the work directory, kept in memory while the private tmpfs replaces it."""
    files = []
    for dirpath, _, names in os.walk(root):
        for n in names:
            full = os.path.join(dirpath, n)
            with open(full, "rb") as f:
                files.append((os.path.relpath(full, root), f.read()))
    return files


def _hidden(path):
    return any(path == d or path.startswith(d + "/") for d in ("/tmp", *PRIVATE_DIRS))


def _private_filesystem(workdir, size_mb, uid, readable=()):
    """A fresh tmpfs of ``size_mb`` on /tmp; /var/tmp, /dev/shm and /run become directories of it
    (bind mounts: one quota for everything the run writes), and the work directory is recreated
    inside it. Nothing written there outlives the mount namespace."""
    workdir = os.path.abspath(workdir)
    files = _read_tree(workdir)
    # Host paths the run must still read (the interpreter's environment, when it lives under /tmp):
    # hold them open now, and bind them back read-only once the private tmpfs hides them.
    keep = []
    for path in sorted({os.path.abspath(p) for p in readable}):
        if _hidden(path) and os.path.isdir(path) and not _hidden_by_workdir(path, workdir):
            keep.append((path, os.open(path, os.O_PATH | os.O_DIRECTORY)))
    if not _mount(None, "/", None, MS_REC | MS_PRIVATE):
        return None
    opts = f"size={int(size_mb)}m,mode=1777"
    if not _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts):
        return None
    bound = ["/tmp"]
    for d in PRIVATE_DIRS:
        if os.path.isdir(d) and not os.path.islink(d):
            sub = "/tmp/.divelab" + d.replace("/", "-")
            os.mkdir(sub)
            os.chmod(sub, 0o1777)
            if _mount(sub, d, None, MS_BIND | MS_REC):
                bound.append(d)
    if not (workdir == "/tmp" or workdir.startswith("/tmp/")):
        sub = "/tmp/.divelab-work"
        os.mkdir(sub)
        if not _mount(sub, workdir, None, MS_BIND):
            return None
    for path, fd in keep:
        os.makedirs(path, exist_ok=True)
        if _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC):
            _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_REC)
            bound.append(f"{path} (read-only)")
        os.close(fd)
    os.makedirs(workdir, exist_ok=True)
    for rel, data in files:
        target = os.path.join(workdir, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(data)
    if uid is not None:
        for dirpath, dirs, names in os.walk(workdir):
            for n in [*dirs, *names]:
                os.chown(os.path.join(dirpath, n), uid, uid)
        os.chown(workdir, uid, uid)
    return bound


def _hidden_by_workdir(path, workdir):
    return path == workdir or path.startswith(workdir + "/")


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
    # the control directory may be hidden by the private /tmp below: keep a handle on it
    ctrl_fd = os.open(os.path.dirname(config_path), os.O_RDONLY | os.O_DIRECTORY)
    meta = {"network": "none", "uid": os.getuid(), "nproc_enforced": False, "ipc": "shared",
            "filesystem": "shared", "pid_namespace": False, "no_new_privs": False, "cgroups": []}
    root = os.geteuid() == 0
    iso = cfg.get("isolation") or {}
    uid = cfg.get("uid")
    meta["cgroups"] = _join_cgroups(cfg.get("cgroups", {}))  # before anything forks

    if cfg["isolate_network"]:
        if root and _unshare(CLONE_NEWNET):
            meta["network"] = "namespace"
        elif not root and _unshare(CLONE_NEWUSER | CLONE_NEWNET):
            meta["network"] = "user+net namespace"
        else:
            meta["network"] = "audit-hook"
    if root and iso.get("ipc") and _unshare(CLONE_NEWIPC):
        meta["ipc"] = "namespace"
    if root and iso.get("disk_mb") and _unshare(CLONE_NEWNS):
        bound = _private_filesystem(cfg["workdir"], iso["disk_mb"], uid, iso.get("readable", ()))
        if bound:
            meta["filesystem"] = f"private tmpfs of {iso['disk_mb']} MB over {', '.join(bound)}"
    pid_ns = root and iso.get("pid") and _unshare(CLONE_NEWPID)
    meta["pid_namespace"] = bool(pid_ns)
    if uid is not None:
        meta["uid"] = uid
    lim = cfg["limits"]
    if lim.get("processes"):
        # The kernel never applies RLIMIT_NPROC to real uid 0, so it only binds after the uid drop.
        meta["nproc_enforced"] = uid is not None or os.getuid() != 0
    # Inherited by every descendant: from here on no exec can raise privileges (set-uid bits and
    # file capabilities are ignored). Root can still drop its own uid below.
    meta["no_new_privs"] = _prctl(PR_SET_NO_NEW_PRIVS, 1)
    fd = os.open("meta.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600, dir_fd=ctrl_fd)
    with os.fdopen(fd, "w") as f:
        json.dump(meta, f)

    if not pid_ns:
        _run_program(cfg, code, meta)
        return
    init = os.fork()  # the first child of a new PID namespace is its init
    if init == 0:
        _init(cfg, code, meta, ctrl_fd)
        return  # only the program's process gets here: a normal interpreter exit (atexit, threads)
    _, wstatus = os.waitpid(init, 0)
    status = None
    try:
        fd = os.open("status.json", os.O_RDONLY, dir_fd=ctrl_fd)
        with os.fdopen(fd) as f:
            status = json.load(f)
    except (OSError, ValueError):
        pass
    if status is None:  # init itself died (killed from outside): report that
        status = _ending(wstatus)
    _end_like(status)


def _ending(wstatus, rusage=None):
    """How a process ended, as recorded in ``status.json``: its signal or exit code, and its CPU time."""
    status = {"signal": os.WTERMSIG(wstatus)} if os.WIFSIGNALED(wstatus) else {"code": os.WEXITSTATUS(wstatus)}
    if rusage is not None:
        status["cpu_s"] = rusage.ru_utime + rusage.ru_stime
    return status


def _end_like(status):
    """Exit the way the program did, so the parent classifies it as before."""
    sys.stdout.flush()
    if "signal" in status:
        sig = int(status["signal"])
        if sig not in UNCATCHABLE:  # SIGKILL's action is fixed (resetting it raises); it ends us anyway
            signal.signal(sig, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # a signal that cannot end us (not expected)
    os._exit(int(status.get("code", 1)))


def _init(cfg, code, meta, ctrl_fd):
    """PID 1 of the run: mount its own /proc, fork the program, reap everything, record how the
    program ended, exit. The kernel then kills every process left in the namespace."""
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the parent killed (wall clock): take all down
        if meta["filesystem"] != "shared":
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV)
        program = os.fork()
        if program == 0:
            _run_program(cfg, code, meta)
            os._exit(0)
        while True:
            pid, wstatus, rusage = os.wait4(-1, 0)
            if pid == program:
                break
        status = _ending(wstatus, rusage)
        fd = os.open("status.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600, dir_fd=ctrl_fd)
        with os.fdopen(fd, "w") as f:
            json.dump(status, f)
    finally:
        os._exit(0)


def _run_program(cfg, code, meta):
    uid = cfg.get("uid")
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
    if lim.get("processes"):
        # With a pids cgroup the cgroup binds first (the rlimit one process later is a backstop), so the
        # parent can count the forks it refused (pids.events) and name the limit when the run ends.
        nproc = int(lim["processes"]) + ("pids" in meta["cgroups"])
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
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
            sys.stdout.flush()  # what the program printed before failing is part of its output
            traceback.print_exc()
            sys.stderr.flush()
        except MemoryError:
            os.write(2, MEMORY_MARKER)
            os._exit(MEMORY_EXIT_CODE)
        os._exit(1)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
