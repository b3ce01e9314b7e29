"""Progress bars for long work (rich), quiet when not on a terminal or when DIVELAB_QUIET=1."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

T = TypeVar("T")

console = Console(stderr=True)


def enabled() -> bool:
    return os.environ.get("DIVELAB_QUIET", "") not in ("1", "true") and sys.stderr.isatty()


HEARTBEAT_S = float(os.environ.get("DIVELAB_HEARTBEAT_S", "30"))


def quiet() -> bool:
    return os.environ.get("DIVELAB_QUIET", "") in ("1", "true")


class Heartbeat:
    """Off a terminal (CI logs, nohup, pipes) a live bar prints nothing: print a plain line at
    most every ``HEARTBEAT_S`` seconds instead, so a long run is never silent for minutes."""

    def __init__(self, description: str, total: int | None) -> None:
        self.description, self.total = description, total
        self.t0 = self.last = time.monotonic()
        self.on = not quiet() and not sys.stderr.isatty()

    def tick(self, done: int, force: bool = False) -> None:
        now = time.monotonic()
        if self.on and (force or now - self.last >= HEARTBEAT_S):
            self.last = now
            of = f"/{self.total}" if self.total is not None else ""
            elapsed = now - self.t0
            # a linear ETA from the rate so far: rough, but it tells a reader of a log whether to wait
            eta = (f", about {elapsed / done * (self.total - done):.0f} s left"
                   if self.total is not None and 0 < done < self.total else "")
            print(f"  … {self.description}: {done}{of} after {elapsed:.0f} s{eta}", file=sys.stderr, flush=True)


class _BeatingProgress(Progress):
    """A rich Progress that also prints heartbeat lines off a terminal, for every task."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._beats: dict[int, Heartbeat] = {}

    def _beat(self, task_id) -> None:
        task = self._tasks.get(task_id)
        if task is None:
            return
        beat = self._beats.setdefault(task_id, Heartbeat(task.description, task.total))
        beat.description, beat.total = task.description, task.total
        beat.tick(int(task.completed))

    def update(self, task_id, *args, **kwargs) -> None:  # type: ignore[override]
        super().update(task_id, *args, **kwargs)
        self._beat(task_id)

    def advance(self, task_id, advance: float = 1) -> None:  # type: ignore[override]
        super().advance(task_id, advance)
        self._beat(task_id)


def make_progress() -> Progress:
    return _BeatingProgress(
        TextColumn("[bold blue]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[info]}"),
        console=console,
        disable=not enabled(),
        transient=False,
    )


def track(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """Iterate with a progress bar (a heartbeat line off a terminal)."""
    if total is None:
        try:
            total = len(items)  # type: ignore[arg-type]
        except TypeError:
            total = None
    with make_progress() as p:
        task = p.add_task(description, total=total, info="")
        for item in items:
            yield item
            p.advance(task)
