"""Proposers turn a kernel's diagnoses into ranked edits (pluggable).

- :class:`RuleProposer` (default): edits in the order the diagnoses recommend them (by severity),
  then the remaining applicable edits. With ``risky > 0`` it sometimes puts the unsafe
  ``drop_tail`` edit first, the way an LLM proposes fast-but-wrong code (seeded), so the
  correctness wall has real work to do.
- :class:`ChatProposer`: any OpenAI-compatible chat model (``divelab.chat``); it is shown the
  kernel's diagnoses and the allowed edits and answers with edit names.
- :class:`RandomProposer`: a uniformly shuffled edit list (the no-information baseline); ``risky``
  as for the rule proposer, so the two waste budget on the unsafe edit alike.

Two wrappers take the diagnoses away from any proposer, for the "diagnoses vs no profiling" ablation:
:class:`NoDiagnoses` hides them (the proposer falls back to its fixed order), :class:`ShamDiagnoses`
keeps their number and severities but replaces every recommended edit with a random applicable one
(a sham: the same shape of input without the profiler's information).
"""

from __future__ import annotations

import random
import re
from dataclasses import replace
from typing import Protocol

from divelab.coding.kernelpro.program import EDITS, apply_edit, edit_names
from divelab.coding.kernelpro.tools import Diagnosis


class Proposer(Protocol):
    def propose(self, config, diagnoses: list[Diagnosis], capabilities: frozenset[str],
                rng: random.Random) -> list[str]: ...


def _applicable(config, names: list[str]) -> list[str]:
    out: list[str] = []
    for n in names:
        if n not in out and apply_edit(config, n) is not None:
            out.append(n)
    return out


def _safe(capabilities) -> list[str]:
    return [e for e in edit_names(capabilities) if e != "drop_tail"]


def _maybe_unsafe_first(out: list[str], config, risky: float, rng: random.Random) -> list[str]:
    """With probability ``risky``, the unsafe drop_tail edit goes first (the way an LLM proposes fast-but-wrong
    code)."""
    if risky and rng.random() < risky and apply_edit(config, "drop_tail") is not None:
        out.insert(0, "drop_tail")
    return out


class RuleProposer:
    def __init__(self, risky: float = 0.0):
        self.risky = risky

    def propose(self, config, diagnoses, capabilities, rng):
        allowed = _safe(capabilities)
        ranked = [e for d in diagnoses for e in d.edits if e in allowed]
        return _maybe_unsafe_first(_applicable(config, ranked + allowed), config, self.risky, rng)


class RandomProposer:
    def __init__(self, risky: float = 0.0):
        self.risky = risky

    def propose(self, config, diagnoses, capabilities, rng):
        if not self.risky:  # the plain shuffle of every edit (random search's proposer)
            names = _applicable(config, edit_names(capabilities))
            rng.shuffle(names)
            return names
        names = _applicable(config, _safe(capabilities))
        rng.shuffle(names)
        return _maybe_unsafe_first(names, config, self.risky, rng)


class NoDiagnoses:
    """Hides the diagnoses from ``inner`` (the "no profiling" input)."""

    def __init__(self, inner):
        self.inner = inner

    def propose(self, config, diagnoses, capabilities, rng):
        return self.inner.propose(config, [], capabilities, rng)


class ShamDiagnoses:
    """Shows ``inner`` sham diagnoses: each real diagnosis with its recommended edits replaced by as many random
    safe edits (its own seeded rng, so ``inner``'s draws are unchanged)."""

    def __init__(self, inner, seed: int = 0):
        self.inner, self.rng = inner, random.Random(f"sham-diagnoses-{seed}")

    def propose(self, config, diagnoses, capabilities, rng):
        pool = _safe(capabilities)
        sham = [replace(d, edits=self.rng.sample(pool, min(len(d.edits), len(pool)))) for d in diagnoses]
        return self.inner.propose(config, sham, capabilities, rng)


class ChatProposer:
    """Ask a chat model (``divelab.chat.ChatModel``) for edits; unknown names in its reply are ignored,
    and the rule ranking fills in whatever it leaves out (so a weak model cannot stall the search)."""

    def __init__(self, model, fallback: RuleProposer | None = None):
        self.model, self.fallback = model, fallback or RuleProposer()
        self.replies: list[str] = []

    def prompt(self, config, diagnoses, capabilities) -> str:
        allowed = _applicable(config, edit_names(capabilities))
        lines = [f"Kernel build: {config.short()}", "Profiler diagnoses:"]
        lines += [f"- {d.render()}" for d in diagnoses] or ["- (none)"]
        lines += ["Allowed edits:"] + [f"- {n}: {EDITS[n][0]}" for n in allowed]
        lines.append("Answer with the edit names to try, best first, comma-separated.")
        return "\n".join(lines)

    def propose(self, config, diagnoses, capabilities, rng):
        from divelab.chat import system, user

        msgs = [system("You optimise C kernels. Choose edits from the list given."),
                user(self.prompt(config, diagnoses, capabilities))]
        text = self.model.complete(msgs).message.content or ""
        self.replies.append(text)
        named = [n for n in re.findall(r"[a-z_0-9]+", text) if n in EDITS]
        return _applicable(config, named + self.fallback.propose(config, diagnoses, capabilities, rng))
