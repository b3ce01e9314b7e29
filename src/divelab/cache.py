"""The divelab cache: ``$DIVELAB_CACHE`` (default ``~/.cache/divelab``).

Entries are directories keyed by a hash of what produced them (config + data hash). Every write
goes to a temporary sibling and is renamed into place, so an interrupt never leaves a
half-written entry that a later run would trust.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def cache_root() -> Path:
    root = Path(os.environ.get("DIVELAB_CACHE", Path.home() / ".cache" / "divelab")).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    return root


def stable_hash(obj: Any, length: int = 16) -> str:
    """Hash of a JSON-serialisable object, independent of dict order."""
    data = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(data).hexdigest()[:length]


def entry_path(kind: str, key: str) -> Path:
    return cache_root() / kind / key


@contextmanager
def atomic_dir(final: Path) -> Iterator[Path]:
    """Yield a temporary directory; on success it is renamed to ``final`` (replacing any old one).
    On an exception (or Ctrl-C) the temporary directory is removed and ``final`` is untouched."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=_tmp_prefix(final), suffix=".tmp", dir=final.parent))
    try:
        yield tmp
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    clean_stale_temporaries(final)


@contextmanager
def lock(path: Path) -> Iterator[None]:
    """An exclusive lock beside ``path`` (``path.lock``, fcntl): two processes, or two Ray workers
    on one machine, building the same cache entry — the second waits, then finds it built."""
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=_tmp_prefix(path), suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        # mkstemp creates 0600; a written file should read like any other (0644 under umask 022),
        # so a web server or another user can open a report.
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    clean_stale_temporaries(path)


# A temporary's name carries its writer's pid (".NAME.PID.RANDOM.tmp"), so a later writer can tell
# one orphaned by a killed process (SIGKILL skips every cleanup) from one a live writer still owns.
LEGACY_STALE_S = 3600.0  # temporaries from before the pid was in the name: stale after an hour


def _tmp_prefix(final: Path) -> str:
    return f".{final.name}.{os.getpid()}."


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def clean_stale_temporaries(final: Path) -> list[Path]:
    """Remove temporaries of ``final`` left by writers that no longer run; returns what was removed.
    A temporary whose writer is alive (a concurrent run) is never touched."""
    import time

    final = Path(final)
    removed = []
    for tmp in final.parent.glob(f".{glob_escape(final.name)}.*.tmp"):
        middle = tmp.name[len(final.name) + 2:-len(".tmp")]
        pid_text = middle.split(".", 1)[0]
        if pid_text.isdigit() and "." in middle:
            stale = not _alive(int(pid_text))
        else:
            try:
                stale = time.time() - tmp.stat().st_mtime > LEGACY_STALE_S
            except FileNotFoundError:
                continue
        if stale:
            if tmp.is_dir():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def glob_escape(name: str) -> str:
    import glob

    return glob.escape(name)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
