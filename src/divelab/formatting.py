"""How a measured number is printed in claims, rules and reports: three significant figures, one
decimal from 100, scientific notation below 0.001 and from 1000. One function, used by the claims and
by the verdict rules' text, so both print a number the same way."""

from __future__ import annotations


def format_number(x: float) -> str:
    if x == 0:
        return "0"
    ax = abs(x)
    if ax >= 1000 or ax < 0.001:
        return f"{x:.3g}"
    if ax >= 100:
        return f"{x:.1f}"
    return f"{x:.3g}"
