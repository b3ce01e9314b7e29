"""How big SHERLOC's reproduction is at each scale: which repositories, how many bugs each, the
language model's training steps, the repair agent's budget and the two SmolLM2 studies' sub-plans."""

from __future__ import annotations

from dataclasses import dataclass

from divelab.coding.sherloc.real_diagnostician import DiagConfig
from divelab.coding.sherloc.real_llm import RealConfig
from divelab.coding.sherloc.repos import ALL_REPOS


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
    real_llm: RealConfig | None = None
    """drive the SHERLOC loop with SmolLM2-135M-Instruct on a slice of the tasks (:mod:`.real_llm`, minutes of
    CPU), sized by this sub-plan; None lists it as not checkable."""
    real_diagnostician: DiagConfig | None = None
    """run SmolLM2-135M-Instruct as the diagnostician over SBFL shortlists on every task, untuned and after LoRA
    SFT on disjoint training bugs (:mod:`.real_diagnostician`, minutes of CPU), sized by this sub-plan; None lists
    it as not checkable."""


# The repair budget is sized so the agent, localizing with SBFL itself, resolves some bugs with no report and the
# gold location (the positive control) resolves more: at 2-4 validations every arm sat at the floor.
PLANS = {
    "smoke": Plan(repos=("html",), n_per_repo=2, lm_steps=5, repair_budget=4),
    "quick": Plan(repos=ALL_REPOS, n_per_repo=4, lm_steps=120, repair_budget=8, repair_every=2),
    "full": Plan(repos=ALL_REPOS, n_per_repo=20, lm_steps=600, repair_budget=12,
                 real_llm=RealConfig(per_repo=2), real_diagnostician=DiagConfig()),
}
