"""Proposers turn a kernel's diagnoses into ranked edits (pluggable).

- :class:`RuleProposer` (default): edits in the order the diagnoses recommend them (by severity),
  then the remaining applicable edits. With ``risky > 0`` it sometimes puts the unsafe
  ``drop_tail`` edit first, the way an LLM proposes fast-but-wrong code (seeded), so the
  correctness wall has real work to do.
- :class:`ChatProposer`: any OpenAI-compatible chat model (``divelab.chat``); it is shown the
  kernel's diagnoses and the allowed edits and answers with edit names.
- :class:`RandomProposer`: a uniformly shuffled edit list (the no-information baseline).
"""

from __future__ import annotations

import random
import re
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


class RuleProposer:
    def __init__(self, risky: float = 0.0):
        self.risky = risky

    def propose(self, config, diagnoses, capabilities, rng):
        allowed = [e for e in edit_names(capabilities) if e != "drop_tail"]
        ranked = [e for d in diagnoses for e in d.edits if e in allowed]
        out = _applicable(config, ranked + allowed)
        if self.risky and rng.random() < self.risky and apply_edit(config, "drop_tail") is not None:
            out.insert(0, "drop_tail")
        return out


class RandomProposer:
    def propose(self, config, diagnoses, capabilities, rng):
        names = _applicable(config, edit_names(capabilities))
        rng.shuffle(names)
        return names


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
