"""How big SHERLOC's reproduction is at each scale: which repositories, how many bugs each, the
language model's training steps and the repair agent's budget. Its own module because the real-LLM
run sizes itself by the same plan."""

from __future__ import annotations

from dataclasses import dataclass

from divelab.scale import pick


@dataclass(frozen=True)
class Plan:
    repos: tuple[str, ...]
    n_per_repo: int
    lm_steps: int
    repair_budget: int
    repair_every: int = 1  # repair every k-th task (the repair side dominates the run time)


def plan_for(scale: str) -> Plan:
    return pick(scale,
                smoke=Plan(("html",), 2, 5, 2),
                quick=Plan(("json", "tomllib", "textlib", "html", "pyflakes"), 4, 120, 4, repair_every=2),
                full=Plan(("json", "tomllib", "textlib", "html", "pyflakes"), 20, 600, 8))
