"""Typed text experience: plans, environment facts and pitfalls, retrieved by BM25, persisted as JSONL.

Every record has a kind, a key (the task pattern for a plan, the environment for a fact), a text,
the evidence (episode ids) behind it, and use/failure counters. The store is append-only JSONL:
each change appends one complete line and is flushed and fsynced, and a later line for the same
id replaces an earlier one. A kill mid-write can leave at most a torn last line, which
:meth:`MemoryStore.load` skips, so the store on disk is always the state after some complete
write ("safe under interrupt"). Retrieval is Okapi BM25 (``rank-bm25``); any embedding retriever
can be plugged in through ``retriever=`` (a callable ``(query, entries) -> scores``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

KINDS = ("plan", "fact", "pitfall", "tool", "meta")
_TOKEN = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def words(text: str) -> int:
    """The cost unit used throughout (a stand-in for tokens): whitespace-separated words."""
    return len(text.split())


@dataclass
class Entry:
    """One memory record. ``data`` holds kind-specific structure (a plan's steps, a tool's source)."""

    id: str
    kind: str
    key: str
    text: str
    evidence: list[str] = field(default_factory=list)
    uses: int = 0
    failures: int = 0
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown memory kind {self.kind!r}; allowed: {', '.join(KINDS)}")
        if not self.id:
            raise ValueError("a memory entry needs a non-empty id")


Retriever = Callable[[str, Sequence[Entry]], Sequence[float]]


class MemoryStore:
    """Entries by id, optionally persisted to an append-only JSONL file (see the module docstring)."""

    def __init__(self, path: str | Path | None = None, retriever: Retriever | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.retriever = retriever
        self._entries: dict[str, Entry] = {}
        self._index: Any = None
        self._indexed: list[Entry] = []
        self.skipped_lines = 0
        if self.path is not None and self.path.exists():
            self.load()

    # -- persistence ----------------------------------------------------------------------------
    def load(self) -> None:
        """Read the JSONL file; a torn or corrupt line (an interrupted write) is skipped and counted."""
        if self.path is None:
            raise ValueError("this store has no path")
        self._entries.clear()
        self.skipped_lines = 0
        with open(self.path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.endswith("\n"):
                    self.skipped_lines += 1  # torn tail of an interrupted write
                    continue
                try:
                    rec = json.loads(line)
                    if rec.get("op") == "del":
                        self._entries.pop(rec["id"], None)
                    else:
                        e = Entry(**rec["entry"])
                        self._entries[e.id] = e
                except (ValueError, KeyError, TypeError):
                    self.skipped_lines += 1
        self._index = None

    def _append(self, rec: dict[str, Any]) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(rec, sort_keys=True) + "\n"
        with open(self.path, "a+b") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() > 0:  # a previous writer was killed mid-line: start on a fresh line
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")
            f.write(line.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())

    # -- entries --------------------------------------------------------------------------------
    def put(self, entry: Entry) -> Entry:
        self._entries[entry.id] = entry
        self._append({"op": "put", "entry": asdict(entry)})
        self._index = None
        return entry

    def delete(self, entry_id: str) -> None:
        if entry_id in self._entries:
            del self._entries[entry_id]
            self._append({"op": "del", "id": entry_id})
            self._index = None

    def get(self, entry_id: str) -> Entry | None:
        return self._entries.get(entry_id)

    def entries(self, kind: str | None = None, key: str | None = None) -> list[Entry]:
        return [e for e in self._entries.values() if (kind is None or e.kind == kind) and (key is None or e.key == key)]

    def __len__(self) -> int:
        return len(self._entries)

    # -- retrieval ------------------------------------------------------------------------------
    def search(self, query: str, kinds: Iterable[str] = ("plan", "fact", "pitfall"), n: int = 3) -> list[tuple[Entry, float]]:
        """The ``n`` best entries of the given kinds for ``query`` (BM25 over key + text), best first;
        entries that share no word with the query are left out."""
        kinds = tuple(kinds)
        for k in kinds:
            if k not in KINDS:
                raise ValueError(f"unknown memory kind {k!r}; allowed: {', '.join(KINDS)}")
        pool = [e for e in self._entries.values() if e.kind in kinds]
        if not pool or n <= 0:
            return []
        if self.retriever is not None:
            scores = list(self.retriever(query, pool))
        else:
            scores = self._bm25(query, pool)
        q = set(tokens(query))
        ranked = sorted(((e, s) for e, s in zip(pool, scores, strict=True) if q & set(tokens(e.key + " " + e.text))),
                        key=lambda es: (-es[1], es[0].id))
        return ranked[:n]

    def _bm25(self, query: str, pool: list[Entry]) -> list[float]:
        from rank_bm25 import BM25Okapi

        all_entries = sorted(self._entries.values(), key=lambda e: e.id)
        if self._index is None or self._indexed != all_entries:
            docs = [tokens(e.key + " " + e.text) or ["_"] for e in all_entries]
            self._index, self._indexed = BM25Okapi(docs), list(all_entries)
            self._pos = {e.id: i for i, e in enumerate(all_entries)}
        scores = self._index.get_scores(tokens(query))
        return [float(scores[self._pos[e.id]]) for e in pool]
