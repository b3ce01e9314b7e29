"""How big SHERLOC's reproduction is at each scale: which repositories, how many bugs each, the
language model's training steps and the repair agent's budget. Its own module because the real-LLM
run sizes itself by the same plan."""

from __future__ import annotations

from dataclasses import dataclass

ALL_REPOS = ("json", "tomllib", "textlib", "html", "pyflakes")


@dataclass(frozen=True)
class Plan:
    repos: tuple[str, ...]
    """the real packages bugs are planted into (CPython stdlib packages and pyflakes)."""
    n_per_repo: int
    """bugs planted per package (only those the package's own tests detect are kept)."""
    lm_steps: int
    """training steps of the surprisal baseline's language model on the 'seen' packages."""
    repair_budget: int
    """validated candidate patches the repair agent may try per task."""
    repair_every: int = 1
    """repair every k-th task only (the repair side dominates the run time)."""
    live_llm: bool = False
    """also drive the SHERLOC loop with SmolLM2-135M-Instruct on a slice of the tasks, and run SmolLM2 as the
    diagnostician over SBFL shortlists on every task after LoRA SFT on disjoint training bugs (minutes of CPU)."""


# The repair budget is sized so the agent, localizing with SBFL itself, resolves some bugs with no report and the
# gold location (the positive control) resolves more: at 2-4 validations every arm sat at the floor.
PLANS = {
    "smoke": Plan(("html",), 2, 5, 4),
    "quick": Plan(ALL_REPOS, 4, 120, 8, repair_every=2),
    "full": Plan(ALL_REPOS, 20, 600, 12, live_llm=True),
}
