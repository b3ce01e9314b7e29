"""Task → pattern key: mask the entities a task names, keep its verbs and structure.

``"Put the blue mug on the steel table."`` in environment ``w0`` becomes the key
``"w0|put <e1> on <e2>"`` with slots ``{"e1": "blue mug", "e2": "steel table"}``. Entities are
the noun phrases after "the" (up to a preposition or the end), or, when ``entities`` is given, any
of those names. Numbers are masked as ``<n>``. Two tasks with the same key are "the same need"
for the desire-path gate, whatever their entities.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_STOP = r"(?=\s+(?:on|in|into|out|from|to|with|and|at|onto|inside)\b|\s*[.,;:!?]|\s*$)"
_NP = re.compile(r"\bthe\s+([a-z][a-z\- ]*?)" + _STOP)
_NUM = re.compile(r"\b\d+(?:\.\d+)?\b")


@dataclass(frozen=True)
class Pattern:
    key: str
    slots: dict[str, str]

    @property
    def params(self) -> list[str]:
        return list(self.slots)

    @property
    def template(self) -> str:
        """The key without its environment prefix."""
        return self.key.split("|", 1)[-1]


def normalise(text: str, env: str = "", entities: Sequence[str] | None = None) -> Pattern:
    """The pattern key and slot values of a task text (see the module docstring)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"task text must be a non-empty string, got {text!r}")
    t = " ".join(text.lower().split())
    slots: dict[str, str] = {}

    def slot(value: str) -> str:
        value = value.strip()
        for name, v in slots.items():
            if v == value:
                return f"<{name}>"
        name = f"e{len(slots) + 1}"
        slots[name] = value
        return f"<{name}>"

    if entities:
        names = sorted({e.lower() for e in entities}, key=len, reverse=True)
        rx = re.compile(r"\b(" + "|".join(re.escape(n) for n in names) + r")\b")
        masked = rx.sub(lambda m: slot(m.group(1)), t)
        masked = re.sub(r"\bthe\s+(?=<e)", "", masked)
    else:
        masked = _NP.sub(lambda m: slot(m.group(1)), t)
    masked = _NUM.sub("<n>", masked)
    masked = re.sub(r"[.,;:!?]+\s*$", "", masked).strip()
    return Pattern(f"{env}|{masked}" if env else masked, slots)


def fill(step: str, slots: dict[str, str]) -> str | None:
    """Put slot values into an abstract step (``"take {e1} from chest"``); None if a slot is missing."""
    out = step
    for name in re.findall(r"\{(e\d+)\}", step):
        if name not in slots:
            return None
        out = out.replace("{" + name + "}", slots[name])
    return out


def abstract(command: str, slots: dict[str, str]) -> str:
    """The inverse of :func:`fill`: replace slot values in a concrete command by ``{e1}``... (longest first)."""
    out = command
    for name, value in sorted(slots.items(), key=lambda kv: len(kv[1]), reverse=True):
        out = re.sub(r"\b" + re.escape(value) + r"\b", "{" + name + "}", out)
    return out
