"""Run scales shared by every reproduction.

- ``smoke``: seconds; what the tests run. Checks that claims are computed, not that papers match.
- ``quick``: the default; every implemented system together in about 15 minutes on 2 CPU cores.
- ``full``: hours; as close to the paper as this machine gets.
"""

from __future__ import annotations

from typing import TypeVar

SCALES = ("smoke", "quick", "full")
DEFAULT_SCALE = "quick"

T = TypeVar("T")


def check_scale(scale: str) -> str:
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; allowed: {', '.join(SCALES)}")
    return scale


def pick(scale: str, smoke: T, quick: T, full: T) -> T:
    """The value for ``scale`` (a one-line way for reproductions to size their work)."""
    return {"smoke": smoke, "quick": quick, "full": full}[check_scale(scale)]
