"""What the server does with a score: the policies, and the verdict a response carries.

``annotate`` only reports the score; ``stop`` ends a flagged generation with ``finish_reason:
"content_filter"`` and no text; ``redirect`` answers a flagged request with the probe's refusal text
instead of the model's own words. A request that is not flagged is generated as usual under every
policy.
"""

from __future__ import annotations

from dataclasses import dataclass

POLICIES = ("annotate", "stop", "redirect")


def check_policy(policy: str) -> str:
    if policy not in POLICIES:
        raise ValueError(f"guard policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    return policy


@dataclass(frozen=True)
class GuardVerdict:
    """One request's score and what happened (the ``divelab.guard`` object of a response)."""

    score: float | None  # None: no forward read the position (a ``first`` request that ended at its first token)
    flagged: bool
    layer: int
    position: str
    policy: str
    threshold: float

    @property
    def decision(self) -> str:
        return "unscored" if self.score is None else "flag" if self.flagged else "pass"

    @property
    def action(self) -> str:
        """What the server did: ``none``, ``stopped`` or ``redirected``."""
        if not self.flagged or self.policy == "annotate":
            return "none"
        return "stopped" if self.policy == "stop" else "redirected"

    def to_dict(self) -> dict:
        return {"score": self.score, "decision": self.decision, "layer": self.layer, "position": self.position,
                "threshold": self.threshold, "policy": self.policy, "action": self.action}
