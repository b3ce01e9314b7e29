"""Verifiable tasks for routing: five families, several phrasings each, scored by exact match.

Every task has one correct answer computed here, so any worker's reply is scored without a judge.
Phrasings vary within a family so a router must learn the family from the text, not a fixed key.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

FAMILIES = ("add", "mul", "reverse", "count", "sort")
_WORDS = ("orchestra", "router", "conductor", "pufferfish", "gradient", "entropy", "workflow", "transcript",
          "verifier", "planner", "executor", "diversity", "sakana", "lantern", "harbour", "meridian")

_TEMPLATES = {
    "add": ("What is {a} + {b}?", "Compute the sum of {a} and {b}.", "Add {a} to {b}. Give the total.",
            "{a} plus {b} equals what?"),
    "mul": ("What is {a} * {b}?", "Compute the product of {a} and {b}.", "Multiply {a} by {b}.",
            "{a} times {b} equals what?"),
    "reverse": ("Reverse the word '{w}'.", "Spell '{w}' backwards.", "Write the letters of '{w}' in reverse order."),
    "count": ("How many times does the letter '{c}' occur in '{w}'?", "Count the letter '{c}' in the word '{w}'.",
              "In '{w}', count occurrences of '{c}'."),
    "sort": ("Sort these numbers in ascending order: {xs}.", "Put the list {xs} in increasing order.",
             "Order from smallest to largest: {xs}."),
}


@dataclass(frozen=True)
class Task:
    """One query: its prompt, the exact answer, its family and a difficulty in [0, 1]."""

    prompt: str
    answer: str
    family: str
    difficulty: float


def make_task(family: str, rng: random.Random) -> Task:
    if family not in FAMILIES:
        raise ValueError(f"unknown task family {family!r}; allowed: {', '.join(FAMILIES)}")
    tpl = rng.choice(_TEMPLATES[family])
    if family in ("add", "mul"):
        digits = rng.randint(1, 4) if family == "add" else rng.randint(1, 3)
        a, b = rng.randint(10 ** (digits - 1), 10**digits - 1), rng.randint(2, 10**digits - 1)
        ans = a + b if family == "add" else a * b
        return Task(tpl.format(a=a, b=b), str(ans), family, (digits - 1) / (3 if family == "add" else 2))
    if family in ("reverse", "count"):
        w = rng.choice(_WORDS) + (rng.choice(_WORDS) if rng.random() < 0.4 else "")
        if family == "reverse":
            return Task(tpl.format(w=w), w[::-1], family, min(1.0, (len(w) - 6) / 14))
        c = rng.choice(sorted(set(w)))
        return Task(tpl.format(w=w, c=c), str(w.count(c)), family, min(1.0, (len(w) - 6) / 14))
    n = rng.randint(3, 8)
    xs = [rng.randint(0, 99) for _ in range(n)]
    return Task(tpl.format(xs=", ".join(map(str, xs))), ", ".join(map(str, sorted(xs))), family, (n - 3) / 5)


def make_tasks(n: int, seed: int = 0, mix: dict[str, float] | None = None) -> list[Task]:
    """``n`` tasks drawn from ``mix`` (family → weight; uniform by default), deterministic in ``seed``."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    mix = mix or {f: 1.0 for f in FAMILIES}
    rng = random.Random(seed)
    fams, weights = zip(*sorted(mix.items()), strict=True)
    return [make_task(rng.choices(fams, weights)[0], rng) for _ in range(n)]


def solve(prompt: str) -> tuple[str, str] | None:
    """``(family, exact answer)`` parsed from a prompt of any template, or None if it is not one of ours."""
    nums = [int(x) for x in re.findall(r"-?\d+", prompt)]
    quoted = re.findall(r"'([^']*)'", prompt)
    low = prompt.lower()
    if any(k in low for k in ("sort", "ascending", "increasing", "smallest to largest")) and nums:
        return "sort", ", ".join(map(str, sorted(nums)))
    if ("count" in low or "how many" in low) and len(quoted) == 2:
        a, b = quoted
        letter, word = (a, b) if len(a) == 1 else (b, a)
        return "count", str(word.count(letter))
    if any(k in low for k in ("reverse", "backwards")) and quoted:
        return "reverse", quoted[0][::-1]
    if len(nums) == 2 and any(k in low for k in ("*", "product", "multiply", "times")):
        return "mul", str(nums[0] * nums[1])
    if len(nums) == 2 and any(k in low for k in ("+", "sum", "add", "plus")):
        return "add", str(nums[0] + nums[1])
    return None


def extract_answer(text: str) -> str:
    """The answer in a reply: after the last ``ANSWER:`` if present, else the last line; whitespace-normalised."""
    m = re.findall(r"ANSWER:\s*(.+)", text)
    s = m[-1] if m else (text.strip().splitlines() or [""])[-1]
    return " ".join(s.strip().strip(".").split())


def score(task: Task, reply: str) -> float:
    """1.0 if the reply's answer equals the task's exact answer, else 0.0."""
    return float(extract_answer(reply) == task.answer)
