"""Scoring a localization: is the planted bug's location among the first k distinct predictions, at
file, function (class-qualified) or line granularity. Shared by the reproduction and the real-LLM run."""

from __future__ import annotations

from divelab.coding.sherloc.benchmark import Task
from divelab.coding.sherloc.finding import Location

GRANS = ("file", "function", "line")
MAX_LINE_SPAN = 5  # a predicted line span wider than this does not count as a line-level hit


def hit(locs: list[Location], task: Task, gran: str, k: int) -> bool:
    """Is the gold location among the first ``k`` distinct predictions at granularity ``gran``?"""
    seen: list = []
    for loc in locs:
        if gran == "file":
            key = loc.file
        elif gran == "function":
            key = (loc.file, loc.symbol)
        else:
            key = (loc.file, loc.span)
        if key in seen:
            continue
        seen.append(key)
        if len(seen) > k:
            return False
        if loc.file != task.file:
            continue
        if gran == "file":
            return True
        if gran == "function":
            if loc.symbol == task.function:  # qualified: Counter.bump is not Timer.bump
                return True
        elif loc.span and loc.span[1] - loc.span[0] < MAX_LINE_SPAN and loc.span[0] <= task.span[1] \
                and task.span[0] <= loc.span[1]:
            return True
    return False
