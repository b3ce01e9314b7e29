"""Run scales shared by every reproduction.

- ``smoke``: seconds; what the tests run. Checks that claims are computed, not that papers match.
- ``quick``: the default; every implemented system together in about 15 minutes on 2 CPU cores.
- ``full``: hours; as close to the paper as this machine gets.
"""

from __future__ import annotations

SCALES = ("smoke", "quick", "full")
DEFAULT_SCALE = "quick"


def check_scale(scale: str) -> str:
    """``scale`` itself when it is one of SCALES; otherwise a ValueError naming the allowed ones."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; allowed: {', '.join(SCALES)}")
    return scale

