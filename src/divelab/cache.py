"""The divelab cache: ``$DIVELAB_CACHE`` (default ``~/.cache/divelab``).

Entries are directories keyed by a hash of what produced them (config + data hash). Every write
goes to a temporary sibling and is renamed into place, so an interrupt never leaves a
half-written entry that a later run would trust. Ctrl-C is held back (:mod:`divelab.interrupts`)
while a temporary is created, renamed or removed, so an interrupt at any point leaves neither a
temporary nor a half-replaced entry; a temporary orphaned by SIGKILL (no cleanup runs) carries its
writer's pid and is removed by the next writer of the same entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from divelab.interrupts import Guard, guards_exit


def cache_root() -> Path:
    root = Path(os.environ.get("DIVELAB_CACHE", Path.home() / ".cache" / "divelab")).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    return root


def stable_hash(obj: Any, length: int = 16) -> str:
    """Hash of a JSON-serialisable object, independent of dict order."""
    data = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(data).hexdigest()[:length]


def entry_path(kind: str, key: str) -> Path:
    """Where the cache entry ``key`` of ``kind`` lives: ``cache_root()/KIND/KEY``. An entry is a
    directory (a model, a tokenizer) or a single file whose key carries its suffix (``KEY.npy``)."""
    return cache_root() / kind / key


class atomic_dir:  # noqa: N801 - used as a function: ``with atomic_dir(final) as tmp:``
    """Yield a temporary directory; on success it is renamed to ``final`` (replacing any old one).
    On an exception (or Ctrl-C, at any point) the temporary directory is removed and ``final`` is
    untouched: a class rather than a generator, so no library code runs between the body's end and
    the cleanup, and Ctrl-C is held back while the temporary is created, committed or removed."""

    def __init__(self, final: Path) -> None:
        self.final = Path(final)
        self.tmp: Path | None = None
        self._guard: Guard | None = None

    def __enter__(self) -> Path:
        self.final.parent.mkdir(parents=True, exist_ok=True)
        self._guard = Guard()  # holds from here: a Ctrl-C now is raised once the cleanup is sure to run
        try:
            self.tmp = _create_temporary(self.final, os.mkdir)
            self._guard.arm()  # the body may be interrupted; __exit__ removes the temporary
        except BaseException:
            self._guard.hold()
            _remove(self.tmp)
            self._guard.close()
            raise
        return self.tmp

    @guards_exit
    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        self._guard.hold()  # first: the cleanup below must not be interrupted
        try:
            if exc_type is None:
                _replace_dir(self.tmp, self.final)
                clean_stale_temporaries(self.final)
        except BaseException:
            _remove(self.tmp)
            raise
        finally:
            if exc_type is not None:
                _remove(self.tmp)
            self._guard.close()  # a Ctrl-C held during the commit is raised here, after it


def _replace_dir(tmp: Path, final: Path) -> None:
    """Rename ``tmp`` to ``final``; an old ``final`` is moved aside first (one rename) and removed
    after, so ``final`` is never a half-deleted directory."""
    old = None
    if final.exists():
        old = _create_temporary(final, lambda name: os.rename(final, name))
    try:
        os.replace(tmp, final)
    except BaseException:
        if old is not None:
            os.rename(old, final)  # put the old entry back
        raise
    _remove(old)


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
    """Write ``data`` to a temporary sibling and rename it to ``path``. Ctrl-C is held back for the
    whole (short) write, so ``path`` is either the old file or the new one and no temporary stays."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = None
    with Guard():  # holds throughout; a Ctrl-C is raised when it closes, after the write
        try:
            # 0o666 & ~umask, like any file (mkstemp's 0600 would hide a report from a web server)
            tmp = _create_temporary(path, lambda name: os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                                                                         0o666)))
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except BaseException:
            _remove(tmp)
            raise
        clean_stale_temporaries(path)


def _create_temporary(final: Path, make: Any) -> Path:
    """A fresh sibling name of ``final`` (".NAME.PID.RANDOM.tmp"), passed to ``make`` to create it;
    retried on a name clash. The caller holds Ctrl-C back, so a created temporary always comes back."""
    for _ in range(100):
        name = final.parent / f"{_tmp_prefix(final)}{secrets.token_hex(6)}.tmp"
        try:
            make(name)
            return name
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary beside {final} (100 names taken)")


def _remove(tmp: Path | None) -> None:
    if tmp is None:
        return
    if tmp.is_dir() and not tmp.is_symlink():
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.unlink(missing_ok=True)


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
            _remove(tmp)
            removed.append(tmp)
    return removed


def glob_escape(name: str) -> str:
    import glob

    return glob.escape(name)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
