"""Governance Decay: How Context Compaction Silently Erases Safety Constraints in Long-Horizon
LLM Agents (Shiyang Chen, arXiv 2606.22528) — ConstraintRot and Constraint Pinning.

Long-running agents compact their context to stay within a token budget, and the compaction step
silently drops governance rules that live in context rather than in the system slot; an agent
that refused a forbidden action while the rule was visible performs it after compaction (paper:
0% violations with the rule in full context, 30% mean / 59% worst after one compaction). Soft
organisational rules decay far more than hard safety norms (8.3x), stock framework compaction
paths are affected, and an attacker can bias the summariser to drop a rule. Pinning the rules as
a small verbatim card outside the compactable window, re-inserted after every compaction,
restores 0% violations at under 0.5% token overhead — except against a forged "operator update",
which this implementation closes with a signed operator channel and an optional tool guard.

Usage::

    from divelab.safety.pinning import make_scenario, KeepLastN, Pinned, TokenCounter
    s = make_scenario("external-email")
    view = Pinned(KeepLastN(), s.card).view([*s.messages, s.trigger], budget=800)
"""

from divelab.safety.pinning.agent import ToolAgent, Turn
from divelab.safety.pinning.benchmark import RULES, TOOLS, Scenario, make_scenario, make_suite
from divelab.safety.pinning.card import (
    CARD_NAME,
    CardIntegrityError,
    InBandRules,
    NonceBoundRules,
    OperatorChannel,
    PinnedRules,
    RuleCard,
    SignedUpdate,
    UpdateRejected,
    find_inband_updates,
)
from divelab.safety.pinning.compactors import (
    ChatSummarizer,
    Compactor,
    HeadTail,
    KeepLastN,
    NoCompaction,
    SummarizingCompactor,
    SumySummarizer,
)
from divelab.safety.pinning.constraints import Check, Constraint, ToolCallGrader, Violation
from divelab.safety.pinning.expectations import BEHAVIOURS, Behaviour, behaviour
from divelab.safety.pinning.guard import ToolGuard
from divelab.safety.pinning.pinning import POSITIONS, Pinned, sanitize, strip_rules
from divelab.safety.pinning.quarantine import Retired, Sanitizer
from divelab.safety.pinning.summary_llm import CachedSummaryModel, smollm2_writer
from divelab.safety.pinning.tokens import TokenCounter, default_counter

__all__ = [
    "BEHAVIOURS", "Behaviour", "CachedSummaryModel", "behaviour", "smollm2_writer", "CARD_NAME", "POSITIONS", "RULES", "TOOLS", "CardIntegrityError", "ChatSummarizer", "Check", "Compactor",
    "Constraint", "HeadTail", "InBandRules", "KeepLastN", "NoCompaction", "NonceBoundRules",
    "OperatorChannel", "Pinned", "PinnedRules", "Retired", "RuleCard", "Scenario", "SignedUpdate",
    "SummarizingCompactor", "SumySummarizer", "TokenCounter", "ToolAgent", "ToolCallGrader", "ToolGuard",
    "Turn", "UpdateRejected", "Violation", "default_counter", "find_inband_updates", "make_scenario",
    "make_suite", "sanitize", "Sanitizer", "strip_rules",
]
