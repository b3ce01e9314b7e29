"""The offline corpus: CPython's standard-library ``.py`` sources found on this machine.

Files are split into train/val/test by a hash of their path relative to the stdlib root, so a
file never moves between splits when other files are added or removed, and two machines with
the same Python version get the same split. A :class:`Manifest` (per split: file count, bytes,
and a sha256 over the sorted ``(path, content sha256)`` list) makes runs comparable: cache keys
for tokenizers and trained models include it.

What is included (and why):

- only ``*.py`` under ``sysconfig.get_paths()["stdlib"]``;
- ``site-packages``/``dist-packages`` are skipped (third-party code, differs per machine);
- test directories (``test/``, ``tests/``, ``idle_test/``) are skipped by default
  (``include_tests=False``): they are half of the stdlib by bytes and are dominated by
  repetitive assertion boilerplate; pass ``include_tests=True`` to keep them;
- ``encodings/`` is skipped (generated character-map tables, not code people write);
- ``_sysconfigdata*.py`` is skipped (machine-specific build settings, not portable);
- files larger than ``max_file_bytes`` (default 256 kB; drops ``pydoc_data/topics.py``, which is
  prose documentation stored as a string) and files that are not valid UTF-8 are skipped.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import sysconfig
from dataclasses import asdict, dataclass, field
from pathlib import Path

from divelab.cache import stable_hash

SPLITS = ("train", "val", "test")
SKIP_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__", "encodings"})
TEST_DIRS = frozenset({"test", "tests", "idle_test"})


@dataclass(frozen=True)
class CorpusConfig:
    """Which files make the corpus and how they are split.

    ``max_files``/``max_bytes`` cap each split (the cap for a split is the cap times its
    fraction, at least one file); files are taken in hash order, so a capped corpus is a stable
    prefix of the uncapped one. ``root`` overrides the stdlib directory (for tests).
    """

    root: str | None = None
    include_tests: bool = False
    max_file_bytes: int = 256_000
    max_files: int | None = None
    max_bytes: int | None = None
    fractions: tuple[float, float, float] = (0.90, 0.05, 0.05)

    def __post_init__(self) -> None:
        if len(self.fractions) != 3 or any(f < 0 for f in self.fractions) or abs(sum(self.fractions) - 1) > 1e-9:
            raise ValueError(f"fractions must be three non-negative numbers summing to 1 (train, val, test); "
                             f"got {self.fractions}")
        for name in ("max_files", "max_bytes"):
            v = getattr(self, name)
            if v is not None and v <= 0:
                raise ValueError(f"{name} must be positive or None, got {v}")


@dataclass(frozen=True)
class SplitManifest:
    split: str
    files: int
    bytes: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """What a corpus is made of. ``key`` changes iff any split's content changes."""

    splits: dict[str, SplitManifest]
    config: dict
    python_version: str
    root: str
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return stable_hash({s: asdict(m) for s, m in sorted(self.splits.items())})

    def split_key(self, split: str) -> str:
        return stable_hash(asdict(self.splits[_check_split(split)]))

    def to_dict(self) -> dict:
        return {"key": self.key, "python_version": self.python_version, "root": self.root,
                "config": self.config, "skipped": self.skipped,
                "splits": {s: asdict(m) for s, m in self.splits.items()}}


def _check_split(split: str) -> str:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; allowed: {', '.join(SPLITS)}")
    return split


def stdlib_root(config: CorpusConfig | None = None) -> Path:
    root = Path(config.root) if config is not None and config.root else Path(sysconfig.get_paths()["stdlib"])
    if not root.is_dir() or not any(root.glob("*.py")):
        raise FileNotFoundError(
            f"no Python standard-library sources found at {root} (sysconfig stdlib path); the divelab corpus "
            "needs the .py files of CPython's stdlib (some distributions ship only .pyc: install the "
            "python3 source package, or pass CorpusConfig(root=...) pointing at a directory of .py files)")
    return root


def _path_hash(rel: str) -> int:
    return int.from_bytes(hashlib.sha256(rel.encode("utf-8")).digest()[:8], "big")


def split_of(rel_path: str, fractions: tuple[float, float, float] = (0.90, 0.05, 0.05)) -> str:
    """The split a relative path belongs to (a pure function of the path)."""
    u = (_path_hash(rel_path) % 1_000_000) / 1_000_000
    if u < fractions[0]:
        return "train"
    return "val" if u < fractions[0] + fractions[1] else "test"


@dataclass(frozen=True)
class _Doc:
    path: str
    text: str
    sha256: str


@functools.lru_cache(maxsize=8)
def _build(config: CorpusConfig) -> tuple[dict[str, tuple[_Doc, ...]], Manifest]:
    root = stdlib_root(config)
    skipped = {"test_dirs": 0, "too_large": 0, "not_utf8": 0, "skipped_dirs": 0}
    per_split: dict[str, list[tuple[int, str, Path]]] = {s: [] for s in SPLITS}
    for dirpath, dirnames, filenames in os.walk(root):
        # prune in place so site-packages (often huge) is never walked
        kept = []
        for d in sorted(dirnames):
            if d in SKIP_DIRS:
                skipped["skipped_dirs"] += 1
            elif d in TEST_DIRS and not config.include_tests:
                skipped["test_dirs"] += 1
            else:
                kept.append(d)
        dirnames[:] = kept
        for name in filenames:
            if not name.endswith(".py") or name.startswith("_sysconfigdata"):
                continue
            path = Path(dirpath) / name
            rel = "/".join(path.relative_to(root).parts)
            per_split[split_of(rel, config.fractions)].append((_path_hash(rel), rel, path))

    docs: dict[str, tuple[_Doc, ...]] = {}
    manifests: dict[str, SplitManifest] = {}
    for split, fraction in zip(SPLITS, config.fractions, strict=True):
        chosen: list[_Doc] = []
        total = 0
        max_files = None if config.max_files is None else max(1, round(config.max_files * fraction))
        max_bytes = None if config.max_bytes is None else max(1, round(config.max_bytes * fraction))
        for _, rel, path in sorted(per_split[split]):  # hash order: a capped corpus is a stable prefix
            if max_files is not None and len(chosen) >= max_files:
                break
            data = path.read_bytes()
            if len(data) > config.max_file_bytes:
                skipped["too_large"] += 1
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                skipped["not_utf8"] += 1
                continue
            if max_bytes is not None and chosen and total + len(data) > max_bytes:
                break
            chosen.append(_Doc(rel, text, hashlib.sha256(data).hexdigest()))
            total += len(data)
        h = hashlib.sha256()
        for d in sorted(chosen, key=lambda d: d.path):
            h.update(f"{d.path}\0{d.sha256}\n".encode())
        docs[split] = tuple(chosen)
        manifests[split] = SplitManifest(split, len(chosen), total, h.hexdigest())
    if not docs["train"]:
        raise FileNotFoundError(f"the stdlib corpus at {root} has no usable training files ({skipped})")
    cfg = asdict(config)
    cfg.pop("root")
    manifest = Manifest(manifests, cfg, sys.version.split()[0], str(root), skipped)
    return docs, manifest


def load_corpus(split: str = "train", config: CorpusConfig | None = None) -> list[str]:
    """The texts (one per file) of a split, in a fixed order.

    >>> texts = load_corpus("val", CorpusConfig(max_files=40))
    >>> all(isinstance(t, str) for t in texts)
    True
    """
    docs, _ = _build(config or CorpusConfig())
    return [d.text for d in docs[_check_split(split)]]


def load_paths(split: str = "train", config: CorpusConfig | None = None) -> list[str]:
    """The relative paths of a split's files, in the same order as :func:`load_corpus`."""
    docs, _ = _build(config or CorpusConfig())
    return [d.path for d in docs[_check_split(split)]]


def manifest(config: CorpusConfig | None = None) -> Manifest:
    """The manifest of the corpus for ``config`` (default: the whole stdlib, tests excluded)."""
    return _build(config or CorpusConfig())[1]
