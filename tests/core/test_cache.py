import pytest

from divelab.cache import atomic_dir, atomic_write_text, cache_root, stable_hash


def test_cache_root_follows_env(tmp_path, monkeypatch):
    monkeypatch.setenv("DIVELAB_CACHE", str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c" and (tmp_path / "c").is_dir()


def test_stable_hash_ignores_key_order():
    assert stable_hash({"a": 1, "b": [1, 2]}) == stable_hash({"b": [1, 2], "a": 1})
    assert stable_hash({"a": 1}) != stable_hash({"a": 2})


def test_atomic_dir_leaves_nothing_on_failure(tmp_path):
    final = tmp_path / "entry"
    with pytest.raises(RuntimeError), atomic_dir(final) as tmp:
        (tmp / "weights.bin").write_bytes(b"half")
        raise RuntimeError("interrupted")
    assert not final.exists()
    assert list(tmp_path.iterdir()) == []


def test_atomic_dir_replaces_on_success(tmp_path):
    final = tmp_path / "entry"
    for content in ("one", "two"):
        with atomic_dir(final) as tmp:
            (tmp / "f.txt").write_text(content)
    assert (final / "f.txt").read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["entry"]


def test_atomic_write_text(tmp_path):
    p = tmp_path / "a" / "b.txt"
    atomic_write_text(p, "hi")
    assert p.read_text() == "hi"


def test_temporaries_orphaned_by_sigkill_are_cleaned_by_the_next_writer(tmp_path):
    """A writer killed with SIGKILL leaves its temporary; the next successful write removes it,
    but never one owned by a live concurrent writer."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from divelab.cache import atomic_dir

    final = tmp_path / "models" / "abc"
    script = ("import sys, time; from pathlib import Path; from divelab.cache import atomic_dir\n"
              f"with atomic_dir(Path({str(final)!r})) as t:\n"
              "    (t / 'w.bin').write_bytes(b'x' * 10); print('ready', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    live = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert live.stdout.readline().strip() == "ready"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    orphans = list(final.parent.glob(".abc.*.tmp"))
    assert len(orphans) == 2 and not final.exists()
    with atomic_dir(final) as t:
        (t / "w.bin").write_bytes(b"ok")
    left = list(final.parent.glob(".abc.*.tmp"))
    assert [p.name.split(".")[2] for p in left] == [str(live.pid)]  # the live writer's is kept
    live.kill()
    live.wait()
    assert (final / "w.bin").read_bytes() == b"ok"
    time.sleep(0)
